"""A cron spec's boundaries in its time zone (contract §5.8, §5.9).

``cronsim`` walks the calendar (it mimics Debian cron, whose DST rule the
contract adopts); this module holds it to the contract's words where a walk
alone would not:

* a wall-clock spec is walked in naive local time, so a walk that starts in the
  second pass of a repeated hour meets that hour's first pass again, an instant
  already behind it: such candidates are passed over;
* an elapsed-time spec is walked one stretch of a single UTC offset at a time,
  in that offset's local time, which has no gaps and no repeats: cronsim's own
  walk through a zone steps whole hours of elapsed time, so after a 30-minute
  shift (Australia/Lord_Howe) it lands on :30 and misses :00 to :29, and it can
  be handed a local time that does not exist (a midnight inside a gap).

Counting the boundaries a long outage skipped walks only the days at its ends
and the days a DST transition falls on; every whole day in between counts its
matching (hour, minute) pairs at once. A year of ``* * * * *`` (525,600
boundaries) is counted in milliseconds instead of seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo

from cronsim import CronSim

from .cadence import Due
from .constants import MAX_SECONDS
from .cron_grammar import CronFields

NEVER = MAX_SECONDS
"""The boundary of a spec with none left before the calendar's end (year 9999)."""

_DAY = timedelta(days=1)
_OFFSET_PROBE_S = 6 * 3600
_WINDOW_S = 3600
"""The first look back for the latest due boundary; it grows sixteenfold while empty."""


@dataclass(frozen=True, slots=True)
class CronCadence:
    """The boundaries of a cron spec in ``zone`` (``alkstore.spec.Cadence``)."""

    spec: str
    timezone: str
    fields: CronFields
    zone: tzinfo

    @property
    def interval_s(self) -> None:
        return None

    # -- the next boundary ---------------------------------------------------------
    def first_after(self, now: int) -> int:
        return self.next_after(now)

    def next_after(self, boundary: int) -> int:
        """The first boundary strictly after the instant ``boundary``."""
        try:
            if self.fields.wall_clock:
                return self._next_on_the_wall_clock(boundary)
            return self._next_in_elapsed_time(boundary)
        except (OverflowError, ValueError, StopIteration):
            # Past the calendar's end (cronsim, too, gives up after 50 years without
            # a match, which no spec the grammar accepts comes near).
            return NEVER

    def _next_on_the_wall_clock(self, after: int) -> int:
        # cronsim walks naive local times and maps each to its instant as §5.8 says.
        walk = CronSim(self.fields.expression, datetime.fromtimestamp(after, self.zone))
        while True:
            instant = int(next(walk).timestamp())
            if instant > after:
                return instant
            # else: the first pass of a repeated hour, met again from its second pass

    def _next_in_elapsed_time(self, after: int) -> int:
        # Walk each stretch of one UTC offset in that offset's local time, where no
        # local time is missing or repeated; a stretch ends where the offset changes.
        start = after
        while True:
            offset = self._offset(start + 1)
            walk = CronSim(self.fields.expression, datetime.fromtimestamp(start, timezone(offset)))
            candidate = int(next(walk).timestamp())
            change = self._offset_change(start + 1, candidate, offset)
            if change is None:
                return candidate
            start = change - 1  # nothing fired in the stretch before the change

    def _offset(self, instant: int) -> timedelta:
        offset = datetime.fromtimestamp(instant, self.zone).utcoffset()
        assert offset is not None  # (every tzinfo this module is given is aware)
        return offset

    def _offset_change(self, first: int, last: int, offset: timedelta) -> int | None:
        """The first instant in ``[first, last]`` whose UTC offset is not ``offset``.

        Looked for every six hours, then narrowed down to the second: no zone changes
        its offset and back within six hours.
        """
        low = first
        while low < last:
            high = min(low + _OFFSET_PROBE_S, last)
            if self._offset(high) != offset:
                while high - low > 1:
                    middle = (low + high) // 2
                    low, high = (middle, high) if self._offset(middle) == offset else (low, middle)
                return high
            low = high
        return None

    # -- the boundaries due at a tick ----------------------------------------------
    def due(self, at: int, now: int) -> Due:
        latest = self._latest(at, now)
        return Due(
            count=1 + self.count_between(at, latest), latest=latest, after=self.next_after(now)
        )

    def _latest(self, at: int, now: int) -> int:
        """The last boundary at or before ``now``; ``at`` (a boundary) if none is later."""
        window = _WINDOW_S
        while True:
            start = max(at, now - window)
            latest = start if start == at else None
            step = self.next_after(start)
            while step <= now:
                latest = step
                step = self.next_after(step)
            if latest is not None:
                return latest
            window *= 16

    def count_between(self, after: int, until: int) -> int:
        """How many boundaries lie in ``(after, until]``.

        Whole days with no DST transition count ``times_per_day`` each when the spec
        fires on them; the rest is walked boundary by boundary.
        """
        count = 0
        cursor = after  # every boundary in (after, cursor] is counted
        while True:
            step = self.next_after(cursor)
            if step > until:
                return count
            day = datetime.fromtimestamp(step, self.zone).date()
            bounds = self._plain_day(day)
            if bounds is None or cursor >= bounds[0] or bounds[1] - 1 > until:
                count += 1
                cursor = step
                continue
            # ``step`` is the first boundary after the cursor and its day is plain and
            # ends by ``until``: count whole days while they have boundaries.
            while bounds is not None and bounds[1] - 1 <= until:
                per_day = self.fields.times_per_day if self.fields.day_matches(day) else 0
                if per_day == 0:
                    break
                count += per_day
                cursor = bounds[1] - 1
                day += _DAY
                bounds = self._plain_day(day)

    def _plain_day(self, day: date) -> tuple[int, int] | None:
        """``(first instant, first instant of the next day)`` of ``day`` if it is 24
        hours of one UTC offset, so each of its local times occurs exactly once and
        is the only one at its instant; ``None`` if a DST transition touches it."""
        start = self._only_instant(datetime.combine(day, time()))
        end = self._only_instant(datetime.combine(day + _DAY, time()))
        if start is None or end is None or end - start != 86_400:
            return None
        offsets = {
            datetime.fromtimestamp(instant, self.zone).utcoffset()
            for instant in (start - 1, start, start + 43_200, end - 1)
        }
        return (start, end) if len(offsets) == 1 else None

    def _only_instant(self, local: datetime) -> int | None:
        """The instant of a naive local time that occurs exactly once; ``None`` in a
        gap or an overlap."""
        first = local.replace(tzinfo=self.zone, fold=0).timestamp()
        second = local.replace(tzinfo=self.zone, fold=1).timestamp()
        return int(first) if first == second else None
