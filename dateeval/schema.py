"""The per-item row schema: which columns a stored row has and which of them identify what.

Every module that writes or reads rows names its columns from here, so a column is renamed or added in one place.
A row records what produced it (model identity, condition factors, prompt hash, scoring settings); see
``dateeval.engine.worker`` for how it is filled and ``dateeval.results`` for how it is read. What a row means
(:func:`with_factor`, :func:`predictions`) and how rows are grouped (:func:`group_codes`) are here too: the store sums
its units with them and the statistics compare rows with them, so both agree by construction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# What makes a result unique. The hardware is part of it so that results of one model from two
# machines (two GPU models, say) both stay in one store and can be compared.
ROW_KEY = ["model_key", "hardware", "task_key", "condition_key", "item_id", "prompt_hash"]
# Rows that share these columns were produced the same way except for the condition: one leaderboard entry.
ENTRY = ["model", "dtype", "device", "hardware", "model_key", "dataset", "task_key"]
# An entry is fixed by these (model_key fixes model, dtype and device); a condition by condition_key.
# Grouping on them as integer codes keeps the readers fast on tens of millions of rows.
ENTRY_KEY = ["model_key", "hardware", "dataset", "task_key"]
# One entry x condition: the unit of every per-condition sum.
GROUP = [*ENTRY_KEY, "condition_key"]
# What describes a group beyond its key (shown, not grouped on); ``task`` is the task's kind (mcqa, cot, gsm8k,
# humaneval, translation, generation), which says what a dataset is even where its name is a user's own file;
# ``label_variant`` is the option label a choice task read (" A" or "A"): scores read from different labels differ.
DESCRIPTION = [column for column in ENTRY if column not in ENTRY_KEY] + [
    "condition",
    "factor",
    "date_mode",
    "date",
    "task",
    "label_variant",
]
# Task kinds (the ``task`` column) whose replies are generated, stored verbatim and graded.
GENERATION_KINDS = ("cot", "gsm8k", "humaneval", "translation", "generation")
# The columns every task writes.
SUMMARY_COLUMNS = [
    "model",
    "model_key",
    "dtype",
    "device",
    "hardware",
    "dataset",
    "task_key",
    "condition",
    "condition_key",
    "date_mode",
    "date",
    "system_prompt",
    "item_id",
    "correct",
    "confidence",
    "pred",
    "answer",
    "prompt_hash",
    "created_at",
    "date_text",
    "factor",
    "task",
]
# Sentence-level sufficient statistics of corpus metrics (BLEU, chrF).
CORPUS_COLUMNS = ["bleu_stats", "chrf_stats"]
# Columns only open-ended tasks have: read where present, never filled in for stores of MCQA only
# (filling them would add four empty columns to tens of millions of rows).
GENERATION_COLUMNS = ["parsed", "score", *CORPUS_COLUMNS]
# What the statistics read per item: graded outcomes with what identifies their entry, condition and answer.
OUTCOME_COLUMNS = [
    *ENTRY,
    "condition",
    "condition_key",
    "factor",
    "date_mode",
    "date",
    "item_id",
    "correct",
    "confidence",
    "pred",
    "parsed",
]
# A generated answer that could not be parsed, as one comparable value of its own.
UNPARSEABLE = "(unparseable)"


# Helpers over stored rows that the store's sums and the statistics both read, so the sums and a computation from the
# rows agree by construction: what a row means (its factor, its comparable answer) and rows numbered by a combination
# of columns.


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
