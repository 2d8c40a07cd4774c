"""Unique jobs in the model (contract §15): which job holds a key, and what an
enqueue of a held key returns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from alkstore import EnqueueOpts, QueueOpts

from .state import ModelState
from .values import ModelDisagreement, json_round_trip

PAYLOAD_KEY_PREFIX = "payload:sha256:"


def payload_key(payload: Any) -> str:
    """§15.1: the payload as it reads back, keys sorted, no whitespace, UTF-8, hashed."""
    canonical = json.dumps(
        json_round_trip(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return PAYLOAD_KEY_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class UniqueModel(ModelState):
    """Enqueues with ``EnqueueOpts(unique=...)``."""

    def holder(self, queue: str, key: str, now: int) -> int | None:
        """The job of ``queue`` holding ``key`` at ``now``, live or dead (§15.3)."""
        for job in (*self._live.values(), *self._dead.values()):
            if job.holds(queue, key, now):
                return job.id
        return None

    def unique_enqueue_many(
        self,
        queue: str,
        payloads: Sequence[Any],
        queue_opts: QueueOpts,
        opts: EnqueueOpts,
        results: Sequence[Any],
    ) -> None:
        """Record a unique enqueue the engine answered with ``results`` (one ``Enqueued``
        per payload): a payload whose key a job holds, or an earlier payload of the
        batch has, must be that job's duplicate; every other one a new job."""
        unique = opts.unique
        if unique is None:
            raise TypeError("unique_enqueue_many needs opts with unique")
        if len(results) != len(payloads):
            raise ModelDisagreement(
                f"{len(payloads)} payloads enqueued but {len(results)} ids returned"
            )
        self._check_settled()
        now = self.now
        given: dict[str, int] = {}
        made: list[tuple[int, Any, str]] = []
        for payload, result in zip(payloads, results, strict=True):
            key = unique.key if unique.key is not None else payload_key(payload)
            expected = given.get(key)
            if expected is None:
                expected = self.holder(queue, key, now)
            duplicate = getattr(result, "duplicate", None)
            if expected is not None:
                if (int(result), duplicate) != (expected, True):
                    raise ModelDisagreement(
                        f"an enqueue of key {key!r} of {queue!r}, held by job {expected}, "
                        f"returned {int(result)} with duplicate={duplicate!r}"
                    )
                given[key] = expected
                continue
            if duplicate is not False:
                raise ModelDisagreement(
                    f"an enqueue of key {key!r} of {queue!r}, which no job holds, returned "
                    f"{int(result)} with duplicate={duplicate!r}"
                )
            given[key] = int(result)
            made.append((int(result), payload, key))
        self._check_new_ids([job_id for job_id, _, _ in made])
        jobs = []
        for job_id, payload, key in made:
            job = self._new_job(job_id, queue, payload, queue_opts, opts)
            job.unique_key = key
            job.holding = True
            job.hold_until = None if unique.period is None else now + unique.period
            job.hold_dead = unique.holds_dead
            jobs.append(job)
        self._commit_jobs(jobs)
