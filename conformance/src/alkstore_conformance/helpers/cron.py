"""What the suite's cron properties share (contract §5): zones, spec strategies,
DST transitions, and fires counted against the kit's oracle (``model.cron``).

The strategies generate only specs the grammar accepts, in every form it has:
lists, ranges, steps, names in any case, day-of-week 7, and the nicknames.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

from hypothesis import strategies as st

from alkstore import Store, TickResult
from alkstore.testing import FakeClock

from ..model import cron as oracle

ZONES = (
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Australia/Lord_Howe",  # a 30-minute DST shift
    "Asia/Kolkata",  # +05:30, no DST
    "Pacific/Chatham",  # +12:45 / +13:45, shifting at 02:45
    "America/Santiago",  # shifts at midnight: 00:00 does not exist on the spring day
    "Europe/London",
    "UTC",
)
DST_ZONES = tuple(zone for zone in ZONES if zone not in ("Asia/Kolkata", "UTC"))
DST_YEARS = (2025, 2028)
TICKER = "cron-ticker"

EARLIEST = int(datetime(2000, 1, 1, tzinfo=UTC).timestamp())
LATEST = int(datetime(2080, 1, 1, tzinfo=UTC).timestamp())
instants = st.integers(EARLIEST, LATEST)

# (low, high, names) of each field, as the oracle reads them.
_FIELDS = oracle.FIELD_RANGES


def _named(value: int, low: int, names: tuple[str, ...], draw: st.DrawFn) -> str:
    """A value as a number, or (month, day-of-week) as its name in a drawn case."""
    if names and value - low < len(names) and draw(st.booleans()):
        name = names[value - low]
        return draw(st.sampled_from([name, name.lower(), name.capitalize()]))
    return str(value)


@st.composite
def _item(draw: st.DrawFn, low: int, high: int, names: tuple[str, ...]) -> str:
    kind = draw(st.sampled_from(["value", "value", "range", "stepped-range", "star-step"]))
    if kind == "star-step":
        return f"*/{draw(st.integers(1, high - low + 2))}"
    start = draw(st.integers(low, high))
    if kind == "value":
        return _named(start, low, names, draw)
    end = draw(st.integers(start, high))
    text = f"{_named(start, low, names, draw)}-{_named(end, low, names, draw)}"
    if kind == "stepped-range":
        text += f"/{draw(st.integers(1, 8))}"
    return text


@st.composite
def _field(draw: st.DrawFn, index: int) -> str:
    low, high, names = _FIELDS[index]
    if draw(st.integers(0, 3)) == 0:
        return "*"
    items = draw(st.lists(_item(low, high, names), min_size=1, max_size=3))
    return ",".join(items)


@st.composite
def five_field_specs(draw: st.DrawFn) -> str:
    """A valid five-field spec (one whose day-of-month some listed month has)."""
    while True:
        spec = " ".join(draw(_field(i)) for i in range(5))
        read = oracle.read_spec(spec)
        if read.either_day or min(read.days) <= max(_MONTH_DAYS[m] for m in read.months):
            return spec


_MONTH_DAYS = {
    1: 31,
    2: 29,
    3: 31,
    4: 30,
    5: 31,
    6: 30,
    7: 31,
    8: 31,
    9: 30,
    10: 31,
    11: 30,
    12: 31,
}

cron_specs = five_field_specs() | st.sampled_from(sorted(oracle.NICKNAMES))
zones = st.sampled_from(ZONES)


@dataclass(frozen=True)
class Transition:
    """One change of a zone's UTC offset: a gap (spring forward) or an overlap."""

    zone: str
    at: int
    before_s: int
    after_s: int

    @property
    def kind(self) -> str:
        return "gap" if self.after_s > self.before_s else "overlap"

    @property
    def shift(self) -> timedelta:
        return timedelta(seconds=abs(self.after_s - self.before_s))

    def stretch_start(self) -> datetime:
        """The first local (wall) time the change touches: the first that does not
        exist (a gap), or the first that occurs twice (an overlap)."""
        after = datetime.fromtimestamp(self.at, oracle.zone_of(self.zone)).replace(tzinfo=None)
        return after - self.shift if self.kind == "gap" else after

    def __str__(self) -> str:
        local = datetime.fromtimestamp(self.at, oracle.zone_of(self.zone))
        return f"{self.zone}-{local:%Y-%m-%dT%H:%M}-{self.kind}"


@cache
def dst_transitions() -> tuple[Transition, ...]:
    """Every DST transition of the DST zones in ``DST_YEARS``."""
    found = []
    for zone in DST_ZONES:
        tz = oracle.zone_of(zone)
        for at in oracle.transitions(zone, *DST_YEARS):
            before = datetime.fromtimestamp(at - 1, tz).utcoffset()
            after = datetime.fromtimestamp(at, tz).utcoffset()
            assert before is not None
            assert after is not None
            found.append(
                Transition(zone, at, int(before.total_seconds()), int(after.total_seconds()))
            )
    return tuple(found)


def transition_specs(transition: Transition) -> list[str]:
    """Specs whose boundaries land in and around the transition, of both classes.

    Wall clock: the first local time the change touches, one inside the stretch, both
    (in a gap they fire once in total), and the first time after the stretch. Elapsed
    time: every 15 minutes, the minute the stretch starts at, and a fixed hour's
    quarters.
    """
    start = transition.stretch_start()
    inside = start + transition.shift / 2
    after = start + transition.shift
    return [
        f"{start.minute} {start.hour} * * *",
        f"{inside.minute} {inside.hour} * * *",
        f"{_listed(start.minute, inside.minute)} {_listed(start.hour, inside.hour)} * * *",
        f"{after.minute} {after.hour} * * *",
        "*/15 * * * *",
        f"{start.minute} * * * *",
        f"*/15 {start.hour} * * *",
    ]


def _listed(*values: int) -> str:
    return ",".join(str(v) for v in sorted(set(values)))


def fire_through(
    store: Store, clock: FakeClock, names: list[str], until: int
) -> dict[str, list[int]]:
    """Tick at every boundary the store shows until ``until``; the instants each named
    schedule fired at (a fire at its boundary, since the clock stands on it)."""
    fired: dict[str, list[int]] = {name: [] for name in names}
    while True:
        shown = {s.name: s.next_fire_at for s in store.schedules() if s.name in fired}
        at = min(shown.values())
        if at > until:
            return fired
        clock.set(at)
        result = store.tick_schedules(TICKER)
        due = [name for name, boundary in shown.items() if boundary == at]
        assert result == TickResult(fired=len(due), skipped=0), (at, due, result)
        for name in due:
            fired[name].append(at)
