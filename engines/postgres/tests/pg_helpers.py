"""Helpers shared by the PostgreSQL engine's tests (a uniquely named module, so it
never collides with another package's test helpers on ``sys.path``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

import alkstore
from alkstore import JobHandle, QueueConsumer, StopToken
from alkstore.core import CoreStore
from alkstore_postgres import migrations
from alkstore_postgres.testing.reuse import new_schema_name

VERSIONS = [migration.version for migration in migrations.MIGRATIONS]
"""Every migration's version, in order: a migration slot kept for another line of work
may leave a gap, so not ``range(1, LATEST_VERSION + 1)``."""

ENGINE_TABLES = frozenset(
    {
        "alkstore_jobs",
        "alkstore_dead_jobs",
        "alkstore_locks",
        "alkstore_schedules",
        "alkstore_streams",
        "alkstore_stream_events",
        "alkstore_stream_consumers",
        "alkstore_messages",
        "alkstore_paused_queues",
        "alkstore_queue_limits",
        "alkstore_queue_claims",
        "alkstore_claim_starts",
        "alkstore_key_claim_starts",
        "alkstore_completed_jobs",
        "alkstore_workers",
        "alkstore_throughput",
        "alkstore_waiting_jobs",
        "alkstore_job_dependencies",
        "alkstore_dead_dependencies",
        "alkstore_migrations",
    }
)
"""Every table a current schema holds: the engine creates these and nothing else."""

StoreFactory = Callable[..., CoreStore]
"""``open_store(**opts)``: a store on the test's fresh schema."""


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def fresh_schema_name() -> str:
    return new_schema_name()


class BackgroundClaim:
    """``claim_wait`` with no timeout in a thread, so only a wake can end it."""

    def __init__(self, queue: QueueConsumer, worker_id: str) -> None:
        self._stop = StopToken()
        self._got: list[JobHandle | None] = []
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._claim, args=(queue, worker_id), daemon=True)
        self._thread.start()

    def _claim(self, queue: QueueConsumer, worker_id: str) -> None:
        try:
            self._got.append(queue.claim_wait(worker_id, timeout=None, stop=self._stop))
        except BaseException as exc:
            self._errors.append(exc)

    def result(self, within: float = 60) -> JobHandle:
        """The claimed job; fails if the call was still waiting after ``within``
        seconds (a liveness bound for a wake that takes milliseconds)."""
        self._thread.join(within)
        woken = not self._thread.is_alive()
        self._stop.stop()
        self._thread.join()
        assert self._errors == []
        assert woken, "claim_wait was never woken"
        (handle,) = self._got
        assert handle is not None
        return handle


# -- child-process targets (importable by name from ``spawn`` children) ---------------


LARGE = "x" * 10_000
"""A payload over NOTIFY's 8000-byte limit."""


def publish_messages(dsn: str, schema: str, channel: str, count: int) -> None:
    """Publish ``0 .. count - 1`` on ``channel`` -- every third in a transaction, every
    fifth as a large ``{"n": n, "blob": LARGE}`` -- and one rolled-back transaction's
    message, then ``"done"``."""
    with alkstore.open(dsn, schema=schema) as store:
        for n in range(count):
            message: Any = {"n": n, "blob": LARGE} if n % 5 == 0 else n
            if n % 3:
                store.notify(channel, message)
            else:
                with store.transaction() as tx:
                    tx.notify(channel, message)
        try:
            with store.transaction() as tx:
                tx.notify(channel, "rolled back")
                tx.notify(channel, {"rolled back": LARGE})
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        store.notify(channel, "done")


class BackgroundCall:
    """``call()`` in a daemon thread; ``result()`` joins it (a liveness bound) and
    returns its value or re-raises its error."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._value: list[Any] = []
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._value.append(call())
        except BaseException as exc:
            self._errors.append(exc)

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self, within: float = 60) -> Any:
        self._thread.join(within)
        assert self.done, "the call did not finish"
        if self._errors:
            raise self._errors[0]
        return self._value[0]


def blocked_on_a_lock(admin: psycopg.Connection[Any], table: str) -> bool:
    """Whether some session's statement on ``table`` is waiting for a lock."""
    row = admin.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND query LIKE %s AND pid <> pg_backend_pid()",
        (f"%.{table}%",),
    ).fetchone()
    return row is not None and row[0] > 0


class CountingConnection(psycopg.Connection[Any]):
    """A psycopg connection that records the statements run through ``execute``
    (``CountingConnection.connect(dsn)``)."""

    executed: list[Any]

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.executed.append(query)
        return super().execute(query, params, **kwargs)

    @classmethod
    def open(cls, dsn: str) -> CountingConnection:
        conn = cls.connect(dsn)
        conn.executed = []
        return conn
