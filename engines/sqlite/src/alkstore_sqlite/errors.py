"""What a sqlite3 error means to a caller: retry, the contract's EngineUnavailable, or a bug."""

from __future__ import annotations

import sqlite3

from alkstore import EngineUnavailable

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_WRITE_REFUSED = frozenset(
    {sqlite3.SQLITE_IOERR_WRITE, sqlite3.SQLITE_IOERR_TRUNCATE, sqlite3.SQLITE_IOERR_SHMSIZE}
)
_OUT_OF_SPACE_HINT = (
    " (a write was refused: a full disk, a quota or a file size limit, or a failing "
    "device; nothing was half-written, and the store resumes by itself once there "
    "is room again)"
)


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds a lock; retrying is safe."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _BUSY_CODES


def is_unavailable(exc: sqlite3.Error) -> bool:
    """Errors that say the database cannot be used right now (I/O, permissions, full
    disk, not a database, corruption) as opposed to a wrong statement or value."""
    return type(exc) in (sqlite3.OperationalError, sqlite3.DatabaseError)


def is_out_of_space(exc: sqlite3.Error) -> bool:
    """A write failed for want of room: a full disk (SQLITE_FULL), or a write the
    OS refused (a quota, a file size limit, an I/O error all read SQLITE_IOERR_WRITE)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF == sqlite3.SQLITE_FULL or code in _WRITE_REFUSED)


def unavailable(exc: sqlite3.Error, path: str) -> EngineUnavailable:
    hint = _OUT_OF_SPACE_HINT if is_out_of_space(exc) else ""
    return EngineUnavailable(f"SQLite database {path!r} is unavailable: {exc}{hint}")
