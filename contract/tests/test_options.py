"""Queue, enqueue and schedule options normalize to whole seconds and refuse bad
fields by name (contract §2, §5, §9)."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from alkstore.errors import InvalidOptions, InvalidSpec
from alkstore.options import (
    DEFAULT_QUEUE_OPTS,
    OUTBOX_QUEUE_OPTS,
    EnqueueOpts,
    QueueOpts,
    ScheduleOpts,
    resolve_stamps,
)

NOW = 1_000


def test_default_queue_opts_match_the_contract() -> None:
    assert QueueOpts(300, 3, 5, None) == DEFAULT_QUEUE_OPTS
    assert (
        DEFAULT_QUEUE_OPTS.visibility_timeout_s,
        DEFAULT_QUEUE_OPTS.max_attempts,
        DEFAULT_QUEUE_OPTS.backoff_base_s,
        DEFAULT_QUEUE_OPTS.dead_letter_retention_s,
    ) == (300, 3, 5, None)


def test_queue_opts_constructed_without_arguments_are_the_defaults() -> None:
    assert QueueOpts() == DEFAULT_QUEUE_OPTS


def test_outbox_queue_opts_match_the_contract() -> None:
    assert QueueOpts(60, 5, 5, None) == OUTBOX_QUEUE_OPTS


def test_enqueue_opts_default_to_ready_now_priority_zero() -> None:
    opts = EnqueueOpts()
    assert (opts.delay, opts.priority, opts.max_attempts, opts.expires, opts.run_at) == (
        None,
        0,
        None,
        None,
        None,
    )


def test_queue_opts_normalize_durations_to_whole_seconds_rounded_up() -> None:
    opts = QueueOpts(
        visibility_timeout_s=1.2,
        backoff_base_s=timedelta(milliseconds=1500),
        dead_letter_retention_s=timedelta(days=1, microseconds=1),
    )
    assert (opts.visibility_timeout_s, opts.backoff_base_s, opts.dead_letter_retention_s) == (
        2,
        2,
        86_401,
    )
    assert type(opts.visibility_timeout_s) is int


def test_enqueue_opts_normalize_durations_and_instants() -> None:
    opts = EnqueueOpts(
        delay=timedelta(seconds=0.5),
        expires=59.1,
        run_at=datetime(2024, 1, 1, microsecond=1, tzinfo=UTC),
    )
    assert (opts.delay, opts.expires, opts.run_at) == (1, 60, 1_704_067_201)


def test_schedule_opts_normalize_expires() -> None:
    assert ScheduleOpts(expires=timedelta(minutes=1, microseconds=1)).expires == 61


def test_options_are_frozen() -> None:
    opts = QueueOpts()
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.max_attempts = 9  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"visibility_timeout_s": 0}, "visibility_timeout_s"),
        ({"visibility_timeout_s": -1}, "visibility_timeout_s"),
        ({"visibility_timeout_s": "300"}, "visibility_timeout_s"),
        ({"visibility_timeout_s": math.nan}, "visibility_timeout_s"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 2.0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 2**31}, "max_attempts"),
        ({"backoff_base_s": -1}, "backoff_base_s"),
        ({"backoff_base_s": math.inf}, "backoff_base_s"),
        ({"backoff_base_s": None}, "backoff_base_s"),
        ({"dead_letter_retention_s": -1}, "dead_letter_retention_s"),
        ({"dead_letter_retention_s": False}, "dead_letter_retention_s"),
    ],
    ids=repr,
)
def test_queue_opts_refuse_a_bad_field_by_name(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptions, match=field):
        QueueOpts(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"delay": -1}, "delay"),
        ({"delay": math.nan}, "delay"),
        ({"delay": "10"}, "delay"),
        ({"priority": 1.0}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 2**31}, "priority"),
        ({"priority": -(2**31) - 1}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"expires": 0}, "expires"),
        ({"expires": -5}, "expires"),
        ({"expires": math.inf}, "expires"),
        ({"run_at": datetime(2024, 1, 1)}, "run_at"),
        ({"run_at": -1}, "run_at"),
        ({"run_at": True}, "run_at"),
        ({"run_at": "2024-01-01"}, "run_at"),
    ],
    ids=repr,
)
def test_enqueue_opts_refuse_a_bad_field_by_name(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptions, match=field):
        EnqueueOpts(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"priority": "high"}, "priority"),
        ({"priority": 2**31}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": False}, "max_attempts"),
        ({"expires": 0}, "expires"),
        ({"expires": math.nan}, "expires"),
    ],
    ids=repr,
)
def test_schedule_opts_refuse_a_bad_field_by_name(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidOptions, match=field):
        ScheduleOpts(**kwargs)


def test_priority_accepts_the_ends_of_the_32_bit_range() -> None:
    assert EnqueueOpts(priority=2**31 - 1).priority == 2**31 - 1
    assert EnqueueOpts(priority=-(2**31)).priority == -(2**31)


def test_schedule_opts_carry_over_to_enqueue_opts() -> None:
    opts = ScheduleOpts(priority=4, max_attempts=7, expires=30).as_enqueue_opts()
    assert opts == EnqueueOpts(priority=4, max_attempts=7, expires=30)


def test_resolve_delay_wins_over_run_at() -> None:
    job = resolve_stamps("q", QueueOpts(), EnqueueOpts(delay=10, run_at=5_000), NOW)
    assert job.run_at == NOW + 10


def test_resolve_run_at_applies_without_delay() -> None:
    job = resolve_stamps("q", QueueOpts(), EnqueueOpts(run_at=5_000), NOW)
    assert job.run_at == 5_000


def test_resolve_without_delay_or_run_at_is_ready_now() -> None:
    job = resolve_stamps("q", QueueOpts(), EnqueueOpts(), NOW)
    assert job.run_at == NOW


def test_resolve_zero_delay_still_wins_over_run_at() -> None:
    job = resolve_stamps("q", QueueOpts(), EnqueueOpts(delay=0, run_at=5_000), NOW)
    assert job.run_at == NOW


def test_resolve_expires_is_relative_to_now() -> None:
    job = resolve_stamps("q", QueueOpts(), EnqueueOpts(expires=60), NOW)
    assert job.expires_at == NOW + 60


def test_resolve_without_expires_never_expires() -> None:
    job = resolve_stamps("q", QueueOpts(), EnqueueOpts(), NOW)
    assert job.expires_at is None


def test_resolve_enqueue_max_attempts_wins_over_the_queues() -> None:
    job = resolve_stamps("q", QueueOpts(max_attempts=3), EnqueueOpts(max_attempts=9), NOW)
    assert job.max_attempts == 9


def test_resolve_falls_back_to_the_queues_max_attempts() -> None:
    job = resolve_stamps("q", QueueOpts(max_attempts=4), EnqueueOpts(), NOW)
    assert job.max_attempts == 4


def test_resolve_stamps_the_queue_opts_on_the_job() -> None:
    queue_opts = QueueOpts(visibility_timeout_s=42, backoff_base_s=7, dead_letter_retention_s=99)
    job = resolve_stamps("emails", queue_opts, EnqueueOpts(priority=3), NOW)
    assert (
        job.queue,
        job.priority,
        job.created_at,
        job.visibility_timeout_s,
        job.backoff_base_s,
        job.dead_letter_retention_s,
    ) == ("emails", 3, NOW, 42, 7, 99)


def test_resolve_keeps_no_retention_when_the_queue_has_none() -> None:
    job = resolve_stamps("q", QueueOpts(dead_letter_retention_s=None), EnqueueOpts(), NOW)
    assert job.dead_letter_retention_s is None


def test_resolved_options_are_plain_ints() -> None:
    queue_opts = QueueOpts(visibility_timeout_s=1.5, backoff_base_s=timedelta(seconds=2.1))
    enqueue_opts = EnqueueOpts(delay=0.2, expires=timedelta(minutes=1), run_at=10.5)
    values = (
        queue_opts.visibility_timeout_s,
        queue_opts.backoff_base_s,
        enqueue_opts.delay,
        enqueue_opts.expires,
        enqueue_opts.run_at,
        ScheduleOpts(expires=0.5).expires,
    )
    assert values == (2, 3, 1, 60, 11, 1)
    assert all(type(value) is int for value in values)


def test_options_compare_and_hash_by_their_resolved_values() -> None:
    assert QueueOpts(visibility_timeout_s=timedelta(seconds=60)) == QueueOpts(60)
    assert hash(EnqueueOpts(delay=0.5)) == hash(EnqueueOpts(delay=1))
    assert dataclasses.replace(QueueOpts(), max_attempts=9) == QueueOpts(max_attempts=9)


def test_schedule_opts_default_to_utc_and_replaying_every_missed_boundary() -> None:
    assert (ScheduleOpts().timezone, ScheduleOpts().catch_up) == ("UTC", "all")


@pytest.mark.parametrize("policy", ["all", "latest", "none"])
def test_schedule_opts_take_each_catch_up_policy(policy: str) -> None:
    assert ScheduleOpts(catch_up=policy, timezone="Asia/Kolkata").catch_up == policy


@pytest.mark.parametrize("policy", ["ALL", "skip", "", None, 0])
def test_a_catch_up_policy_outside_the_three_names_the_field(policy: object) -> None:
    with pytest.raises(InvalidOptions, match="catch_up"):
        ScheduleOpts(catch_up=policy)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "zone", ["", "Mars/Base", "europe/berlin", "localtime", "../UTC", None, 1], ids=repr
)
def test_a_zone_that_is_none_raises_invalid_spec_naming_it(zone: object) -> None:
    with pytest.raises(InvalidSpec) as raised:
        ScheduleOpts(timezone=zone)  # type: ignore[arg-type]
    assert raised.value.timezone == zone
    assert repr(zone) in str(raised.value)


def test_stored_opts_keep_a_zone_this_process_cannot_resolve() -> None:
    stored = ScheduleOpts.stored(1, None, None, "Atlantis/Capital", "latest")
    assert (stored.priority, stored.timezone, stored.catch_up) == (1, "Atlantis/Capital", "latest")


def test_enqueue_metadata_is_kept_sorted_and_an_empty_map_is_none() -> None:
    opts = EnqueueOpts(metadata={"b": "2", "a": "1"})
    assert list(opts.metadata or {}) == ["a", "b"]
    assert EnqueueOpts(metadata={}).metadata is None


def test_enqueue_metadata_is_a_copy_the_caller_cannot_change() -> None:
    given = {"a": "1"}
    opts = EnqueueOpts(metadata=given)
    given["a"] = "changed"
    assert opts.metadata == {"a": "1"}
    with pytest.raises(TypeError):
        opts.metadata["a"] = "x"  # type: ignore[index]


def test_stamps_carry_the_metadata_as_sorted_compact_json() -> None:
    stamps = resolve_stamps("q", DEFAULT_QUEUE_OPTS, EnqueueOpts(metadata={"b": "é", "a": "1"}), 5)
    assert stamps.metadata == '{"a":"1","b":"é"}'
    assert resolve_stamps("q", DEFAULT_QUEUE_OPTS, EnqueueOpts(), 5).metadata is None
