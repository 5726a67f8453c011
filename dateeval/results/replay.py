"""A sparse design replayed on a dense grid: which cells ``dateeval run --budget`` would score and what the readers
would estimate from them, computed from grades already known (``dateeval.stats.sparse_replay``).

Why: with one dense run in hand, a user can see what each budget would give the next models before sweeping them, and
a bench can hold the design against the dense truth (and against a peer at the same cells) without running a model.
The replay calls what the sweep and the readers call (``sparse.design_for``, ``sparse.chosen``,
``estimated.estimates_table``; the exact dates' Clopper-Pearson band), so its numbers are theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dateeval import sparse
from dateeval.results import bands, estimated


@dataclass(frozen=True)
class Replay:
    """Per date (rows of the grid, in date order): the value and its 95% interval as shares, and whether it was
    estimated (not scored in full); the cells scored (the dense conditions and the baseline included) and the grid's
    cells; the sample itself, as the readers hold it."""

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    estimated: np.ndarray
    cells: int
    grid: int
    sample: estimated.Sample


def replay(
    grades: np.ndarray,
    budget: float,
    seed: int = 0,
    margins: np.ndarray | None = None,
    baseline: bool = False,
    keys: list[str] | None = None,
    items: list[str] | None = None,
) -> Replay:
    """Draw ``grades`` (dates x questions, 0/1, date order) as a sweep at ``budget`` would, with the top-two
    ``margins`` of the same shape (None for generated answers) and, where ``baseline``, a no-date condition scored in
    full beside the dates. ``keys`` and ``items`` fix each cell's uniform as the sweep's condition keys and question
    ids do (default: the rows' and columns' positions)."""
    grades = np.asarray(grades, dtype=float)
    n_dates, n_items = grades.shape
    keys = keys or [f"date{index}" for index in range(n_dates)]
    items = items or [f"q{index}" for index in range(n_items)]
    pilot = sparse.pilot_indices(n_dates)
    rest = [index for index in range(n_dates) if index not in pilot]
    w = sparse.propensity(grades[pilot], None if margins is None else np.asarray(margins, dtype=float)[pilot])
    n_dense = len(pilot) + int(baseline)
    design = sparse.design_for(
        w, len(rest), n_dense, seed=seed, budget=budget, pilot=tuple(keys[index] for index in pilot)
    )
    drawn = np.ones(grades.shape, dtype=bool)
    drawn[rest] = sparse.chosen(design, w, items, [keys[index] for index in rest])
    exact = drawn.all(1)
    inclusion = np.where(exact[:, None], 1.0, np.broadcast_to(design.inclusion(w), grades.shape))
    values = np.where(drawn, grades, np.nan)
    sample = estimated.Sample(keys, keys, items, values, inclusion, grades[pilot].mean(0), exact, design.seed)
    table = estimated.estimates_table(sample)
    right = np.rint(np.where(exact[:, None], grades, 0).sum(1))
    exact_low, exact_high = bands.clopper_pearson(right, n_items)
    return Replay(
        table["value"].to_numpy(),
        np.where(exact, exact_low, table["low"].to_numpy()),
        np.where(exact, exact_high, table["high"].to_numpy()),
        ~exact,
        int(drawn.sum()) + n_items * int(baseline),
        n_items * (n_dates + int(baseline)),
        sample,
    )
