"""Is the date effect beyond chance? (paper §5.1): what the date's worst-to-best delta, Cochran's Q and leaderboard
reordering would be if the date had no effect, by shuffling each question's outcomes across the dates.

* the null band of one entry's delta (:func:`null_draws`, :func:`against`), and of the largest of K (:func:`largest_of`);
* Cochran's Q, by its chi-square (:func:`cochran_q`) and by permutation (:func:`null_tests`, :func:`permutation_p`);
* the family-wise verdict over every graded entry (:func:`date_effect_family`) and its power (:func:`power`);
* one entry's row of the Factors page's significance table (:func:`significance`) and the chance band of Curves
  (:func:`envelope`);
* how often chance alone reorders a leaderboard (:func:`reorder_chance`).

Every function takes dates x questions 0/1 matrices read from the store (``Results.matrices``); scipy is imported by
the functions that need it, not here (the explorer's first render needs none of it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np


def null_draws(correct: np.ndarray, n_perm: int, seed: int = 0) -> np.ndarray:
    """Worst-to-best deltas chance alone gives over the same dates and items: ``n_perm`` draws.

    ``correct`` is dates x items. Under "the date has no effect" each item's
    outcomes are exchangeable across dates, so shuffling every item's column
    independently gives draws of max - min per-date accuracy with the same
    per-item flip counts.
    """
    return (
        np.ptp(_shuffled_counts(np.asarray(correct) > 0.5, n_perm, np.random.default_rng(seed)), axis=1)
        / correct.shape[1]
    )


def spread(counts: np.ndarray) -> np.ndarray:
    """How unequal the dates' right answers are: D sum(C_d^2) - (sum C_d)^2 over the last axis, in integers (exact).

    With every item's right answers fixed (as shuffling keeps them), Cochran's Q is this times a constant, so a
    permutation test on it is Cochran's Q test with an exact size, where the chi-square approximation is unsure (few items)."""
    counts = np.asarray(counts, dtype=np.int64)
    return counts.shape[-1] * np.sum(counts**2, axis=-1) - np.sum(counts, axis=-1) ** 2


def null_tests(correct: np.ndarray, n_perm: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int, float]:
    """From one set of shuffles: the worst-to-best deltas chance alone gives (:func:`null_draws`, the same draws);
    Cochran's Q as a permutation statistic, its draws and its observed value (:func:`spread`); and the chance band's
    half-width (:func:`envelope`)."""
    correct = np.asarray(correct) > 0.5
    counts = _shuffled_counts(correct, n_perm, np.random.default_rng(seed))
    right = correct.sum(0)
    observed = correct[:, (right > 0) & (right < correct.shape[0])].sum(
        1
    )  # the items shuffling moves, as the draws count them
    return (
        np.ptp(counts, axis=1) / correct.shape[1],
        spread(counts),
        int(spread(observed)),
        envelope(counts, correct.shape[1]),
    )


def envelope(counts: np.ndarray, n_items: int, level: float = 0.95) -> float:
    """The half-width of the chance band drawn on Curves: with the date having no effect, every date's accuracy lies
    within the mean +- this in ``level`` of the shuffles (a simultaneous band over all the dates, the yardstick for
    "does the line leave it"). Shuffles keep the total right, so the mean over dates is the observed one."""
    counts = np.asarray(counts, dtype=float)
    if counts.size == 0:
        return 0.0
    deviation = np.abs(counts - counts.mean(1, keepdims=True)).max(1) / n_items
    return float(np.quantile(deviation, level))


def permutation_p(observed: float, draws: np.ndarray) -> float:
    """The permutation p-value (1 + draws at least as large) / (draws + 1): exact size under the null."""
    return float((1 + np.sum(np.asarray(draws) >= observed)) / (len(draws) + 1))


def cochran_logp(counts: np.ndarray, row_totals: np.ndarray) -> np.ndarray:
    """Cochran's Q's chi-square log p-value from per-date right answers (``counts``, ... x dates) and each question's
    right answers over the dates (``row_totals``, fixed under shuffling): the standardised statistic the verdict takes
    the smallest of over entries (entries with other numbers of dates are compared on one scale). 0 (p = 1) where no
    question varies across dates."""
    from scipy import stats as scipy_stats

    n_dates = counts.shape[-1]
    row_totals = np.asarray(row_totals, dtype=np.int64)
    denominator = n_dates * row_totals.sum() - np.sum(row_totals**2)
    if denominator == 0:
        return np.zeros(counts.shape[:-1])
    q = (n_dates - 1) * spread(counts) / denominator
    return scipy_stats.chi2.logsf(q, n_dates - 1)


SHUFFLE_CELLS = 4_000_000  # gathered cells per chunk of joint shuffles: bounds the memory at a few tens of MB


Progress = Callable[[int, int], object]  # called with (shuffles done, shuffles in all) as a long test goes on


def joint_shuffled_counts(
    group: np.ndarray, n_perm: int, rng: np.random.Generator, progress: Progress | None = None
) -> np.ndarray:
    """Per-date right answers (entries x permutations x dates) of entries that share questions and dates (``group``:
    entries x dates x questions), each question's dates shuffled by ONE permutation applied to every entry: under "the
    date moves no entry" that keeps whatever ties the entries (one model at two precisions answers alike), so the
    draws have the observed data's dependence. Questions constant in every entry add the same to every date and are
    left out."""
    group = np.asarray(group) > 0.5
    n_entries, n_dates, _ = group.shape
    right = group.sum(1)
    varying = ((right > 0) & (right < n_dates)).any(0)
    by_question = np.ascontiguousarray(group[:, :, varying].transpose(0, 2, 1))  # entries x questions x dates
    counts = np.empty((n_entries, n_perm, n_dates), dtype=np.int64)
    chunk = max(1, SHUFFLE_CELLS // max(1, by_question.size))
    for start in range(0, n_perm, chunk):
        size = min(chunk, n_perm - start)
        order = rng.permuted(np.broadcast_to(np.arange(n_dates), (size, by_question.shape[1], n_dates)), axis=2)
        shuffled = np.take_along_axis(by_question[:, None], order[None], axis=3)  # entries x size x questions x dates
        counts[:, start : start + size] = shuffled.sum(2)
        if progress is not None:
            progress(start + size, n_perm)
    return counts


VERDICT_PERM = 1000  # joint shuffles behind the verdict: a p-value near 0.05 has a Monte-Carlo SE of 0.007


def date_effect_family(
    groups: Sequence[Sequence[np.ndarray]], n_perm: int = VERDICT_PERM, seed: int = 0, progress: Progress | None = None
) -> float:
    """The family-wise p-value of "the date moves at least one entry": the smallest of the entries' Cochran's Q
    chi-square p-values (a min-p over standardised statistics), against the same smallest over joint shuffles.

    ``groups`` holds the entries (dates x questions 0/1 matrices) in sets that share questions and dates, rows in the
    same date order and columns in the same question order: a set is shuffled jointly (:func:`joint_shuffled_counts`),
    sets independently of each other. The observed table and the ``n_perm`` shuffled ones are exchangeable under the
    null, so the p-value (1 + shuffles at least as extreme) / (n_perm + 1) has its size for any number of entries, and
    can reach 1 / (n_perm + 1) whatever their number. The chi-square p only puts the entries on one scale: the
    permutation, not the approximation, gives the size. Coverage and power: docs/coverage.md. ``progress`` is told
    each set's shuffles as they are drawn (the time goes there: docs/statistics-api.md gives it by size).
    """
    rng = np.random.default_rng(seed)
    observed, null = 0.0, np.zeros(n_perm)
    for group in groups:
        group = np.stack([np.asarray(matrix) > 0.5 for matrix in group])
        if group.shape[1] < 2 or group.shape[2] == 0:
            continue
        counts = joint_shuffled_counts(group, n_perm, rng, progress)
        for entry, drawn in zip(group, counts):
            totals = entry.sum(0)
            observed = min(observed, float(cochran_logp(entry.sum(1), totals)))
            null = np.minimum(null, cochran_logp(drawn, totals))
    return float((1 + np.sum(null <= observed + 1e-9 * max(1.0, abs(observed)))) / (n_perm + 1))


def bonferroni(p_values: Sequence[float]) -> float:
    """The family-wise p-value of tests joined by Bonferroni: the smallest times their number, at most 1 (1 for none).
    Its size holds whatever their dependence: it joins tests that cannot be shuffled together (sparse entries, each
    under its own design, beside the dense entries' joint test)."""
    return float(min(1.0, len(p_values) * min(p_values))) if len(p_values) else 1.0


def reorder_chance(group: np.ndarray, observed: float, n_perm: int = 200, seed: int = 0) -> dict[str, float]:
    """The share of date pairs that reorder the entries when the date has no effect, beside the ``observed`` share.

    ``group`` is entries x dates x questions (0/1, the same dates and questions). Each question's dates are shuffled
    alike in every entry (:func:`joint_shuffled_counts`), and the entries' per-date right answers ranked on each date:
    counting noise alone reorders entries that are close, more so with few questions. Returns the chance share (the
    mean over ``n_perm`` shuffles), its 95% quantile and the permutation p-value of "the date reorders the entries more
    than chance does" (observed share at least as large)."""
    from dateeval.results.descriptive import reorder_share

    group = np.asarray(group) > 0.5
    right = group.sum(1)
    constant = ~((right > 0) & (right < group.shape[1])).any(0)  # left out of the shuffled counts: add back their share
    fixed = group[:, 0, constant].sum(1)
    counts = joint_shuffled_counts(group, n_perm, np.random.default_rng(seed)) + fixed[:, None, None]
    shares = np.array([reorder_share(counts[:, b].T) for b in range(n_perm)])
    shares = shares[np.isfinite(shares)]
    if not shares.size or not np.isfinite(observed):
        return {"chance": float("nan"), "chance_upper": float("nan"), "p_value": float("nan")}
    return {
        "chance": float(shares.mean()),
        "chance_upper": float(np.quantile(shares, 0.95)),
        "p_value": float((1 + np.sum(shares >= observed - 1e-12)) / (len(shares) + 1)),
    }


def verdict_groups(keys: Sequence, matrices: Sequence[np.ndarray]) -> list[list[np.ndarray]]:
    """The entries' matrices in the sets :func:`date_effect_family` shuffles jointly: equal ``keys`` (e.g. dataset
    and dates, rows sorted by date) and equal shapes. Joint shuffles are valid for any grouping under "the date moves
    nothing"; grouping entries that share questions keeps their dependence, which is where the power comes from."""
    found: dict = {}
    for key, matrix in zip(keys, matrices):
        found.setdefault((key, np.shape(matrix)), []).append(matrix)
    return list(found.values())


def power(correct: np.ndarray, effect: float = 0.05, n_sims: int = 100, n_perm: int = 100, seed: int = 0) -> float:
    """How often the verdict's test (Cochran's Q by permutation, 5%) finds a planted date effect of ``effect`` on
    these questions and dates: each question keeps its own rate (its share right over the dates), the dates' rates are
    moved by an even spread over +-``effect`` / 2 (in random order), and outcomes are drawn from those rates."""
    rng = np.random.default_rng(seed)
    correct = np.asarray(correct, dtype=float)
    rates, n_dates = correct.mean(0), correct.shape[0]
    found = 0
    for _ in range(n_sims):
        shift = rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates))
        drawn = rng.random(correct.shape) < np.clip(rates[None, :] + shift[:, None], 0, 1)
        _, draws, observed, _ = null_tests(drawn, n_perm, int(rng.integers(1 << 31)))
        found += permutation_p(observed, draws) < 0.05
    return found / n_sims


def against(observed: float, draws: np.ndarray, level: float = 0.95) -> dict[str, float]:
    """An observed delta against chance's draws of the same statistic: the band's median and ``level`` quantile
    (its upper edge) and the permutation p-value."""
    return {
        "delta": float(observed),
        "null_median": float(np.median(draws)),
        "null_upper": float(np.quantile(draws, level)),
        "p_value": float((1 + np.sum(draws >= observed - 1e-12)) / (len(draws) + 1)),
    }


def largest_of(
    deltas: Sequence[float], draws: Sequence[np.ndarray], level: float = 0.95, seed: int = 0
) -> dict[str, float]:
    """The largest of K entries' worst-to-best deltas against the null of that largest, not of one entry's.

    Picking the largest of K deltas and testing it against one entry's null
    band overstates the effect: even with no date effect, the largest of K
    null deltas is larger than a typical one. Each entry's permutation draws
    (:func:`null_draws`) are drawn independently; the null of the maximum is
    the maximum over entries of one draw each. Draws are paired at random
    (a permutation per entry), since entries drawn with one seed share their
    random stream.
    """
    rng = np.random.default_rng(seed)
    size = min(len(d) for d in draws)
    maxima = np.max([rng.permutation(np.asarray(d, dtype=float))[:size] for d in draws], axis=0)
    return against(max(deltas), maxima, level)


def _shuffled_counts(correct: np.ndarray, n_perm: int, rng: np.random.Generator) -> np.ndarray:
    """Per-date right answers (permutations x dates) with each item's outcomes shuffled across dates, every permutation at once.

    Shuffling an item's column puts its k right answers on a uniform random
    k-subset of the dates. Items right (or wrong) on every date add the same
    to every date and are left out (they do not move max - min). The subsets
    are drawn by selection sampling, date by date for all permutations and
    items together: date d is taken with probability (still to place) /
    (dates left), which gives every k-subset the same chance, with no sort.
    """
    n_dates = correct.shape[0]
    right = correct.sum(0)
    varying = (right > 0) & (right < n_dates)
    # float32 counts (whole numbers up to the dates, exact) compare with the float32 draws without a float64 copy
    remaining = np.broadcast_to(right[varying].astype(np.float32), (n_perm, int(varying.sum()))).copy()
    draws, taken = np.empty(remaining.shape, dtype=np.float32), np.empty(remaining.shape, dtype=bool)
    counts = np.empty((n_perm, n_dates), dtype=np.int64)
    for date in range(n_dates):  # buffers reused: the draws are the same as fresh arrays would hold
        rng.random(out=draws, dtype=np.float32)
        np.less(np.multiply(draws, np.float32(n_dates - date), out=draws), remaining, out=taken)
        np.subtract(remaining, taken, out=remaining)
        counts[:, date] = np.count_nonzero(taken, axis=1)
    return counts


def cochran_q(correct: np.ndarray) -> dict[str, float]:
    """Cochran's Q test that all dates (rows) have the same accuracy on the same items (columns)."""
    from scipy import stats as scipy_stats

    x = np.asarray(correct, dtype=float).T  # items x dates
    k = x.shape[1]
    columns, rows_total, total = x.sum(0), x.sum(1), x.sum()
    denominator = k * total - np.sum(rows_total**2)
    if denominator == 0:  # every item right on every date, or wrong on every date: nothing varies
        return {"q": 0.0, "df": k - 1, "p_value": 1.0}
    q = (k - 1) * (k * np.sum(columns**2) - total**2) / denominator
    return {"q": float(q), "df": k - 1, "p_value": float(scipy_stats.chi2.sf(q, k - 1))}


SIGNIFICANCE_COLUMNS = [
    "entry",
    "dataset",
    "n_dates",
    "n_items",
    "delta",
    "null_median",
    "null_upper",
    "p_value",
    "cochran_q",
    "cochran_p",
    "cochran_permutation_p",
    "exceeds_chance",
]


@dataclass(frozen=True)
class Significance:
    """One entry's date effect against chance: the Factors page's row, the summary's chance columns and what the
    headline and the verdict read. ``delta`` is the worst-to-best delta, ``null_median``/``null_upper``/``p_value``
    its null band (:func:`against`), ``cochran_*`` Cochran's Q by its chi-square and by permutation (the verdict's test,
    ``exceeds_chance`` at 5%), ``chance_half_width`` the Curves page's chance band around ``mean_accuracy``, and
    ``null_draws`` the shuffled deltas the headline's largest-of-K null draws from.

    Kept with the store as one row (``dateeval.results.sources.stored``): :meth:`record` and :meth:`from_record` are its only
    way in and out; the fields keep the order the row was written in, so kept files do not change."""

    entry: str
    dataset: str
    n_dates: int
    n_items: int
    delta: float
    null_median: float
    null_upper: float
    p_value: float
    exceeds_chance: bool
    cochran_q: float
    cochran_p: float
    cochran_permutation_p: float
    mean_accuracy: float
    chance_half_width: float
    null_draws: list[float]

    def record(self) -> dict:
        """The row this significance is kept as (and a row of the significance table)."""
        return asdict(self)

    @classmethod
    def from_record(cls, record: dict) -> Significance:
        """A kept row back as a significance (a kept row holds exactly its fields)."""
        return cls(**record)


def significance(entry: str, dataset: str, correct: np.ndarray, n_perm: int) -> Significance:
    """One entry's :class:`Significance` (``date_significance``'s row, a test oracle) from its dates x items outcome
    matrix (by condition key)."""
    draws, spreads, observed, half_width = null_tests(correct, n_perm)
    band, q, permuted = (
        against(float(np.ptp(correct.mean(1))), draws),
        cochran_q(correct),
        permutation_p(observed, spreads),
    )
    return Significance(
        entry=entry,
        dataset=dataset,
        n_dates=correct.shape[0],
        n_items=correct.shape[1],
        **band,
        exceeds_chance=permuted < 0.05,
        cochran_q=q["q"],
        cochran_p=q["p_value"],
        cochran_permutation_p=permuted,
        mean_accuracy=float(correct.mean()),
        chance_half_width=half_width,
        null_draws=draws.tolist(),
    )
