"""The reference model (split by profile in the next commit)."""

from .queues import *  # noqa: F403
from .queues import __all__  # noqa: F401
