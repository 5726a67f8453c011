"""Helpers over stored rows that the store's sidecars and the statistics both read: one home below both.

``with_factor`` and ``predictions`` say what a row means (its factor, its comparable answer); ``group_codes`` numbers
rows by a combination of columns. The store sums each unit with them when it commits the unit
(:mod:`dateeval.store.sidecars`), and the statistics group and compare rows with them, so the sums and a
computation from the rows agree by construction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dateeval.schema import UNPARSEABLE


def group_codes(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Dense int64 codes of the row's combination of ``columns`` (one hash pass per column)."""
    combined = np.zeros(len(frame), dtype=np.int64)
    for column in columns:
        codes, uniques = pd.factorize(frame[column], use_na_sentinel=False)
        combined = combined * (len(uniques) + 1) + codes
    return np.unique(combined, return_inverse=True)[1].reshape(-1)


def with_factor(frame: pd.DataFrame) -> pd.DataFrame:
    """Fill the ``factor`` column for rows stored before it existed (they are date sweeps or baselines)."""
    if "factor" in frame and frame["factor"].notna().all():
        return frame
    derived = frame["date_mode"].map({"date": "date", "none": "no-date", "default": "template-default"})
    return frame.assign(factor=frame["factor"].fillna(derived) if "factor" in frame else derived)


def predictions(rows: pd.DataFrame) -> pd.Series:
    """What the model answered, comparable across dates: the option for MCQA, else the parsed answer.

    The parsed answer is the final number (GSM8K), option letter (chain of
    thought), extracted code (HumanEval) or translation; an answer that could
    not be parsed is one value of its own.
    """
    pred = rows["pred"].astype(object)
    if "parsed" not in rows:
        return pred
    parsed = rows["parsed"].astype(object)
    return parsed.where(parsed.notna(), pred).fillna(UNPARSEABLE)
