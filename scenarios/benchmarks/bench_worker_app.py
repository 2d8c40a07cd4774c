"""The app the worker rows run, and the hand-written loop they are read against.

``worker`` is what ``alkstore worker bench_worker_app:worker --concurrency N``
loads (the harness puts this directory on the children's ``PYTHONPATH`` and
the store in ``ALKSTORE_URL`` / ``ALKSTORE_OPTS``): one task, a no-op handler
on the bench queue, so what is timed is the worker's own machinery.

Run as ``python -m bench_worker_app MODE --url URL --opts JSON --concurrency N``:

- ``hand``: the loop one would write by hand instead of the worker: claim up
  to N with ``claim_batch``, ``claim_wait`` only when that finds nothing, the
  same no-op on each job, ``ack``, single-threaded. SIGTERM ends it.
- ``worker``: the same ``worker`` as the CLI runs, started in-process
  (``worker.run()``), for when the ``alkstore worker`` command is not there.

Both print ``READY_LINE`` on stdout once the store is open, so the harness
knows when a child can take jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import alkstore
from alkstore.stop import StopToken
from alkstore.worker import Worker

QUEUE = "bench"
"""The queue every worker row drains (``bench_workloads.QUEUE``)."""
READY_LINE = "bench-child ready"
SHUTDOWN_GRACE_S = 10.0
"""A no-op handler finishes at once; this only bounds a stuck stop."""

worker = Worker(shutdown_grace_s=SHUTDOWN_GRACE_S)


@worker.task(QUEUE)
def noop(job: alkstore.Job) -> None:
    """The handler under test does nothing: only the worker's cost is left."""


def hand_loop(queue: alkstore.Queue, worker_id: str, batch: int, stop: StopToken) -> int:
    """Drain ``queue`` as the worker does, minus the worker: returns the jobs acked."""
    acked = 0
    while not stop.is_set():
        handles = queue.claim_batch(worker_id, batch)
        if not handles:
            waited = queue.claim_wait(worker_id, stop=stop)
            if waited is None:
                continue  # stopped
            handles = [waited]
        for handle in handles:
            noop(handle.job)
            acked += handle.ack()
    return acked


def _open(url: str, opts_json: str) -> alkstore.Store:
    opts: dict[str, Any] = json.loads(opts_json)
    return alkstore.open(url, **opts)


def _announce() -> None:
    print(READY_LINE, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("hand", "worker"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--opts", default="{}", help="engine options as a JSON object")
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args(argv)
    store = _open(args.url, args.opts)
    try:
        if args.mode == "worker":
            worker.store = store
            worker.configure(concurrency=args.concurrency)
            _announce()
            worker.run()  # SIGTERM: graceful stop, as under the CLI
            return 0
        stop = StopToken()
        signal.signal(signal.SIGTERM, lambda signum, frame: stop.stop())
        worker_id = f"hand-{os.getpid()}"
        queue = store.queue(QUEUE)
        _announce()
        hand_loop(queue, worker_id, args.concurrency, stop)
        return 0
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(main())
