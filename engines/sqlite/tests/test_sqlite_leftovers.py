"""Telling, from file sizes alone, whether a database file might hold nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from alkstore_sqlite.leftovers import might_hold_nothing


def _file_of(tmp_path: Path, size: int) -> str:
    path = tmp_path / "store.db"
    path.write_bytes(b"\0" * size)
    return str(path)


def test_a_missing_file_might_hold_nothing(tmp_path: Path) -> None:
    assert might_hold_nothing(str(tmp_path / "absent.db"))


@pytest.mark.parametrize("size", [0, 100, 512, 1000, 2048, 4096, 40000, 65536])
def test_one_page_or_an_incomplete_first_page_might_hold_nothing(tmp_path: Path, size: int) -> None:
    assert might_hold_nothing(_file_of(tmp_path, size))


@pytest.mark.parametrize("size", [3 * 512, 30 * 2048, 3 * 4096, 15 * 4096, 2 * 65536])
def test_several_pages_of_any_size_hold_something(tmp_path: Path, size: int) -> None:
    assert not might_hold_nothing(_file_of(tmp_path, size))


def test_a_file_with_wal_frames_beside_it_holds_something(tmp_path: Path) -> None:
    path = _file_of(tmp_path, 0)
    Path(path + "-wal").write_bytes(b"\0" * (32 + 24 + 2048))
    assert not might_hold_nothing(path)
