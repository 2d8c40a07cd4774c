"""Telling, without a descriptor of its own on the file, whether a database might hold nothing."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from alkstore_sqlite.leftovers import might_hold_nothing


def _database(path: Path, page_size: int, tables: int) -> Path:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("PRAGMA journal_mode = WAL")
    for n in range(tables):
        conn.execute(f"CREATE TABLE t{n} (x)")
    conn.close()  # the last connection checkpoints and removes the WAL
    return path


def test_a_missing_file_might_hold_nothing(tmp_path: Path) -> None:
    assert might_hold_nothing(str(tmp_path / "absent.db"))
    assert not (tmp_path / "absent.db").exists()  # and looking did not create it


def test_an_empty_file_might_hold_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty.db").write_bytes(b"")
    assert might_hold_nothing(str(tmp_path / "empty.db"))


def test_a_header_page_alone_might_hold_nothing(tmp_path: Path) -> None:
    path = _database(tmp_path / "header.db", 8192, tables=0)
    assert path.stat().st_size == 8192
    assert might_hold_nothing(str(path))


def test_a_cut_off_first_page_might_hold_nothing(tmp_path: Path) -> None:
    whole = _database(tmp_path / "whole.db", 2048, tables=1).read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(whole[:1536])  # a multiple of 512, not a power of two
    assert might_hold_nothing(str(cut))


def test_a_small_file_that_is_no_database_might_hold_nothing(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_bytes(b"not a database\n" * 100)
    assert might_hold_nothing(str(tmp_path / "notes.db"))


def test_a_small_database_of_several_small_pages_holds_something(tmp_path: Path) -> None:
    path = _database(tmp_path / "store.db", 2048, tables=25)
    assert path.stat().st_size < 65536  # as small as a fresh store in 2 KiB pages
    assert not might_hold_nothing(str(path))


def test_a_file_with_wal_frames_beside_it_holds_something(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    path.write_bytes(b"")
    Path(f"{path}-wal").write_bytes(b"\0" * (32 + 24 + 2048))
    assert not might_hold_nothing(str(path))


_TAKE_EXCLUSIVE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    conn.execute("PRAGMA journal_mode = DELETE").fetchall()
    print("exclusive")
except sqlite3.OperationalError:
    print("locked")
"""


def test_looking_keeps_the_locks_this_processs_connections_hold(tmp_path: Path) -> None:
    # Closing a descriptor of its own on the file would drop every POSIX lock this
    # process holds on it: another process could then take the file exclusively
    # under a reader's feet.
    path = _database(tmp_path / "store.db", 512, tables=1)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t0").fetchall()  # a read lock on the file
    try:
        assert might_hold_nothing(str(path)) is False
        outcome = subprocess.run(
            [sys.executable, "-c", _TAKE_EXCLUSIVE, str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert outcome.stdout.strip() == "locked"
    finally:
        reader.close()
