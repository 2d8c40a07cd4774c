"""Repeated trials of the suite's concurrency tests.

A race may hide in one run and show in the next, so every run repeats each
test that asks for the ``trial`` fixture: twice in a check and in a reduced
certification, at least three times in a full one. Each trial is its own
test (``[trial1]``, ``[trial2]``, ...) with a fresh seed derived from the
run's seed and its node id -- recorded in the report and reproduced by
``--hypothesis-seed`` -- for the test to vary what it can (which jobs a
"crashed" worker abandons, ...).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

TRIAL_FIXTURE = "trial"


@dataclass(frozen=True, slots=True)
class Trial:
    number: int
    """1-based."""
    of: int
    seed: int

    def random(self) -> random.Random:
        """A generator seeded for this trial alone."""
        return random.Random(self.seed)


def trial_ids(count: int) -> list[str]:
    return [f"trial{number}" for number in range(1, count + 1)]


def trial_seed(run_seed: str, nodeid: str) -> int:
    """A 32-bit seed for one trial: the same run seed and node id give the same trial."""
    digest = hashlib.sha256(f"{run_seed}\0{nodeid}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
