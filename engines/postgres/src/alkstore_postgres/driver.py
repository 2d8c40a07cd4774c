"""``PostgresDriver``: the ``alkstore.driver.Driver`` seam over psycopg 3 and a pool.

Transactions
    ``write``/``read`` run on a pooled connection in autocommit mode: nearly every
    statement the core issues there is one atomic statement (an ``UPDATE ...
    RETURNING``, a ``DELETE`` moving rows to the dead table, a stream append that
    allocates its offsets and inserts its events, ...), and no queue or lock unit
    needs two of them to commit together (a claim that meets lapsed claims moves
    the exhausted ones in the statement that claims). So a lone enqueue, claim, ack or
    heartbeat costs ONE round trip (the statement and its commit) instead of three
    (BEGIN, statement, COMMIT), and a conflict (deadlock, serialization failure) can be
    retried statement by statement, because each one rolled back alone.

    The driver has no ``prefer_one_commit`` (``alkstore.driver.OneCommitHint``):
    a transaction would add a BEGIN and a COMMIT round trip to ``ack_and_claim``,
    more than the commit it saves.

    A statement that must commit together with what follows it opens a real
    transaction on the unit's handle first (``handle.begin_transaction``): the
    scheduler's compare-and-set advance does, so a boundary's advance and the job
    it fires commit as one (BEGIN, advance, insert, COMMIT). The transaction
    commits when the unit returns and rolls back if it raises.

    ``transaction()`` is a real transaction on a pooled connection;
    ``attach(conn)`` runs on the caller's connection inside the caller's own
    transaction and never commits or rolls it back.

Connection loss
    A pooled connection the server closed while it sat idle (a restart) is
    noticed at checkout without a round trip -- unsolicited input on an idle
    connection -- confirmed, and handed back to the pool, which replaces it.
    Waiting for a connection is bounded by the caller's ``wait_s`` and
    ``connect_timeout_s``, and reconnecting after an outage by
    ``reconnect_max_s`` (see ``connections``). Anything that still fails
    because the server is unreachable raises ``alkstore.EngineUnavailable``,
    and a refused configuration (no such database or role, a wrong password, a
    missing privilege) ``alkstore.EngineMisconfigured``, with the psycopg error
    chained.

Behind a transaction pooler
    With ``pooler="transaction"`` (PgBouncer's ``pool_mode = transaction``) each
    transaction may run on another server connection, so nothing is left in a
    session: psycopg never prepares a statement (``prepare_threshold=None``), the
    lock-wait bound is ``SET LOCAL`` per transaction (see ``lock_waits``), and
    LISTEN -- which needs a session of its own -- runs on ``listen_url`` (a direct
    URL), or not at all: then the store is poll-only (waiting calls see other
    processes' work within ``repoll_s``; no pub/sub). Migrations already hold their
    advisory lock per transaction.

Locks held by other sessions
    A statement waits for a lock another session holds (a migration's ``ALTER
    TABLE``, a ``LOCK TABLE``) at most ``lock_timeout_s``, and a waiting call no
    longer than its own remaining time either; then the call raises
    ``EngineUnavailable`` (see ``lock_waits``).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Final, TypeVar

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict

from alkstore.driver import ERROR_EXHAUSTED, ERROR_EXPIRED, WakeSink, queue_topic
from alkstore.errors import InvalidOptions
from alkstore.options import JobStamps
from alkstore.params import (
    AckBatch,
    AckClaims,
    Bury,
    BuryClaims,
    Cancel,
    Claim,
    ClaimRef,
    Complete,
    GetJob,
    Heartbeat,
    InsertUnique,
    LockHolder,
    LockLease,
    LockRelease,
    NextWake,
    Reschedule,
    RescheduleClaims,
    Snooze,
    Sweep,
)
from alkstore.rows import error_entry
from alkstore.values import Job, LockInfo

from .binding import by_name, id_array
from .clock import ServerClock
from .columns import claimed_jobs, job_from_row
from .connections import Pool, StorePool
from .dependencies import DependencyStatements
from .errors import contract_error
from .handle import PgHandle, SqlConnection, begin_transaction, execute, rowcount
from .listener import Listener, NotifyListener, PollOnlyListener, notify_payload
from .lock_waits import LockWaits
from .migrations import ensure_schema
from .operations import OpsStatements
from .options import PostgresOptions
from .plans import PlanAges
from .profiles import ProfileStatements
from .statements import RELEASED_CUE_ID, Statements
from .watchdog import Watchdog, timed_out

T = TypeVar("T")


def _async_ack(c: PgHandle) -> bool:
    """Whether this ack was asked not to wait for the disk (and is standalone, so its
    statement is its own transaction); the request is spent by the ack it was for."""
    asked = c.async_ack
    c.async_ack = False
    return asked and c.standalone


APPLICATION_NAME: Final = "alkstore"

_CHANNEL_MAX_BYTES: Final = 63

TARGET_SESSION_ATTRS: Final = "read-write"
_WRITABLE_TARGETS: Final = frozenset({"read-write", "primary", "any"})


def session_target(conninfo: str) -> dict[str, Any]:
    """The connect keyword that keeps every connection off a standby: libpq's
    ``target_session_attrs=read-write`` unless the URL (or ``PGTARGETSESSIONATTRS``)
    chose one; with several hosts, libpq then skips those that cannot take writes.
    A choice that targets standbys is refused: a store writes."""
    chosen = conninfo_to_dict(conninfo).get("target_session_attrs")
    if chosen is None:
        chosen = os.environ.get("PGTARGETSESSIONATTRS")
    if chosen is None:
        return {"target_session_attrs": TARGET_SESSION_ATTRS}
    if str(chosen) not in _WRITABLE_TARGETS:
        raise InvalidOptions(
            f"target_session_attrs={chosen!s} would connect the store to a standby, which "
            f"cannot take its writes: use {TARGET_SESSION_ATTRS} (the default), primary or any"
        )
    return {}


def _store_channel(schema: str, kind: str) -> str:
    """A NOTIFY channel of the store in ``schema`` (an identifier of at most 63 bytes)."""
    channel = f"{schema}.{kind}"
    if len(channel) <= _CHANNEL_MAX_BYTES:
        return channel
    # A long schema name: keep it recognisable, keep the channel unique per schema.
    digest = hashlib.sha256(schema.encode()).hexdigest()[:12]
    return f"{schema[: _CHANNEL_MAX_BYTES - len(digest) - len(kind) - 2]}.{digest}.{kind}"


def wake_channel(schema: str) -> str:
    """The NOTIFY channel of the store's wakes (payload: a topic)."""
    return _store_channel(schema, "wake")


def message_channel(schema: str) -> str:
    """The NOTIFY channel of the store's pub/sub messages (see ``messages``)."""
    return _store_channel(schema, "message")


def listen_conninfo_of(conninfo: str, options: PostgresOptions) -> str | None:
    """Where the store LISTENs: ``listen_url`` (already in libpq's form); the store's
    own URL without a transaction pooler; nowhere (poll-only) behind one without it."""
    if options.listen_url is not None:
        return options.listen_url
    return None if options.pooler is not None else conninfo


def check_attachable(native: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Refuse a connection ``attach`` cannot join: a failed transaction, or autocommit
    outside a transaction."""
    status = native.info.transaction_status
    if status == pq.TransactionStatus.INERROR:
        raise InvalidOptions("attach(): the connection's transaction has failed; roll it back")
    if native.autocommit and status == pq.TransactionStatus.IDLE:
        # Each statement would commit on its own: nothing to be atomic with.
        raise InvalidOptions(
            "attach() needs a connection inside a transaction: an autocommit "
            "connection must be inside conn.transaction()"
        )


class PostgresDriver(ProfileStatements, OpsStatements, DependencyStatements):
    """One opened store: a connection pool, the rendered statements, a lazy listener."""

    def __init__(
        self, conninfo: str, options: PostgresOptions, server_clock: ServerClock | None
    ) -> None:
        self.schema = options.schema
        self.channel = wake_channel(options.schema)
        self.message_channel = message_channel(options.schema)
        self.messages_keep = options.messages_keep
        self._sql = Statements.for_schema(options.schema)
        self._limited: set[str] = set()
        """Queues a claim found limited: a hint of which claim to try first, not a copy
        of the limit (``alkstore_claim_limited`` reads it and says when it is gone)."""
        pooled = options.pooler is not None
        self._plan_ages = PlanAges(kept=not pooled)
        self._server_clock = server_clock
        self._lock_waits = LockWaits(options.lock_timeout_s, per_transaction=pooled)
        self._watchdog = Watchdog(options.call_timeout_s)
        connect_kwargs: dict[str, Any] = {
            # libpq takes whole seconds (and treats 1 as 2).
            "connect_timeout": max(2, math.ceil(options.connect_timeout_s)),
            # Shows in pg_stat_activity unless the URL names an application_name.
            "fallback_application_name": APPLICATION_NAME,
            **session_target(conninfo),  # never a write sent to a standby (failover)
        }
        listen_kwargs = dict(connect_kwargs)
        if pooled:
            # A statement prepared on one server connection is unknown on the next.
            connect_kwargs["prepare_threshold"] = None
        self._prepare(conninfo, connect_kwargs, options)
        self._pool: Pool = self._open_pool(conninfo, connect_kwargs, options)
        listen_conninfo = listen_conninfo_of(conninfo, options)
        self.listener: Listener = (
            PollOnlyListener()
            if listen_conninfo is None
            else self._open_listener(listen_conninfo, listen_kwargs, options)
        )
        """The store's LISTEN connection and thread (started by ``start_watching``);
        none behind a transaction pooler without ``listen_url`` (poll-only)."""

    # The two places where a store opened on an event loop differs (``loop_io``).
    def _open_pool(
        self, conninfo: str, connect_kwargs: dict[str, Any], options: PostgresOptions
    ) -> Pool:
        return StorePool(conninfo, connect_kwargs, options, configure=self._configure)

    def _open_listener(
        self, conninfo: str, connect_kwargs: dict[str, Any], options: PostgresOptions
    ) -> Listener:
        return NotifyListener(
            conninfo,
            connect_kwargs,
            self.channel,
            message_channel=self.message_channel,
            fetch_messages=self._sql.fetch_messages,
            ready_timeout_s=options.connect_timeout_s,
            reconnect_max_s=options.reconnect_max_s,
            on_reconnect=self._pool.prompt,
        )

    def _prepare(
        self, conninfo: str, connect_kwargs: dict[str, Any], options: PostgresOptions
    ) -> None:
        """Migrate (or check) the schema and take the first clock reading.

        A direct connection rather than the pool, so an unreachable server fails
        fast with libpq's own reason chained (not a pool timeout)."""
        try:
            with psycopg.connect(conninfo, autocommit=True, **connect_kwargs) as conn:
                # Opening waits for a lock (a migration of another opener, a table
                # another session holds) no longer than any other call.
                self._lock_waits.for_transaction(conn)
                ensure_schema(
                    conn,
                    options.schema,
                    migrate=options.migrate,
                    begun=self._lock_waits.in_transaction,
                )
                # Pub/sub's stored messages are pruned here and when publishing,
                # never on a timer (the only thread the store keeps is the watchdog).
                conn.execute(self._sql.prune_messages, {"keep": options.messages_keep})
                if self._server_clock is not None:
                    self._server_clock.measure(conn)
        except psycopg.Error as exc:
            error = contract_error(exc, "opening the store")
            if error is not None:
                raise error from exc
            raise

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        # Runs on every new pooled connection (after a restart, too).
        if self._server_clock is not None:
            self._server_clock.refresh(conn)

    # -- connections ----------------------------------------------------------------
    @contextmanager
    def _pooled(self, wait_s: float | None = None) -> Iterator[SqlConnection]:
        with self._pool.connection(wait_s) as conn:
            try:
                if self._server_clock is not None and self._server_clock.due():
                    self._server_clock.refresh(conn)
                self._lock_waits.for_transaction(conn)
                yield conn
            except psycopg.Error as exc:
                error = contract_error(exc, "talking to the server")
                if error is not None:
                    raise error from exc
                raise

    def _run(self, work: Callable[[PgHandle], T], wait_s: float | None) -> T:
        # ``_pooled`` spelled out (every write and read runs this): no generator
        # context managers on the path of a one-statement unit.
        pool = self._pool
        lock_waits = self._lock_waits
        lock_deadline = lock_waits.deadline(wait_s)  # one budget, the checkout's included
        conn = pool.checkout(wait_s)
        watchdog = self._watchdog
        watch = watchdog.start(conn)
        cancelled: bool | None = None
        try:
            clock = self._server_clock
            if clock is not None and clock.due():
                clock.refresh(conn)
            handle = PgHandle(
                conn,
                standalone=True,
                lock_waits=lock_waits,
                lock_deadline=lock_deadline,
                local_lock_ms=lock_waits.for_unit(conn, wait_s),
            )
            # The unit's exit stack closes a transaction a statement began mid-unit
            # (commit on return, rollback on raise) before the connection goes back.
            with ExitStack() as unit:
                handle.unit = unit
                result = work(handle)
        except psycopg.Error as exc:
            cancelled = watchdog.finish(watch)
            if cancelled:
                raise timed_out(watchdog.limit_s, False, exc) from exc
            error = contract_error(exc, "talking to the server")
            if error is not None:
                raise error from exc
            raise
        finally:
            if cancelled is None:
                cancelled = watchdog.finish(watch)
            pool.checkin(conn)
        if cancelled:
            raise timed_out(watchdog.limit_s, True, None)
        return result

    # -- transactions ----------------------------------------------------------------
    def write(self, work: Callable[[PgHandle], T], *, wait_s: float | None = None) -> T:
        return self._run(work, wait_s)

    def read(self, work: Callable[[PgHandle], T], *, wait_s: float | None = None) -> T:
        return self._run(work, wait_s)

    @contextmanager
    def transaction(self) -> Iterator[PgHandle]:
        with self._pooled() as conn:
            transaction = conn.transaction()
            transaction.__enter__()
            try:
                self._lock_waits.in_transaction(conn)
                yield PgHandle(conn, standalone=False, lock_waits=self._lock_waits)
            except BaseException as exc:
                if not transaction.__exit__(type(exc), exc, exc.__traceback__):
                    raise
                return
            self._commit(transaction, conn)

    def _commit(self, transaction: Any, conn: SqlConnection) -> None:
        """The commit of ``store.transaction()``, watched as every unit is."""
        watchdog = self._watchdog
        watch = watchdog.start(conn)
        try:
            transaction.__exit__(None, None, None)
        except psycopg.Error as exc:
            if watchdog.finish(watch):
                raise timed_out(watchdog.limit_s, False, exc) from exc
            raise  # ``_pooled`` maps it
        if watchdog.finish(watch):
            raise timed_out(watchdog.limit_s, True, None)

    @contextmanager
    def attach(self, native: Any) -> Iterator[PgHandle]:
        if isinstance(native, psycopg.AsyncConnection):
            raise InvalidOptions(
                "attach() got a psycopg.AsyncConnection: open the store with "
                "alkstore.aio.open(url) to attach async connections"
            )
        if not isinstance(native, psycopg.Connection):
            raise InvalidOptions(
                f"attach() takes a psycopg.Connection, got {type(native).__name__}"
            )
        check_attachable(native)
        yield PgHandle(native, standalone=False)

    def native_connection(self, c: PgHandle) -> Any:
        return c.conn

    # -- wakes -------------------------------------------------------------------------
    def start_watching(self, sink: WakeSink) -> None:
        self.listener.start(sink)

    def announce(self, c: PgHandle, topics: Sequence[str]) -> None:
        fresh = [t for t in dict.fromkeys(topics) if t not in c.announced]
        if not fresh:
            return
        payloads = list(dict.fromkeys(notify_payload(t) for t in fresh))
        execute(c, self._sql.notify, {"wake_channel": self.channel, "topics": payloads})
        c.announced.update(fresh)

    def close(self) -> None:
        self.listener.close()
        self._pool.close()
        self._watchdog.close()

    # -- queues ------------------------------------------------------------------------
    def insert_jobs(self, c: PgHandle, stamps: JobStamps, payloads: Sequence[str]) -> list[int]:
        """One statement: the rows, and the NOTIFY of their queue (unless this unit
        already announced it), so a lone enqueue is one round trip."""
        topic = queue_topic(stamps.queue)
        wake = None if topic in c.announced else notify_payload(topic)
        if len(payloads) == 1:
            # A lone enqueue, the hottest path: plain VALUES, no array to build.
            params = by_name(stamps, payload=payloads[0], wake_channel=self.channel, topic=wake)
            rows = execute(c, self._sql.insert_job, params).fetchall()
        else:
            params = by_name(stamps, payloads=list(payloads), wake_channel=self.channel, topic=wake)
            rows = execute(c, self._sql.insert_jobs, params).fetchall()
        c.announced.add(topic)
        return [row[0] for row in rows]

    def insert_unique_jobs(self, c: PgHandle, params: InsertUnique) -> list[tuple[int, bool]]:
        """One statement, whatever the number of keys: ``alkstore_enqueue_unique`` (or,
        for many keys, ``alkstore_enqueue_unique_many``: functions of the schema,
        migration 7), which NOTIFY the queue when a row went in (unless this unit
        already announced it). Each gives a signed id: minus the holder's for a key
        found held."""
        stamps = params.stamps
        topic = queue_topic(stamps.queue)
        wake = None if topic in c.announced else notify_payload(topic)
        retention, limit_key = stamps.completed_retention_s, stamps.limit_key
        metadata = stamps.metadata
        if retention is not None or limit_key is not None or metadata is not None:
            begin_transaction(c)  # the rows and their stamps commit together
        if len(params.keys) == 1:  # a lone enqueue: no arrays to build or to unnest
            bound = by_name(
                stamps,
                hold_until=params.hold_until,
                hold_dead=params.hold_dead,
                payload=params.payloads[0],
                key=params.keys[0],
                wake_channel=self.channel,
                topic=wake,
            )
            ((signed,),) = execute(c, self._sql.insert_unique_one, bound).fetchall()
            outcomes = [(-signed, True) if signed < 0 else (signed, False)]
        else:
            bound = by_name(
                stamps,
                hold_until=params.hold_until,
                hold_dead=params.hold_dead,
                payloads=list(params.payloads),
                keys=list(params.keys),
                wake_channel=self.channel,
                topic=wake,
            )
            rows = execute(c, self._sql.insert_unique, bound).fetchall()
            outcomes = [(-signed, True) if signed < 0 else (signed, False) for (signed,) in rows]
        made = [job_id for job_id, duplicate in outcomes if not duplicate]
        if retention is not None and made:
            stamp = {"completed_retention_s": retention, "ids": made}
            execute(c, self._sql.set_completed_retention, stamp)
        if limit_key is not None and made:
            execute(c, self._sql.set_limit_key, {"limit_key": limit_key, "ids": made})
        if metadata is not None and made:
            execute(c, self._sql.set_metadata, {"metadata": metadata, "ids": made})
        if not all(duplicate for _, duplicate in outcomes):
            c.announced.add(topic)
        return outcomes

    def claim(self, c: PgHandle, params: Claim) -> list[Job]:
        """Nearly always one statement: pending rows, while no claim of the queue has
        lapsed (so none is exhausted either). When that claims nothing, one statement
        that moves the queue's exhausted lapsed rows to dead and claims pending and
        lapsed rows alike. A queue this store has found limited: one statement too,
        ``alkstore_claim_limited``."""
        bound = by_name(params, last_error=ERROR_EXHAUSTED)
        # One row: a prepared statement whose plan holds at any table size. More:
        # prepared plans made again as the table grows (see plans.py).
        sql = self._sql
        if params.limit != 1:
            self._plan_ages.keep_fresh(c)
        if params.queue in self._limited:
            rows = self._claim_limited(c, bound)
            if rows is not None:
                return claimed_jobs(rows, params.queue, params.worker_id, params.now)
        if params.limit == 1:
            ready, either = sql.claim_ready_one, sql.claim_one
        else:
            ready, either = sql.claim_ready, sql.claim
        rows = execute(c, ready, bound, binary=True).fetchall()
        if not rows:
            rows = self._claim_after_burying(c, either, bound)
            if rows and rows[-1][0] is None:  # the queue has a limit: CLAIM left it alone
                limited = self._claim_limited(c, bound)
                if limited is None:  # cleared meanwhile: the unlimited claim
                    limited = self._claim_after_burying(c, either, bound)
                rows = [r for r in limited if r[0] is not None]
        return claimed_jobs(rows, params.queue, params.worker_id, params.now)

    @staticmethod
    def _claim_after_burying(c: PgHandle, either: bytes, bound: dict[str, Any]) -> list[Any]:
        """``CLAIM`` (or ``CLAIM_ONE``), run again while it buried a row with dependents:
        then it claimed nothing, and the next run's snapshot sees the jobs that made
        pending (contract §2.7). Each such run buries at least one row, so this ends."""
        while True:
            rows = execute(c, either, bound, binary=True).fetchall()
            if not any(row[0] == RELEASED_CUE_ID for row in rows):
                return rows

    def _claim_limited(self, c: PgHandle, bound: dict[str, Any]) -> list[Any] | None:
        """The claim of a queue with a limit (the limits profile), one statement: the
        function locks the queue's limit row (held until the unit's transaction ends),
        claims at most its free slots with a snapshot taken after the lock, so two
        claimers never share a slot, and records the starts a rate counts. ``None``
        when the queue has no limit (any more): then the store forgets the hint."""
        queue = bound["queue"]
        rows = execute(c, self._sql.call_claim_limited, bound, binary=True).fetchall()
        if rows and rows[-1][0] is None:
            self._limited.discard(queue)
            return None
        self._limited.add(queue)
        return rows

    def bury_exhausted(self, c: PgHandle, params: Sweep) -> int:
        return rowcount(c, self._sql.bury_exhausted, by_name(params, last_error=ERROR_EXHAUSTED))

    def bury_expired(self, c: PgHandle, params: Sweep) -> int:
        waiting = self._bury_expired_waiting(c, params)  # an atomic statement of its own
        return waiting + rowcount(
            c, self._sql.bury_expired, by_name(params, last_error=ERROR_EXPIRED)
        )

    def purge_dead(self, c: PgHandle, params: Sweep) -> int:
        purged = rowcount(c, self._sql.purge_dead, by_name(params))
        if purged:
            execute(c, self._sql.prune_kept_edges, {})  # their kept edges too (§18.4)
        return purged

    def ack(self, c: PgHandle, params: ClaimRef) -> bool:
        bound = by_name(params, wake_channel=self.channel, topic_prefix=queue_topic(""))
        sql = self._sql.ack_async if _async_ack(c) else self._sql.ack
        (acked, *_) = execute(c, sql, bound).fetchone()
        return bool(acked == 1)

    # -- acks that need not wait for the disk (the async_acks profile, §12.11) -------
    def commit_acks_without_waiting(self, c: PgHandle) -> None:
        """In a write unit, the unit's next ack runs as ``ACK_ASYNC``/``COMPLETE_ASYNC``:
        ``set_config(..., true)`` in the statement, so its own implicit transaction
        commits without a flush and nothing after it (ack_and_claim's claim) is
        touched. In a transaction (a worker's group of acks), ``SET LOCAL``: that
        transaction's commit. Never session-wide: the pooled connection goes back as
        durable as it came."""
        if c.standalone:
            c.async_ack = True
        else:
            execute(c, self._sql.set_local_async_commit)

    def ack_batch(self, c: PgHandle, params: AckBatch) -> int:
        ids = sorted(set(params.job_ids))  # the core drops ids outside int64
        if not ids:
            return 0
        self._plan_ages.keep_fresh(c)  # see ACK_BATCH
        topic = notify_payload(queue_topic(params.queue))
        bound = by_name(params, job_ids=id_array(ids), wake_channel=self.channel, topic=topic)
        (acked, _) = execute(c, self._sql.ack_batch, bound).fetchone()
        return int(acked)

    def ack_claims(self, c: PgHandle, params: AckClaims) -> list[int]:
        if not params.job_ids:
            return []
        self._plan_ages.keep_fresh(c)  # see ACK_BATCH
        (acked, _) = execute(c, self._sql.ack_claims, self._claims_bound(params)).fetchone()
        return [int(job_id) for job_id in acked]

    def reschedule_claims(self, c: PgHandle, params: RescheduleClaims) -> list[int]:
        if not params.job_ids:
            return []
        self._plan_ages.keep_fresh(c)  # see ACK_BATCH
        entries = [
            error_entry(attempt, params.now, error)
            for attempt, error in zip(params.attempts, params.errors, strict=True)
        ]
        bound = self._claims_bound(params, run_ats=id_array(params.run_ats), entries=entries)
        (rescheduled, queues, _) = execute(c, self._sql.reschedule_claims, bound).fetchone()
        c.announced.update(queue_topic(queue) for queue in queues)
        return [int(job_id) for job_id in rescheduled]

    def bury_claims(self, c: PgHandle, params: BuryClaims) -> list[int]:
        if not params.job_ids:
            return []
        self._plan_ages.keep_fresh(c)  # see ACK_BATCH
        entries = [
            None if error is None else error_entry(attempt, params.now, error)
            for attempt, error in zip(params.attempts, params.errors, strict=True)
        ]
        bound = self._claims_bound(params, last_errors=list(params.last_errors), entries=entries)
        (buried, _) = execute(c, self._sql.bury_claims, bound).fetchone()
        return [int(job_id) for job_id in buried]

    def _claims_bound(
        self, params: AckClaims | RescheduleClaims | BuryClaims, **values: Any
    ) -> dict[str, Any]:
        """A many-claims statement's parameters: the claims as the text of two arrays
        (``binding.id_array``), the wake channel, and the statement's own ``values``."""
        return by_name(
            params,
            job_ids=id_array(params.job_ids),
            attempts=id_array(params.attempts),
            wake_channel=self.channel,
            topic_prefix=queue_topic(""),
            **values,
        )

    # -- finished jobs (the results profile) ---------------------------------------------
    def complete(self, c: PgHandle, params: Complete) -> bool:
        bound = by_name(params, wake_channel=self.channel, topic_prefix=queue_topic(""))
        sql = self._sql.complete_async if _async_ack(c) else self._sql.complete
        (completed, *_) = execute(c, sql, bound).fetchone()
        return bool(completed == 1)

    def purge_completed(self, c: PgHandle, params: Sweep) -> int:
        return rowcount(c, self._sql.purge_completed, by_name(params))

    def heartbeat(self, c: PgHandle, params: Heartbeat) -> bool:
        return rowcount(c, self._sql.heartbeat, by_name(params)) == 1

    def release_claim(self, c: PgHandle, params: ClaimRef) -> bool:
        bound = by_name(params, wake_channel=self.channel, topic_prefix=queue_topic(""))
        return self._announced_back(c, execute(c, self._sql.release_claim, bound).fetchone())

    def snooze(self, c: PgHandle, params: Snooze) -> bool:
        bound = by_name(params, wake_channel=self.channel, topic_prefix=queue_topic(""))
        return self._announced_back(c, execute(c, self._sql.snooze, bound).fetchone())

    def reschedule(self, c: PgHandle, params: Reschedule) -> bool:
        bound = by_name(
            params,
            entry=error_entry(params.attempt, params.now, params.error),
            wake_channel=self.channel,
            topic_prefix=queue_topic(""),
        )
        return self._announced_back(c, execute(c, self._sql.reschedule, bound).fetchone())

    @staticmethod
    def _announced_back(c: PgHandle, row: Any) -> bool:
        """Whether a statement that NOTIFYs its job's queue found the job (``row``: the
        queue's name); the unit then has announced that queue."""
        if row is None:
            return False
        c.announced.add(queue_topic(row[0]))
        return True

    def bury(self, c: PgHandle, params: Bury) -> bool:
        error = params.error
        entry = None if error is None else error_entry(params.attempt, params.now, error)
        row = execute(c, self._sql.bury_claim, by_name(params, entry=entry)).fetchone()
        if row is None:
            return False
        self._wake_if_limited(c, row[0])
        return True

    def cancel(self, c: PgHandle, params: Cancel) -> bool:
        if rowcount(c, self._sql.cancel, by_name(params)) != 1:
            return self._cancel_waiting(c, params)
        self._wake_if_limited(c, params.queue)
        return True

    def _wake_if_limited(self, c: PgHandle, queue: str) -> None:
        """A claim of ``queue`` may have ended: if the queue has a limit, a slot is
        free, so NOTIFY its waiters in every process (the limits profile)."""
        topic = notify_payload(queue_topic(queue))
        bound = {"queue": queue, "wake_channel": self.channel, "topic": topic}
        execute(c, self._sql.notify_if_limited, bound).fetchall()

    def get_job(self, c: PgHandle, params: GetJob) -> Job | None:
        row = execute(c, self._sql.get_job, by_name(params)).fetchone()
        return None if row is None else job_from_row(row)

    def next_wake_at(self, c: PgHandle, params: NextWake) -> int | None:
        run_at, deadline, at_limit, window_frees, key_window_frees = execute(
            c, self._sql.next_wake_at, by_name(params)
        ).fetchone()
        blocked = [] if window_frees is None else [int(window_frees)]
        if at_limit and deadline is not None:
            blocked.append(int(deadline))
        if blocked:  # a limited queue at a limit: nothing is claimable before it frees
            return max(blocked)
        due = [i for i in (run_at, deadline, key_window_frees) if i is not None]
        return min(due) if due else None

    # -- locks -------------------------------------------------------------------------
    def lock_acquire(self, c: PgHandle, params: LockLease) -> bool:
        return execute(c, self._sql.lock_acquire, by_name(params)).fetchone() is not None

    def lock_renew(self, c: PgHandle, params: LockLease) -> bool:
        return rowcount(c, self._sql.lock_renew, by_name(params)) == 1

    def lock_release(self, c: PgHandle, params: LockRelease) -> bool:
        return rowcount(c, self._sql.lock_release, by_name(params)) == 1

    def lock_holder(self, c: PgHandle, params: LockHolder) -> LockInfo | None:
        row = execute(c, self._sql.lock_holder, by_name(params)).fetchone()
        return None if row is None else LockInfo(owner=row[0], expires_at=row[1])
