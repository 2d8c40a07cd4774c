"""Transactional atomicity under SIGKILL: all of a transaction, or none of it.

A child process loops over orders: each is ONE ``store.transaction()`` that
inserts a business row (through ``tx.execute``, in the caller's own table),
enqueues one job per order line and appends one stream event. The child is
SIGKILLed at a random moment, restarted, killed again, many times. Afterwards
every business row must have exactly its jobs and its one event, and no job or
event may exist without its business row:

* orphan jobs / orphan events -- written without their business row: must be 0;
* orders missing jobs / missing their event -- a row without its work: must be 0;
* duplicate jobs / events -- one order line enqueued twice: must be 0.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import random
import re
import secrets
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from fault_report import ScenarioResult, count, must_be_zero

import alkstore
from alkstore import EngineSpec

SCENARIO = "atomicity under SIGKILL"
QUEUE = "fault_fulfil"
STREAM = "fault_orders"
TABLE_PREFIX = "fault_orders_"
TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
READY_TIMEOUT_S = 60.0
"""A child that is not up (imports, open) within this long fails the run."""
DRAIN_BATCH = 500
MAX_LINES = 4

# SQL the business side runs; ``{table}`` is a validated, quoted identifier and
# ``{p}`` the driver's placeholder, so values are always bound, never formatted in.
CREATE_TABLE = 'CREATE TABLE "{table}" (order_key TEXT PRIMARY KEY, lines INTEGER NOT NULL)'
INSERT_ORDER = 'INSERT INTO "{table}" (order_key, lines) VALUES ({p}, {p})'
SELECT_ORDERS = 'SELECT order_key, lines FROM "{table}"'
DROP_TABLE = 'DROP TABLE "{table}"'

PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


@dataclass(frozen=True, slots=True)
class AtomicityConfig:
    kills: int = 40
    min_life_s: float = 0.05
    """Each child lives this long at least after it is ready, then dies by SIGKILL..."""
    max_life_s: float = 0.3
    """...at a random moment up to this long."""
    seed: int = 0


def placeholder(connection: Any) -> str:
    """The DB-API placeholder of ``tx.connection``'s driver (sqlite3 ``?``, psycopg ``%s``).

    The driver module is the first class in the connection's MRO whose package
    declares a DB-API ``paramstyle`` (an engine may hand out a subclass of its own).
    """
    for cls in type(connection).__mro__:
        module = importlib.import_module(cls.__module__.split(".")[0])
        style = getattr(module, "paramstyle", None)
        if style in PLACEHOLDERS:
            return PLACEHOLDERS[style]
    raise RuntimeError(f"no supported DB-API paramstyle for {type(connection).__name__}")


def _sql(template: str, table: str, p: str = "") -> str:
    if TABLE_NAME.fullmatch(table) is None:
        raise ValueError(f"not a safe table name: {table!r}")
    return template.format(table=table, p=p)


# --------------------------------------------------------------------------- child


def order_writer(
    engine: str, spec: EngineSpec, table: str, incarnation: int, journal: str, ready: Connection
) -> None:
    """Write orders, one transaction each, until SIGKILLed (it never stops on its own).

    ``journal`` gets ``begin <key>`` before each transaction and ``end <key>``
    after it, so the parent can tell whether the kill landed inside one.
    """
    with (
        alkstore.load_engine(engine).open(spec.url, **spec.opts) as store,
        open(journal, "a", encoding="utf-8", buffering=1) as log,
    ):
        ready.send("ready")
        ready.close()
        sequence = 0
        while True:
            key = f"{incarnation}-{sequence}"
            lines = 1 + sequence % MAX_LINES
            log.write(f"begin {key}\n")
            with store.transaction() as tx:
                insert = _sql(INSERT_ORDER, table, placeholder(tx.connection))
                tx.execute(insert, (key, lines))
                for line in range(lines):
                    tx.enqueue(QUEUE, {"order": key, "line": line})
                tx.stream_append(STREAM, {"order": key, "lines": lines})
            log.write(f"end {key}\n")
            sequence += 1


# --------------------------------------------------------------------------- parent


def run_atomicity(
    engine: str,
    spec: EngineSpec,
    config: AtomicityConfig,
    progress: Callable[[str], None] = lambda _: None,
) -> ScenarioResult:
    started = time.monotonic()
    rng = random.Random(config.seed)
    table = TABLE_PREFIX + secrets.token_hex(6)
    context = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="alkstore-atomicity-") as journals,
        alkstore.load_engine(engine).open(spec.url, **spec.opts) as store,
    ):
        with store.transaction() as tx:
            tx.execute(_sql(CREATE_TABLE, table))
        try:
            in_flight: list[str] = []
            for incarnation in range(config.kills):
                journal = os.path.join(journals, f"{incarnation}.log")
                _live_and_die(context, engine, spec, table, incarnation, journal, config, rng)
                key = _in_flight(journal)
                if key is not None:
                    in_flight.append(key)
            progress(f"{engine}: {config.kills} writers SIGKILLed")
            result = _judge(store, table, engine, config, in_flight, started)
        finally:
            with store.transaction() as tx:
                tx.execute(_sql(DROP_TABLE, table))
    return result


def _live_and_die(
    context: multiprocessing.context.SpawnContext,
    engine: str,
    spec: EngineSpec,
    table: str,
    incarnation: int,
    journal: str,
    config: AtomicityConfig,
    rng: random.Random,
) -> None:
    receive, send = context.Pipe(duplex=False)
    child = context.Process(
        target=order_writer,
        args=(engine, spec, table, incarnation, journal, send),
        name=f"order-writer-{incarnation}",
        daemon=True,
    )
    child.start()
    send.close()
    try:
        if not receive.poll(READY_TIMEOUT_S):
            raise RuntimeError(f"order writer {incarnation} was not ready in {READY_TIMEOUT_S} s")
        receive.recv()
        time.sleep(rng.uniform(config.min_life_s, config.max_life_s))
    finally:
        if child.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
        child.join()
        receive.close()
    if child.exitcode != -signal.SIGKILL:
        raise RuntimeError(f"order writer {incarnation} ended on its own: exit {child.exitcode}")


def _in_flight(journal: str) -> str | None:
    """The order whose transaction the kill interrupted (``begin`` without ``end``), if any."""
    with open(journal, encoding="utf-8") as log:
        complete = [line.split() for line in log if line.endswith("\n")]
    if complete and complete[-1][0] == "begin":
        return str(complete[-1][1])
    return None


def _judge(
    store: alkstore.Store,
    table: str,
    engine: str,
    config: AtomicityConfig,
    in_flight: list[str],
    started: float,
) -> ScenarioResult:
    with store.transaction() as tx:
        orders = dict(tx.execute(_sql(SELECT_ORDERS, table)).fetchall())

    queue = store.queue(QUEUE)
    job_lines: Counter[tuple[str, int]] = Counter()
    while handles := queue.claim_batch("atomicity-judge", DRAIN_BATCH):
        job_lines.update((h.payload["order"], h.payload["line"]) for h in handles)
        queue.ack_batch([h.id for h in handles], "atomicity-judge")

    events: Counter[str] = Counter()
    stream = store.stream(STREAM)
    offset = 0
    while batch := stream.read(after=offset, limit=DRAIN_BATCH):
        events.update(event.payload["order"] for event in batch)
        offset = batch[-1].offset

    expected_lines = {(key, line) for key, lines in orders.items() for line in range(lines)}
    figures = (
        count("writers SIGKILLed", config.kills),
        count("kills inside a transaction", len(in_flight)),
        count("... of which committed before the kill", sum(1 for k in in_flight if k in orders)),
        count("orders committed", len(orders)),
        count("jobs found", sum(job_lines.values())),
        count("events found", sum(events.values())),
        must_be_zero("orphan jobs", sum(1 for k in job_lines if k not in expected_lines)),
        must_be_zero("orphan events", sum(1 for k in events if k not in orders)),
        must_be_zero("orders missing jobs", len({k for k, _ in expected_lines - set(job_lines)})),
        must_be_zero("orders missing their event", sum(1 for k in orders if k not in events)),
        must_be_zero("duplicate jobs", sum(1 for n in job_lines.values() if n > 1)),
        must_be_zero("duplicate events", sum(1 for n in events.values() if n > 1)),
    )
    return ScenarioResult(SCENARIO, engine, figures, time.monotonic() - started)
