"""Engine options: validated by name before anything opens, and applied to every connection."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlite_helpers import StoreFactory, shared_state

import alkstore
from alkstore import InvalidOptions, PayloadError
from alkstore.constants import MAX_PAYLOAD_BYTES
from alkstore_sqlite import SqliteOptions, parse_options


def _pragma(store: alkstore.Store, name: str) -> Any:
    with store.transaction() as tx:
        return tx.execute(f"PRAGMA {name}").fetchone()[0]


def test_defaults() -> None:
    assert parse_options({}) == SqliteOptions(
        synchronous="NORMAL",
        busy_timeout_s=5.0,
        wake_poll_s=0.0003,
        repoll_s=1.0,
        notifications_keep=10_000,
        page_size=2048,
        max_payload_bytes=MAX_PAYLOAD_BYTES,
    )


def test_synchronous_normal_is_the_default(open_store: StoreFactory) -> None:
    assert _pragma(open_store(), "synchronous") == 1  # NORMAL


def test_synchronous_full_is_applied(open_store: StoreFactory) -> None:
    assert _pragma(open_store(synchronous="FULL"), "synchronous") == 2  # FULL


def test_synchronous_is_case_insensitive() -> None:
    assert parse_options({"synchronous": "full"}).synchronous == "FULL"


def test_sqlites_own_busy_handler_is_off(open_store: StoreFactory) -> None:
    # The driver itself waits for locks, within busy_timeout_s for the whole call
    # (test_sqlite_locking); SQLite's handler would add a second window of its own.
    assert _pragma(open_store(busy_timeout_s=2.5), "busy_timeout") == 0


def test_the_wal_size_limit_is_applied(open_store: StoreFactory) -> None:
    assert _pragma(open_store(), "journal_size_limit") == 16 * 1024 * 1024


def test_the_database_is_in_wal_mode(open_store: StoreFactory) -> None:
    assert _pragma(open_store(), "journal_mode") == "wal"


def test_a_new_file_gets_2_kib_pages(open_store: StoreFactory) -> None:
    assert _pragma(open_store(), "page_size") == 2048


def test_a_new_file_gets_the_page_size_asked_for(open_store: StoreFactory) -> None:
    assert _pragma(open_store(page_size=8192), "page_size") == 8192


def test_a_file_that_holds_a_database_keeps_its_page_size(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    with alkstore.open(f"sqlite:///{path}", page_size=1024) as store:
        store.queue("q").enqueue(1)
        assert _pragma(store, "page_size") == 4096


@pytest.mark.parametrize(
    ("opts", "field"),
    [
        ({"synchronous": "OFF"}, "synchronous"),
        ({"synchronous": "EXTRA"}, "synchronous"),
        ({"synchronous": 1}, "synchronous"),
        ({"busy_timeout_s": 0}, "busy_timeout_s"),
        ({"busy_timeout_s": -1}, "busy_timeout_s"),
        ({"busy_timeout_s": True}, "busy_timeout_s"),
        ({"busy_timeout_s": float("nan")}, "busy_timeout_s"),
        ({"busy_timeout_s": "5"}, "busy_timeout_s"),
        ({"wake_poll_s": 0}, "wake_poll_s"),
        ({"wake_poll_s": 2}, "wake_poll_s"),
        ({"notifications_keep": 0}, "notifications_keep"),
        ({"notifications_keep": 2.5}, "notifications_keep"),
        ({"notifications_keep": True}, "notifications_keep"),
        ({"notifications_keep": "10"}, "notifications_keep"),
        ({"page_size": 3000}, "page_size"),
        ({"page_size": 131072}, "page_size"),
        ({"page_size": 256}, "page_size"),
        ({"page_size": True}, "page_size"),
        ({"page_size": "2048"}, "page_size"),
        ({"max_payload_bytes": 0}, "max_payload_bytes"),
        ({"max_payload_bytes": MAX_PAYLOAD_BYTES + 1}, "max_payload_bytes"),
        ({"max_payload_bytes": 1.5}, "max_payload_bytes"),
        ({"max_payload_bytes": True}, "max_payload_bytes"),
    ],
)
def test_bad_values_are_refused_naming_the_field(opts: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptions, match=field):
        parse_options(opts)


def test_unknown_options_are_refused_naming_them_and_the_known_ones() -> None:
    with pytest.raises(InvalidOptions, match=r"schema.*the options are busy_timeout_s"):
        parse_options({"schema": "x"})


@pytest.mark.parametrize("repoll_s", [0, -1, "1", 7200])
def test_a_bad_repoll_is_refused_and_leaves_nothing_open(url: str, repoll_s: Any) -> None:
    with pytest.raises(InvalidOptions, match="repoll_s"):
        alkstore.open(url, repoll_s=repoll_s)
    assert shared_state(url) is None


def test_bad_options_are_refused_before_the_file_is_created(tmp_path: Path) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(InvalidOptions):
        alkstore.open(f"sqlite:///{path}", synchronous="sometimes")
    assert not path.exists()


def test_a_lowered_payload_bound_is_applied(open_store: StoreFactory) -> None:
    queue = open_store(max_payload_bytes=10).queue("q")
    queue.enqueue("x" * 8)  # 10 bytes of JSON text
    with pytest.raises(PayloadError, match="11 bytes"):
        queue.enqueue("x" * 9)
    assert [h.payload for h in queue.claim_batch("worker", 10)] == ["x" * 8]


def test_a_payload_bound_over_the_contracts_is_refused_before_the_file_is_created(
    tmp_path: Path,
) -> None:
    path = tmp_path / "never.db"
    with pytest.raises(InvalidOptions, match="max_payload_bytes"):
        alkstore.open(f"sqlite:///{path}", max_payload_bytes=MAX_PAYLOAD_BYTES + 1)
    assert not path.exists()
