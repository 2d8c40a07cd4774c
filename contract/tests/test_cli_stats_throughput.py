"""``alkstore stats``' acked counts (contract 1.2 §19.6): from ``store.throughput()``
with the workers profile, nothing (and no error) without it."""

from __future__ import annotations

from rich.console import Console

from alkstore.cli import documents, tables
from alkstore.values import QueueStats, QueueThroughput

EMAILS = QueueStats("emails", 1, 0, 0, 0, 0, None, False)


def _render(table: object) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_the_json_entry_has_null_acked_counts_without_the_workers_profile() -> None:
    entry = documents.stats_entry(EMAILS, None)

    assert (entry["acked_last_minute"], entry["acked_last_hour"]) == (None, None)


def test_the_json_entry_counts_zero_for_a_queue_nothing_was_acked_of() -> None:
    entry = documents.stats_entry(EMAILS, {})

    assert (entry["acked_last_minute"], entry["acked_last_hour"]) == (0, 0)


def test_the_json_entry_takes_the_current_minute_and_the_hours_total() -> None:
    counted = QueueThroughput("emails", 7, (5, 0, 2))

    entry = documents.stats_entry(EMAILS, {"emails": counted})

    assert (entry["acked_last_minute"], entry["acked_last_hour"]) == (2, 7)


def test_the_table_has_no_acked_columns_without_the_workers_profile() -> None:
    text = _render(tables.stats_table([EMAILS], 0, None))

    assert "emails" in text
    assert "acked" not in text


def test_the_table_has_acked_columns_with_the_workers_profile() -> None:
    text = _render(tables.stats_table([EMAILS], 0, {}))

    assert "acked 1m" in text
    assert "acked 1h" in text
