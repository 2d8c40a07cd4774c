"""A primary and a streaming standby (``testing.replication``): multi-host URLs, a store
that meets only a standby, and a scripted failover (docs/engines/postgres.md, Failover
and standbys). Each pair is two throwaway clusters, stopped and deleted afterwards."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest
from pg_helpers import fresh_schema_name, wait_until
from psycopg.conninfo import conninfo_to_dict

import alkstore
from alkstore import EngineUnavailable, InvalidOptions, Job, JobState, QueueOpts
from alkstore.worker import Worker
from alkstore_postgres.options import DEFAULT_CALL_TIMEOUT_S, parse_options
from alkstore_postgres.testing.provisioning import dsn_as_url
from alkstore_postgres.testing.replication import STANDBY_NAME, ReplicatedPostgres

T = TypeVar("T")

RETRY_S = 30.0
"""A safety net for waiting out a failover, never a timing assertion."""
WRITE_REFUSED = "read-only transaction"
"""What a standby's log says of each write it refused (nothing must reach it)."""


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedPostgres]:
    """One synchronous pair for the tests that do not fail over."""
    with ReplicatedPostgres(synchronous=True, fsync=False) as replicated:
        yield replicated


@pytest.fixture
def failing_pair() -> Iterator[ReplicatedPostgres]:
    """A synchronous pair of the test's own: it is failed over."""
    with ReplicatedPostgres(synchronous=True, fsync=False) as replicated:
        yield replicated


def _standby_url(pair: ReplicatedPostgres, query: str = "") -> str:
    return f"postgresql://postgres@127.0.0.1:{pair.standby.port}/postgres{query}"


def _schemas(dsn: str, name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (name,))
        return int(row.fetchone()[0])  # type: ignore[index]


def _refused_writes(pair: ReplicatedPostgres) -> int:
    return pair.standby.log_file.read_text(errors="replace").count(WRITE_REFUSED)


def _retrying(call: Callable[[], T]) -> T:
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            return call()
        except EngineUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


# --------------------------------------------------------------------------- the fixture


def test_the_pair_streams_synchronously_to_its_standby(pair: ReplicatedPostgres) -> None:
    with psycopg.connect(pair.primary.dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
            (STANDBY_NAME,),
        ).fetchone()
    with psycopg.connect(pair.standby.dsn, autocommit=True) as conn:
        in_recovery = conn.execute("SELECT pg_is_in_recovery()").fetchone()

    assert row == ("sync",)
    assert in_recovery == (True,)


def test_the_pair_leaves_no_server_and_no_directory_even_when_the_block_fails() -> None:
    dirs: list[Path] = []
    pids: list[int] = []

    with pytest.raises(RuntimeError, match="the test failed"):
        _fail_inside_a_pair(dirs, pids)

    assert len(dirs) == len(pids) == 2
    assert [d for d in dirs if d.exists()] == []
    assert [pid for pid in pids if _running(pid)] == []


def _fail_inside_a_pair(dirs: list[Path], pids: list[int]) -> None:
    with ReplicatedPostgres(synchronous=False, fsync=False) as replicated:
        for server in (replicated.primary, replicated.standby):
            dirs.append(server.socket_dir)
            pids.append(int((server.data_dir / "postmaster.pid").read_text().split()[0]))
        raise RuntimeError("the test failed")


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process: a server that exited may linger a moment as a
    zombie of init (pg_ctl detached it), which is no process left running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


# --------------------------------------------------------------------------- URLs


def test_a_multi_host_url_reaches_the_primary_whichever_host_is_listed_first(
    pair: ReplicatedPostgres,
) -> None:
    standby_first = (
        f"postgresql://postgres@127.0.0.1:{pair.standby.port},127.0.0.1:{pair.primary.port}"
        "/postgres?target_session_attrs=read-write"
    )
    schema = fresh_schema_name()

    with alkstore.open(standby_first, schema=schema) as store:
        job_id = store.queue("q").enqueue({"n": 1})

    assert job_id >= 1
    assert _schemas(pair.primary.dsn, schema) == 1


def test_a_key_value_multi_host_dsn_becomes_a_url_naming_the_same_hosts_and_ports() -> None:
    dsn = "host=127.0.0.1,127.0.0.2 port=5433,5434 user=postgres dbname=jobs"

    url = dsn_as_url(dsn)

    assert url == "postgresql://postgres@127.0.0.1:5433,127.0.0.2:5434/jobs"
    assert conninfo_to_dict(url) == conninfo_to_dict(dsn)


@pytest.mark.parametrize("target", ["standby", "read-only", "prefer-standby"])
def test_a_url_targeting_standbys_is_refused_before_connecting(target: str) -> None:
    # The host "h" does not resolve: anything that tried to connect would fail otherwise.
    with pytest.raises(InvalidOptions, match=target) as info:
        alkstore.open(f"postgresql://u@h/app?target_session_attrs={target}")
    assert info.value.__cause__ is None


# --------------------------------------------------------------------------- standby only


def test_a_store_opened_on_a_standby_only_is_unavailable_and_sends_it_no_write(
    pair: ReplicatedPostgres,
) -> None:
    refused_before = _refused_writes(pair)
    schema = fresh_schema_name()

    with pytest.raises(EngineUnavailable, match="read-only"):
        alkstore.open(_standby_url(pair), schema=schema, connect_timeout_s=2)

    assert _refused_writes(pair) == refused_before  # libpq turned it away at connect
    assert _schemas(pair.primary.dsn, schema) == 0


def test_a_write_a_standby_refuses_is_unavailable_not_a_raw_driver_error(
    pair: ReplicatedPostgres,
) -> None:
    # target_session_attrs=any: the URL lets the store reach a standby; its first
    # write (creating the schema) is refused by the server itself.
    with pytest.raises(EngineUnavailable, match="read-only transaction") as info:
        alkstore.open(
            _standby_url(pair, "?target_session_attrs=any"),
            schema=fresh_schema_name(),
            connect_timeout_s=2,
        )
    assert isinstance(info.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)


# --------------------------------------------------------------------------- failover


def test_after_a_failover_the_store_claims_every_job_committed_before_it(
    failing_pair: ReplicatedPostgres,
) -> None:
    with alkstore.open(failing_pair.url, schema=fresh_schema_name(), connect_timeout_s=2) as store:
        queue = store.queue("q")
        enqueued = set(queue.enqueue_many([{"n": n} for n in range(20)]))

        failing_pair.fail_over()
        claimed = {handle.id for handle in _retrying(lambda: queue.claim_batch("w", 50))}
        later = _retrying(lambda: queue.enqueue({"n": 20}))

    assert claimed == enqueued
    assert later not in enqueued
    assert _refused_writes(failing_pair) == 0


# -- a synchronous standby that stops answering (call_timeout_s) ------------------------

CALL_TIMEOUT_S = 2.0


@pytest.fixture
def cut_pair() -> Iterator[ReplicatedPostgres]:
    """A synchronous pair whose standby is cut off by the test: every commit then waits
    for a standby that never answers, and PostgreSQL itself never gives up."""
    with ReplicatedPostgres(synchronous=True, cuttable=True, fsync=False) as replicated:
        yield replicated


def test_an_enqueue_whose_commit_waits_for_a_lost_synchronous_standby_is_unavailable(
    cut_pair: ReplicatedPostgres,
) -> None:
    opts = {"schema": fresh_schema_name(), "lock_timeout_s": 1, "call_timeout_s": CALL_TIMEOUT_S}
    with alkstore.open(cut_pair.url, **opts) as store:
        queue = store.queue("q")
        queue.enqueue({"n": "before"})
        cut_pair.cut_replication()
        with pytest.raises(EngineUnavailable, match=r"call_timeout_s=2: .*committed on this"):
            queue.enqueue({"n": "unconfirmed"})
        # The call no longer hangs, and the store goes on: reads wait for no standby.
        payloads = [job.payload for job in queue.jobs()]
        assert payloads == [{"n": "before"}, {"n": "unconfirmed"}]


def test_a_transaction_whose_commit_waits_for_a_lost_synchronous_standby_is_unavailable(
    cut_pair: ReplicatedPostgres,
) -> None:
    opts = {"schema": fresh_schema_name(), "lock_timeout_s": 1, "call_timeout_s": CALL_TIMEOUT_S}
    with alkstore.open(cut_pair.url, **opts) as store:
        store.queue("q").enqueue({"n": "before"})
        cut_pair.cut_replication()
        unconfirmed = pytest.raises(EngineUnavailable, match=r"committed on this server")
        with unconfirmed, store.transaction() as tx:
            tx.enqueue("q", {"n": "in a transaction"})


def test_an_unset_call_timeout_stays_above_a_long_lock_timeout() -> None:
    options = parse_options({"lock_timeout_s": 600})
    assert (options.lock_timeout_s, options.call_timeout_s) == (600, 1200)
    assert parse_options({}).call_timeout_s == DEFAULT_CALL_TIMEOUT_S


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"call_timeout_s": 5, "lock_timeout_s": 5}, "greater than lock_timeout_s"),
        ({"call_timeout_s": 0}, r"call_timeout_s must be within"),
        ({"call_timeout_s": "30"}, "call_timeout_s must be a number"),
    ],
    ids=["not-above-lock-timeout", "zero", "text"],
)
def test_a_malformed_call_timeout_is_refused_before_connecting(
    opts: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidOptions, match=message):
        alkstore.open("postgresql://postgres@127.0.0.1:1/postgres", **opts)


def test_a_kept_ack_committed_before_its_standby_was_lost_is_confirmed_by_the_worker(
    cut_pair: ReplicatedPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    # The ack commits on the primary, then waits for a standby that never answers, so
    # the store cancels the wait and raises EngineUnavailable: committed, and not told.
    # The worker writes the ack again (refused: the claim is over) and reads the job
    # back: completed under this claim, so it logs the ack confirmed (§12.9).
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    opts = {"schema": fresh_schema_name(), "lock_timeout_s": 1, "call_timeout_s": CALL_TIMEOUT_S}
    with alkstore.open(cut_pair.url, **opts) as store:
        queue = store.queue("q", QueueOpts(completed_retention_s=3600))
        job_id = queue.enqueue({"n": 1})
        started, finish = threading.Event(), threading.Event()

        def handler(job: Job) -> dict[str, bool]:
            started.set()
            assert finish.wait(60)
            return {"ok": True}

        worker = Worker(store, name="w")
        worker.task("q")(handler)
        thread = threading.Thread(target=worker.run)
        thread.start()
        try:
            assert started.wait(60)  # claimed before the cut: the claim's commit did not wait
            cut_pair.cut_replication()
            finish.set()
            assert wait_until(lambda: _outcome_line(caplog, job_id) is not None, timeout=RETRY_S)
        finally:
            worker.stop()
            thread.join(60)
        assert not thread.is_alive()
        said = _outcome_line(caplog, job_id)
        assert said is not None
        assert said.startswith(
            f"job ack (confirmed: an earlier write had committed): queue=q id={job_id} attempt=1"
        )
        job = store.queue("q").get_job(job_id)
        assert job is not None
        assert (job.state, job.result) == (JobState.COMPLETED, {"ok": True})


def _outcome_line(caplog: pytest.LogCaptureFixture, job_id: int) -> str | None:
    """The worker's outcome line for ``job_id``, once it has logged one."""
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job ")]
    return next((line for line in lines if f" id={job_id} " in line), None)
