"""The maintenance recipe (contract §5, decision 010 §6): timeliness is the app's.

Nothing in alkstore sweeps on its own. This story wires the one schedule and
the one worker every deployment needs: every 300 s the scheduler enqueues a
maintenance job naming the queues to sweep; a worker claims it and calls
``sweep_expired`` on each. Run it against any engine URL:

    python scenarios/maintenance.py sqlite:///app.db --queue emails --queue reports

It leads the scheduler (leader-elected: start it on several hosts, one fires)
and works the maintenance queue until interrupted or ``--seconds`` elapse.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

import alkstore
from alkstore import StopToken, SweepResult

SCHEDULE_NAME = "maintenance"
MAINTENANCE_QUEUE = "maintenance"
EVERY = "@every 300s"


def install(store: alkstore.Store, queues: Sequence[str], every: str = EVERY) -> alkstore.Schedule:
    """Register (idempotently) the schedule that asks for a sweep of ``queues``."""
    return store.schedule(
        SCHEDULE_NAME, every, MAINTENANCE_QUEUE, {"task": "sweep", "queues": list(queues)}
    )


def work_one(
    store: alkstore.Store,
    worker_id: str,
    timeout: float | None = 0,
    stop: StopToken | None = None,
) -> dict[str, SweepResult] | None:
    """Claim one maintenance job and sweep every queue it names; ``None`` if none came."""
    job = store.queue(MAINTENANCE_QUEUE).claim_wait(worker_id, timeout=timeout, stop=stop)
    if job is None:
        return None
    try:
        results = {name: store.queue(name).sweep_expired() for name in job.payload["queues"]}
    except Exception as exc:
        job.retry(f"sweep failed: {exc}")
        raise
    job.ack()
    return results


def run(url: str, queues: Sequence[str], seconds: float | None, worker_id: str) -> None:
    stop = StopToken()
    with alkstore.open(url) as store:
        install(store, queues)
        leader = threading.Thread(
            target=store.run_schedules, args=(stop,), kwargs={"worker_id": worker_id}
        )
        leader.start()
        timer = threading.Timer(seconds, stop.stop) if seconds is not None else None
        if timer is not None:
            timer.start()
        try:
            while not stop.is_set():
                results = work_one(store, worker_id, timeout=None, stop=stop)
                for name, result in (results or {}).items():
                    print(f"swept {name}: {result}")
        except KeyboardInterrupt:
            pass
        finally:
            stop.stop()
            if timer is not None:
                timer.cancel()
            leader.join()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="an engine URL, e.g. sqlite:///app.db")
    parser.add_argument("--queue", action="append", default=[], help="a queue to sweep")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--worker-id", default="maintenance-worker")
    args = parser.parse_args(argv)
    run(args.url, args.queue, args.seconds, args.worker_id)


if __name__ == "__main__":
    main()
