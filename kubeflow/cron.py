"""KFP's cron, as its API server parses it and its ScheduledWorkflow controller runs it.

A port of robfig/cron v1.2.0 (the version KFP 2.15.0 to 2.17.0 pin in go.mod):
`cron.Parse` (parser.go), the bounds and `SpecSchedule.Next` (spec.go) and
`Every` (constantdelay.go). The API server refuses a recurring run whose cron
`cron.Parse` refuses (backend/src/apiserver/server/api_converter.go 2.16.1
L1973-1978), and the controller takes its next run from `schedule.Next`
(backend/src/crd/controller/scheduledworkflow/util/cron_schedule.go 2.16.1
L105-140). So the settings are checked before any call with the same grammar,
and a release computes the ticks the controller will fire.

The grammar (parser.go L154-166, `defaultParser`): six fields from the seconds,
the day of week optional (five fields are seconds to month, *not* the Unix
minute-first cron), or a descriptor: @yearly, @annually, @monthly, @weekly,
@daily, @midnight, @hourly, @every DURATION.

Port register: docs/ports.md
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo

# spec.go L17-46: each field's bounds and names.
_MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec"
_MONTH_NAMES = {n: i + 1 for i, n in enumerate(_MONTHS.split())}
_DOW_NAMES = {n: i for i, n in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# (name, min, max, names) in the order the fields are written (parser.go L29-36).
_FIELDS = (
    ("second", 0, 59, None),
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTH_NAMES),
    ("day of week", 0, 6, _DOW_NAMES),
)
# A field given as * or ? (spec.go L48-51, starBit): it changes how the two day
# fields combine (spec.go L145-157, dayMatches).
_STAR = 1 << 63
# Go's time.ParseDuration units, in seconds (@every).
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class CronError(ValueError):
    """robfig/cron's refusal, in its own words (the server answers with them)."""


@dataclass(frozen=True)
class Cron:
    """A parsed cron: a field bit set each (spec.go L6-9), or a constant delay."""

    text: str
    second: int = 0
    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    # @every: seconds between runs (constantdelay.go), else None.
    every: int | None = None

    def next(self, after: datetime) -> datetime | None:
        """The first activation strictly after `after` (a time zone-aware datetime, in
        the zone the controller runs in), or None where none comes within five years:
        spec.go L53-143 (`SpecSchedule.Next`) and constantdelay.go L25-28."""
        if self.every is not None:
            return after.replace(microsecond=0) + timedelta(seconds=self.every)
        # "Start at the earliest possible time (the upcoming second)."
        t = after.replace(microsecond=0) + timedelta(seconds=1)
        added = False
        year_limit = t.year + 5
        while True:  # The WRAP label.
            if t.year > year_limit:
                return None
            wrapped = False
            while not (1 << t.month) & self.month:
                if not added:
                    added = True
                    t = t.replace(day=1, hour=0, minute=0, second=0)
                t = _add_month(t)
                if t.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self._day_matches(t):
                if not added:
                    added = True
                    t = t.replace(hour=0, minute=0, second=0)
                t = _add_days(t, 1)
                if t.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not (1 << t.hour) & self.hour:
                if not added:
                    added = True
                    t = t.replace(minute=0, second=0)
                t = _add_seconds(t, 3600)
                if t.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not (1 << t.minute) & self.minute:
                if not added:
                    added = True
                    t = t.replace(second=0)
                t = _add_seconds(t, 60)
                if t.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not (1 << t.second) & self.second:
                if not added:
                    added = True
                t = _add_seconds(t, 1)
                if t.second == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            return t

    def _day_matches(self, t: datetime) -> bool:
        # spec.go L145-157: with either day field a star, both must match; else either.
        dom_match = bool((1 << t.day) & self.dom)
        dow_match = bool((1 << ((t.weekday() + 1) % 7)) & self.dow)
        if self.dom & _STAR or self.dow & _STAR:
            return dom_match and dow_match
        return dom_match or dow_match


def _add_month(t: datetime) -> datetime:
    # Go's AddDate(0, 1, 0) on the first of a month at midnight: the next month's first.
    year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
    return t.replace(year=year, month=month)


def _add_days(t: datetime, days: int) -> datetime:
    # Go's AddDate adds calendar days in the location, keeping the wall clock.
    naive = t.replace(tzinfo=None) + timedelta(days=days)
    return _localize(naive, t.tzinfo)


def _add_seconds(t: datetime, seconds: int) -> datetime:
    # Go's Time.Add adds absolute time; the result is shown in the same location.
    return (t.astimezone(timezone.utc) + timedelta(seconds=seconds)).astimezone(t.tzinfo)


def _localize(naive: datetime, zone: tzinfo | None) -> datetime:
    return naive.replace(tzinfo=zone).astimezone(timezone.utc).astimezone(zone)


def parse(text: str) -> Cron:
    """`text` as robfig/cron v1.2.0's `cron.Parse` reads it (parser.go L78-140, L170-172),
    or CronError with its message."""
    if len(text) == 0:
        raise CronError("Empty spec string")
    if text[0] == "@":
        return _descriptor(text)
    fields = text.split()
    # Second | Minute | Hour | Dom | Month | DowOptional: 5 to 6 fields (L86-104).
    if not 5 <= len(fields) <= 6:
        raise CronError(f"Expected 5 to 6 fields, found {len(fields)}: {text}")
    fields = fields + ["*"] * (6 - len(fields))  # expandFields (L120-135): dow defaults to *.
    bits = [_field(value, *bounds[1:]) for value, bounds in zip(fields, _FIELDS, strict=True)]
    return Cron(text, *bits)


def _field(value: str, low: int, high: int, names: dict[str, int] | None) -> int:
    # getField (L176-190): a comma-separated list of ranges; Go's FieldsFunc drops empties.
    bits = 0
    for expr in (part for part in value.split(",") if part):
        bits |= _range(expr, low, high, names)
    return bits


def _range(expr: str, low: int, high: int, names: dict[str, int] | None) -> int:
    """getRange (parser.go L192-256)."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    single = len(low_and_high) == 1
    extra = 0
    if low_and_high[0] in ("*", "?"):
        start, end, extra = low, high, _STAR
    else:
        start = _int_or_name(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _int_or_name(low_and_high[1], names)
        else:
            raise CronError(f"Too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if single:  # "N/step" means "N-max/step".
            end = high
    else:
        raise CronError(f"Too many slashes: {expr}")
    if start < low:
        raise CronError(f"Beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise CronError(f"End of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise CronError(f"Beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"Step of range should be a positive number: {expr}")
    bits = 0
    for i in range(start, end + 1, step):
        bits |= 1 << i
    return bits | extra


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _int(expr)


def _int(expr: str) -> int:
    # mustParseInt (L268-279) on Go's strconv.Atoi: an optional sign, then decimal digits.
    if not re.fullmatch(r"[+-]?\d+", expr):
        raise CronError(
            f'Failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax'
        )
    number = int(expr)
    if number < 0:
        raise CronError(f"Negative number ({number}) not allowed: {expr}")
    return number


def _descriptor(text: str) -> Cron:
    """parseDescriptor (parser.go L296-371)."""
    every_day = dict(dom=_all(1, 31), month=_all(1, 12), dow=_all(0, 6))
    fixed = {
        "@yearly": dict(dom=1 << 1, month=1 << 1, dow=_all(0, 6)),
        "@annually": dict(dom=1 << 1, month=1 << 1, dow=_all(0, 6)),
        "@monthly": dict(dom=1 << 1, month=_all(1, 12), dow=_all(0, 6)),
        "@weekly": dict(dom=_all(1, 31), month=_all(1, 12), dow=1 << 0),
        "@daily": every_day,
        "@midnight": every_day,
    }
    if text in fixed:
        return Cron(text, second=1, minute=1, hour=1, **fixed[text])
    if text == "@hourly":
        return Cron(text, second=1, minute=1, hour=_all(0, 23), **every_day)
    prefix = "@every "
    if text.startswith(prefix):
        seconds = _go_duration(text[len(prefix) :])
        if seconds is None:
            raise CronError(f"Failed to parse duration {text}: time: invalid duration")
        # constantdelay.go L14-21: under a second is a second; sub-second parts are dropped.
        return Cron(text, every=max(1, int(seconds)))
    raise CronError(f"Unrecognized descriptor: {text}")


def _all(low: int, high: int) -> int:
    bits = 0
    for i in range(low, high + 1):
        bits |= 1 << i
    return bits | _STAR


def _go_duration(text: str) -> float | None:
    """Go's time.ParseDuration: a signed sequence of decimal numbers with units."""
    sign = 1.0
    if text[:1] in "+-" and text:
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    if text == "0":
        return 0.0
    if not text:
        return None
    total, position = 0.0, 0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text):
        return None
    return sign * total
