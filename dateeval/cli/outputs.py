"""The files a user asks for (``dateeval export``, ``report``, ``robust --figure``, ``regrade --csv``), written atomically.

``dateeval.results`` only reads: it builds the tables and the report's text, and this module writes them where the
user said, each file through a staging file renamed into place, so a disk that fills up or a killed command leaves
the old file (or none), never half of one, and a link at the output's name is replaced, never written through. Nothing here writes into a store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from dateeval import atomic
from dateeval.errors import DateEvalError
from dateeval.results.report import export
from dateeval.results.entries import Period
from dateeval.results.report.report import build_report
from dateeval.results.robust.robust_record import RobustRecord
from dateeval.results.view import Results
from dateeval.store.text import arrow_table


def check_outside(out: Path, store: Path) -> None:
    """Refuse an output inside the store it is read from: the next read would take it for a unit (or damage one)."""
    if out.resolve().is_relative_to(store.resolve()):
        raise DateEvalError(
            f"{out} is inside the store {store}: write outputs elsewhere (a store holds only what `dateeval run` writes)"
        )


def _atomically(out: Path, write: Callable[[Path], object]) -> None:
    """``write(staging)`` then rename the staging file onto ``out``; an OSError is one line, nothing left behind."""
    try:
        with atomic.replacing(out) as staging:
            write(staging)
    except OSError as error:
        raise DateEvalError(f"cannot write {out}: {error.strerror or error}") from None


def write_text(out: Path, text: str) -> None:
    """``text`` (UTF-8) to ``out``."""
    _atomically(out, lambda staging: staging.write_text(text, encoding="utf-8", newline=""))


def write_figure(record: RobustRecord, out: Path, store: Path) -> Path:
    """``dateeval robust --figure``: the figure of a robust record (:func:`dateeval.results.robust.robust_format.figure`) read
    from ``store``."""
    from dateeval.results.robust import robust_format

    check_outside(out, store)
    drawn = robust_format.figure(record, out.suffix)
    _atomically(out, lambda staging: staging.write_bytes(drawn))
    return out


def write_csv(table: pd.DataFrame, out: Path) -> None:
    """``table`` to ``out`` through the one CSV writer (:func:`dateeval.results.report.export.to_csv`)."""
    write_text(out, export.to_csv(export.as_text(table)))


def write_export(results: Results, out: Path, period: Period | None = None) -> int:
    """Every stored row (:func:`dateeval.results.report.export.rows`) to ``out``, its format by the suffix; the row count."""
    export.check_target(out)
    check_outside(out, results.store.root)
    table = export.rows(results, period)
    if out.suffix == ".parquet":
        _atomically(out, lambda staging: pq.write_table(arrow_table(table), staging))
    elif out.suffix == ".csv":
        write_csv(table, out)
    else:
        _atomically(
            out,
            lambda staging: export.as_text(table).to_json(
                staging, orient="records", lines=True, date_format="iso", force_ascii=False
            ),
        )
    return len(table)


def write_report(results: Results, out: Path) -> Path:
    """The report (:func:`dateeval.results.report.report.build_report`) into the folder ``out``; returns its page."""
    check_outside(out, results.store.root)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in build_report(results).items():
        write_text(out / name, text)
    return out / "index.html"
