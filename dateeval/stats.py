"""dateeval's statistics on plain numpy arrays, for results from anywhere (lm-eval ``--log_samples``, Inspect logs).

Each function here is the one the explorer's pages, the CLI and the report print: they call the same implementation
(``dateeval.results.inference`` and ``dateeval.results.robust.robust``), so a number computed here from a user's own arrays
equals the one dateeval shows for the same outcomes. Arrays are 0/1 grades (1 right): a dates x questions matrix holds
one model's grades on every question on every date of a sweep. Every interval is 95%. Coverage and size of each, in a
simulation with known truth: docs/coverage.md; how to call them: docs/statistics-api.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from dateeval.errors import DateEvalError
from dateeval.sparse import MIN_INCLUSION


class UsageError(DateEvalError, ValueError):
    """Arrays these functions cannot read as asked (wrong shape, grades other than 0/1): one line that says why."""


__all__ = [
    "Estimate",
    "UsageError",
    "date_effect_test",
    "date_spread",
    "ece",
    "paired_difference",
    "rate_interval",
    "robust_score",
    "sparse_estimates",
    "sparse_date_spread",
    "sparse_replay",
    "sparse_robust_score",
]


class Estimate(NamedTuple):
    """A number with its 95% interval; ``low`` and ``high`` are NaN where no interval holds."""

    value: float
    low: float
    high: float


def _floats(values: object, name: str) -> np.ndarray:
    """``values`` as a float array, or one error naming the argument: a masked array (its masked cells would count at
    their fill value), ragged lists and missing values (pandas NA, None) are refused, not read as numpy reads them."""
    if isinstance(values, np.ma.MaskedArray):
        raise UsageError(
            f"{name} is a masked array: pass only the cells you have (a masked cell would count at its fill value)"
        )
    try:
        found = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise UsageError(
            f"{name} must be a rectangular array of numbers (no ragged rows, no missing values such as None or pandas NA)"
        ) from None
    if np.isnan(found).any():
        raise UsageError(f"{name} holds missing values (NaN): pass only the cells you have")
    return found


def _whole(value: object) -> bool:
    """A whole number as Python or numpy writes it (not a bool, not 2.5)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _grades(correct: object, name: str = "correct") -> np.ndarray:
    """A dates x questions array of 0/1 grades, or one clear error: a reader's arrays come from elsewhere."""
    found = _floats(correct, name)
    if found.ndim != 2 or found.shape[0] < 2 or found.shape[1] < 2:
        raise UsageError(f"{name} must be a dates x questions array with two or more of each; got shape {found.shape}")
    if not np.isin(found, (0.0, 1.0)).all():
        raise UsageError(f"{name} must hold 0/1 grades (1 right); found other values")
    return found


def rate_interval(right: int, n: int) -> Estimate:
    """A rate from ``right`` of ``n`` with its exact (Clopper-Pearson) interval: the per-date band of the Curves page.
    Its coverage is at least 95% at every rate and every n; 0 of n gives [0, 1 - 0.025^(1/n)], never zero wide."""
    if not (_whole(n) and _whole(right) and n > 0 and 0 <= right <= n):
        raise UsageError(f"rate_interval needs 0 <= right <= n and n a positive whole number; got right={right}, n={n}")
    from dateeval.results.bands.bands import clopper_pearson

    low, high = clopper_pearson(np.array([right]), n)
    return Estimate(right / n, float(low[0]), float(high[0]))


def robust_score(correct: object) -> Estimate:
    """The date-robust score (the mean over dates and questions) of a dates x questions 0/1 array, with the interval
    over both questions and dates that ``dateeval robust`` and the What to report page print (Korn-Graubard at the
    effective sample size the two-way variance components give)."""
    from dateeval.results.robust.robust import date_robust

    score, low, high, _ = date_robust(_grades(correct))
    return Estimate(score, low, high)


def date_spread(correct: object) -> Estimate:
    """How much the date moves a dates x questions 0/1 array: the SD across dates of the dates' true rates, without
    the counting noise that inflates the SD of the measured ones (the two-way ANOVA's date component), with its 95%
    interval (the noncentral F's, Steiger 2004): the ``sd_date`` fields of ``dateeval robust --json``. NaN bounds
    where no question changes across dates (the SD is then 0 for certain). Coverage: docs/coverage.md."""
    from dateeval.results.variation import level_sd, mean_squares

    grades = _grades(correct)
    _, ms_date, ms_residual = mean_squares(grades)
    return Estimate(*level_sd(ms_date, ms_residual, *grades.shape))


def date_effect_test(
    entries: Sequence[object], seed: int = 0, shuffles: int = 1000, progress: Callable[[int, int], object] | None = None
) -> float:
    """The family-wise p-value of "the date moves at least one entry": the headline verdict's test.

    ``entries`` holds one dates x questions 0/1 array per entry (model), all on the same dates (rows in one order) and
    the same questions (columns in one order). Each entry's Cochran's Q chi-square p-value is taken, and their smallest
    set against the smallest over joint shuffles (each question's dates permuted alike in every entry, so their
    dependence is kept): the size holds for any number of entries. ``seed`` fixes the shuffles; ``shuffles`` is their
    number (the pages use 1000: a p-value near 0.05 has a Monte-Carlo SE of 0.007; the smallest p is 1 / (shuffles + 1));
    the time grows with shuffles x questions that vary x dates, and ``progress(done, total)`` is called as they are drawn.
    """
    if not _whole(seed) or seed < 0:
        raise UsageError(f"seed must be a whole number 0 or more; got {seed!r}")
    if not _whole(shuffles) or not 1 <= shuffles <= 1_000_000:
        raise UsageError(f"shuffles must be a whole number from 1 to 1,000,000; got {shuffles!r}")
    arrays = [_grades(entry, f"entries[{number}]") for number, entry in enumerate(entries)]
    if not arrays:
        raise UsageError("date_effect_test needs at least one entry")
    if len({array.shape for array in arrays}) > 1:
        raise UsageError(
            f"every entry must be on the same dates and questions; got shapes {sorted({array.shape for array in arrays})}"
        )
    from dateeval.results.chance.chance import date_effect_family

    return date_effect_family([arrays], n_perm=int(shuffles), seed=seed, progress=progress)


def ece(confidence: object, correct: object) -> Estimate:
    """One date's expected calibration error (10 equal-width bins) from each question's confidence in its answer and
    its 0/1 grade, as the pages print it: the debiased estimate (Kumar, Liang & Ma 2019: each bin's gap less its own
    counting-noise bias; the paper's plug-in sits above the truth with few questions) and a 95% interval that covered
    the population ECE in at least 0.93 of simulated dates in every cell from 50 questions (calibrated and miscalibrated
    models, accuracy 0.02-0.98; docs/coverage.md). ``low``/``high`` are NaN below 50 questions, and with fewer than 3
    right or 3 wrong answers (accuracy near 1 or 0), where no bound held: at confidence 0.99 and accuracy 0.97 on 50
    questions an interval read from the sample covered 0.77."""
    from dateeval.metrics.calibration import ece as debiased
    from dateeval.results.bands.bands import ece_interval

    confidence, correct = _floats(confidence, "confidence"), _floats(correct, "correct")
    if confidence.ndim != 1 or confidence.shape != correct.shape or confidence.size == 0:
        raise UsageError(
            f"confidence and correct must be two equal-length 1-d arrays; got shapes {confidence.shape} and {correct.shape}"
        )
    if not np.isin(correct, (0.0, 1.0)).all() or not ((confidence >= 0) & (confidence <= 1)).all():
        raise UsageError("correct must hold 0/1 grades (1 right) and confidence values in [0, 1]")
    low, high = ece_interval(confidence[None, :], correct[None, :])
    return Estimate(debiased(confidence, correct), float(low[0]), float(high[0]))


def paired_difference(a: object, b: object) -> Estimate:
    """A's date-robust score minus B's on the same dates and questions, with a 95% interval clustered by question:
    "is A better than B whatever the date?" (``dateeval compare``, the Leaderboard page). ``low``/``high`` are NaN
    where every question's difference is the same on every date (no spread to read an interval from; a zero-wide
    interval would claim certainty)."""
    from dateeval.results.robust.robust import paired_difference as difference

    a, b = _grades(a, "a"), _grades(b, "b")
    if a.shape != b.shape:
        raise UsageError(f"a and b must be on the same dates and questions; got shapes {a.shape} and {b.shape}")
    return Estimate(*difference(a, b))


def sparse_estimates(values: object, inclusion: object, predictor: object) -> list[Estimate]:
    """Each date's mean over the questions from a sample of its cells, with a 95% interval: what ``dateeval run
    --budget`` stores and ``summary --per-date`` prints (``dateeval.results.sparse.estimated``), for cells you sampled yourself.

    ``values`` is dates x questions (grades, confidences: any value in [0, 1]) with NaN where a cell was not sampled;
    ``inclusion`` each cell's known probability of having been sampled (same shape, or one per question), every one in
    [1e-6, 1] (``dateeval.sparse.MIN_INCLUSION``) and independent of the cells' values (Poisson sampling); ``predictor`` one value per question fixed before
    the sample (e.g. its mean over a few dates scored in full; zeros give Horvitz-Thompson). The estimate is
    design-unbiased for the mean over every question, so it is not cut to [0, 1]; the interval is. Coverage against
    dense sweeps: docs/coverage.md ("Sparse sweeps")."""
    from dateeval.results.sparse.estimated import difference_estimates

    found, pi, m = _sample(values, inclusion, predictor)
    estimates = difference_estimates(found, pi, m)
    return [
        Estimate(float(value), float(low), float(high))
        for value, low, high in zip(estimates.value, estimates.low, estimates.high)
    ]


def sparse_robust_score(values: object, inclusion: object, predictor: object) -> Estimate:
    """The date-robust score (:func:`robust_score`) of a dates x questions 0/1 array of which only a sample of cells
    was graded, with its 95% interval over questions, dates and the sample: what ``dateeval robust`` prints for an
    entry swept with ``--budget`` (``dateeval.results.sparse.estimated.sparse_robust``). ``values``, ``inclusion`` and
    ``predictor`` as in :func:`sparse_estimates` (grades 0/1, two or more dates and questions); with every cell
    sampled it is :func:`robust_score`. Coverage: docs/coverage.md ("Sparse sweeps")."""
    from dateeval.results.sparse.estimated import sparse_robust

    found, pi, m = _graded_sample(values, inclusion, predictor)
    score, low, high, _ = sparse_robust(found, pi, m)
    return Estimate(score, low, high)


def sparse_date_spread(values: object, inclusion: object, predictor: object) -> Estimate:
    """:func:`date_spread` of a dates x questions 0/1 array of which only a sample of cells was graded, with its 95%
    interval over the counting noise and the sample: what ``dateeval robust --json`` gives an entry swept with
    ``--budget`` (``dateeval.results.sparse.estimated.sparse_spread``). Arguments as in :func:`sparse_robust_score`; with
    every cell sampled it is :func:`date_spread`. Coverage: docs/coverage.md ("Sparse sweeps")."""
    from dateeval.results.sparse.estimated import mean_squares, sparse_spread

    found, pi, m = _graded_sample(values, inclusion, predictor)
    return Estimate(*sparse_spread(found, pi, m, mean_squares(found, pi, m)))


class SparseReplay(NamedTuple):
    """What :func:`sparse_replay` gives: per date row an :class:`Estimate` (shares) and whether it was ``estimated``
    (not scored in full); the ``cells`` scored (the dense conditions and the baseline included) and the ``grid``'s;
    the ``budget`` drawn at (a ``target_width`` replay's stop) and whether its target was ``reached`` (True for a
    plain budget)."""

    estimates: list[Estimate]
    estimated: list[bool]
    cells: int
    grid: int
    budget: float
    reached: bool


def sparse_replay(
    grades: object,
    *,
    budget: float | None = None,
    target_width: float | None = None,
    seed: int = 0,
    margins: object = None,
    baseline: object = None,
) -> SparseReplay:
    """What ``dateeval run --budget`` (or ``--target-width``) would score of a dense dates x questions 0/1 grid (date
    order) and what its readers would show: each date's estimate (exact where scored in full) with its 95% interval,
    from the cells the design draws at ``budget`` with ``seed`` (``--budget-seed``); with ``target_width`` (a share,
    e.g. 0.03 for +-3 points), at the first of the pre-declared budgets up to ``budget`` (default 1) where every
    estimated date is within the width, its intervals widened for that data-dependent stop (``sparse.critical``).
    ``margins``: the same shape's top-two option probability margins (None for generated answers; the pilot date's are
    what the design reads); ``baseline``: the no-date grades, scored in full (one per question; they count toward the
    budget as the sweep's baseline does) and the predictor's prior. The first date is the pilot. The draw's uniforms
    hash each cell's position, not a
    store's condition keys, so the cells are the design's but not the same ones a sweep picks. With one dense run, the
    figures each budget or width would give the next models (docs/sparse.md)."""
    from dateeval import sparse
    from dateeval.results.sparse.replay import dense_share, replay, to_width

    found = _grades(grades, "grades")
    if found.ndim != 2 or found.shape[0] <= sparse.PILOT or found.shape[1] < 1:
        raise UsageError(f"grades must be dates x questions with more than {sparse.PILOT} date(s); got {found.shape}")
    if budget is None and target_width is None:
        raise UsageError("give a budget, a target_width, or both (the width's cap)")
    cap = _share(1.0 if budget is None else budget, "budget")
    width = None if target_width is None else _share(target_width, "target_width")
    grades_of = None
    if baseline is not None:
        grades_of = _floats(baseline, "baseline")
        if grades_of.shape != found.shape[1:] or not np.isin(grades_of, (0.0, 1.0)).all():
            raise UsageError(f"baseline must hold one 0/1 grade per question ({found.shape[1]})")
    if not sparse.looks(cap, dense_share(found.shape[0], baseline is not None)):
        dense = sparse.PILOT + int(baseline is not None)
        raise UsageError(f"budget {cap:g} is spent by the {dense} condition(s) scored in full: ask for more")
    margin = _margins(margins, found.shape, "margins")
    if not (isinstance(seed, int) and not isinstance(seed, bool)):
        raise UsageError(f"seed must be a whole number; got {seed!r}")
    draw = {"seed": seed, "margins": margin, "baseline": grades_of}
    done, reached = (replay(found, cap, **draw), True) if width is None else to_width(found, width, cap, **draw)
    estimates = [Estimate(*map(float, row)) for row in zip(done.value, done.low, done.high)]
    return SparseReplay(estimates, [bool(flag) for flag in done.estimated], done.cells, done.grid, done.budget, reached)


def _share(value: object, name: str) -> float:
    """A budget or width as the replay takes it: a number in (0, 1]."""
    from dateeval import sparse

    found = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")
    try:
        return sparse.check_budget(found)
    except DateEvalError:
        raise UsageError(f"{name} is a share in (0, 1], e.g. 0.2; got {value!r}") from None


def _margins(margins: object, shape: tuple, name: str) -> np.ndarray | None:
    """Top-two margins as given (None stays None), checked: in [0, 1], of ``shape``."""
    margin = None if margins is None else _floats(margins, name)
    if margin is not None and (margin.shape != shape or ((margin < 0) | (margin > 1)).any()):
        raise UsageError(f"{name} must be in [0, 1] with shape {shape}")
    return margin


def _graded_sample(values: object, inclusion: object, predictor: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_sample` of 0/1 grades on two or more dates and questions, ``inclusion`` as large as ``values``."""
    found, pi, m = _sample(values, inclusion, predictor)
    if found.shape[0] < 2 or found.shape[1] < 2:
        raise UsageError(f"values must be a dates x questions array with two or more of each; got shape {found.shape}")
    if not np.isin(found[np.isfinite(found)], (0.0, 1.0)).all():
        raise UsageError("values must hold 0/1 grades (1 right) where sampled, NaN elsewhere")
    return found, np.broadcast_to(pi, found.shape), m


def _sample(values: object, inclusion: object, predictor: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A sample of cells as :func:`sparse_estimates` takes it, checked: (values, inclusion, predictor) as arrays,
    or one clear error."""
    if isinstance(values, np.ma.MaskedArray):
        raise UsageError("values is a masked array: pass NaN where a cell was not sampled")
    try:
        found = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise UsageError(
            "values must be a rectangular dates x questions array of numbers, NaN where not sampled"
        ) from None
    if found.ndim != 2 or found.shape[1] < 1 or found.shape[0] < 1:
        raise UsageError(f"values must be a dates x questions array; got shape {found.shape}")
    sampled = found[np.isfinite(found)]
    if np.isinf(found).any() or ((sampled < 0) | (sampled > 1)).any():
        raise UsageError("values must lie in [0, 1] (NaN where not sampled)")
    pi = _floats(inclusion, "inclusion")
    m = _floats(predictor, "predictor")
    if pi.shape not in (found.shape, found.shape[1:]):
        raise UsageError(
            f"inclusion must have the shape of values {found.shape} or one entry per question; got {pi.shape}"
        )
    if not ((pi >= MIN_INCLUSION) & (pi <= 1)).all():
        raise UsageError(
            f"inclusion probabilities must lie in [{MIN_INCLUSION:g}, 1]: a cell that could not be drawn cannot be "
            "estimated, and one drawn with a smaller probability weighs so much that no estimate bounds it"
        )
    if m.shape != found.shape[1:] or ((m < 0) | (m > 1)).any():
        raise UsageError(
            f"predictor must hold one value in [0, 1] per question ({found.shape[1]}); got shape {m.shape}"
        )
    if (np.isnan(found) & (np.broadcast_to(pi, found.shape) == 1)).any():
        raise UsageError("a cell with inclusion probability 1 was always sampled, so values cannot be NaN there")
    return found, pi, m
