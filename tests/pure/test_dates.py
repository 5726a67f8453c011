import datetime as dt

import pytest

from dateeval.conditions.dates import parse_dates
from dateeval.errors import DateEvalError


def test_default_is_every_day_of_2024():
    days = parse_dates(None)
    assert len(days) == 366 and days[0] == dt.date(2024, 1, 1) and days[-1] == dt.date(2024, 12, 31)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("2024-01-01..2024-01-03", ["2024-01-01", "2024-01-02", "2024-01-03"]),
        ("2024-01-01..2024-01-15/7", ["2024-01-01", "2024-01-08", "2024-01-15"]),
        ("2024-01-01..2024-01-15/1w", ["2024-01-01", "2024-01-08", "2024-01-15"]),
        ("2024-01-31..2024-04-30/1m", ["2024-01-31", "2024-02-29", "2024-03-31", "2024-04-30"]),
        ("2024-03-14, 2024-01-01,2024-03-14", ["2024-01-01", "2024-03-14"]),
        ("2024-02-28..2024-03-01,2024-12-25", ["2024-02-28", "2024-02-29", "2024-03-01", "2024-12-25"]),
    ],
)
def test_parse(spec, expected):
    assert [d.isoformat() for d in parse_dates(spec)] == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("2024-13-01", "malformed date"),
        ("yesterday", "malformed date"),
        ("2024-02-01..2024-01-01", "reversed date range"),
        ("", "empty date specification"),
        (" , ", "empty date specification"),
        ("2024-01-01..2024-02-01/0", "malformed step"),
        ("2024-01-01..2024-02-01/x", "malformed step"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(DateEvalError, match=message):
        parse_dates(spec)
