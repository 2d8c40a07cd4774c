"""Many threads claiming and acking one queue: every job processed exactly once."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import psycopg
from pg_helpers import StoreFactory

JOBS = 600
THREADS = 8


def test_threads_hammering_claim_and_ack_process_every_job_exactly_once(
    open_store: StoreFactory, admin: psycopg.Connection[Any], schema: str
) -> None:
    store = open_store(pool_max_size=THREADS)
    queue = store.queue("hammered")
    enqueued = queue.enqueue_many([{"n": n} for n in range(JOBS)])
    start = threading.Barrier(THREADS)
    acked: list[int] = []
    refused: list[int] = []
    errors: list[BaseException] = []
    record = threading.Lock()

    def work(worker: int) -> None:
        start.wait()
        try:
            while True:
                # Alternate single claims and small batches, so both paths race.
                handles = queue.claim_batch(f"w{worker}", 1 + worker % 3)
                if not handles:
                    return
                for handle in handles:
                    ok = handle.ack()
                    with record:
                        (acked if ok else refused).append(handle.id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert refused == []
    duplicates = [job for job, times in Counter(acked).items() if times > 1]
    assert duplicates == []
    assert sorted(acked) == sorted(enqueued)
    assert admin.execute(f'SELECT count(*) FROM "{schema}".alkstore_jobs').fetchone() == (0,)
