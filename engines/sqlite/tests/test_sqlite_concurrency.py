"""Threads and processes hammering one database file: no error escapes, every job once."""

from __future__ import annotations

import multiprocessing as mp
import threading
from typing import Any

from sqlite_helpers import StoreFactory, consume_until_stop, drain, produce

import alkstore

JOBS = 2_000


def _collect(procs: list[Any], results: Any) -> list[Any]:
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return outcomes


def test_threads_of_two_stores_claim_and_ack_every_job_exactly_once(
    open_store: StoreFactory,
) -> None:
    stores = [open_store(), open_store()]
    ids = stores[0].queue("q").enqueue_many([{"n": n} for n in range(JOBS)])
    acked: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(store: alkstore.Store, name: str) -> None:
        queue = store.queue("q")
        try:
            while (handle := queue.claim(name)) is not None:
                if handle.ack():
                    with lock:
                        acked.append(handle.id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(stores[i % 2], f"w{i}")) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(acked) == ids


def test_processes_and_threads_claim_and_ack_every_job_exactly_once(url: str) -> None:
    with alkstore.open(url) as store:
        ids = store.queue("q").enqueue_many([{"n": n} for n in range(JOBS)])
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=drain, args=(url, "q", f"p{i}", 2, results)) for i in range(4)]
    for proc in procs:
        proc.start()
    outcomes = _collect(procs, results)
    acked = [job_id for got, _ in outcomes for job_id in got]
    errors = [error for _, errs in outcomes for error in errs]
    assert errors == []
    assert sorted(acked) == ids
    with alkstore.open(url) as store:
        assert store.queue("q").claim("w") is None


def test_producers_and_waiting_consumers_in_processes_pass_every_job_once(url: str) -> None:
    with alkstore.open(url):
        pass  # the schema exists before the race starts
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    consumers = [
        ctx.Process(target=consume_until_stop, args=(url, "q", f"c{i}", results)) for i in range(2)
    ]
    producers = [
        ctx.Process(target=produce, args=(url, "q", i * 500, 500, results)) for i in range(2)
    ]
    for proc in consumers + producers:
        proc.start()
    produced = _collect(producers, results)
    with alkstore.open(url) as store:  # one stop job per consumer, after all the work
        store.queue("q").enqueue_many([{"stop": True}] * len(consumers))
    consumed = _collect(consumers, results)
    assert [e for _, errs in produced + consumed for e in errs] == []
    assert sorted(n for seen, _ in consumed for n in seen) == list(range(1000))
