"""The README's example, runnable: ``python scenarios/quickstart.py [URL]``."""

from __future__ import annotations

import sys
from typing import Any

import alkstore
from alkstore import EnqueueOpts, QueueOpts


def main(url: str = "sqlite:///quickstart.db", **opts: Any) -> list[object]:
    handled: list[object] = []
    with alkstore.open(url, **opts) as store:
        emails = store.queue("emails", QueueOpts(visibility_timeout_s=60, max_attempts=5))
        emails.enqueue({"to": "a@example.com"}, EnqueueOpts(priority=10))
        with store.transaction() as tx:
            tx.enqueue("emails", {"order": 7})
        while (job := emails.claim_wait("worker-1", timeout=0.5)) is not None:
            handled.append(job.payload)
            job.ack()
    return handled


if __name__ == "__main__":
    for payload in main(*sys.argv[1:]):
        print("handled", payload)
