"""``python -m alkstore.cli``: the same as the ``alkstore`` console script."""

from . import main

main()
