"""The cron grammar of contract §5.2: five fields, checked field by field.

The contract checks every spec itself before any library sees it, so each spec
it accepts is one the kit's oracle reads the same way, and each refusal names
the field at fault. What it accepts is the standard (Vixie) five fields:

    minute hour day-of-month month day-of-week

each a comma list of ``*``, ``*/n``, ``a``, ``a-b`` or ``a-b/n``; month and
day-of-week also take names (``JAN``..``DEC``, ``SUN``..``SAT``, any case), and
day-of-week 7 is Sunday, like 0. The nicknames stand for five fields each.
Nothing else: no seconds field, and none of the extensions other crons add
(``L``, ``W``, ``#``, ``?``, ``H``, ``a/n``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from .errors import InvalidSpec

NICKNAMES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
"""Each nickname and the five fields it stands for."""

MAX_SPEC_LENGTH = 1024
"""The longest spec, in characters (every field listed value by value fits)."""

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February at its longest


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    """Names of the values ``low``, ``low + 1``, ... (month and day-of-week only)."""


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day-of-week", 0, 7, _WEEKDAYS),
)

_ITEM = re.compile(r"(?P<start>[0-9A-Za-z]+)(?:-(?P<end>[0-9A-Za-z]+)(?:/(?P<step>[0-9]+))?)?")
_STAR = re.compile(r"\*(?:/(?P<step>[0-9]+))?")
_SEPARATOR = re.compile(r"[ \t]+")

_Refusal = Callable[[str], InvalidSpec]
"""Builds the ``InvalidSpec`` of one field from what is wrong with it."""


@dataclass(frozen=True, slots=True)
class CronFields:
    """A cron spec read field by field: the values each field allows.

    Attributes:
        minutes, hours, days, months: the values of those fields.
        weekdays: the days of the week, 0 (Sunday) to 6 (7 is read as 0).
        days_either: day-of-month and day-of-week are both restricted (neither
            starts with ``*``), so a day matching either fires; otherwise a day
            must match both (Vixie cron's rule).
        wall_clock: minute and hour are both fixed (neither starts with ``*``):
            the spec follows the wall clock across DST (§5.8); otherwise it runs on
            elapsed time.
        expression: the five fields as the cadence hands them to ``cronsim``: each
            value listed, but a field that starts with ``*`` keeps that start, since
            both rules above (and cronsim's) read it.
    """

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_either: bool
    wall_clock: bool
    expression: str

    def day_matches(self, day: date) -> bool:
        """Whether ``day`` (a local date) is one the spec fires on."""
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        return (in_month or in_week) if self.days_either else (in_month and in_week)

    @property
    def times_per_day(self) -> int:
        """How many (hour, minute) pairs a matching day has."""
        return len(self.hours) * len(self.minutes)


def parse_cron(spec: str) -> CronFields:
    """``spec`` (five fields, or a nickname) read field by field.

    Raises:
        InvalidSpec: ``spec`` is not in the grammar; the reason names the field at
            fault, and a six-field spec is told to use ``@every <n>s``.
    """
    if len(spec) > MAX_SPEC_LENGTH:
        raise InvalidSpec(spec, f"a spec is at most {MAX_SPEC_LENGTH} characters")
    if spec.startswith("@"):
        if spec not in NICKNAMES:
            raise InvalidSpec(spec, f"no such nickname; the nicknames are {', '.join(NICKNAMES)}")
        spec_fields = NICKNAMES[spec].split(" ")
    else:
        if spec != spec.strip(" \t") or not spec:
            raise InvalidSpec(spec, "nothing may stand before the first field or after the last")
        spec_fields = _SEPARATOR.split(spec)
    if len(spec_fields) == 6:
        raise InvalidSpec(
            spec,
            "cron specs have no seconds field (a cron's unit is the minute); for a "
            "cadence under a minute use '@every <n>s'",
        )
    if len(spec_fields) != 5:
        raise InvalidSpec(spec, f"a cron spec has five fields, this one has {len(spec_fields)}")
    values = [
        _field_values(spec, field, text) for field, text in zip(_FIELDS, spec_fields, strict=True)
    ]
    minutes, hours, days, months, weekdays = values
    starred = [text.startswith("*") for text in spec_fields]
    days_either = not starred[2] and not starred[4]
    if not days_either and min(days) > max(_DAYS_IN_MONTH[m - 1] for m in months):
        raise InvalidSpec(
            spec, "day-of-month field: no month of the month field has any of its days"
        )
    return CronFields(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(day % 7 for day in weekdays),
        days_either=days_either,
        wall_clock=not starred[0] and not starred[1],
        expression=" ".join(
            _canonical(text, field_values, field)
            for field, text, field_values in zip(_FIELDS, spec_fields, values, strict=True)
        ),
    )


def _field_values(spec: str, field: _Field, text: str) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        values.update(_item_values(spec, field, text, item))
    return frozenset(values)


def _item_values(spec: str, field: _Field, text: str, item: str) -> range:
    def refuse(why: str) -> InvalidSpec:
        return InvalidSpec(spec, f"{field.name} field {text!r}: {why}")

    if not item:
        raise refuse("an empty list item")
    star = _STAR.fullmatch(item)
    if star is not None:
        return range(field.low, field.high + 1, _step(star.group("step"), refuse))
    match = _ITEM.fullmatch(item)
    if match is None:
        if "/" in item and "-" not in item:
            raise refuse(f"{item!r}: a step follows '*' or a range a-b, as '*/n' or 'a-b/n'")
        raise refuse(f"{item!r} is not a value, a range or a step of the standard grammar")
    start = _value(match.group("start"), field, refuse)
    if match.group("end") is None:
        return range(start, start + 1)
    end = _value(match.group("end"), field, refuse)
    if end < start:
        raise refuse(f"the range {item!r} runs backwards")
    return range(start, end + 1, _step(match.group("step"), refuse))


def _value(token: str, field: _Field, refuse: _Refusal) -> int:
    if token.isdigit():
        value = int(token)
        if not field.low <= value <= field.high:
            raise refuse(f"{value} is outside {field.low}-{field.high}")
        return value
    upper = token.upper()
    if upper in field.names:
        return field.low + field.names.index(upper)
    if field.names:
        raise refuse(f"{token!r} is neither a number nor one of {', '.join(field.names)}")
    raise refuse(f"{token!r} is not a number (the {field.name} field takes no names)")


def _step(token: str | None, refuse: _Refusal) -> int:
    if token is None:
        return 1
    step = int(token)
    if step == 0:
        raise refuse("a step is at least 1")
    return step


def _canonical(text: str, values: frozenset[int], field: _Field) -> str:
    """The field as cronsim reads it: its values as plain runs ``a-b`` (a form every
    cron reads alike), except that a field starting with ``*`` keeps its first item
    (``*`` or ``*/n``) in front, since whether it starts with ``*`` decides rules."""
    if field.name == "day-of-week":
        values = frozenset(v % 7 for v in values)
    prefix: list[str] = []
    if text.startswith("*"):
        first = text.split(",", 1)[0]
        prefix = [first]
        values = values - set(_item_values(text, field, text, first))
    listed = sorted(values)
    runs: list[str] = []
    i = 0
    while i < len(listed):
        j = i
        while j + 1 < len(listed) and listed[j + 1] == listed[j] + 1:
            j += 1
        runs.append(str(listed[i]) if i == j else f"{listed[i]}-{listed[j]}")
        i = j + 1
    return ",".join(prefix + runs)
