"""Schedule expressions (docs/sources.md): a cron schedule as Knative's PingSource reads it
(robfig/cron: five fields, ``@hourly``-style descriptors, a ``CRON_TZ=``/``TZ=`` prefix), or a
rate (every N seconds, IntegrationSource's timer); each converted to what EventBridge Scheduler
runs (``cron(m h dom mon dow year)`` or ``rate(N unit)``, with an IANA time zone), and the next
time it fires (the local runtime fires them itself). Pure.

What Scheduler cannot express is a problem at parse time, said in words: a day of month and a day
of week both restricted (cron fires when either matches; Scheduler wants one of them ``?``), a
seconds field other than ``0`` (Scheduler fires at minutes), ``@every`` (refused by Knative too),
a rate that is not whole minutes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from chalicelib.core.errors import Problem
from chalicelib.core.names import quote

MAX_SCHEDULE_CHARS = 256  # Scheduler's ScheduleExpression
MAX_TIMEZONE_CHARS = 50  # Scheduler's ScheduleExpressionTimezone
# How far ahead the next fire time is looked for: a leap day on a given weekday recurs within 28
# years; a schedule that fires later than this (or never: 30 February) does not fire locally.
HORIZON_DAYS = 366 * 28
DEFAULT_TIMEZONE = "UTC"

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_PART = re.compile(r"^(?P<range>\*|\?|[A-Za-z0-9]+(?:-[A-Za-z0-9]+)?)(?:/(?P<step>[0-9]{1,4}))?$")


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names of low, low + 1, ...


_FIELDS = (
    _Spec("minute", 0, 59),
    _Spec("hour", 0, 23),
    _Spec("day of month", 1, 31),
    _Spec("month", 1, 12, _MONTHS),
    _Spec("day of week", 0, 6, _DAYS),
)


@dataclass(frozen=True, slots=True)
class CronField:
    values: frozenset[int]
    # robfig's star bit: ``*``, ``?`` or a step of 1 over them. With a star in the day of month
    # or the day of week, a day must match both; with neither, either (classic cron).
    star: bool


@dataclass(frozen=True, slots=True)
class Cron:
    text: str  # the schedule as written, without its time-zone prefix
    fields: tuple[CronField, CronField, CronField, CronField, CronField]
    timezone: str = DEFAULT_TIMEZONE

    def scheduler(self) -> tuple[str, str]:
        """(``cron(...)``, time zone) as EventBridge Scheduler takes them."""
        minute, hour, dom, month, dow = self.fields
        if dow.star:
            days, weekdays = ("*" if dom.star else _render(dom.values, 1, 31)), "?"
        else:  # dom.star: parsing refused both restricted
            days, weekdays = "?", _render(frozenset(d + 1 for d in dow.values), 1, 7)
        parts = (
            _render(minute.values, 0, 59),
            _render(hour.values, 0, 23),
            days,
            _render(month.values, 1, 12),
            weekdays,
            "*",
        )
        return f"cron({' '.join(parts)})", self.timezone

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire time strictly after ``after`` (aware), in UTC; None within the horizon.
        Local times a daylight-saving change skips do not fire; a repeated hour fires once."""
        zone = _zone(self.timezone)
        minute, hour, dom, month, dow = self.fields
        start = after.astimezone(zone)
        day = start.date()
        for _ in range(HORIZON_DAYS):
            if day.month in month.values and _day_matches(day.day, day.isoweekday() % 7, dom, dow):
                for h in sorted(hour.values):
                    for m in sorted(minute.values):
                        local = datetime(day.year, day.month, day.day, h, m, tzinfo=zone)
                        at = local.astimezone(UTC)
                        if at.astimezone(zone).replace(tzinfo=None) != local.replace(tzinfo=None):
                            continue  # skipped by a daylight-saving change
                        if at > after:
                            return at
            day += timedelta(days=1)
        return None


@dataclass(frozen=True, slots=True)
class Rate:
    """Every ``seconds``; the first time one period after the schedule is made."""

    seconds: int

    def scheduler(self, *, seconds: bool = False) -> tuple[str, str]:
        """(``rate(...)``, time zone); ValueError unless whole minutes (Scheduler's unit).
        ``seconds``: any other period is ``rate(N seconds)``, a form Scheduler refuses and only
        the local runtime reads back (``from_scheduler``)."""
        if self.seconds % 60 and seconds:
            unit = "second" if self.seconds == 1 else "seconds"
            return f"rate({self.seconds} {unit})", DEFAULT_TIMEZONE
        if self.seconds % 60:
            raise ValueError(
                f"EventBridge Scheduler runs rates in whole minutes; {self.seconds} s is not one"
            )
        value, unit = self.seconds // 60, "minute"
        for size, name in ((1440, "day"), (60, "hour")):
            if value % size == 0:
                value, unit = value // size, name
                break
        return f"rate({value} {unit}{'' if value == 1 else 's'})", DEFAULT_TIMEZONE

    def next_after(self, after: datetime, anchor: datetime) -> datetime:
        """The first ``anchor + k·period`` (k ≥ 1) strictly after ``after``."""
        period = timedelta(seconds=self.seconds)
        if after < anchor:
            return anchor + period
        k = int((after - anchor) / period) + 1
        return anchor + k * period


Expression = Cron | Rate


def parse_cron(
    schedule: object, timezone_name: object, path: str, tz_path: str
) -> tuple[Cron | None, list[Problem]]:
    """A PingSource's ``schedule`` and ``timezone`` as a Cron (UTC without either), with every
    problem found, each saying why when it is what Scheduler cannot run."""
    problems: list[Problem] = []
    if not isinstance(schedule, str) or not schedule.strip():
        return None, [Problem(path, 'must be a cron schedule such as "*/5 * * * *"')]
    if len(schedule) > MAX_SCHEDULE_CHARS:
        return None, [Problem(path, f"must be at most {MAX_SCHEDULE_CHARS} characters")]
    text, prefix_tz = _split_timezone(schedule.strip())
    zone = None if timezone_name in (None, "") else timezone_name
    if zone is not None and prefix_tz is not None:
        problems.append(
            Problem(path, f"names a time zone ({quote(prefix_tz)}) and so does {tz_path}: set one")
        )
    chosen = zone if zone is not None else prefix_tz
    where = tz_path if zone is not None else path
    problems += timezone_problems(chosen, where)
    fields = _fields(text, path, problems)
    if fields is not None:
        dom, dow = fields[2], fields[4]
        if not dom.star and not dow.star:
            problems.append(
                Problem(
                    path,
                    "restricts both the day of month and the day of week, which cron fires on "
                    "when either matches; EventBridge Scheduler cannot express that: make one "
                    "of them *",
                )
            )
        elif dow.star and not any(
            d <= _MONTH_DAYS[m - 1] for m in fields[3].values for d in dom.values
        ):
            problems.append(Problem(path, "never fires: no month it names has that day"))
    if problems or fields is None:
        return None, problems
    cron = Cron(text, fields, chosen if isinstance(chosen, str) else DEFAULT_TIMEZONE)
    rendered, _ = cron.scheduler()
    if len(rendered) > MAX_SCHEDULE_CHARS:
        too_long = f"is {len(rendered)} characters as Scheduler's cron(...), over its "
        return None, [Problem(path, f"{too_long}{MAX_SCHEDULE_CHARS}: use ranges or steps")]
    return cron, []


def timezone_problems(name: object, path: str) -> list[Problem]:
    """An IANA time zone (``Europe/Paris``) Scheduler takes, or None (UTC)."""
    if name is None:
        return []
    if not isinstance(name, str) or not name or len(name) > MAX_TIMEZONE_CHARS:
        return [Problem(path, f"must be an IANA time zone name of at most {MAX_TIMEZONE_CHARS} "
                              "characters, such as Europe/Paris")]  # fmt: skip
    try:
        _zone(name)
    except (ZoneInfoNotFoundError, ValueError):
        return [Problem(path, f"{quote(name)} is not an IANA time zone (such as Europe/Paris)")]
    return []


def _zone(name: str) -> tzinfo:
    if name == DEFAULT_TIMEZONE:
        return UTC
    if name.startswith("/") or ".." in name or name == "Local":
        raise ValueError(name)
    return ZoneInfo(name)


def _split_timezone(text: str) -> tuple[str, str | None]:
    for prefix in ("CRON_TZ=", "TZ="):
        if text.startswith(prefix):
            zone, _, rest = text[len(prefix) :].partition(" ")
            return rest.strip(), zone
    return text, None


_Fields = tuple[CronField, CronField, CronField, CronField, CronField]


def _fields(text: str, path: str, problems: list[Problem]) -> _Fields | None:
    if text.startswith("@"):
        if text.startswith("@every"):
            problems.append(Problem(path, "@every is not supported (as in Knative): use cron"))
            return None
        expanded = _DESCRIPTORS.get(text.lower())
        if expanded is None:
            names = ", ".join(_DESCRIPTORS)
            problems.append(Problem(path, f"unknown descriptor {quote(text)}; known: {names}"))
            return None
        text = expanded
    parts = text.split()
    if len(parts) == 6:
        if parts[0] != "0":
            problems.append(
                Problem(
                    path,
                    "has a seconds field; EventBridge Scheduler fires at whole minutes, so it "
                    "must be 0 (or use the five fields: minute hour day-of-month month "
                    "day-of-week)",
                )
            )
            return None
        parts = parts[1:]
    if len(parts) != 5:
        problems.append(
            Problem(
                path,
                f"has {len(parts)} fields; expected 5: minute hour day-of-month month day-of-week",
            )
        )
        return None
    found = [_field(p, spec, path, problems) for p, spec in zip(parts, _FIELDS, strict=True)]
    minute, hour, dom, month, dow = found
    if minute is None or hour is None or dom is None or month is None or dow is None:
        return None
    return minute, hour, dom, month, dow


def _field(text: str, spec: _Spec, path: str, problems: list[Problem]) -> CronField | None:
    values: set[int] = set()
    star = False
    for part in text.split(","):
        match = _PART.match(part)
        if match is None:
            problems.append(Problem(path, f"{spec.name}: {quote(part)} is not a value, a range "
                                          "or a step (L, W and # are not cron's)"))  # fmt: skip
            return None
        span, step_text = match["range"], match["step"]
        step = 1 if step_text is None else int(step_text)
        if step == 0:
            problems.append(Problem(path, f"{spec.name}: a step must be positive"))
            return None
        if span in ("*", "?"):
            low, high = spec.low, spec.high
            star = star or step == 1
        else:
            bounds = [_value(v, spec, path, problems) for v in span.split("-")]
            if any(b is None for b in bounds):
                return None
            low = bounds[0] or 0
            high = (bounds[1] or 0) if len(bounds) == 2 else (spec.high if step_text else low)
            if low > high:
                problems.append(Problem(path, f"{spec.name}: {quote(span)} runs backwards"))
                return None
        values.update(range(low, high + 1, step))
    return CronField(frozenset(values), star)


def _value(text: str, spec: _Spec, path: str, problems: list[Problem]) -> int | None:
    if text.isdigit() and len(text) <= 2:
        value = int(text)
    elif text.lower() in spec.names:
        value = spec.low + spec.names.index(text.lower())
    else:
        problems.append(Problem(path, f"{spec.name}: {quote(text)} is not a number or a name"))
        return None
    if not spec.low <= value <= spec.high:
        problems.append(Problem(path, f"{spec.name}: {value} is outside {spec.low}-{spec.high}"))
        return None
    return value


def _day_matches(day: int, weekday: int, dom: CronField, dow: CronField) -> bool:
    on_day, on_weekday = day in dom.values, weekday in dow.values
    if dom.star or dow.star:
        return on_day and on_weekday
    return on_day or on_weekday


def _render(values: Iterable[int], low: int, high: int) -> str:
    """Scheduler's text for a set of values: ``*``, ``start/step`` for a progression to the top,
    else ranges and single values joined by commas."""
    ordered = sorted(values)
    if ordered == list(range(low, high + 1)):
        return "*"
    if len(ordered) > 2:
        step = ordered[1] - ordered[0]
        progression = list(range(ordered[0], high + 1, step))
        if step > 1 and ordered == progression:
            return f"{ordered[0]}/{step}"
    runs: list[str] = []
    start = prev = ordered[0]
    for v in [*ordered[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(runs)


_RATE = re.compile(r"^rate\((?P<value>[0-9]{1,8}) (?P<unit>seconds?|minutes?|hours?|days?)\)$")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def from_scheduler(expression: str, timezone: str) -> Expression:
    """A deployed schedule's expression read back, to fire it where no Scheduler runs (the local
    runtime); ValueError for a form this module never writes."""
    rate = _RATE.match(expression)
    if rate is not None:
        return Rate(int(rate["value"]) * _UNIT_SECONDS[rate["unit"].rstrip("s")])
    if not (expression.startswith("cron(") and expression.endswith(")")):
        raise ValueError(f"not a cron(...) or rate(...) expression: {expression[:80]!r}")
    parts = expression[5:-1].split()
    if len(parts) != 6 or parts[5] != "*":
        raise ValueError(f"not a cron(...) this broker writes: {expression[:80]!r}")
    minute, hour, dom, month, dow = parts[:5]
    if dow != "?":  # Scheduler counts 1 (Sunday) to 7; cron 0 to 6
        problems: list[Problem] = []
        days = _field(dow, _Spec("day of week", 1, 7), "schedule", problems)
        if days is None:
            raise ValueError(problems[0].message)
        dow = _render(frozenset(d - 1 for d in days.values), 0, 6)
    text = " ".join((minute, hour, "*" if dom == "?" else dom, month, "*" if dow == "?" else dow))
    cron, problems = parse_cron(text, timezone, "schedule", "timezone")
    if cron is None:
        raise ValueError("; ".join(p.message for p in problems))
    return cron
