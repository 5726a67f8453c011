"""Date specifications: ranges, steps and explicit lists.

The paper sweeps every day of 2024 (§3); users with a small budget sweep a
range with a step or a hand-picked list. Everything here is pure and
validated, so a malformed ``--dates`` fails before any model is loaded.
"""

from __future__ import annotations

import datetime as dt
import re

from dateeval.errors import DateEvalError

DEFAULT_DATES = "2024-01-01..2024-12-31"
_STEP = re.compile(r"^(\d+)([dwm]?)$")


def parse_date(text: str) -> dt.date:
    """Parse one ISO date (YYYY-MM-DD), with a message that names the bad text."""
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise DateEvalError(f"malformed date {text.strip()!r}: use YYYY-MM-DD, e.g. 2024-03-14") from None


def _add_months(day: dt.date, months: int) -> dt.date:
    """Add calendar months, clamping the day (31 Jan + 1 month = 29 Feb 2024)."""
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    for candidate_day in range(day.day, 27, -1):
        try:
            return dt.date(year, month, candidate_day)
        except ValueError:
            continue
    return dt.date(year, month, min(day.day, 28))


def _parse_range(text: str) -> list[dt.date]:
    """``START..END`` or ``START..END/STEP`` where STEP is N, Nd, Nw or Nm."""
    span, _, step_text = text.partition("/")
    start_text, _, end_text = span.partition("..")
    start, end = parse_date(start_text), parse_date(end_text)
    if end < start:
        raise DateEvalError(f"reversed date range {text!r}: the end {end} is before the start {start}")
    match = _STEP.match(step_text.strip() or "1d")
    if not match or int(match.group(1)) == 0:
        raise DateEvalError(f"malformed step {step_text!r} in {text!r}: use e.g. /7, /7d, /2w or /1m")
    count, unit = int(match.group(1)), match.group(2) or "d"
    days: list[dt.date] = []
    index = 0
    while True:
        if unit == "m":
            day = _add_months(start, count * index)
        else:
            day = start + dt.timedelta(days=count * index * (7 if unit == "w" else 1))
        if day > end:
            return days
        days.append(day)
        index += 1


def parse_dates(spec: str | None) -> list[dt.date]:
    """Expand a date spec into a sorted list of distinct dates.

    Accepts comma-separated parts, each a single date or a range
    (``2024-01-01..2024-12-31``, optionally ``/7d``). ``None`` means the
    paper's default: every day of 2024 (366 dates).
    """
    text = DEFAULT_DATES if spec is None else spec
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise DateEvalError("empty date specification: give e.g. 2024-01-01..2024-12-31 or 2024-03-14,2024-07-26")
    days: set[dt.date] = set()
    for part in parts:
        days.update(_parse_range(part) if ".." in part else [parse_date(part)])
    return sorted(days)
