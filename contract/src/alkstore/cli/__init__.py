"""``alkstore``: the operator's command line (contract §14).

``alkstore [--url URL] [--opt NAME=VALUE ...] COMMAND [--json]``; the commands
and the JSON document each prints are described in ``docs/operations.md``.

The command line needs the ``cli`` extra (``pip install 'alkstore[cli]'``:
click and rich). Nothing else in ``alkstore`` imports this package, so the
contract itself stays dependency-free.
"""

from __future__ import annotations

import sys

MISSING_EXTRA_EXIT = 1


def main() -> None:
    """The ``alkstore`` console script."""
    try:
        from .app import cli
    except ImportError as exc:  # click or rich is missing: say how to get them
        sys.stderr.write(
            f"alkstore: error: the command line needs the 'cli' extra ({exc.name} is "
            "missing): pip install 'alkstore[cli]'\n"
        )
        raise SystemExit(MISSING_EXTRA_EXIT) from None
    cli(prog_name="alkstore")
