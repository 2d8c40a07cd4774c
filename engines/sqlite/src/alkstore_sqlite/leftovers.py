"""What a failed open leaves behind, and removing it safely.

Opening a store on a new path creates the database file (``sqlite3.connect``
does), the writer gate's lock file and SQLite's ``-wal`` / ``-shm``. When the
open then fails (a full disk, an I/O error, a lock held past
``busy_timeout_s``) those files would stay: an empty database that the next
open would adopt, and sidecars nobody uses. A failed open removes the files it
created, and only those:

- only files that did not exist when the open began: a database that was
  there before is never removed, even an empty one;
- only while the database holds nothing a store could use: no file, no bytes,
  no SQLite database, or SQLite's bare header page with an empty schema, and
  no WAL frames beside it;
- only while no other opener can be using the file. An open that finds a
  database that might hold nothing (``might_hold_nothing``, a cheap
  over-estimate from file sizes and the header's page size) takes the writer
  gate *before* its first connection touches the file and keeps it until its
  tables exist, and only such an open removes anything, before it lets go of
  the gate, and only if no other store of its process has the file open. Every
  other opener of the file is therefore either still waiting for the gate (and
  will create a new file) or found content (and content is never removed). A waiting opener
  checks, once it holds the gate, that its lock file is still the one at the
  path (``WriterGate.acquire_current``).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import struct
from urllib.parse import quote

from .gate import LOCK_SUFFIX

WAL_SUFFIX = "-wal"
SHM_SUFFIX = "-shm"

_MAGIC = b"SQLite format 3\x00"
_WAL_HEADER_BYTES = 32
_LARGEST_PAGE_BYTES = 65536
# The schema read makes SQLite check the header: without it PRAGMA page_size
# answers a default (2048 or 4096) for a cut-off file or one that is no database.
_READ_SCHEMA = "SELECT count(*) FROM sqlite_master"
_READ_PAGE_SIZE = "PRAGMA page_size"
_SCHEMA_PAGE_HEADER = 100
"""Page 1 holds the schema table; its b-tree page header starts after the file header."""
_PAGE_HEADER = struct.Struct(">BHHH")  # page type, first freeblock, cell count, content start
_LEAF_TABLE_PAGE = 13
_HEAD_BYTES = _SCHEMA_PAGE_HEADER + _PAGE_HEADER.size


def database_files(path: str) -> tuple[str, ...]:
    """The database file and every file an open creates beside it."""
    return (path, path + WAL_SUFFIX, path + SHM_SUFFIX, path + LOCK_SUFFIX)


def missing_files(path: str) -> frozenset[str]:
    """Which of ``database_files(path)`` do not exist (yet)."""
    return frozenset(f for f in database_files(path) if not os.path.lexists(f))


def might_hold_nothing(path: str) -> bool:
    """``True`` whenever ``holds_nothing`` could be: no regular file, or at most one
    page (a cut-off first page included) and no WAL frames. It never opens a file
    descriptor of its own on the database, which another store or the
    application's own connections may be using (see ``_page_size_read_by_sqlite``)."""
    if _size(path + WAL_SUFFIX) > _WAL_HEADER_BYTES:
        return False
    try:
        status = os.stat(path)
    except OSError:
        return True
    if not stat.S_ISREG(status.st_mode):
        return True
    if status.st_size > _LARGEST_PAGE_BYTES:
        return False  # more than one page of any size
    page_size = _page_size_read_by_sqlite(path)
    return page_size is None or status.st_size <= page_size


def _page_size_read_by_sqlite(path: str) -> int | None:
    """The page size the file's header gives, or ``None`` when SQLite cannot read the
    file as a database (not one, or a cut-off first page).

    Read by SQLite itself, on an ``immutable`` read-only connection (no lock taken,
    no file created): closing a descriptor the engine opened itself would drop every
    POSIX lock this process holds on the file, the read locks of other connections
    to it among them; SQLite keeps its own descriptors open while any are held."""
    uri = f"file:{quote(path)}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            conn.execute(_READ_SCHEMA).fetchone()
            (page_size,) = conn.execute(_READ_PAGE_SIZE).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return int(page_size)


def holds_nothing(path: str) -> bool:
    """Whether the file at ``path`` holds nothing a store could use: no regular file
    there, no bytes, not a SQLite database, or an incomplete first page or a
    header page with an empty schema; and no WAL frames beside it."""
    if _size(path + WAL_SUFFIX) > _WAL_HEADER_BYTES:
        return False
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return True
        with open(path, "rb") as file:
            # Closing this descriptor drops this process's POSIX locks on the file:
            # the caller makes sure no connection of this process is open on it.
            head = file.read(_HEAD_BYTES)
            size = file.seek(0, os.SEEK_END)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not head.startswith(_MAGIC):
        return True  # (a file that was there before the open is never removed)
    page_size = _page_size(head)
    if size != page_size:
        return size < page_size
    page_type, _, cells, _ = _PAGE_HEADER.unpack_from(head, _SCHEMA_PAGE_HEADER)
    return bool(page_type == _LEAF_TABLE_PAGE and cells == 0)


def remove_created(path: str, missing: frozenset[str]) -> None:
    """Remove the files of ``missing`` (what did not exist before the open) that
    exist now, if the database holds nothing. The caller holds the writer gate."""
    if not missing or not holds_nothing(path):
        return
    # The lock file last: an opener arriving meanwhile opens it and waits for the
    # gate until everything else is gone.
    for created in (path + WAL_SUFFIX, path + SHM_SUFFIX, path, path + LOCK_SUFFIX):
        if created in missing:
            _unlink(created)


def _page_size(head: bytes) -> int:
    (size,) = struct.unpack_from(">H", head, len(_MAGIC))
    return _LARGEST_PAGE_BYTES if size == 1 else int(size)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # gone already, or not ours to remove after all: leave it
