"""A sparse design replayed on a dense grid: which cells ``dateeval run --budget`` (or ``--target-width``) would score
and what the readers would estimate from them, computed from grades already known (``dateeval.stats.sparse_replay``).

Why: with one dense run in hand, a user can see what each budget would give the next models before sweeping them, and
a bench can hold the design against the dense truth (and against a peer at the same cells) without running a model.
The replay calls what the sweep and the readers call (``sparse.design_for``, ``sparse.chosen``,
``estimated.estimates_table``; the exact dates' Clopper-Pearson band), so its numbers are theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dateeval import sparse
from dateeval.results.bands import bands
from dateeval.results.sparse import estimated

BASELINE = "no-date"  # the replayed baseline's condition key in its design


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
    budget: float

    def widest(self) -> float:
        """The largest distance from an estimated date's value to its interval's ends (0 where none is estimated)."""
        return estimated.widest(self.value, self.low, self.high, self.estimated)


def replay(
    grades: np.ndarray,
    budget: float,
    seed: int = 0,
    margins: np.ndarray | None = None,
    baseline: np.ndarray | None = None,
    keys: list[str] | None = None,
    items: list[str] | None = None,
    looks: int = 1,
    uniform: bool = False,
) -> Replay:
    """Draw ``grades`` (dates x questions, 0/1, date order) as a sweep at ``budget`` would, with the top-two
    ``margins`` of the same shape (None for generated answers) and, where given, the no-date ``baseline`` grades (one
    per question), scored in full beside the dates, read beside the pilot for each question's propensity and the
    predictor's prior; the pilot is the first date. ``keys`` and
    ``items`` fix each cell's uniform as the sweep's condition keys and
    question ids do (default: the rows' and columns' positions). ``looks``: the design is one of a ``--target-width``
    sweep's (:func:`to_width`), its intervals widened for the stop. ``uniform``: every drawn cell equally likely (no
    propensity), what the design is measured against (``bench/sparse_coverage.py``)."""
    grades = np.asarray(grades, dtype=float)
    n_dates, n_items = grades.shape
    keys = keys or [f"date{index}" for index in range(n_dates)]
    items = items or [f"q{index}" for index in range(n_items)]
    pilot = sparse.pilot_indices(n_dates)
    seen_margins = None if margins is None else np.asarray(margins, dtype=float)[pilot]
    prior = None if baseline is None else np.asarray(baseline, dtype=float)
    rest = [index for index in range(n_dates) if index not in pilot]
    w = np.zeros(n_items) if uniform else sparse.propensity(grades[pilot], seen_margins, prior)
    n_dense = len(pilot) + int(baseline is not None)
    pilot_keys = tuple(keys[index] for index in pilot)
    design = sparse.design_for(
        w,
        len(rest),
        n_dense,
        seed=seed,
        budget=budget,
        pilot=pilot_keys,
        looks=looks,
        baseline=None if baseline is None else BASELINE,
    )
    drawn = np.ones(grades.shape, dtype=bool)
    drawn[rest] = sparse.chosen(design, w, items, [keys[index] for index in rest])
    exact = drawn.all(1)
    inclusion = np.where(exact[:, None], 1.0, np.broadcast_to(design.inclusion(w), grades.shape))
    values = np.where(drawn, grades, np.nan)
    weight = float(prior is not None)
    predictor = estimated.cross_fitted(values, prior, weight)
    critical = sparse.critical(looks)
    sample = estimated.Sample(keys, keys, items, values, inclusion, predictor, exact, design.seed, weight, critical)
    table = estimated.estimates_table(sample)
    right = np.rint(np.where(exact[:, None], grades, 0).sum(1))
    exact_low, exact_high = bands.clopper_pearson(right, n_items)
    return Replay(
        table["value"].to_numpy(),
        np.where(exact, exact_low, table["low"].to_numpy()),
        np.where(exact, exact_high, table["high"].to_numpy()),
        ~exact,
        int(drawn.sum()) + n_items * int(baseline is not None),
        n_items * (n_dates + int(baseline is not None)),
        sample,
        budget,
    )


def dense_share(n_dates: int, baseline: bool) -> float:
    """The share of a grid of ``n_dates`` dates (and the no-date ``baseline``, where swept) that the replay scores in
    full: the pilot dates and the baseline (as ``engine.drawn.dense_share`` counts a sweep's)."""
    dense = len(sparse.pilot_indices(n_dates)) + int(baseline)
    return dense / (n_dates + int(baseline))


def to_width(grades: np.ndarray, width: float, cap: float = 1.0, **draw: object) -> tuple[Replay, bool]:
    """What ``dateeval run --target-width`` stops at: :func:`replay` at each of ``sparse.looks(cap, dense share)`` in
    turn (each draw holds the one before), until every estimated date is within +- ``width`` of its interval's ends;
    the replay it stopped at and whether the width was reached (else the cap's). ``draw``: :func:`replay`'s other
    arguments."""
    budgets = sparse.looks(cap, dense_share(len(grades), draw.get("baseline") is not None))
    for budget in budgets:
        found = replay(grades, budget, looks=len(budgets), **draw)  # type: ignore[arg-type]
        if found.widest() <= width:
            return found, True
    return found, False
