"""alkstore's SQLite reference engine.

``alkstore.open("sqlite:///app.db")`` reaches it through the ``alkstore.engines``
entry point ``sqlite``, which names ``provider``. Stdlib ``sqlite3`` only: WAL
mode, writes serialized by a cross-process file lock and committed statement by
statement (what must be atomic in one ``BEGIN IMMEDIATE`` transaction),
one-statement claims, and a ``data_version`` watcher for cross-process wakes and
pub/sub delivery. Implements every optional profile: scheduler, streams, pub/sub
and contract 1.1's operations (ops).
"""

from .driver import SqliteDriver
from .migrations import LATEST_VERSION
from .options import SYNCHRONOUS_LEVELS, SqliteOptions, parse_options
from .provider import ENGINE_NAME, SqliteEngine, __version__, provider
from .url import database_path, database_url

__all__ = [
    "ENGINE_NAME",
    "LATEST_VERSION",
    "SYNCHRONOUS_LEVELS",
    "SqliteDriver",
    "SqliteEngine",
    "SqliteOptions",
    "__version__",
    "database_path",
    "database_url",
    "parse_options",
    "provider",
]
