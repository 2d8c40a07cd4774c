"""The ``alkstore`` console script, run as an operator runs it, on both reference engines.

Every test invokes the installed script (next to ``sys.executable``) in a
subprocess against a store provisioned for it (a SQLite file; a fresh schema on
the PostgreSQL server, passed with ``--opt schema=...``) and checks its exit
code and output; the test seeds and inspects the store through the API. The
JSON documents checked here are the ones ``docs/operations.md`` publishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import alkstore
from alkstore import (
    EngineSpec,
    EnqueueOpts,
    JobState,
    OffsetClock,
    QueueOpts,
    Schedule,
    ScheduleOpts,
    Store,
    WorkerInfo,
)
from alkstore.rows import JOB_COLUMNS

ALKSTORE = Path(sys.executable).with_name("alkstore")
DAY_S = 86_400
TOP_PRIORITY = 2**31 - 1
JOB_FIELDS = {*JOB_COLUMNS, "payload_error"}
"""What a job document holds: every field of ``alkstore.Job`` (so a new job column must
reach the CLI's documents), and whether its payload could be decoded."""
# Subprocesses get a bound only so that a hung command fails the test instead of the run.
HANG_GUARD_S = 120


@dataclass(frozen=True)
class Cli:
    """The console script pointed at one provisioned store."""

    spec: EngineSpec

    def global_args(self) -> list[str]:
        args = ["--url", self.spec.url]
        for name, value in self.spec.opts.items():
            text = value if isinstance(value, str) else json.dumps(value)
            args.append(f"--opt={name}={text}")
        return args

    def run(
        self, *command: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ALKSTORE), *self.global_args(), *command],
            capture_output=True,
            text=True,
            env=env,
            timeout=HANG_GUARD_S,
            check=False,
        )

    def json(self, *command: str) -> Any:
        done = self.run(*command, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def open(self, **kwargs: Any) -> Store:
        return alkstore.open(self.spec.url, **self.spec.opts, **kwargs)


@pytest.fixture
def cli(engine_spec: tuple[str, EngineSpec]) -> Cli:
    name, spec = engine_spec
    # Both reference engines implement the ops profile: nothing here may skip.
    assert alkstore.load_engine(name).capabilities.ops, f"{name} lacks the ops profile"
    return Cli(spec)


@pytest.fixture
def store(cli: Cli) -> Iterator[Store]:
    with closing(cli.open()) as opened:
        yield opened


def make_dead(store: Store, queue: str = "emails", error: str = "boom") -> int:
    q = store.queue(queue)
    # The top priority makes the next claim take this job, whatever else is ready.
    job_id = q.enqueue({"to": "a@example.com"}, EnqueueOpts(priority=TOP_PRIORITY))
    handle = q.claim("worker-1")
    assert handle is not None
    assert handle.id == job_id
    assert handle.fail(error)
    return job_id


def dead_ids(store: Store, queue: str = "emails") -> list[int]:
    return [job.id for job in store.queue(queue).jobs(JobState.DEAD)]


# -- stats ------------------------------------------------------------------------
def test_stats_json_counts_each_queue(cli: Cli, store: Store) -> None:
    emails = store.queue("emails")
    emails.enqueue("now")
    emails.enqueue("later", EnqueueOpts(delay=3600))
    make_dead(store)
    store.queue("reports").pause()

    document = cli.json("stats")

    assert document == {
        "version": 1,
        "queues": [
            {
                "queue": "emails",
                "ready": 1,
                "scheduled": 1,
                "processing": 0,
                "lapsed": 0,
                "dead": 1,
                "oldest_ready_age_s": document["queues"][0]["oldest_ready_age_s"],
                "paused": False,
                "concurrency_limit": None,
                "rate_limit": None,
                "rate_per_s": None,
                "completed": 0,
                "concurrency_per_key": None,
                "rate_per_key": None,
                "waiting": 0,
                "acked_last_minute": 0,
                "acked_last_hour": 0,
            },
            {
                "queue": "reports",
                "ready": 0,
                "scheduled": 0,
                "processing": 0,
                "lapsed": 0,
                "dead": 0,
                "oldest_ready_age_s": None,
                "paused": True,
                "concurrency_limit": None,
                "rate_limit": None,
                "rate_per_s": None,
                "completed": 0,
                "concurrency_per_key": None,
                "rate_per_key": None,
                "waiting": 0,
                "acked_last_minute": 0,
                "acked_last_hour": 0,
            },
        ],
    }
    assert isinstance(document["queues"][0]["oldest_ready_age_s"], int)


MINUTE_LEFT_S = 20
"""The acked-last-minute count is the current minute's (a bucket per minute): a test
reading it starts with at least this long left in the minute, so that its three CLI
runs read the minute its heartbeat wrote (one failed in CI across a boundary)."""


def _start_of_a_minute_with_time_left(store: Store) -> int:
    """Wait, if the store's clock has under ``MINUTE_LEFT_S`` left in this minute, for
    the next; the minute (epoch seconds // 60) it is then."""
    now = store.clock.now()
    if 60 - now % 60 < MINUTE_LEFT_S:
        store.clock.sleep(60 - now % 60 + 0.1)
    return int(store.clock.now() // 60)


def test_stats_show_each_queues_acked_counts_in_json_table_and_prometheus(
    cli: Cli, store: Store
) -> None:
    minute = _start_of_a_minute_with_time_left(store)
    # Both reference engines have the workers profile (contract 1.2 §19.6).
    store.register_worker(WorkerInfo("w", "h", 1, ("emails",), 0))
    assert store.heartbeat_worker("w", {"emails": 3})
    store.queue("reports").enqueue("x")

    document = cli.json("stats")
    table = cli.run("stats")
    prometheus = cli.run("stats", "--format", "prometheus")
    assert int(store.clock.now() // 60) == minute, "the reads ran past the heartbeat's minute"

    acked = {q["queue"]: (q["acked_last_minute"], q["acked_last_hour"]) for q in document["queues"]}
    # emails holds no job now: its acked jobs list it all the same.
    assert acked == {"emails": (3, 3), "reports": (0, 0)}
    assert table.returncode == 0, table.stderr
    assert "acked 1h" in table.stdout
    (row,) = [line for line in table.stdout.splitlines() if "emails" in line]
    cells = [cell.strip() for cell in row.strip(" │|").split("│")]
    assert cells[-2:] == ["3", "3"]
    assert prometheus.returncode == 0, prometheus.stderr
    assert 'alkstore_queue_acked_last_minute{queue="emails"} 3' in prometheus.stdout
    assert 'alkstore_queue_acked_last_hour{queue="reports"} 0' in prometheus.stdout


def test_stats_table_names_each_queue(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue("x")

    done = cli.run("stats")

    assert done.returncode == 0, done.stderr
    assert "emails" in done.stdout


def test_stats_prometheus_prints_a_gauge_per_queue(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue("x")

    done = cli.run("stats", "--format", "prometheus")

    assert done.returncode == 0, done.stderr
    assert "# TYPE alkstore_queue_ready gauge" in done.stdout
    assert 'alkstore_queue_ready{queue="emails"} 1' in done.stdout
    assert 'alkstore_queue_paused{queue="emails"} 0' in done.stdout


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_stats_watch_prints_documents_until_interrupted(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue("x")
    command = [str(ALKSTORE), *cli.global_args(), "stats", "--watch", "--json"]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it, even when this run was started in the
        # background of a shell, which leaves its children ignoring SIGINT.
        preexec_fn=_interruptible,
    ) as proc:
        try:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=HANG_GUARD_S)
        finally:
            if proc.poll() is None:
                proc.kill()

    assert first["queues"][0]["queue"] == "emails"
    assert proc.returncode == 0


def test_url_comes_from_the_environment(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue("x")
    env = {**os.environ, "ALKSTORE_URL": cli.spec.url}
    options = [f"--opt={k}={v}" for k, v in cli.spec.opts.items()]

    done = subprocess.run(
        [str(ALKSTORE), *options, "stats", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_GUARD_S,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert [q["queue"] for q in json.loads(done.stdout)["queues"]] == ["emails"]


def test_a_missing_url_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ALKSTORE_URL"}

    done = subprocess.run(
        [str(ALKSTORE), "stats"], capture_output=True, text=True, env=env, check=False
    )

    assert done.returncode == 2
    assert "ALKSTORE_URL" in done.stderr


def test_a_bad_engine_option_is_a_usage_error(cli: Cli) -> None:
    done = cli.run("--opt", "no_such_option=1", "stats")

    assert done.returncode == 2
    assert "no_such_option" in done.stderr


# -- jobs and job -----------------------------------------------------------------
def test_jobs_pages_by_id(cli: Cli, store: Store) -> None:
    ids = store.queue("emails").enqueue_many(["a", "b", "c"])

    first = cli.json("jobs", "emails", "--limit", "2")
    rest = cli.json("jobs", "emails", "--after", str(first["next_after"]), "--limit", "2")

    assert [j["id"] for j in first["jobs"]] == ids[:2]
    assert first["next_after"] == ids[1]
    assert [j["id"] for j in rest["jobs"]] == ids[2:]
    assert rest["next_after"] is None


def test_jobs_filters_by_state(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue("pending one")
    dead = make_dead(store)

    document = cli.json("jobs", "emails", "--state", "dead")

    assert document["state"] == "dead"
    assert [j["id"] for j in document["jobs"]] == [dead]


def test_jobs_documents_every_job_field(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue({"to": "a@example.com"}, EnqueueOpts(priority=7))

    (entry,) = cli.json("jobs", "emails")["jobs"]

    assert set(entry) == JOB_FIELDS
    assert entry["payload"] == {"to": "a@example.com"}
    assert entry["priority"] == 7
    assert entry["state"] == "pending"


def test_job_shows_its_unique_key_as_json_and_as_a_table(cli: Cli, store: Store) -> None:
    job_id = store.queue("emails").enqueue("x", EnqueueOpts(unique="sync-user-42"))

    document = cli.json("job", str(job_id))["job"]
    shown = cli.run("job", str(job_id))

    assert document["unique_key"] == "sync-user-42"
    assert shown.returncode == 0
    assert "unique_key" in shown.stdout
    assert "sync-user-42" in shown.stdout


def _completed(store: Store, result: object) -> int:
    queue = store.queue("reports", QueueOpts(completed_retention_s=3600))
    job_id = queue.enqueue({"month": 11})
    handle = queue.claim("worker-1")
    assert handle is not None
    assert handle.ack(result=result)
    return job_id


def test_job_shows_a_completed_jobs_result_as_json_and_as_a_table(cli: Cli, store: Store) -> None:
    job_id = _completed(store, {"rows": 1200})

    document = cli.json("job", str(job_id))["job"]
    shown = cli.run("job", str(job_id))

    assert (document["state"], document["result"]) == ("completed", {"rows": 1200})
    assert document["completed_retention_s"] == 3600
    assert isinstance(document["completed_at"], int)
    assert shown.returncode == 0, shown.stderr
    assert "completed_at" in shown.stdout
    assert '{"rows": 1200}' in shown.stdout


def test_jobs_lists_completed_jobs_and_stats_count_them(cli: Cli, store: Store) -> None:
    job_id = _completed(store, None)
    store.queue("reports").enqueue("waiting")

    listed = cli.json("jobs", "reports", "--state", "completed")
    stats = cli.json("stats")

    assert [job["id"] for job in listed["jobs"]] == [job_id]
    assert [(q["queue"], q["completed"]) for q in stats["queues"]] == [("reports", 1)]


def test_jobs_lists_waiting_jobs_and_stats_count_them(cli: Cli, store: Store) -> None:
    charges = store.queue("charges")
    charge = charges.enqueue({"order": 7})
    ship = store.queue("ships").enqueue({"order": 7}, EnqueueOpts(after=[charge]))

    listed = cli.json("jobs", "ships", "--state", "waiting")
    stats = cli.json("stats")
    table = cli.run("stats")

    assert [(job["id"], job["state"]) for job in listed["jobs"]] == [(ship, "waiting")]
    assert [(q["queue"], q["waiting"]) for q in stats["queues"]] == [("charges", 0), ("ships", 1)]
    assert "waiting" in table.stdout


def test_jobs_refuses_a_page_over_1000_as_usage(cli: Cli) -> None:
    done = cli.run("jobs", "emails", "--limit", "1001")

    assert done.returncode == 2


def test_job_shows_why_each_attempt_failed(cli: Cli, store: Store) -> None:
    q = store.queue("emails", QueueOpts(max_attempts=2))
    job_id = q.enqueue("x")
    first = q.claim("worker-1")
    assert first is not None
    assert first.retry("smtp timeout", delay=0)
    second = q.claim("worker-1")
    assert second is not None
    assert second.retry("smtp refused")

    job = cli.json("job", str(job_id))["job"]

    assert job["state"] == "dead"
    assert job["last_error"] == "max attempts exceeded"
    assert [(e["attempt"], e["error"]) for e in job["errors"]] == [
        (1, "smtp timeout"),
        (2, "smtp refused"),
    ]


def test_an_unknown_job_is_refused_with_one_line(cli: Cli) -> None:
    done = cli.run("job", "987654321")

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "987654321" in done.stderr


# -- redrive ----------------------------------------------------------------------
def test_redrive_dry_run_changes_nothing(cli: Cli, store: Store) -> None:
    dead = make_dead(store)
    before = store.queue("emails").stats()

    document = cli.json("redrive", "emails", "--all", "--dry-run")

    assert document["dry_run"] is True
    assert document["redriven"] == [{"from": dead, "to": None}]
    assert store.queue("emails").stats() == before
    assert dead_ids(store) == [dead]


def test_redrive_of_a_named_job_makes_a_new_pending_job(cli: Cli, store: Store) -> None:
    dead = make_dead(store)

    document = cli.json("redrive", "emails", "--id", str(dead))

    (move,) = document["redriven"]
    assert move["from"] == dead
    new = store.queue("emails").get_job(move["to"])
    assert new is not None
    assert new.state is JobState.PENDING
    assert new.redriven_from == dead
    assert store.queue("emails").get_job(dead) is None


def test_redrive_all_takes_every_dead_job_of_the_queue(cli: Cli, store: Store) -> None:
    dead = [make_dead(store), make_dead(store)]
    other = make_dead(store, "reports")

    document = cli.json("redrive", "emails", "--all")

    assert [m["from"] for m in document["redriven"]] == dead
    assert dead_ids(store) == []
    assert dead_ids(store, "reports") == [other]


def test_redrive_skips_ids_that_are_not_dead_jobs_of_the_queue(cli: Cli, store: Store) -> None:
    dead = make_dead(store)
    elsewhere = make_dead(store, "reports")

    document = cli.json("redrive", "emails", "--id", str(dead), "--id", str(elsewhere))

    assert [m["from"] for m in document["redriven"]] == [dead]
    assert document["skipped"] == [elsewhere]
    assert dead_ids(store, "reports") == [elsewhere]


def test_redrive_with_nothing_to_redrive_among_the_ids_is_refused(cli: Cli, store: Store) -> None:
    pending = store.queue("emails").enqueue("alive")

    done = cli.run("redrive", "emails", "--id", str(pending))

    assert done.returncode == 1
    assert "emails" in done.stderr


def test_redrive_needs_ids_or_all(cli: Cli) -> None:
    done = cli.run("redrive", "emails")

    assert done.returncode == 2


def test_redrive_error_contains_takes_only_dead_jobs_whose_error_matches(
    cli: Cli, store: Store
) -> None:
    matching = make_dead(store, error="Traceback ...\nTimeoutError: upstream took 30 s")
    other = make_dead(store, error="ValueError: bad address")

    document = cli.json("redrive", "emails", "--error-contains", "timeouterror")

    assert [m["from"] for m in document["redriven"]] == [matching]
    assert dead_ids(store) == [other]


def test_redrive_error_contains_dry_run_changes_nothing(cli: Cli, store: Store) -> None:
    matching = make_dead(store, error="TimeoutError")
    make_dead(store, error="ValueError")

    document = cli.json("redrive", "emails", "--error-contains", "Timeout", "--dry-run")

    assert document["redriven"] == [{"from": matching, "to": None}]
    assert len(dead_ids(store)) == 2


def test_redrive_refuses_an_empty_error_text_as_usage(cli: Cli, store: Store) -> None:
    make_dead(store)

    done = cli.run("redrive", "emails", "--error-contains", " ")

    assert done.returncode == 2
    assert len(dead_ids(store)) == 1


def test_redrive_refuses_two_selections_at_once_as_usage(cli: Cli, store: Store) -> None:
    dead = make_dead(store)

    done = cli.run("redrive", "emails", "--all", "--error-contains", "boom")

    assert done.returncode == 2
    assert dead_ids(store) == [dead]


# -- purge ------------------------------------------------------------------------
def test_purge_older_than_deletes_only_jobs_dead_that_long(cli: Cli, store: Store) -> None:
    with closing(cli.open(clock=OffsetClock(-3 * DAY_S))) as past:
        old = make_dead(past)
    recent = make_dead(store)

    document = cli.json("purge", "emails", "--older-than", "2d")

    assert document == {"version": 1, "queue": "emails", "purged": 1}
    assert dead_ids(store) == [recent]
    assert store.queue("emails").get_job(old) is None


def test_purge_named_jobs(cli: Cli, store: Store) -> None:
    doomed, kept = make_dead(store), make_dead(store)

    document = cli.json("purge", "emails", "--id", str(doomed))

    assert document["purged"] == 1
    assert dead_ids(store) == [kept]


def test_purge_all_leaves_live_jobs(cli: Cli, store: Store) -> None:
    make_dead(store)
    live = store.queue("emails").enqueue("alive")

    document = cli.json("purge", "emails", "--all")

    assert document["purged"] == 1
    assert [job.id for job in store.queue("emails").jobs()] == [live]


def test_purge_of_ids_that_are_not_dead_is_refused(cli: Cli, store: Store) -> None:
    pending = store.queue("emails").enqueue("alive")

    done = cli.run("purge", "emails", "--id", str(pending))

    assert done.returncode == 1
    assert store.queue("emails").get_job(pending) is not None


def test_purge_error_contains_deletes_only_dead_jobs_whose_error_matches(
    cli: Cli, store: Store
) -> None:
    make_dead(store, error="TimeoutError: upstream")
    kept = make_dead(store, error="ValueError: bad address")

    document = cli.json("purge", "emails", "--error-contains", "TIMEOUT")

    assert document["purged"] == 1
    assert dead_ids(store) == [kept]


# -- cancel -----------------------------------------------------------------------
def test_cancel_deletes_the_named_live_jobs_and_lists_the_rest(cli: Cli, store: Store) -> None:
    q = store.queue("emails")
    pending, kept = q.enqueue("a"), q.enqueue("b")
    dead = make_dead(store)

    document = cli.json("cancel", "emails", str(pending), str(dead))

    assert document == {"version": 1, "queue": "emails", "cancelled": [pending], "skipped": [dead]}
    assert q.get_job(pending) is None
    assert [job.id for job in q.jobs(JobState.PENDING)] == [kept]
    assert dead_ids(store) == [dead]


def test_cancel_of_a_processing_job_makes_its_claim_stale(cli: Cli, store: Store) -> None:
    q = store.queue("emails")
    job_id = q.enqueue("a")
    handle = q.claim("worker-1")
    assert handle is not None

    done = cli.run("cancel", "emails", str(job_id))

    assert done.returncode == 0, done.stderr
    assert not handle.ack()
    assert q.get_job(job_id) is None


def test_cancel_of_a_job_of_another_queue_is_refused(cli: Cli, store: Store) -> None:
    elsewhere = store.queue("reports").enqueue("a")

    done = cli.run("cancel", "emails", str(elsewhere))

    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert store.queue("reports").get_job(elsewhere) is not None


def test_cancel_needs_an_id_as_usage(cli: Cli) -> None:
    done = cli.run("cancel", "emails")

    assert done.returncode == 2


def test_purge_refuses_a_malformed_duration_as_usage(cli: Cli, store: Store) -> None:
    make_dead(store)

    done = cli.run("purge", "emails", "--older-than", "7 days")

    assert done.returncode == 2
    assert dead_ids(store) != []


# -- pause, resume, schedules, outboxes ----------------------------------------------
def test_pause_stops_claims_in_other_processes(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue("x")

    document = cli.json("pause", "emails")

    assert document == {"version": 1, "queue": "emails", "paused": True, "changed": True}
    assert store.queue("emails").claim("worker-1") is None


def test_resume_hands_jobs_out_again(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue("x")
    store.queue("emails").pause()

    document = cli.json("resume", "emails")

    assert document["changed"] is True
    assert store.queue("emails").claim("worker-1") is not None


def test_pausing_a_paused_queue_succeeds_unchanged(cli: Cli, store: Store) -> None:
    store.queue("emails").pause()

    document = cli.json("pause", "emails")

    assert document["changed"] is False
    assert document["paused"] is True


def test_limits_sets_a_limit_every_process_honours(cli: Cli, store: Store) -> None:
    store.queue("emails").enqueue_many(["a", "b"])

    document = cli.json("limits", "emails", "--concurrency", "1")

    assert document == {
        "version": 1,
        "queue": "emails",
        "concurrency": 1,
        "rate": None,
        "per_s": None,
        "concurrency_per_key": None,
        "rate_per_key": None,
        "changed": True,
    }
    assert store.queue("emails").claim("worker-1") is not None
    assert store.queue("emails").claim("worker-1") is None


def test_limits_shows_the_stored_limit(cli: Cli, store: Store) -> None:
    assert cli.json("limits", "emails") == {
        "version": 1,
        "queue": "emails",
        "concurrency": None,
        "rate": None,
        "per_s": None,
        "concurrency_per_key": None,
        "rate_per_key": None,
    }
    store.queue("emails").set_limits(alkstore.Limits(concurrency=4))

    assert cli.json("limits", "emails")["concurrency"] == 4


def test_limits_sets_a_rate_per_window(cli: Cli, store: Store) -> None:
    document = cli.json("limits", "emails", "--rate", "10", "--per", "1m")

    assert (document["rate"], document["per_s"], document["changed"]) == (10, 60, True)
    assert store.queue("emails").limits() == alkstore.Limits(rate=10, per=60)
    (entry,) = cli.json("stats")["queues"]
    assert (entry["rate_limit"], entry["rate_per_s"]) == (10, 60)


def test_limits_sets_a_limit_per_key(cli: Cli, store: Store) -> None:
    document = cli.json("limits", "emails", "--concurrency-per-key", "2")

    assert (document["concurrency_per_key"], document["changed"]) == (2, True)
    assert store.queue("emails").limits() == alkstore.Limits(concurrency_per_key=2)
    (entry,) = cli.json("stats")["queues"]
    assert entry["concurrency_per_key"] == 2


def test_limits_sets_a_rate_per_key_per_window(cli: Cli, store: Store) -> None:
    document = cli.json("limits", "emails", "--rate-per-key", "5", "--per", "1m")

    assert (document["rate_per_key"], document["per_s"], document["changed"]) == (5, 60, True)
    assert store.queue("emails").limits() == alkstore.Limits(rate_per_key=5, per=60)
    (entry,) = cli.json("stats")["queues"]
    assert (entry["rate_per_key"], entry["rate_per_s"]) == (5, 60)


@pytest.mark.parametrize("bad", [["--rate", "10"], ["--per", "1m"], ["--rate", "1", "--per", "x"]])
def test_limits_refuses_a_rate_without_its_window_as_usage(
    cli: Cli, store: Store, bad: list[str]
) -> None:
    done = cli.run("limits", "emails", *bad)

    assert done.returncode == 2
    assert store.queue("emails").limits() is None


def test_limits_clear_removes_the_limit(cli: Cli, store: Store) -> None:
    store.queue("emails").set_limits(alkstore.Limits(concurrency=4))

    document = cli.json("limits", "emails", "--clear")

    assert (document["concurrency"], document["changed"]) == (None, True)
    assert store.queue("emails").limits() is None


@pytest.mark.parametrize("bad", ["0", "-3", "1000001", "two"])
def test_limits_refuses_a_malformed_concurrency_as_usage(cli: Cli, store: Store, bad: str) -> None:
    done = cli.run("limits", "emails", "--concurrency", bad)

    assert done.returncode == 2
    assert store.queue("emails").limits() is None


def test_limits_refuses_setting_and_clearing_at_once(cli: Cli, store: Store) -> None:
    done = cli.run("limits", "emails", "--concurrency", "2", "--clear")

    assert done.returncode == 2
    assert store.queue("emails").limits() is None


def test_stats_show_a_queues_limit_in_json_table_and_prometheus(cli: Cli, store: Store) -> None:
    store.queue("emails").set_limits(alkstore.Limits(concurrency=7))

    (entry,) = cli.json("stats")["queues"]
    table = cli.run("stats")
    prometheus = cli.run("stats", "--format", "prometheus")

    assert (entry["queue"], entry["concurrency_limit"]) == ("emails", 7)
    assert "limit" in table.stdout
    assert " 7 " in table.stdout
    assert 'alkstore_queue_concurrency_limit{queue="emails"} 7' in prometheus.stdout


def test_schedules_lists_every_schedule(cli: Cli, store: Store) -> None:
    store.schedule("nightly", "@every 1d", "reports", {"kind": "nightly"})

    (entry,) = cli.json("schedules")["schedules"]

    assert entry["name"] == "nightly"
    assert entry["spec"] == "@every 1d"
    assert entry["queue"] == "reports"
    assert entry["interval_s"] == DAY_S
    assert (entry["timezone"], entry["catch_up"]) == ("UTC", "all")


def test_the_schedules_document_carries_every_field_of_a_cron_schedule(
    cli: Cli, store: Store
) -> None:
    opts = ScheduleOpts(priority=2, expires=600, timezone="Europe/Berlin", catch_up="latest")
    stored = store.schedule("digest", "0 9 * * MON-FRI", "mail", {"kind": "digest"}, opts)

    (entry,) = cli.json("schedules")["schedules"]

    assert entry == {
        "name": "digest",
        "spec": "0 9 * * MON-FRI",
        "queue": "mail",
        "payload": {"kind": "digest"},
        "priority": 2,
        "max_attempts": None,
        "expires_s": 600,
        "interval_s": None,
        "next_fire_at": stored.next_fire_at,
        "timezone": "Europe/Berlin",
        "catch_up": "latest",
        "declared_until": None,
    }
    # Every field of alkstore.Schedule, and what it reads from its opts, reaches it.
    assert {f.name for f in fields(Schedule)} - {"opts"} <= set(entry)


def test_the_schedules_table_shows_the_zone_the_policy_and_both_clocks(
    cli: Cli, store: Store
) -> None:
    stored = store.schedule(
        "digest", "0 9 * * *", "mail", {}, ScheduleOpts(timezone="Asia/Kolkata", catch_up="none")
    )
    local = datetime.fromtimestamp(stored.next_fire_at, ZoneInfo("Asia/Kolkata"))
    utc = datetime.fromtimestamp(stored.next_fire_at, UTC)

    done = cli.run("schedules")

    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if "digest" in line]
    assert "Asia/Kolkata" in row
    assert "none" in row
    assert f"{local:%Y-%m-%d} 09:00:00 +0530" in row
    assert f"{utc:%Y-%m-%d} 03:30:00Z" in row


def test_the_schedules_document_and_table_show_a_declared_schedule_s_lease(
    cli: Cli, store: Store
) -> None:
    declared = store.declare_schedule("heartbeat", "@every 1h", "pings", {})
    assert declared.declared_until is not None
    until = datetime.fromtimestamp(declared.declared_until, UTC)

    (entry,) = cli.json("schedules")["schedules"]
    done = cli.run("schedules")

    assert entry["declared_until"] == declared.declared_until
    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if "heartbeat" in line]
    assert f"{until:%Y-%m-%d %H:%M:%S}Z" in row


def test_the_schedules_table_shows_no_lease_for_an_undeclared_schedule(
    cli: Cli, store: Store
) -> None:
    store.schedule("plain", "@every 1h", "pings", {})

    done = cli.run("schedules")

    assert done.returncode == 0, done.stderr
    (row,) = [line for line in done.stdout.splitlines() if "plain" in line]
    assert row.count("Z") == 1  # the next fire's UTC time, and no lease


def test_an_outbox_backing_queue_is_reachable_by_its_listed_name(cli: Cli, store: Store) -> None:
    job_id = store.outbox("mail").enqueue({"to": "a@example.com"})
    (listed,) = [s["queue"] for s in cli.json("stats")["queues"]]

    document = cli.json("jobs", listed)

    assert [j["id"] for j in document["jobs"]] == [job_id]


def test_enqueue_prints_the_new_jobs_id_for_scripts(cli: Cli, store: Store) -> None:
    done = cli.run("enqueue", "emails", '{"to": "ada@example.com"}')

    assert done.returncode == 0, done.stderr
    job = store.queue("emails").get_job(int(done.stdout))
    assert job is not None
    assert job.payload == {"to": "ada@example.com"}
    assert job.state is JobState.PENDING


def test_enqueue_json_names_the_queue_and_id(cli: Cli, store: Store) -> None:
    document = cli.json("enqueue", "emails", "42")

    assert document == {
        "version": 1,
        "queue": "emails",
        "id": document["id"],
        "duplicate": False,
    }
    job = store.queue("emails").get_job(document["id"])
    assert job is not None
    assert job.payload == 42


def test_enqueue_reads_a_dash_payload_from_stdin(cli: Cli, store: Store) -> None:
    done = subprocess.run(
        [str(ALKSTORE), *cli.global_args(), "enqueue", "emails", "-"],
        input='["a", {"b": null}]',
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    job = store.queue("emails").get_job(int(done.stdout))
    assert job is not None
    assert job.payload == ["a", {"b": None}]


def test_enqueue_stamps_the_given_options(cli: Cli, store: Store) -> None:
    document = cli.json(
        "enqueue", "emails", "{}", "--delay", "1h", "--priority", "7",
        "--max-attempts", "9", "--expires", "2d",
    )  # fmt: skip

    job = store.queue("emails").get_job(document["id"])
    assert job is not None
    assert job.priority == 7
    assert job.max_attempts == 9
    assert job.run_at - job.created_at == 3600
    assert job.expires_at is not None
    assert job.expires_at - job.created_at == 2 * DAY_S


def test_enqueue_run_at_takes_an_iso_instant_with_an_offset(cli: Cli, store: Store) -> None:
    document = cli.json("enqueue", "emails", "{}", "--run-at", "2036-01-02T03:04:05+01:00")

    job = store.queue("emails").get_job(document["id"])
    assert job is not None
    assert job.run_at == 2082852245


def test_enqueue_refuses_a_run_at_without_an_offset_as_usage(cli: Cli, store: Store) -> None:
    done = cli.run("enqueue", "emails", "{}", "--run-at", "2036-01-02T03:04:05")

    assert done.returncode == 2
    assert "no UTC offset" in done.stderr
    assert store.stats() == []


def test_enqueue_refuses_a_payload_that_is_not_json_as_usage(cli: Cli, store: Store) -> None:
    done = cli.run("enqueue", "emails", "{to: ada}")

    assert done.returncode == 2
    assert "not JSON" in done.stderr
    assert store.stats() == []


def test_enqueue_refuses_a_reserved_queue_name_as_usage(cli: Cli, store: Store) -> None:
    done = cli.run("enqueue", "__alkstore_mine", "{}")

    assert done.returncode == 2
    assert "reserved" in done.stderr
    assert store.stats() == []


def test_enqueue_with_a_held_unique_key_prints_the_holders_id_and_writes_nothing(
    cli: Cli, store: Store
) -> None:
    first = cli.json("enqueue", "sync", '{"user": 42}', "--unique", "sync-user-42")
    again = cli.json("enqueue", "sync", '{"user": 42}', "--unique", "sync-user-42")

    assert first["duplicate"] is False
    assert again == {**first, "duplicate": True}
    assert [job.id for job in store.queue("sync").jobs()] == [first["id"]]
    job = store.queue("sync").get_job(first["id"])
    assert job is not None
    assert job.unique_key == "sync-user-42"


def test_enqueue_refuses_an_empty_unique_key_as_usage(cli: Cli, store: Store) -> None:
    done = cli.run("enqueue", "sync", "{}", "--unique", "")

    assert done.returncode == 2
    assert store.stats() == []
