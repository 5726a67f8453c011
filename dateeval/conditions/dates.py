"""Date specifications: ranges, steps and explicit lists.

The paper sweeps every day of 2024 (§3); users with a small budget sweep a
range with a step or a hand-picked list. Everything here is pure and
validated, so a malformed ``--dates`` fails before any model is loaded.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from dateeval.errors import DateEvalError

DEFAULT_DATES = "2024-01-01..2024-12-31"
# Every date is a work unit per model and dataset, each checked and rendered before the sweep starts:
# 10,000 (27 years of days) keeps that check to seconds; larger sweeps are split into several runs.
MAX_DATES = 10_000
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


def _step(step_text: str, text: str) -> tuple[int, str]:
    """The step of a range: (count, unit) with unit d, w or m."""
    match = _STEP.match(step_text.strip() or "1d")
    if not match or int(match.group(1)) == 0:
        raise DateEvalError(f"malformed step {step_text!r} in {text!r}: use e.g. /7, /7d, /2w or /1m")
    return int(match.group(1)), match.group(2) or "d"


@dataclass(frozen=True)
class _Range:
    """``START..END/STEP``, counted before it is expanded (a range may hold millions of dates)."""

    start: dt.date
    end: dt.date
    count: int
    unit: str

    def nth(self, index: int) -> dt.date:
        if self.unit == "m":
            return _add_months(self.start, self.count * index)
        return self.start + dt.timedelta(days=self.count * index * (7 if self.unit == "w" else 1))

    def __len__(self) -> int:
        """How many dates the range holds; computed, so that ranges ending near 9999-12-31 never step past it."""
        if self.unit == "m":
            months = (self.end.year - self.start.year) * 12 + self.end.month - self.start.month
            last = months // self.count
            return last + (self.nth(last) <= self.end)
        return (self.end - self.start).days // (self.count * (7 if self.unit == "w" else 1)) + 1

    def dates(self) -> list[dt.date]:
        return [self.nth(index) for index in range(len(self))]


def _parse_range(text: str) -> _Range:
    """``START..END`` or ``START..END/STEP`` where STEP is N, Nd, Nw or Nm."""
    span, _, step_text = text.partition("/")
    start_text, _, end_text = span.partition("..")
    start, end = parse_date(start_text), parse_date(end_text)
    if end < start:
        raise DateEvalError(f"reversed date range {text!r}: the end {end} is before the start {start}")
    return _Range(start, end, *_step(step_text, text))


def parse_dates(spec: str | None) -> list[dt.date]:
    """Expand a date spec into a sorted list of distinct dates.

    Accepts comma-separated parts, each a single date or a range
    (``2024-01-01..2024-12-31``, optionally ``/7d``). ``None`` means the
    paper's default: every day of 2024 (366 dates). More than
    ``MAX_DATES`` dates is refused before any is expanded.
    """
    text = DEFAULT_DATES if spec is None else spec
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise DateEvalError("empty date specification: give e.g. 2024-01-01..2024-12-31 or 2024-03-14,2024-07-26")
    ranges = [
        _parse_range(part) if ".." in part else _Range(parse_date(part), parse_date(part), 1, "d") for part in parts
    ]
    total = sum(len(span) for span in ranges)
    if total > MAX_DATES:
        raise DateEvalError(
            f"--dates asks for {total:,} dates; at most {MAX_DATES:,} per sweep: use a step (e.g. /7d) or split the sweep"
        )
    return sorted({day for span in ranges for day in span.dates()})
