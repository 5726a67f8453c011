"""Is a sparse entry's date effect beyond chance? ``chance``'s null, tested on a sample of the grid (issue 46 §2).

The null is ``chance``'s: the date has no effect, so each question's grades are exchangeable across dates. A sparse
sweep (``dateeval.sparse``) drew each question's cells on the non-pilot dates independently of their grades, with one
probability per question fixed by the pilot. Given the pilot and which cells were drawn, the grades a question shows on
its drawn dates are then exchangeable among those dates under the null, so shuffling each question's drawn grades among
its drawn dates (the dates scored in full kept as they are) draws from the statistic's null distribution exactly: a
permutation test of exact size, whatever the design's probabilities (tests/results/test_sparse_chance.py, docs/coverage.md).

Each shuffle's per-date values are the difference estimates a sweep with those grades would give
(``estimated.difference_estimates``), so the worst-to-best delta, its chance band and the Curves page's chance band are
read on the same estimates the page draws, their noise included. The p-value's statistic is Cochran's Q for an
incomplete grid (:func:`shuffles`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dateeval.results.chance import chance
from dateeval.results.sparse.estimated import Sample, difference_estimates, own_weight


MORE = 20  # shuffles drawn anew where the first ones put the p-value at its floor (4,000 from 200)


class Shuffles(NamedTuple):
    """A sample's per-date estimates as drawn (dates) and under each shuffle (shuffles x dates), and the test statistic
    as drawn and under each shuffle (:func:`shuffles`)."""

    observed: np.ndarray
    shuffled: np.ndarray
    statistic: float
    null: np.ndarray


def shuffles(sample: Sample, n_perm: int, seed: int = 0) -> Shuffles:
    """Each question's grades shuffled among its drawn dates, ``n_perm`` times at once.

    A question with k right of its n drawn grades gets a uniform k-subset of those dates, by selection sampling date
    by date (each drawn date takes a right grade with probability (still to place) / (its drawn dates left)), as
    ``chance._shuffled_counts`` does for a dense grid; questions right or wrong on all their drawn dates add the same
    to every shuffle and are not drawn.

    The statistic is Cochran's Q for an incomplete grid: over the drawn dates, sum_d (R_d - E_d)^2 / V_d, with R_d the
    right grades among the questions drawn that date that vary, E_d the sum of their shares right over their drawn
    dates and V_d of share x (1 - share). Unweighted by the design's probabilities it keeps the power the weighted
    estimates lose to a rarely drawn question's large weight; the shuffles make its size exact all the same."""
    values = np.asarray(sample.values, dtype=float)
    observed = difference_estimates(values, sample.inclusion, sample.predictor).value
    free = np.isfinite(values) & ~np.asarray(sample.exact)[:, None]
    grades = np.where(free, values, 0.0)
    right, slots = grades.sum(0), free.sum(0)
    varying = (right > 0) & (right < slots)
    n_dates, n_items = values.shape
    if not varying.any():
        return Shuffles(observed, np.broadcast_to(observed, (n_perm, n_dates)).copy(), 0.0, np.zeros(n_perm))
    weight = own_weight(sample)[varying]  # each date's estimate is linear in its drawn grades, the rest held
    fixed = observed - (grades[:, varying] * weight).sum(1) / n_items
    share = right[varying] / slots[varying]
    here_all = free[:, varying]
    expected, spread = here_all @ share, here_all @ (share * (1 - share))
    scale = np.where(spread > 0, 1 / np.where(spread > 0, spread, 1), 0.0)
    rng = np.random.default_rng(seed)
    remaining = np.broadcast_to(right[varying], (n_perm, int(varying.sum()))).copy()
    left = slots[varying].astype(float)
    shuffled, counts = np.empty((n_perm, n_dates)), np.empty((n_perm, n_dates))
    for date in range(n_dates):
        here = here_all[date]
        taken = here & (rng.random(remaining.shape) * np.where(here, left, 1.0) < remaining)
        remaining -= taken
        left -= here
        shuffled[:, date] = fixed[date] + taken @ weight / n_items
        counts[:, date] = taken.sum(1)
    drawn_counts = grades[:, varying].sum(1)
    statistic = float(((drawn_counts - expected) ** 2 * scale).sum())
    return Shuffles(observed, shuffled, statistic, ((counts - expected) ** 2 * scale).sum(1))


def significance(entry: str, dataset: str, sample: Sample, n_perm: int) -> chance.Significance:
    """A sparse entry's :class:`~dateeval.results.chance.chance.Significance`: the worst-to-best delta of
    its per-date values (estimated where drawn, shares as shown) against its shuffles, the permutation p-value of
    :func:`shuffles`' statistic, and the chance band's half-width. Cochran's Q's chi-square needs every grade: NaN.

    Where the statistic beats every shuffle, the p-value is drawn again from :data:`MORE` times as many, independent
    of the first (a Monte Carlo p-value of its own, so the test keeps its size): without them a p-value cannot go
    below 1 / (shuffles + 1), and the store's verdict, which joins sparse entries by Bonferroni, could never reject
    beside nine or more of them."""
    found = shuffles(sample, n_perm)
    p_value = chance.permutation_p(found.statistic - 1e-9, found.null)
    if p_value * (n_perm + 1) <= 2:  # at the shuffles' floor: anew with as many more as a store's Bonferroni needs
        found = shuffles(sample, MORE * n_perm, seed=1)
        p_value = chance.permutation_p(found.statistic - 1e-9, found.null)
    observed, shuffled = np.clip(found.observed, 0, 1), np.clip(found.shuffled, 0, 1)
    if np.count_nonzero(sample.exact) >= 2:  # dates scored in full have a test of their own to join
        p_value = combined(p_value, _exact_p(sample, n_perm))
    deviation = np.abs(shuffled - shuffled.mean(1, keepdims=True)).max(1)
    draws = np.ptp(shuffled, axis=1)
    return chance.Significance(
        entry=entry,
        dataset=dataset,
        n_dates=len(observed),
        n_items=len(sample.items),
        **chance.against(float(np.ptp(observed)), draws),
        exceeds_chance=p_value < 0.05,
        cochran_q=float("nan"),
        cochran_p=float("nan"),
        cochran_permutation_p=p_value,
        mean_accuracy=float(observed.mean()),
        chance_half_width=float(np.quantile(deviation, 0.95)),
        null_draws=draws.tolist(),
    )


def _exact_p(sample: Sample, n_perm: int) -> float:
    """Cochran's Q by permutation on the dates scored in full (two or more)."""
    exact = np.asarray(sample.values)[np.asarray(sample.exact)]
    return chance.significance("", "", exact, n_perm).cochran_permutation_p


def combined(drawn: float, exact: float) -> float:
    """Fisher's combination of the drawn dates' p-value and the full dates' (chi-square, 4 df). Under the null the
    drawn dates' test is exact given the full dates (their grades fix the design, and the shuffles hold them), so the two
    are independent and the combination keeps its size; each adds the power of its own cells."""
    from scipy import stats as scipy_stats

    return float(scipy_stats.chi2.sf(-2 * (np.log(drawn) + np.log(exact)), 4))
