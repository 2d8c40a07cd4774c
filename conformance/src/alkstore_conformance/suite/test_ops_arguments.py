"""§11: malformed arguments of the operations are refused before anything is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from alkstore import InvalidOptions, Queue, Store
from alkstore_conformance.helpers.ops import dead_ids, make_dead

PROPERTY = "OPS-ARGUMENTS-REFUSED"

REFUSED: dict[str, Callable[[Queue, int], Any]] = {
    "jobs-unknown-state": lambda q, d: q.jobs("finished"),
    "jobs-state-not-a-state": lambda q, d: q.jobs(3),  # type: ignore[arg-type]
    "jobs-negative-after-id": lambda q, d: q.jobs(after_id=-1),
    "jobs-after-id-not-an-int": lambda q, d: q.jobs(after_id="0"),  # type: ignore[arg-type]
    "jobs-before-id-zero": lambda q, d: q.jobs(before_id=0),
    "jobs-before-id-not-an-int": lambda q, d: q.jobs(before_id="9"),  # type: ignore[arg-type]
    "jobs-before-id-bool": lambda q, d: q.jobs(before_id=True),
    "jobs-limit-zero": lambda q, d: q.jobs(limit=0),
    "jobs-limit-above-1000": lambda q, d: q.jobs(limit=1001),
    "jobs-limit-bool": lambda q, d: q.jobs(limit=True),
    "redrive-ids-a-string": lambda q, d: q.redrive("12"),  # type: ignore[arg-type]
    "redrive-an-id-not-an-int": lambda q, d: q.redrive([d, 1.5]),  # type: ignore[list-item]
    "redrive-limit-zero": lambda q, d: q.redrive(limit=0),
    "redrive-limit-above-10000": lambda q, d: q.redrive(limit=10_001),
    "purge-ids-a-set": lambda q, d: q.purge_dead({d}),  # type: ignore[arg-type]
    "purge-an-id-not-an-int": lambda q, d: q.purge_dead([d, "7"]),  # type: ignore[list-item]
    "purge-negative-age": lambda q, d: q.purge_dead(older_than_s=-1),
    "purge-age-not-a-duration": lambda q, d: q.purge_dead(older_than_s="1h"),  # type: ignore[arg-type]
}


@pytest.mark.property(PROPERTY)
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_malformed_argument_is_refused_and_nothing_changes(store: Store, case: str) -> None:
    queue = store.queue("guarded")
    dead = make_dead(queue, 2)
    with pytest.raises(InvalidOptions):
        REFUSED[case](queue, dead[0])
    assert dead_ids(queue) == dead
