"""The per-item row schema: which columns a stored row has and which of them identify what.

Every module that writes or reads rows names its columns from here, so a column is renamed or added in one place.
A row records what produced it (model identity, condition factors, prompt hash, scoring settings); see
``dateeval.engine.worker`` for how it is filled and ``dateeval.results`` for how it is read.
"""

from __future__ import annotations

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
