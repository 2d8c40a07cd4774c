"""CPU of an idle worker on a fully limited queue (contract 1.2 §16.4), beside one on
an empty queue.

    python scenarios/benchmarks/idle_limited_cpu.py URL [--seconds 10]

A queue with ``Limits(concurrency=1)`` whose one slot another store holds (a claim
with a long visibility timeout) and 1,000 pending jobs: a ``Worker`` with a
4-slot task on it has nothing it may claim. It runs for ``--seconds`` in a child
process, which reports its own CPU time (``resource.getrusage``, user + system)
over that span, after a warm-up second; the same for a worker on an empty queue.
A worker that busy-looped on the limited queue would burn a core; one that waits
for the holding claim's deadline or a wake costs what the idle one does. Nothing
asserts: the numbers are for reading (docs/guide/queue-limits.md quotes them).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import threading
import time
from typing import Any

import alkstore
from alkstore import Limits, QueueOpts
from alkstore.worker import Worker

WARM_UP_S = 1.0
PENDING = 1000
HOLD_S = 3600


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _idle_worker(url: str, queue: str, seconds: float, results: Any) -> None:
    with alkstore.open(url) as store:
        worker = Worker(store, name=f"idle-{queue}")
        handled: list[int] = []

        @worker.task(queue, concurrency=4)
        def handle(job: alkstore.Job) -> None:
            handled.append(job.id)

        runner = threading.Thread(target=worker.run, daemon=True)
        runner.start()
        time.sleep(WARM_UP_S)
        before, started = _cpu_s(), time.monotonic()
        time.sleep(seconds)
        used, elapsed = _cpu_s() - before, time.monotonic() - started
        worker.stop()
        runner.join(30)
        results.put((used, elapsed, len(handled)))


def measure(url: str, queue: str, seconds: float) -> tuple[float, float, int]:
    context = mp.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_idle_worker, args=(url, queue, seconds, results))
    child.start()
    got: tuple[float, float, int] = results.get(timeout=seconds + 60)
    child.join(30)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    suffix = str(time.time_ns())
    limited, empty = f"limited-{suffix}", f"empty-{suffix}"
    with alkstore.open(args.url) as store:
        queue = store.queue(limited, QueueOpts(visibility_timeout_s=HOLD_S))
        queue.enqueue_many([{"n": n} for n in range(PENDING)])
        queue.set_limits(Limits(concurrency=1))
        holder = queue.claim("holder")
        assert holder is not None
        for name in (limited, empty):
            used, elapsed, handled = measure(args.url, name, args.seconds)
            print(
                f"{name.split('-')[0]:>8}: {used * 1000:.0f} ms CPU in {elapsed:.1f} s "
                f"({used / elapsed * 100:.2f}% of a core), {handled} jobs handled"
            )
        holder.ack()
        queue.clear_limits()


if __name__ == "__main__":
    main()
