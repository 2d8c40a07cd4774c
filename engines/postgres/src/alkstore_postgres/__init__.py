"""alkstore's PostgreSQL reference engine.

``alkstore.open("postgresql://user@host/db", schema="alkstore")`` reaches it
through the ``alkstore.engines`` entry points ``postgresql`` and ``postgres``,
which both name ``ENGINE``.
"""

from .clock import ServerClock
from .driver import PostgresDriver, message_channel, wake_channel
from .engine import (
    ENGINE,
    ENGINE_NAME,
    PostgresEngine,
    __version__,
    libpq_url,
    migrate,
    open_store,
)
from .errors import SchemaNotMigrated
from .migrations import LATEST_VERSION
from .options import DEFAULT_MESSAGES_KEEP, DEFAULT_SCHEMA, PostgresOptions, parse_options

__all__ = [
    "DEFAULT_MESSAGES_KEEP",
    "DEFAULT_SCHEMA",
    "ENGINE",
    "ENGINE_NAME",
    "LATEST_VERSION",
    "PostgresDriver",
    "PostgresEngine",
    "PostgresOptions",
    "SchemaNotMigrated",
    "ServerClock",
    "__version__",
    "libpq_url",
    "message_channel",
    "migrate",
    "open_store",
    "parse_options",
    "wake_channel",
]
