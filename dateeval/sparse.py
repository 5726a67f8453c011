"""Sparse date sweeps: which (question, date) cells a budgeted sweep scores, each with a known inclusion probability.

Why: most questions never move with the date (docs/coverage.md, "Sparse sweeps"), so scoring every question on every
date buys little. The design, which the sweep (``dateeval.engine.sweep``) draws and the results layer reads back to estimate:

* **dense conditions** score every question: every condition that is not a date (the no-date baseline, other
  factors), and the **pilot**, :data:`PILOT` date(s) (:func:`pilot_indices`). A date, not the no-date baseline
  although that is scored anyway: a date's prompt moves the same questions the other dates move, the baseline's does
  not (on the real stores the baseline as pilot gave per-date errors 1.1-1.4 times a date pilot's at the same cells,
  docs/coverage.md); the baseline is the predictor's prior instead;
* every other (question, date) cell is drawn by Poisson sampling with probability
  ``pi = clip(scale * w, floor, 1)``, where ``w`` is the question's propensity to move seen on the pilot
  (:func:`propensity`: its grade's spread there and beside the no-date baseline where one is swept, and, for choice
  tasks, how near its top two options came on the pilot), and the
  floor (:data:`FLOOR_SHARE` of the mean probability) lets every cell be drawn often enough that an effect the pilot
  did not foresee is seen and the weights stay bounded;
* a cell is drawn when its uniform ``u`` (:func:`uniforms`: a hash of the seed, the question and the date, the same for
  every model, so entries are sampled on common cells) is below ``pi``. A rerun draws the same cells, a killed sweep
  resumes, and a larger budget raises ``scale`` and ``floor`` (so every ``pi``): it adds cells and discards none.

Every drawn row records its design (:class:`Design`, as JSON), its propensity and its inclusion probability. This
module is pure arithmetic: no store, no model, so the driver that draws and the readers that estimate share it.
Why these constants: docs/coverage.md ("Against the best peer at the same cells") measures the choices.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from dateeval.errors import DateEvalError

PILOT = 1  # pilot dates scored in full
# The floor probability as a share of the sparse cells' mean probability: high enough that effects on questions the
# pilot calls steady keep their coverage and no drawn cell outweighs ~1.3 mean ones; 0.25 (designs of version 1) left
# dates with such effects covered 86% of the time.
FLOOR_SHARE = 0.75
FIRST_FLOOR_SHARE = 0.25  # what designs of version 1 (which do not say) were drawn with
MARGIN_SCALE = (
    0.05  # a top-two probability margin this small makes a choice question about 1/e as likely to move as a coin
)
MARGIN_WEIGHT = 0.5  # the propensity a zero margin implies (a question that moves on half its dates has spread 0.5)
# The smallest inclusion probability a design draws with (and a reader accepts): a cell drawn at 1e-6 weighs a
# million, so one drawn answer already moves an estimate past any bound; below it a weight's square leaves float range.
MIN_INCLUSION = 1e-6
DESIGN_COLUMNS = ("design", "propensity", "inclusion")  # what a drawn row carries beyond a dense one
# The budgets a ``--target-width`` sweep may stop at (each below its cap, then the cap): pre-declared, so the stop,
# which depends on the data, is one of a few looks whose intervals are joined by Bonferroni (:func:`critical`).
LOOKS = (0.06, 0.12, 0.25, 0.5, 1.0)
VERSION = 3  # 2: the floor share is part of the design; 3: so is the baseline the propensity read
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


@dataclass(frozen=True)
class Design:
    """One budget's draw: its seed and budget, the pilot's condition keys, the inclusion probability's ``scale`` and
    ``floor`` (:meth:`inclusion`), the floor's share of the mean probability it was solved with, and the looks of the
    ``--target-width`` sweep it is one of (1 for a plain budget), and the no-date condition whose grades joined the
    pilot's in the propensity (None: none did, as in designs before version 3). Stored as JSON in every drawn row."""

    seed: int
    budget: float
    pilot: tuple[str, ...]
    scale: float
    floor: float
    floor_share: float = FIRST_FLOOR_SHARE
    looks: int = 1  # how many budgets its sweep could have stopped at (``--target-width``): its intervals' Bonferroni
    baseline: str | None = None

    def inclusion(self, propensity: np.ndarray) -> np.ndarray:
        """Each cell's probability of being drawn, from its question's propensity."""
        return np.clip(self.scale * np.asarray(propensity, dtype=float), self.floor, 1.0)

    def to_json(self) -> str:
        return json.dumps({"version": VERSION, **asdict(self), "pilot": list(self.pilot)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Design:
        """A stored design, checked: a row's text is data, and a design that does not parse is named, not guessed."""
        try:
            found = json.loads(text)
            design = cls(
                int(found["seed"]),
                float(found["budget"]),
                tuple(str(key) for key in found["pilot"]),
                float(found["scale"]),
                float(found["floor"]),
                float(found.get("floor_share", FIRST_FLOOR_SHARE)),
                _count(found.get("looks", 1)),
                _key(found.get("baseline")),
            )
        except (TypeError, ValueError, KeyError, AttributeError, json.JSONDecodeError):
            raise DateEvalError(f"a stored sparse design is not readable: {str(text)[:80]!r}") from None
        in_range = MIN_INCLUSION <= design.floor <= 1 and design.scale > 0 and math.isfinite(design.scale)
        in_range = in_range and 0 < design.floor_share <= 1 and 1 <= design.looks <= len(LOOKS)
        if not (0 < design.budget <= 1 and in_range and len(set(design.pilot)) == len(design.pilot)):
            raise DateEvalError(f"a stored sparse design is out of range: {str(text)[:80]!r}")
        return design


def _key(value: object) -> str | None:
    """A condition key as JSON holds it, or None."""
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{value!r} is not a condition key")
    return value


def _count(value: object) -> int:
    """A whole count as JSON holds it (``true`` and ``2.0`` are not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not a whole number")
    return value


def looks(cap: float, above: float = 0.0) -> tuple[float, ...]:
    """The budgets a ``--target-width`` sweep capped at ``cap`` may stop at: :data:`LOOKS` below the cap, then the cap;
    only those above ``above``, the share of the grid its conditions scored in full take (a look at or below it would
    draw nothing, and would widen every interval for nothing). None where the cap is not above it."""
    if cap <= above:
        return ()
    return (*(budget for budget in LOOKS if above < budget < cap), cap)


def critical(looks: int) -> float:
    """The normal quantile of a 95% interval that holds at whichever of ``looks`` pre-declared looks a sweep stopped:
    Bonferroni over the looks (1.96 for one)."""
    from scipy.stats import norm

    return float(norm.ppf(1 - 0.025 / looks))


def check_budget(budget: float) -> float:
    """A budget as ``--budget`` takes it: a share of the dense grid's cells in (0, 1]."""
    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and 0 < budget <= 1):
        raise DateEvalError(f"--budget is a share of the dense grid's item-dates in (0, 1], e.g. 0.2; got {budget}")
    return float(budget)


def pilot_indices(n_dates: int, pilot: int = PILOT) -> list[int]:
    """The positions of the pilot dates among ``n_dates`` sorted dates: spread evenly, both ends included."""
    if n_dates <= pilot:
        return list(range(n_dates))
    return sorted({round(k * (n_dates - 1) / (pilot - 1)) for k in range(pilot)}) if pilot > 1 else [0]


def _hash64(texts: list[str]) -> np.ndarray:
    return np.array(
        [int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") for text in texts], dtype=np.uint64
    )


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a 64-bit value's bits spread over every output bit."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9) & _MASK
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB) & _MASK
        return x ^ (x >> np.uint64(31))


def uniforms(seed: int, item_ids: list[str], conditions: list[str]) -> np.ndarray:
    """A conditions x items array of uniforms in [0, 1), fixed by the seed, each question's id and each condition's key.

    The same for every model and precision, so two entries swept at one seed are drawn on common cells where their
    probabilities agree (paired comparisons lose less)."""
    with np.errstate(over="ignore"):
        items = _hash64([f"{seed}\0item\0{item}" for item in item_ids])
        days = _hash64([f"{seed}\0condition\0{key}" for key in conditions])
        mixed = _mix(_mix(days[:, None] ^ _mix(items[None, :])))
    return (mixed >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def propensity(correct: np.ndarray, margin: np.ndarray | None = None, baseline: np.ndarray | None = None) -> np.ndarray:
    """Each question's propensity to move, from its pilot: ``correct`` is pilot dates x questions (0/1), ``margin``
    the same shape's top-two probability margins (None for generated answers), ``baseline`` the no-date grades (one
    per question; None where the sweep has no baseline).

    The grade's standard deviation over the pilot dates and the baseline (0 where it never moved there), raised for
    choice questions whose top two options came close on some pilot date (``MARGIN_WEIGHT * exp(-margin /
    MARGIN_SCALE)``): a question whose answer changes when the date line is added to the prompt, or between pilot
    dates, is likely to change again; one with a near tie may change on a date the pilot missed. The baseline's own
    margins are not read: its prompt has no date line, and its near ties are not the ones dates move (on the real
    bfloat16 store they cost 2-11% more error at the same cells; its grade beside the pilot's saved 1-7%,
    docs/coverage.md). The sampling is unbiased whatever these weights are; good ones only narrow the intervals."""
    grades = np.asarray(correct, dtype=float)
    if baseline is not None:
        grades = np.vstack([grades, np.asarray(baseline, dtype=float)[None, :]])
    seen = np.isfinite(grades).sum(0)
    rate = np.divide(np.nansum(grades, 0), seen, out=np.zeros(grades.shape[1]), where=seen > 0)
    spread = np.sqrt(rate * (1 - rate))  # 0 for ungraded answers (a translation's): the floor samples them
    if margin is None:
        return spread
    near = MARGIN_WEIGHT * np.exp(-np.asarray(margin, dtype=float).min(0) / MARGIN_SCALE)
    return np.maximum(spread, near)


class PilotIncomplete(DateEvalError):
    """The pilot dates do not hold every question: the draw (and a reader's estimate) cannot be fixed from them."""


def pilot_propensity(rows: pd.DataFrame, keys: list[str], items: list[str], baseline: str | None = None) -> np.ndarray:
    """:func:`propensity` of each of ``items`` from its stored pilot rows (``condition_key``, ``item_id``, ``correct``
    and, for choice tasks, ``probs``) on the pilot conditions ``keys`` and, where given, the ``baseline`` condition's
    grades: what the driver draws from and every reader recomputes, so both see the same probabilities."""
    conditions = [*keys, *([] if baseline is None else [baseline])]
    grid = (
        rows[rows["condition_key"].isin(conditions)]
        .drop_duplicates(["condition_key", "item_id"])
        .set_index(["condition_key", "item_id"])
    )
    index = pd.MultiIndex.from_product([conditions, list(items)])
    if not index.isin(grid.index).all():
        raise PilotIncomplete("the pilot dates (or the no-date baseline) do not hold every question")
    grid = grid.reindex(index)
    graded = grid["correct"].astype(float).to_numpy().reshape(len(conditions), len(items))
    correct, no_date = graded[: len(keys)], (graded[len(keys)] if baseline is not None else None)
    probs = grid["probs"].iloc[: correct.size] if "probs" in grid else None  # the baseline's margins are not read
    if probs is None or probs.isna().any():
        return propensity(correct, baseline=no_date)
    margin = [margins(np.asarray(values, dtype=float)) if len(values) > 1 else 1.0 for values in probs]
    return propensity(correct, np.array(margin).reshape(correct.shape), no_date)


def margins(probs: np.ndarray) -> np.ndarray:
    """The top option's probability less the runner-up's, per row of an items x options array."""
    ordered = np.sort(np.asarray(probs, dtype=float), axis=-1)
    return ordered[..., -1] - ordered[..., -2]


def design_for(
    propensities: np.ndarray,
    sparse_dates: int,
    n_dense: int,
    *,
    seed: int,
    budget: float,
    pilot: tuple[str, ...],
    floor_share: float = FLOOR_SHARE,
    looks: int = 1,
    baseline: str | None = None,
) -> Design:
    """:func:`solve` for a budget, a share of the grid of these questions on ``n_dense`` conditions scored in full and
    ``sparse_dates`` drawn dates: what ``dateeval run --budget`` draws with, and what a reader recomputes to check it."""
    n = len(propensities)
    cells = budget * n * (n_dense + sparse_dates) - n * n_dense
    scale, floor = solve(propensities, sparse_dates, cells, floor_share)
    return Design(seed, budget, pilot, scale, floor, floor_share, looks, baseline)


def chosen(design: Design, propensities: np.ndarray, items: list[str], conditions: list[str]) -> np.ndarray:
    """Which cells of the drawn ``conditions`` x ``items`` the design draws: each one's uniform below its probability."""
    return uniforms(design.seed, items, conditions) < design.inclusion(propensities)


def solve(
    propensities: np.ndarray, sparse_dates: int, cells: float, floor_share: float = FLOOR_SHARE
) -> tuple[float, float]:
    """The ``scale`` and ``floor`` of the probabilities (:meth:`Design.inclusion`) that draw ``cells`` cells in
    expectation over ``sparse_dates`` dates of these questions.

    The floor is ``floor_share`` of the mean probability; ``scale`` is found by bisection (the expected draw grows
    with it). Both grow with ``cells``, so a larger budget's probabilities are never smaller than a smaller one's."""
    w = np.asarray(propensities, dtype=float)
    n = len(w)
    if n == 0 or sparse_dates == 0:
        return 1.0, 1.0
    mean = min(1.0, cells / (n * sparse_dates))
    floor = max(floor_share * mean, MIN_INCLUSION)
    if mean >= 1.0:
        return 1.0, 1.0
    if not (w > 0).any():
        return 1.0, max(mean, MIN_INCLUSION)  # nothing moved in the pilot: cells alike
    target = mean * n
    moving = int((w > 0).sum())
    if target >= moving + floor * (n - moving):  # every question that moved is certain; the steady share the rest
        return 1.0 / float(w[w > 0].min()), min(1.0, (target - moving) / max(n - moving, 1))
    low, high = 0.0, 1.0
    while np.clip(high * w, floor, 1).sum() < target:
        high *= 2
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if np.clip(middle * w, floor, 1).sum() < target else (low, middle)
    return high, floor
