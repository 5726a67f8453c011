"""``dateeval export``: every stored per-item row, with its entry and condition, as one table any tool reads.

The store's own units are already Parquet (docs/store.md: the pandas and DuckDB one-liners), but they are spread over
folders, vary in columns by task, and sit beside the ``.aggregates`` sidecars that a ``**/*.parquet`` glob would mix
in. The export is one file of the rows a read of the store gives (verified, duplicates dropped as every reader drops
them), with the explorer's ``entry`` label, in Parquet, CSV or JSON Lines by the file's suffix.

A reply holding a lone surrogate (which UTF-8 cannot encode) is kept as the store keeps it: in Parquet its column is
escaped and named in the file's metadata (``store.text.ESCAPED_KEY``); in the text formats the surrogate is written as the
six characters ``\\udXXXX`` (Python's ``backslashreplace``).

Every CSV dateeval writes (this export, ``regrade --csv``, the report's tables, the explorer's downloads) goes through
:func:`to_csv`: stored text (item ids, subjects, references, replies) is the benchmark's or the model's, and a
spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula (OWASP "CSV injection").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from dateeval.errors import DateEvalError
from dateeval.results import descriptive
from dateeval.results.entries import Period
from dateeval.results.view import Results
from dateeval.schema import with_factor
from dateeval.store.text import has_surrogates

FORMATS = (".parquet", ".csv", ".jsonl")
# What a spreadsheet reads as the start of a formula (OWASP), and a plain number, which it reads as a number instead.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def check_target(out: Path) -> None:
    """Refuse an output that cannot be written, before anything is read (one line, nothing left behind); the file is
    written by :func:`dateeval.cli.outputs.write_export`."""
    if out.is_dir():
        raise DateEvalError(f"--out {out} is a folder: give a file name ending in {', '.join(FORMATS)}")
    if out.suffix not in FORMATS:
        raise DateEvalError(f"--out {out}: give a file ending in {', '.join(FORMATS)} (the format follows the suffix)")
    if not out.parent.is_dir():
        raise DateEvalError(f"--out {out}: the folder {out.parent} does not exist")


def rows(results: Results, period: Period | None = None) -> pd.DataFrame:
    """Every row the store holds (dates in ``period`` and every baseline), with ``entry``, in a stable order; a sparse
    sweep's drawn rows with their design, propensity and inclusion probability (the weights its estimates use)."""
    sources = [*results.sums["source"], *results.drawn["source"]]
    frame, problems = results.store.read(paths=[results.store.root / source for source in dict.fromkeys(sources)])
    if problems.corrupted:
        raise DateEvalError("; ".join(problems.messages()))
    if frame.empty:
        return frame
    if period is not None:
        frame = frame[(with_factor(frame)["factor"] != "date") | period.holds(frame["date"])]
    frame = frame.assign(entry=descriptive.entry_label(frame))
    first = ["entry", "dataset", "condition", "date", "item_id", "correct", "confidence", "pred", "answer"]
    ordered = [column for column in first if column in frame] + [column for column in frame if column not in first]
    return frame[ordered].sort_values(["entry", "dataset", "condition", "item_id"], kind="stable", ignore_index=True)


def as_text(table: pd.DataFrame) -> pd.DataFrame:
    """Lists and arrays (option probabilities, BLEU statistics) as JSON text, so CSV and JSONL keep them readable, and
    lone surrogates as ``\\udXXXX``, so that the file is UTF-8."""
    out = table.copy()
    for column in out.columns:
        if out[column].map(lambda value: isinstance(value, (list, np.ndarray))).any():
            out[column] = out[column].map(
                lambda value: json.dumps(np.asarray(value).tolist()) if isinstance(value, (list, np.ndarray)) else value
            )
        if out[column].dtype == object and out[column].map(has_surrogates).any():
            out[column] = out[column].map(
                lambda value: value.encode("utf-8", "backslashreplace").decode() if has_surrogates(value) else value
            )
    return out


def safe_cell(value: object) -> object:
    """A text cell a spreadsheet would run as a formula, prefixed with ``'`` (shown as text, not run); numbers, and
    text that is a plain number (``-2``, ``+1.5e3``), stay as they are so that they still read as numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def to_csv(table: pd.DataFrame) -> str:
    """``table`` as CSV text, its text cells and headers through :func:`safe_cell`:
    the one CSV writer, so no download or file escapes one cell and not another."""
    out = table.rename(columns=lambda name: safe_cell(str(name)))
    for column in range(out.shape[1]):
        values = out.iloc[:, column]
        if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_datetime64_any_dtype(values)):
            out.isetitem(column, values.map(safe_cell))
    # RFC 4180's line end: the writer then quotes a cell holding a bare CR, which a spreadsheet would otherwise read as
    # a new row whose first cell (unescaped, mid-cell text) could be a formula.
    return out.to_csv(index=False, lineterminator="\r\n")
