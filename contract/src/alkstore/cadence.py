"""A schedule's cadence (contract §5.9): the one value every boundary is computed with.

Engines store the boundaries the core computes with it and never compute one.
``alkstore.spec.parse_spec`` builds one from a spec and a zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Due:
    """A schedule's due boundaries at a tick (``Cadence.due``).

    Attributes:
        count: how many boundaries are due: the row's next one and every later one
            up to now.
        latest: the last of them (at or before now).
        after: the first boundary after now.
    """

    count: int
    latest: int
    after: int


class Cadence(Protocol):
    """When a schedule fires: its boundaries, as whole epoch seconds (contract §5.9)."""

    @property
    def spec(self) -> str:
        """The spec as given."""
        ...

    @property
    def timezone(self) -> str:
        """The zone the spec is read in (``@every`` ignores it)."""
        ...

    @property
    def interval_s(self) -> int | None:
        """The fixed interval of an ``@every`` spec; ``None`` for cron."""
        ...

    def first_after(self, now: int) -> int:
        """A new schedule's first boundary: the first one strictly after ``now``."""
        ...

    def next_after(self, boundary: int) -> int:
        """The boundary that follows the boundary ``boundary``: the first strictly after it."""
        ...

    def due(self, at: int, now: int) -> Due:
        """The due boundaries of a row whose next boundary ``at`` is at or before ``now``."""
        ...


@dataclass(frozen=True, slots=True)
class EveryCadence:
    """``@every <n><unit>``: boundaries one interval apart, counted from registration.

    Elapsed time: a day is 86,400 seconds whatever the zone's clocks do.
    """

    spec: str
    timezone: str
    interval_s: int

    def first_after(self, now: int) -> int:
        return now + self.interval_s

    def next_after(self, boundary: int) -> int:
        return boundary + self.interval_s

    def due(self, at: int, now: int) -> Due:
        count = (now - at) // self.interval_s + 1
        latest = at + (count - 1) * self.interval_s
        return Due(count=count, latest=latest, after=latest + self.interval_s)
