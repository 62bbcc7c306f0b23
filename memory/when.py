"""Time expressions of memory search (`since`, `until`, `when`), resolved against a reference time.

An expression names a span of UTC time, [start, end):
- an ISO-8601 date (`2023-05-08`: that day) or time (`2023-05-08T13:56:00Z`: that instant);
- `today`, `yesterday`; `this week|month|year`, `last week|month|year` (weeks start on Monday);
- `N days|weeks|months|years ago` (that day, week, month or year), `last|past N days|weeks|months|years`
  (the N before the reference, up to it);
- a year (`2023`, `in 2023`), a month (`May 2023`, `in May 2023`; `May` alone is the latest May that
  began by the reference), a day (`8 May 2023`, `May 8, 2023`, `on 8 May 2023`).
Anything else is a 400 naming these forms. `since` takes the start of its span, `until` the end
(exclusive), `when` the whole span.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from core.errors import InvalidInput
from memory.text import MONTHS

Span = tuple[datetime, datetime]

# month names (memory.text's, as a message's line writes them) and their abbreviations → 1..12
_MONTHS = (
    {name.lower(): i + 1 for i, name in enumerate(MONTHS)}
    | {name.lower()[:3]: i + 1 for i, name in enumerate(MONTHS) if name != "May"}
    | {"sept": 9}
)
_UNITS = ("day", "week", "month", "year")
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
FORMS = (
    "an ISO-8601 date or time, today, yesterday, this/last week|month|year, N days|weeks|months|years "
    "ago, last N days|weeks|months|years, a year (2023), a month (May 2023), a day (8 May 2023)"
)


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _add_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    return moment.replace(year=index // 12, month=index % 12 + 1, day=1)


def _unit_span(unit: str, moment: datetime) -> Span:
    """The day, week, month or year holding `moment`."""
    day = _day(moment)
    if unit == "day":
        return day, day + timedelta(days=1)
    if unit == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if unit == "month":
        start = day.replace(day=1)
        return start, _add_months(start, 1)
    start = day.replace(month=1, day=1)
    return start, start.replace(year=start.year + 1)


def _back(unit: str, moment: datetime, n: int) -> datetime:
    if unit in ("day", "week"):
        return moment - timedelta(days=n * (7 if unit == "week" else 1))
    return _add_months(moment, -n * (12 if unit == "year" else 1)).replace(day=min(moment.day, 28))


def _iso(text: str) -> Span | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return _unit_span("day", moment)
    return moment, moment


def _relative(text: str, ref: datetime) -> Span | None:
    if text in ("today", "yesterday"):
        return _unit_span("day", ref - timedelta(days=text == "yesterday"))
    match = re.fullmatch(r"(this|last) (day|week|month|year)", text)
    if match:
        unit = match.group(2)
        return _unit_span(unit, ref if match.group(1) == "this" else _back(unit, ref, 1))
    match = re.fullmatch(r"(\d{1,4}) (day|week|month|year)s? ago", text)
    if match:
        unit = match.group(2)
        return _unit_span(unit, _back(unit, ref, int(match.group(1))))
    match = re.fullmatch(r"(?:last|past) (\d{1,4}) (day|week|month|year)s?", text)
    if match:
        return _back(match.group(2), ref, int(match.group(1))), ref
    return None


def _calendar(text: str, ref: datetime) -> Span | None:
    text = re.sub(r"^(in|on|during) ", "", text)
    if re.fullmatch(r"\d{4}", text):
        return _unit_span("year", datetime(int(text), 1, 1, tzinfo=UTC))
    match = re.fullmatch(_MONTH + r"(?: (\d{4}))?", text)
    if match:
        month = _MONTHS[match.group(1)]
        year = int(match.group(2)) if match.group(2) else ref.year - (month > ref.month)
        return _unit_span("month", datetime(year, month, 1, tzinfo=UTC))
    match = re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)? " + _MONTH + r",? (\d{4})", text) or re.fullmatch(
        _MONTH + r" (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})", text
    )
    if match:
        first, second, in_year = match.groups()
        number, name = (first, second) if first.isdigit() else (second, first)
        try:
            return _unit_span("day", datetime(int(in_year), _MONTHS[name], int(number), tzinfo=UTC))
        except ValueError:
            return None
    return None


def resolve(expression: str, *, reference: datetime, field: str) -> Span:
    """The span `expression` names (see the module's docstring); 400 naming `field` otherwise."""
    text = re.sub(r"\s+", " ", expression.strip().lower())
    try:
        span = _iso(expression.strip()) or _relative(text, reference) or _calendar(text, reference)
    except (ValueError, OverflowError):
        span = None
    if span is None:
        raise InvalidInput(
            f"{field} {expression[:60]!r} is not a time this API reads: {FORMS}",
            details={"field": field},
        )
    return span
