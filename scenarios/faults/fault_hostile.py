"""Hostile input: every surface refuses bad names, payloads, options and URLs, exactly.

A table of rows (surface, input, expected exception type). Each row makes one
call through the public API; it passes when the call raises the expected type
from the contract's taxonomy (``alkstore.errors``) AND nothing was written:
the probe queue and stream stay empty, no schedule appeared, and a refused
``open`` created no database file or schema. A few rows are the boundary's
other side (1 MiB of JSON text, 64 levels of nesting, a 200-character name) and
must be accepted and round-trip unchanged.

The expectations are the contract's REQUIRED behaviour, not whatever the
code does today: a failing row is a bug to fix, never a row to relax.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from fault_report import ScenarioResult, count, must_be_zero
from fault_targets import OpenTarget, open_target, with_port, with_query, with_userinfo

import alkstore
from alkstore import (
    EngineNotFound,
    EngineSpec,
    EnqueueOpts,
    InvalidName,
    InvalidOptions,
    InvalidSpec,
    PayloadError,
    QueueOpts,
    ReservedName,
)
from alkstore.constants import MAX_NAME_LENGTH, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH

SCENARIO = "hostile input"
PROBE = "fault_hostile"
"""The queue and stream every refused call aims at (and the check reads)."""
GOOD = {"ok": True}
ACCEPTED: tuple[type[BaseException], ...] = ()
"""A row expecting no exception: the call must succeed."""
TYPE_OR_OPTIONS = (TypeError, InvalidOptions)
MALFORMED_URL = (InvalidOptions, EngineNotFound)


@dataclass(frozen=True, slots=True)
class Context:
    store: alkstore.Store
    target: OpenTarget | None


@dataclass(frozen=True, slots=True)
class Row:
    surface: str
    label: str
    expected: tuple[type[BaseException], ...]
    call: Callable[[Context], object]
    opens: bool = False
    """The row calls ``open``: its trace is a created file or schema."""
    needs: str | None = None
    """The engine profile the surface belongs to (``streams``, ``scheduler``, ``pubsub``)."""


@dataclass(frozen=True, slots=True)
class RowResult:
    row: Row
    outcome: str
    """The raised exception's type name, or ``"accepted"``."""
    wrote: list[str]
    matched: bool

    @property
    def ok(self) -> bool:
        return self.matched and not self.wrote

    def describe(self) -> str:
        wanted = " or ".join(t.__name__ for t in self.row.expected) or "accepted"
        wrote = f"; wrote {', '.join(self.wrote)}" if self.wrote else ""
        return (
            f"{self.row.surface} <- {self.row.label}: expected {wanted}, got {self.outcome}{wrote}"
        )


# --------------------------------------------------------------------------- inputs


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


HOSTILE_NAMES: tuple[tuple[str, object, type[BaseException]], ...] = (
    ("empty name", "", InvalidName),
    (f"{MAX_NAME_LENGTH + 1}-char name", "q" * (MAX_NAME_LENGTH + 1), InvalidName),
    ("name with NUL", "a\x00b", InvalidName),
    ("name with lone surrogate", "q\ud800", InvalidName),
    ("reserved prefix '__alkstore_x'", "__alkstore_x", ReservedName),
    ("name 42 (int)", 42, InvalidName),
    ("name None", None, InvalidName),
)

HOSTILE_PAYLOADS: tuple[tuple[str, Callable[[], object]], ...] = (
    ("NaN", lambda: {"x": float("nan")}),
    ("infinity", lambda: float("inf")),
    ("set", lambda: {1, 2}),
    ("object()", object),
    ("bytes", lambda: b"raw"),
    ("cycle", _cycle),
    (f"{MAX_PAYLOAD_DEPTH + 1}-level nesting", lambda: _nested(MAX_PAYLOAD_DEPTH + 1)),
    ("tuple dict key", lambda: {(1, 2): "x"}),
    ("lone surrogate string", lambda: "bad \udc80"),
    ("1 MiB + 1 byte of JSON text", lambda: "x" * (MAX_PAYLOAD_BYTES - 1)),
    ("10,000 levels of nesting", lambda: _nested(10_000)),
)


# --------------------------------------------------------------------------- surfaces


def _tx_enqueue(ctx: Context, queue: Any, payload: Any) -> None:
    """A good write first: the refusal must roll it back with the rest."""
    with ctx.store.transaction() as tx:
        tx.enqueue(PROBE, GOOD)
        tx.enqueue(queue, payload)


def _tx_stream_append(ctx: Context, stream: Any, payload: Any) -> None:
    with ctx.store.transaction() as tx:
        tx.enqueue(PROBE, GOOD)
        tx.stream_append(stream, payload)


NAME_SURFACES: tuple[tuple[str, Callable[[Context, Any], object], str | None], ...] = (
    ("queue(name).enqueue", lambda ctx, name: ctx.store.queue(name).enqueue(GOOD), None),
    ("tx.enqueue(name, ...)", lambda ctx, name: _tx_enqueue(ctx, name, GOOD), None),
    ("outbox(name).enqueue", lambda ctx, name: ctx.store.outbox(name).enqueue(GOOD), None),
    ("lock(name).acquire", lambda ctx, name: ctx.store.lock(name).acquire("o", 60), None),
    ("stream(name).append", lambda ctx, name: ctx.store.stream(name).append(GOOD), "streams"),
    (
        "tx.stream_append(name, ...)",
        lambda ctx, name: _tx_stream_append(ctx, name, GOOD),
        "streams",
    ),
    (
        "schedule(name, ...)",
        lambda ctx, name: ctx.store.schedule(name, "@every 60s", PROBE, GOOD),
        "scheduler",
    ),
    ("notify(channel, ...)", lambda ctx, name: ctx.store.notify(name, GOOD), "pubsub"),
)

PAYLOAD_SURFACES: tuple[tuple[str, Callable[[Context, Any], object], str | None], ...] = (
    ("queue.enqueue(payload)", lambda ctx, p: ctx.store.queue(PROBE).enqueue(p), None),
    (
        "queue.enqueue_many([good, payload])",
        lambda ctx, p: ctx.store.queue(PROBE).enqueue_many([GOOD, p]),
        None,
    ),
    ("tx.enqueue(q, payload)", lambda ctx, p: _tx_enqueue(ctx, PROBE, p), None),
    ("stream.append(payload)", lambda ctx, p: ctx.store.stream(PROBE).append(p), "streams"),
    ("tx.stream_append(s, payload)", lambda ctx, p: _tx_stream_append(ctx, PROBE, p), "streams"),
    (
        "schedule(..., payload)",
        lambda ctx, p: ctx.store.schedule(PROBE, "@every 60s", PROBE, p),
        "scheduler",
    ),
    ("notify(c, payload)", lambda ctx, p: ctx.store.notify(PROBE, p), "pubsub"),
)


def _enqueue_with(opts: Callable[[], Any]) -> Callable[[Context], object]:
    return lambda ctx: ctx.store.queue(PROBE).enqueue(GOOD, opts())


def _queue_with(opts: Callable[[], Any]) -> Callable[[Context], object]:
    return lambda ctx: ctx.store.queue(PROBE, opts()).enqueue(GOOD)


def _probe(ctx: Context) -> Any:
    return ctx.store.queue(PROBE)


OPTION_ROWS: tuple[tuple[str, str, Callable[[Context], object]], ...] = (
    ("EnqueueOpts", "delay=-1", _enqueue_with(lambda: EnqueueOpts(delay=-1))),
    ("EnqueueOpts", "delay=nan", _enqueue_with(lambda: EnqueueOpts(delay=float("nan")))),
    ("EnqueueOpts", "delay=inf", _enqueue_with(lambda: EnqueueOpts(delay=float("inf")))),
    ("EnqueueOpts", "priority=2**31", _enqueue_with(lambda: EnqueueOpts(priority=2**31))),
    (
        "EnqueueOpts",
        "priority=-(2**31)-1",
        _enqueue_with(lambda: EnqueueOpts(priority=-(2**31) - 1)),
    ),
    ("EnqueueOpts", "priority=True (bool)", _enqueue_with(lambda: EnqueueOpts(priority=True))),
    ("EnqueueOpts", "priority=1.5", _enqueue_with(lambda: EnqueueOpts(priority=1.5))),  # type: ignore[arg-type]
    ("EnqueueOpts", "max_attempts=0", _enqueue_with(lambda: EnqueueOpts(max_attempts=0))),
    ("EnqueueOpts", "max_attempts=True", _enqueue_with(lambda: EnqueueOpts(max_attempts=True))),
    ("EnqueueOpts", "expires=0", _enqueue_with(lambda: EnqueueOpts(expires=0))),
    ("EnqueueOpts", "run_at='tomorrow'", _enqueue_with(lambda: EnqueueOpts(run_at="tomorrow"))),  # type: ignore[arg-type]
    ("queue.enqueue", "opts={'delay': 1} (a dict)", _enqueue_with(lambda: {"delay": 1})),
    ("QueueOpts", "visibility_timeout_s=0", _queue_with(lambda: QueueOpts(visibility_timeout_s=0))),
    ("QueueOpts", "max_attempts=2**31", _queue_with(lambda: QueueOpts(max_attempts=2**31))),
    ("QueueOpts", "backoff_base_s=-5", _queue_with(lambda: QueueOpts(backoff_base_s=-5))),
    ("store.queue", "opts='fast' (a str)", _queue_with(lambda: "fast")),
    ("queue.enqueue_many", "payloads='abc' (a str)", lambda c: _probe(c).enqueue_many("abc")),
    ("queue.claim_batch", "limit=0", lambda ctx: _probe(ctx).claim_batch("w", 0)),
    ("queue.claim_batch", "limit=True (bool)", lambda ctx: _probe(ctx).claim_batch("w", True)),
    ("queue.claim_wait", "timeout=-1", lambda ctx: _probe(ctx).claim_wait("w", timeout=-1)),
    ("queue.get_job", "job_id='1' (a str)", lambda ctx: _probe(ctx).get_job("1")),
    ("lock.acquire", "ttl=-1", lambda ctx: ctx.store.lock(PROBE).acquire("o", -1)),
)


# --------------------------------------------------------------------------- open rows


def _open_and_close(url: Any, **opts: Any) -> None:
    """A refused open raises; an accepted one is closed again (and its trace shows)."""
    alkstore.open(url, **opts).close()


def _bare_open(url: object) -> Callable[[Context], object]:
    return lambda _ctx: _open_and_close(url)


def _fresh_open(**extra: Any) -> Callable[[Context], object]:
    def call(ctx: Context) -> None:
        assert ctx.target is not None
        fresh = ctx.target.fresh()
        _open_and_close(fresh.url, **{**fresh.opts, **extra})

    return call


def _fresh_url(make: Callable[[str], str]) -> Callable[[Context], object]:
    def call(ctx: Context) -> None:
        assert ctx.target is not None
        fresh = ctx.target.fresh()
        _open_and_close(make(fresh.url), **fresh.opts)

    return call


def _any_engine_url_rows() -> Iterator[Row]:
    for label, url, expected in (
        ("None", None, TYPE_OR_OPTIONS),
        ("123 (an int)", 123, TYPE_OR_OPTIONS),
        ("b'sqlite:///x.db' (bytes)", b"sqlite:///x.db", TYPE_OR_OPTIONS),
        ("'nosuch://x' (unknown scheme)", "nosuch://x", (EngineNotFound,)),
        ("'' (empty)", "", MALFORMED_URL),
        ("'not a url'", "not a url", MALFORMED_URL),
    ):
        yield Row("alkstore.open(url)", label, expected, _bare_open(url))


def _open_rows(target: OpenTarget) -> Iterator[Row]:
    options = (InvalidOptions,)
    yield Row("open(url, **opts)", "bogus_option=1", options, _fresh_open(bogus_option=1), True)
    yield Row("open(url, **opts)", "clock='x'", options, _fresh_open(clock="x"), True)
    if target.kind == "sqlite":
        for label, make in (
            ("'sqlite://:memory:'", lambda _u: "sqlite://:memory:"),
            ("'sqlite:///:memory:'", lambda _u: "sqlite:///:memory:"),
            ("query string '?mode=ro'", lambda u: with_query(u, "mode=ro")),
            ("a host 'sqlite://host/x.db'", lambda u: u.replace("sqlite:///", "sqlite://host/")),
            ("no slashes 'sqlite:x.db'", lambda u: u.replace("sqlite:///", "sqlite:")),
        ):
            yield Row("open(url)", label, options, _fresh_url(make), True)
        yield Row(
            "open(url, **opts)", "synchronous='OFF'", options, _fresh_open(synchronous="OFF"), True
        )
        yield Row(
            "open(url, **opts)", "busy_timeout_s=-1", options, _fresh_open(busy_timeout_s=-1), True
        )
    if target.kind == "postgresql":
        for label, make in (
            ("'postgresql://[::1' (unclosed bracket)", lambda _u: "postgresql://[::1"),
            ("query '?bogus=1'", lambda u: with_query(u, "bogus=1")),
            ("user '%zz' (bad escape)", lambda u: with_userinfo(u, "%zz")),
            ("port 'notaport'", lambda u: with_port(u, "notaport")),
        ):
            yield Row("open(url)", label, MALFORMED_URL, _fresh_url(make), True)
        yield Row(
            "open(url, **opts)", "pool_max_size=0", options, _fresh_open(pool_max_size=0), True
        )
        yield Row(
            "open(url, **opts)",
            'schema="x\'; DROP SCHEMA public --"',
            options,
            _fresh_open(schema="x'; DROP SCHEMA public --"),
            True,
        )
        yield Row("open(url, **opts)", "migrate='yes'", options, _fresh_open(migrate="yes"), True)


# --------------------------------------------------------------------------- accepted rows


def _round_trip(queue_name: str, payload: Any) -> Callable[[Context], object]:
    """Enqueue, claim and ack: the value must come back unchanged (and nothing remain)."""

    def call(ctx: Context) -> None:
        queue = ctx.store.queue(queue_name)
        job_id = queue.enqueue(payload)
        handle = queue.claim("hostile")
        if handle is None or handle.id != job_id or handle.payload != payload:
            raise AssertionError(f"{queue_name!r}: the payload did not round-trip")
        if not handle.ack():
            raise AssertionError(f"{queue_name!r}: the ack of a fresh claim returned False")

    return call


def _accepted_rows() -> Iterator[Row]:
    yield Row(
        "queue.enqueue(payload)",
        "1 MiB of JSON text (the size bound)",
        ACCEPTED,
        _round_trip(PROBE, "x" * (MAX_PAYLOAD_BYTES - 2)),
    )
    yield Row(
        "queue.enqueue(payload)",
        f"{MAX_PAYLOAD_DEPTH}-level nesting",
        ACCEPTED,
        _round_trip(PROBE, _nested(MAX_PAYLOAD_DEPTH)),
    )
    yield Row(
        "queue(name).enqueue",
        f"{MAX_NAME_LENGTH}-char name",
        ACCEPTED,
        _round_trip("q" * MAX_NAME_LENGTH, GOOD),
    )


# --------------------------------------------------------------------------- the table


def rows(target: OpenTarget | None) -> list[Row]:
    table: list[Row] = []
    for label, name, expected in HOSTILE_NAMES:
        for surface, call, needs in NAME_SURFACES:
            table.append(Row(surface, label, (expected,), _bind(call, name), needs=needs))
    for label, make in HOSTILE_PAYLOADS:
        for surface, call, needs in PAYLOAD_SURFACES:
            table.append(Row(surface, label, (PayloadError,), _bind_fresh(call, make), needs=needs))
    for surface, label, option_call in OPTION_ROWS:
        table.append(Row(surface, label, (InvalidOptions,), option_call))
    table.append(
        Row(
            "schedule(spec)",
            "'@every 0s'",
            (InvalidSpec,),
            _schedule_spec("@every 0s"),
            needs="scheduler",
        )
    )
    # Cron is a spec since contract 1.2 (§5.2); what lies outside its grammar is not.
    for label, spec in (
        ("'0 0 * * * *' (a seconds field)", "0 0 * * * *"),
        ("'60 * * * *' (minute 60)", "60 * * * *"),
        ("'0 0 L * *' (an extension)", "0 0 L * *"),
        ("'0 0 31 2 *' (a day no listed month has)", "0 0 31 2 *"),
    ):
        table.append(
            Row("schedule(spec)", label, (InvalidSpec,), _schedule_spec(spec), needs="scheduler")
        )
    table.append(Row("queue.claim", "worker_id=''", (InvalidName,), lambda c: _probe(c).claim("")))
    table.extend(_accepted_rows())
    table.extend(_any_engine_url_rows())
    if target is not None:
        table.extend(_open_rows(target))
    return table


def _bind(call: Callable[[Context, Any], object], value: object) -> Callable[[Context], object]:
    return lambda ctx: call(ctx, value)


def _bind_fresh(
    call: Callable[[Context, Any], object], make: Callable[[], object]
) -> Callable[[Context], object]:
    return lambda ctx: call(ctx, make())


def _schedule_spec(spec: str) -> Callable[[Context], object]:
    return lambda ctx: ctx.store.schedule(PROBE, spec, PROBE, GOOD)


def _written(ctx: Context, profiles: frozenset[str]) -> list[str]:
    """What the probe surfaces hold now (and clear it, so the next row starts clean)."""
    found: list[str] = []
    queue = ctx.store.queue(PROBE)
    if handles := queue.claim_batch("hostile-check", 100):
        found.append(f"{len(handles)} job(s)")
        queue.ack_batch([h.id for h in handles], "hostile-check")
    if "streams" in profiles:
        stream = ctx.store.stream(PROBE)
        if events := stream.read(after=0, limit=100):
            found.append(f"{len(events)} stream event(s)")
            stream.trim_to(events[-1].offset)
    if "scheduler" in profiles and ctx.store.get_schedule(PROBE) is not None:
        found.append("a schedule")
        ctx.store.unschedule(PROBE)
    return found


def try_row(row: Row, ctx: Context, profiles: frozenset[str]) -> RowResult:
    try:
        row.call(ctx)
    except Exception as exc:
        outcome = type(exc).__name__
        matched = bool(row.expected) and isinstance(exc, row.expected)
    else:
        outcome, matched = "accepted", not row.expected
    if row.opens and ctx.target is not None:
        wrote = ctx.target.traces()
        ctx.target.clear()
    else:
        wrote = []
    wrote.extend(_written(ctx, profiles))
    return RowResult(row, outcome, wrote, matched)


def run_hostile(
    engine: str, spec: EngineSpec, progress: Callable[[str], None] = lambda _: None
) -> ScenarioResult:
    started = time.monotonic()
    provider = alkstore.load_engine(engine)
    profiles = provider.capabilities.profiles()
    with provider.open(spec.url, **spec.opts) as store, open_target(spec) as target:
        ctx = Context(store, target)
        if _written(ctx, profiles):
            raise RuntimeError("the hostile-input probe queue/stream is not empty at the start")
        table = [r for r in rows(target) if r.needs is None or r.needs in profiles]
        results = [try_row(row, ctx, profiles) for row in table]
    progress(f"{engine}: {len(results)} hostile-input rows")
    return summarize(engine, results, time.monotonic() - started)


def summarize(engine: str, results: Sequence[RowResult], seconds: float) -> ScenarioResult:
    refused = [r for r in results if r.row.expected]
    figures = (
        count("rows", len(results)),
        count("refused with the expected error", sum(1 for r in refused if r.ok)),
        count("accepted as they must be", sum(1 for r in results if not r.row.expected and r.ok)),
        must_be_zero(
            "wrong error type",
            sum(1 for r in refused if not r.matched and r.outcome != "accepted"),
        ),
        must_be_zero(
            "accepted but must be refused", sum(1 for r in refused if r.outcome == "accepted")
        ),
        must_be_zero(
            "refused but must be accepted",
            sum(1 for r in results if not r.row.expected and not r.matched),
        ),
        must_be_zero("wrote something", sum(1 for r in results if r.wrote)),
    )
    notes = tuple(r.describe() for r in results if not r.ok)
    return ScenarioResult(SCENARIO, engine, figures, seconds, notes)
