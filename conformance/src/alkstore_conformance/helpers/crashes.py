"""Crash every statement of an operation in turn (``alkstore_conformance.helpers.faults``).

``crash_at_every_statement`` runs an operation in a child process once to
count its statements, then once more per statement, each time killed right
after that statement (before the engine's commit), and has the test check
its invariant after every run. The operations below run in the child: each
gets the store, ``arm`` (call it where the operation under test begins; what
comes before is setup and is never crashed) and one picklable argument.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest

from alkstore import EngineProvider, EngineSpec, Store

from ..hooks import DRIVER_WRAPPER_HOOK, has_driver_wrapper
from .common import insert_business_row
from .faults import CrashPoint
from .profile_processes import crashing_process
from .profiles import Children

TIME_LIMIT_S = 60.0

Operation = Callable[[Store, Callable[[], None], Any], None]


def require_driver_wrapper(engine: EngineProvider) -> None:
    """Skip as not_applicable unless the engine lets the kit interpose on its driver."""
    if not has_driver_wrapper(engine):
        pytest.skip(
            f"not_applicable: engine provides no {DRIVER_WRAPPER_HOOK}(url, wrap, ...) hook, "
            "so the kit cannot crash it at a chosen statement"
        )


def run_crashing(
    engine_ref: tuple[str, str, EngineSpec],
    operation: Operation,
    argument: Any,
    crash: CrashPoint | None,
    clock_at: int | None = None,
) -> list[str]:
    """One child run of ``operation``: the statements it ran (without ``crash``),
    or ``[]`` after checking the child died by SIGKILL at ``crash``."""
    with Children(TIME_LIMIT_S) as children:
        child = children.start(
            crashing_process,
            *engine_ref,
            operation,
            argument,
            clock_at,
            crash,
            children.results,
            TIME_LIMIT_S,
        )
        if crash is None:
            statements: list[str] = children.expect("statements")
            return statements
        child.join(TIME_LIMIT_S)
        if child.exitcode != -signal.SIGKILL:
            kind, value = children.results.get(timeout=5)
            raise AssertionError(f"the child was to crash at {crash} but reported {kind}: {value}")
    return []


def crash_at_every_statement(
    engine_ref: tuple[str, str, EngineSpec],
    operation: Operation,
    argument_for: Callable[[int], Any],
    check: Callable[[int, CrashPoint | None, list[str]], None],
    clock_at: int | None = None,
) -> int:
    """Run ``operation`` uncrashed (run 0), then crashed after each of its statements
    (run N after statement N); each run gets ``argument_for(run)`` (set up on fresh
    names) and is ``check(run, crash point, statements)``ed after. Returns how many
    crash points there were."""
    statements = run_crashing(engine_ref, operation, argument_for(0), None, clock_at)
    assert statements, "the operation ran no statement after arm()"
    check(0, None, statements)
    for number in range(1, len(statements) + 1):
        point = CrashPoint(number, "after")
        run_crashing(engine_ref, operation, argument_for(number), point, clock_at)
        check(number, point, statements)
    return len(statements)


# -- operations (run in the child) ----------------------------------------------------------


def tick(store: Store, arm: Callable[[], None], worker_id: str) -> None:
    arm()
    store.tick_schedules(worker_id)


def claim_then_fail(store: Store, arm: Callable[[], None], argument: tuple[str, str]) -> None:
    queue_name, error = argument
    handle = store.queue(queue_name).claim("crasher")
    assert handle is not None
    arm()
    handle.fail(error)


def claim_then_retry(store: Store, arm: Callable[[], None], argument: tuple[str, str]) -> None:
    queue_name, error = argument
    handle = store.queue(queue_name).claim("crasher")
    assert handle is not None
    arm()
    handle.retry(error)


def sweep(store: Store, arm: Callable[[], None], queue_name: str) -> None:
    arm()
    store.queue(queue_name).sweep_expired()


def enqueue_batch(store: Store, arm: Callable[[], None], argument: tuple[str, int]) -> None:
    queue_name, size = argument
    payloads = [{"n": n} for n in range(size)]
    arm()
    store.queue(queue_name).enqueue_many(payloads)


def claim_then_ack_batch(store: Store, arm: Callable[[], None], argument: tuple[str, int]) -> None:
    queue_name, size = argument
    queue = store.queue(queue_name)
    handles = queue.claim_batch("crasher", size)
    assert len(handles) == size
    arm()
    queue.ack_batch([handle.id for handle in handles], "crasher")


def many_writes_in_a_transaction(
    store: Store, arm: Callable[[], None], argument: tuple[str, str | None, int]
) -> None:
    """``writes`` enqueues (and as many stream appends when a stream is named)."""
    queue_name, stream_name, writes = argument
    arm()
    with store.transaction() as tx:
        for n in range(writes):
            tx.enqueue(queue_name, {"n": n})
            if stream_name is not None:
                tx.stream_append(stream_name, {"n": n})


def tx_ack_with_business_writes(
    store: Store, arm: Callable[[], None], argument: tuple[str, str, int]
) -> None:
    """A pipeline step: claim (setup), then one transaction with a business row, the
    job's ``tx.ack`` and the next step's job (§3.8)."""
    queue_name, table, row_id = argument
    handle = store.queue(queue_name).claim("crasher")
    assert handle is not None
    arm()
    with store.transaction() as tx:
        insert_business_row(tx.connection, table, row_id)
        tx.ack(handle)
        tx.enqueue(f"{queue_name}-next", {"after": handle.id})


def tx_ack_all_with_business_writes(
    store: Store, arm: Callable[[], None], argument: tuple[list[str], int, str, int]
) -> None:
    """A group's step: claim ``claims`` jobs of each queue (setup), then one transaction
    with a business row, one ``tx.ack_all`` of every claim and the next step's job (§3.10)."""
    queue_names, claims, table, row_id = argument
    queues = [store.queue(name) for name in queue_names]
    handles = [handle for queue in queues for handle in queue.claim_batch("crasher", claims)]
    assert len(handles) == claims * len(queue_names)
    arm()
    with store.transaction() as tx:
        insert_business_row(tx.connection, table, row_id)
        assert tx.ack_all(handles) == ()
        tx.enqueue(f"{queue_names[0]}-next", {"after": [handle.id for handle in handles]})


def tx_retry_all_and_fail_all_with_business_writes(
    store: Store, arm: Callable[[], None], argument: tuple[list[str], int, str, int]
) -> None:
    """A group's step of retries and fails: claim ``claims`` jobs of each queue
    (setup), then one transaction with a business row, one ``tx.retry_all`` of half of
    every queue's claims, one ``tx.fail_all`` of the rest and the next step's job
    (§3.11)."""
    queue_names, claims, table, row_id = argument
    queues = [store.queue(name) for name in queue_names]
    handles = [handle for queue in queues for handle in queue.claim_batch("crasher", claims)]
    assert len(handles) == claims * len(queue_names)
    retried, failed = handles[::2], handles[1::2]
    arm()
    with store.transaction() as tx:
        insert_business_row(tx.connection, table, row_id)
        assert tx.retry_all(retried, "try again", 3600) == ()
        assert tx.fail_all(failed, "no such card") == ()
        tx.enqueue(f"{queue_names[0]}-next", {"after": [handle.id for handle in handles]})


def redrive_all(store: Store, arm: Callable[[], None], queue_name: str) -> None:
    arm()
    store.queue(queue_name).redrive()
