"""The kit's cron oracle: contract §5.2 and §5.8 read literally, by brute force.

Written from the contract's words alone (no cron library, nothing of the
contract's own cadence), so a property that compares an engine's boundaries
with it compares them with the rule, not with the implementation:

* a spec is read field by field into the set of values each field allows;
* a *wall-clock* spec (minute and hour fields both fixed) walks the local naive
  minutes of every day the spec fires on; each one that matches is a boundary at
  its instant -- a local time that occurs twice at its first occurrence, one that
  does not exist at the first instant after the gap (several in one gap are one);
* an *elapsed-time* spec (a wildcard minute or hour) walks UTC minutes and fires
  at every one whose local time matches -- twice through a repeated hour, never
  for a local time that does not exist.

Slow on purpose: it is an oracle, not a scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

NICKNAMES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
WEEKDAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (low, high, names) of minute, hour, day-of-month, month, day-of-week.
FIELD_RANGES = (
    (0, 59, ()),
    (0, 23, ()),
    (1, 31, ()),
    (1, 12, MONTH_NAMES),
    (0, 7, WEEKDAY_NAMES),
)
MINUTE = timedelta(minutes=1)
SEARCH_DAYS = 366 * 30
"""How far the oracle looks for a next fire (every accepted spec fires within that)."""


@dataclass(frozen=True)
class OracleSpec:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday .. 6
    either_day: bool
    wall_clock: bool

    def fires_on(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_month_day = day.day in self.days
        by_weekday = (day.weekday() + 1) % 7 in self.weekdays
        if self.either_day:
            return by_month_day or by_weekday
        return by_month_day and by_weekday

    def names(self, local: datetime) -> bool:
        return (
            local.minute in self.minutes
            and local.hour in self.hours
            and self.fires_on(local.date())
        )


def read_spec(spec: str) -> OracleSpec:
    """A spec the contract accepts, as the sets its fields allow."""
    texts = NICKNAMES.get(spec, spec).split()
    assert len(texts) == 5, spec
    sets = [_read_field(text, *FIELD_RANGES[i]) for i, text in enumerate(texts)]
    star = [text[0] == "*" for text in texts]
    return OracleSpec(
        minutes=sets[0],
        hours=sets[1],
        days=sets[2],
        months=sets[3],
        weekdays=frozenset(v % 7 for v in sets[4]),
        either_day=not star[2] and not star[4],
        wall_clock=not star[0] and not star[1],
    )


def _read_field(text: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    def number(token: str) -> int:
        if token.upper() in names:
            return low + names.index(token.upper())
        return int(token)

    values: set[int] = set()
    for item in text.split(","):
        body, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            first, last = low, high
        elif "-" in body:
            a, b = body.split("-")
            first, last = number(a), number(b)
        else:
            first = last = number(body)
        values.update(v for v in range(first, last + 1) if (v - first) % step == 0)
    return frozenset(values)


def zone_of(name: str) -> tzinfo:
    return UTC if name == "UTC" else ZoneInfo(name)


def exists(local: datetime, zone: tzinfo) -> bool:
    """Whether the naive local time ``local`` is shown by the zone's clocks at all."""
    aware = local.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == local


def wall_clock_instant(local: datetime, zone: tzinfo) -> int:
    """§5.8: a local time's instant -- its first occurrence, or for one that does not
    exist the first instant after the gap (the first local minute that exists)."""
    while not exists(local, zone):
        local += MINUTE
    return int(local.replace(tzinfo=zone, fold=0).timestamp())


def next_fire(spec: str, timezone: str, after: int) -> int:
    """The first boundary of ``spec`` in ``timezone`` strictly after ``after``."""
    read = read_spec(spec)
    zone = zone_of(timezone)
    if read.wall_clock:
        return _next_wall_clock(read, zone, after)
    return _next_elapsed(read, zone, after)


def _next_wall_clock(spec: OracleSpec, zone: tzinfo, after: int) -> int:
    """Walk local naive minutes: in naive order the instants never go back (a repeated
    hour maps to its first pass, a gap to its end), so the first match whose instant is
    past ``after`` is the answer. Start early enough that nothing is missed."""
    local = datetime.fromtimestamp(after, zone).replace(tzinfo=None, second=0) - timedelta(hours=3)
    end = local + timedelta(days=SEARCH_DAYS)
    while local < end:
        if not spec.fires_on(local.date()):
            local = datetime(local.year, local.month, local.day) + timedelta(days=1)
        elif local.hour not in spec.hours:
            local = local.replace(minute=0) + timedelta(hours=1)
        elif local.minute in spec.minutes and wall_clock_instant(local, zone) > after:
            return wall_clock_instant(local, zone)
        else:
            local += MINUTE
    raise AssertionError(f"no boundary within {SEARCH_DAYS} days after {after}")


def _next_elapsed(spec: OracleSpec, zone: tzinfo, after: int) -> int:
    """Walk UTC minutes and take the first whose local time the spec names. A day the
    spec does not fire on is jumped over, but never by more than its local rest less
    three hours, which no DST shift exceeds, so no minute of the next day is passed."""
    instant = (after // 60 + 1) * 60
    end = instant + SEARCH_DAYS * 86_400
    while instant < end:
        local = datetime.fromtimestamp(instant, zone)
        if spec.names(local):
            return instant
        rest = 86_400 - (local.hour * 3600 + local.minute * 60)
        skip = rest - 3 * 3600 if not spec.fires_on(local.date()) else 0
        instant += max(60, skip - skip % 60)
    raise AssertionError(f"no boundary within {SEARCH_DAYS} days after {after}")


def boundaries(spec: str, timezone: str, after: int, until: int) -> list[int]:
    """Every boundary in ``(after, until]``, in order."""
    found = []
    at = next_fire(spec, timezone, after)
    while at <= until:
        found.append(at)
        at = next_fire(spec, timezone, at)
    return found


def transitions(timezone: str, first_year: int, last_year: int) -> list[int]:
    """Every instant in those years at which the zone's UTC offset changes."""
    zone = zone_of(timezone)
    start = int(datetime(first_year, 1, 1, tzinfo=UTC).timestamp())
    end = int(datetime(last_year + 1, 1, 1, tzinfo=UTC).timestamp())
    found = []

    def offset(instant: int) -> timedelta | None:
        return datetime.fromtimestamp(instant, zone).utcoffset()

    step = 6 * 3600
    for instant in range(start, end, step):
        if offset(instant) != offset(instant + step):
            low, high = instant, instant + step  # offset(low) != offset(high)
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if offset(middle) == offset(low) else (low, middle)
            found.append(high)
    return found
