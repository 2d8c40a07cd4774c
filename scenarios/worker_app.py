"""An app's worker module: what ``alkstore worker`` runs (contract §12).

The module defines the worker and its handlers, and no store: the command
gives it the one ``--url`` names, so the same code runs against a SQLite file
on a laptop and PostgreSQL in production. From the repository root:

    python scenarios/worker_app.py sqlite:///app.db      # enqueue a few demo jobs
    alkstore worker scenarios.worker_app:worker --url sqlite:///app.db

Two tasks, one per kind of handler:

- ``emails`` (a plain function, up to 4 at once on threads): a message
  without a recipient can never be sent, so it is dead-lettered at once
  (``Fail``); a greylisting mail server refuses the first attempt, so that
  one is tried again a little later (``Retry``); anything else is sent and
  acked by returning.
- ``thumbnails`` (a coroutine, on the worker's event loop): rendering an
  image that is not named fails for good; a rendering awaits its I/O, so the
  loop is never blocked, and its handler logs through the job's context.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass

import alkstore
from alkstore import Job, QueueOpts, Store
from alkstore.worker import Fail, JobContext, Retry, Worker

EMAILS = "emails"
THUMBNAILS = "thumbnails"
GREYLISTING_DOMAIN = "greylisted.example"
"""Mail for this domain is refused on the first try, as a greylisting server does."""
GREYLIST_RETRY_S = 1
SMTP_LATENCY_S = float(os.environ.get("WORKER_APP_SMTP_LATENCY_S", "0.05"))
"""How long one send takes (the stand-in for the mail server's round trips)."""
RENDER_S = 0.05

worker = Worker(name=f"worker-app-{os.getpid()}", shutdown_grace_s=10)


class Greylisted(Exception):
    """The mail server asks us to come back later (SMTP 451)."""


def deliver(to: str, subject: str, first_try: bool) -> None:
    """Send one message. A real app talks SMTP here; this one only takes the time."""
    if first_try and to.endswith("@" + GREYLISTING_DOMAIN):
        # A greylisting server turns away a sender it has not seen yet.
        raise Greylisted(f"451 {to}: greylisted, try again later")
    time.sleep(SMTP_LATENCY_S)


@worker.task(EMAILS, concurrency=4)
def send_email(job: Job) -> None:
    to = job.payload.get("to")
    if not isinstance(to, str) or "@" not in to:
        raise Fail("no recipient")  # no retry can fix this message
    try:
        deliver(to, job.payload.get("subject", ""), first_try=job.attempts == 1)
    except Greylisted as exc:
        raise Retry(delay=GREYLIST_RETRY_S, error=str(exc)) from exc


@worker.task(THUMBNAILS)
async def make_thumbnail(job: Job, ctx: JobContext) -> None:
    image = job.payload.get("image")
    if not isinstance(image, str) or not image:
        raise Fail("no image to render")
    await asyncio.sleep(RENDER_S)  # fetching and resizing, without blocking the loop
    ctx.logger.info("thumbnail of %s ready", image)


@dataclass(frozen=True, slots=True)
class DemoJobs:
    """The ids ``enqueue_demo`` enqueued, by what should become of them."""

    sent: tuple[int, ...]
    greylisted: int
    no_recipient: int
    thumbnail: int
    no_image: int


def enqueue_demo(store: Store) -> DemoJobs:
    """Enqueue what the app's web side would: a few emails and thumbnails."""
    emails = store.queue(EMAILS, QueueOpts(visibility_timeout_s=60, max_attempts=5))
    thumbnails = store.queue(THUMBNAILS, QueueOpts(visibility_timeout_s=120, max_attempts=3))
    return DemoJobs(
        sent=tuple(
            emails.enqueue({"to": f"{name}@example.com", "subject": "Your order"})
            for name in ("ada", "grace", "linus")
        ),
        greylisted=emails.enqueue({"to": f"ken@{GREYLISTING_DOMAIN}", "subject": "Welcome"}),
        no_recipient=emails.enqueue({"subject": "Lost"}),
        thumbnail=thumbnails.enqueue({"image": "uploads/cat.png"}),
        no_image=thumbnails.enqueue({}),
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python {sys.argv[0]} URL")
    with alkstore.open(sys.argv[1]) as opened:
        print(enqueue_demo(opened))
