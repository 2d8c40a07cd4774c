"""Mutants of prompt wakes (contract §2.14): a path that makes work available
without waking the waiters elsewhere, and a timer that forgets lapsing claims.

The SQLite reference engine wakes every waiter of every process on any commit
to the file (its watcher reads ``PRAGMA data_version``), so a statement that
"forgets to announce" cannot exist there. An engine whose wakes carry their
topic can have that bug -- PostgreSQL's ``NOTIFY`` rides in each statement that
makes a job claimable, and one statement without it leaves waiters elsewhere to
their re-poll. ``TopicWakeDriver`` is SQLite with such wakes: each announcing
statement also writes its topic to a table, in its own transaction, and the
wake sink the watcher drives hands waiters only the topics committed since it
last looked, instead of waking everyone. Each mutant is that engine with one
statement's announcement left out (``forgets``); everything else wakes as it
should, so only the property of that one path can catch it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from contextlib import closing
from typing import Any, ClassVar

from alkstore.driver import JobStamps, WakeSink, queue_topic, stream_topic
from alkstore.params import (
    ClaimRef,
    GetJob,
    NextWake,
    Redrive,
    Reschedule,
    RescheduleClaims,
    SetPaused,
    Snooze,
    StreamAppend,
)
from alkstore_sqlite import SqliteDriver
from alkstore_sqlite import statements as sql
from alkstore_sqlite.handle import begin_transaction

WAKES = "__alkstore_selftest_wakes"
_CREATE_WAKES = f"""
CREATE TABLE IF NOT EXISTS {WAKES} (id INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL)
"""
_ANNOUNCE = f"INSERT INTO {WAKES} (topic) VALUES (?)"
_LATEST = f"SELECT coalesce(max(id), 0) FROM {WAKES}"
_TOPICS_AFTER = f"SELECT id, topic FROM {WAKES} WHERE id > ? ORDER BY id"
_OPEN_TIMEOUT_S = 10.0


class _TopicSink:
    """What the watcher drives in place of a store's sink: on "the file changed" it
    wakes the waiters of the topics announced since it last looked, and only those.
    Messages (pub/sub) pass through unchanged."""

    def __init__(self, inner: WakeSink, path: str) -> None:
        self._inner = inner
        self._path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._cursor = self._read(lambda conn: int(conn.execute(_LATEST).fetchone()[0]))

    def _read(self, query: Any) -> Any:
        with self._lock:
            if self._conn is None:
                self._conn = sqlite3.connect(
                    self._path,
                    timeout=_OPEN_TIMEOUT_S,
                    isolation_level=None,
                    check_same_thread=False,
                )
            return query(self._conn)

    def notify(self, topic: str) -> None:
        self._inner.notify(topic)

    def notify_all(self) -> None:
        rows = self._read(lambda conn: conn.execute(_TOPICS_AFTER, (self._cursor,)).fetchall())
        if rows:
            self._cursor = rows[-1][0]
        for topic in dict.fromkeys(topic for _, topic in rows):
            self._inner.notify(topic)

    def has_waiters(self) -> bool:
        return self._inner.has_waiters()

    def deliver(self, channel: str, payload: str) -> None:
        self._inner.deliver(channel, payload)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class TopicWakeDriver(SqliteDriver):
    """SQLite whose cross-process wakes carry their topic: every statement that
    makes work available announces its queue (or stream, or the schedules) in its
    own transaction, and waiters elsewhere wake for their topics only."""

    forgets: ClassVar[str | None] = None
    """The one statement method that makes work available and announces nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        connection = sqlite3.connect(self.path, timeout=_OPEN_TIMEOUT_S, isolation_level=None)
        with closing(connection) as conn:
            conn.execute(_CREATE_WAKES)
        self._topic_sinks: dict[int, _TopicSink] = {}
        self._topic_sinks_lock = threading.Lock()

    # -- wakes ------------------------------------------------------------------------
    def start_watching(self, sink: WakeSink) -> None:
        with self._topic_sinks_lock:
            topic_sink = self._topic_sinks.get(id(sink))
            if topic_sink is None:
                topic_sink = self._topic_sinks[id(sink)] = _TopicSink(sink, self.path)
        super().start_watching(topic_sink)

    def close(self) -> None:
        super().close()
        with self._topic_sinks_lock:
            for topic_sink in self._topic_sinks.values():
                topic_sink.close()

    def _announce(self, c: sqlite3.Connection, statement: str, topics: Sequence[str]) -> None:
        if statement != self.forgets:
            c.executemany(_ANNOUNCE, [(topic,) for topic in topics])

    def _announce_job(self, c: sqlite3.Connection, statement: str, job_id: int) -> None:
        job = self.get_job(c, GetJob(job_id))
        if job is not None:
            self._announce(c, statement, [queue_topic(job.queue)])

    def announce(self, c: sqlite3.Connection, topics: Sequence[str]) -> None:
        self._announce(c, "announce", topics)

    # -- every statement that makes work available -------------------------------------
    def insert_jobs(
        self, c: sqlite3.Connection, stamps: JobStamps, payloads: Sequence[str]
    ) -> list[int]:
        begin_transaction(c)  # the rows and their announcement commit together
        ids = super().insert_jobs(c, stamps, payloads)
        self._announce(c, "insert_jobs", [queue_topic(stamps.queue)])
        return ids

    def release_claim(self, c: sqlite3.Connection, params: ClaimRef) -> bool:
        begin_transaction(c)
        released = super().release_claim(c, params)
        if released:
            self._announce_job(c, "release_claim", params.job_id)
        return released

    def reschedule(self, c: sqlite3.Connection, params: Reschedule) -> bool:
        begin_transaction(c)
        rescheduled = super().reschedule(c, params)
        if rescheduled:
            self._announce_job(c, "reschedule", params.job_id)
        return rescheduled

    def reschedule_claims(self, c: sqlite3.Connection, params: RescheduleClaims) -> list[int]:
        """``tx.retry_all``'s statement (§3.11), as an engine with one writes it: each
        claim's reschedule, then each queue it put a job back in announced once."""
        begin_transaction(c)
        claims = zip(params.job_ids, params.attempts, params.run_ats, params.errors, strict=True)
        rescheduled = [
            job_id
            for job_id, attempt, run_at, error in claims
            if SqliteDriver.reschedule(  # not this class's: announced below, once
                self, c, Reschedule(job_id, attempt, params.now, run_at, error)
            )
        ]
        jobs = [self.get_job(c, GetJob(job_id)) for job_id in rescheduled]
        topics = {queue_topic(job.queue) for job in jobs if job is not None}
        self._announce(c, "reschedule_claims", sorted(topics))
        return rescheduled

    def snooze(self, c: sqlite3.Connection, params: Snooze) -> bool:
        begin_transaction(c)
        snoozed = super().snooze(c, params)
        if snoozed:
            self._announce_job(c, "snooze", params.job_id)
        return snoozed

    def redrive(self, c: sqlite3.Connection, params: Redrive) -> list[int]:
        begin_transaction(c)
        new_ids = super().redrive(c, params)
        if new_ids:
            self._announce(c, "redrive", [queue_topic(params.queue)])
        return new_ids

    def set_paused(self, c: sqlite3.Connection, params: SetPaused) -> bool:
        begin_transaction(c)
        changed = super().set_paused(c, params)
        if changed and not params.paused:
            self._announce(c, "set_paused", [queue_topic(params.queue)])
        return changed

    def stream_append(self, c: sqlite3.Connection, params: StreamAppend) -> list[int]:
        begin_transaction(c)
        offsets = super().stream_append(c, params)
        if offsets:
            self._announce(c, "stream_append", [stream_topic(params.stream)])
        return offsets


class RetryAllUnannouncedDriver(TopicWakeDriver):
    """``tx.retry_all``'s statement puts the jobs back and tells no other process."""

    forgets = "reschedule_claims"


class RedriveUnannouncedDriver(TopicWakeDriver):
    """Redrive makes new pending jobs and tells no other process."""

    forgets = "redrive"


class ResumeUnannouncedDriver(TopicWakeDriver):
    """Resume lifts the pause and tells no other process."""

    forgets = "set_paused"


class ReleaseUnannouncedDriver(TopicWakeDriver):
    """A released claim is pending again and no other process is told."""

    forgets = "release_claim"


class TimerIgnoresDeadlinesDriver(SqliteDriver):
    """Says when the next pending row comes due but not when a claim lapses: a
    waiter times its wait to run_at only, and finds a lapsed claim at its re-poll."""

    def next_wake_at(self, c: sqlite3.Connection, params: NextWake) -> int | None:
        # The reference statement answers (the next run_at, the next deadline).
        next_run_at, _ = c.execute(
            sql.NEXT_WAKE_AT, {"queue": params.queue, "now": params.now}
        ).fetchone()
        return None if next_run_at is None else int(next_run_at)


class SlotFreedUnannouncedDriver(TopicWakeDriver):
    """Announces every statement that makes work available (as ``TopicWakeDriver``),
    and never the slot an ack, fail or cancel of a limited queue frees, even while a
    claim is held back by the concurrency limit (contract §16.4: the held-back mark
    never read): a waiter in another process takes the freed slot at its timer (the
    earliest deadline) or its re-poll only."""
