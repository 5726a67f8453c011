"""Do the intervals and tests the pages print keep their promise? A simulation with known truth (issue 27 §1).

Every figure calls the function the pages and the CLI call, with the arguments they use:

* per-date band of a rate (Curves): ``inference.date_band(..., "accuracy")``, against the percentile bootstrap it replaced;
* the date-robust interval (What to report, ``robust``): ``robust.entry_statistics`` -> ``low``, ``high``; and the
  variance components' normal interval ``score +- anova_half_width`` that the planning table predicts;
* the verdict's tests (Overview, Factors, ``summary``): ``inference.significance`` -> the permutation p-value of the
  worst-to-best delta and Cochran's Q p-value, their size with no date effect and their power against planted ones.

Truth. Outcomes are Bernoulli(P) with P = Phi(mu + a_item + b_date + c_item_date), a, b, c normal with standard
deviations chosen per scenario (item-dominated, date-dominated, interaction-heavy). The date-marginal score's truth,
the mean of P over the populations of items and dates, is Phi(mu / sqrt(1 + sd_a^2 + sd_b^2 + sd_c^2)) exactly. A
per-date band's truth is that date's rate over the question population: with no date or interaction part, the rate.
Each figure has its Monte-Carlo standard error sqrt(c (1 - c) / reps).

    .venv/bin/python bench/coverage.py                 # the full grid, writes docs/coverage.md (about 10 min on 2 cores)
    .venv/bin/python bench/coverage.py --quick         # a reduced grid, printed only
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dateeval.metrics import ece_rows  # noqa: E402
from dateeval.results import inference, robust  # noqa: E402
from dateeval.results.view import N_PERM  # noqa: E402  (the permutations the explorer's verdict uses)

RATES = (0.02, 0.1, 0.3, 0.5)
ITEMS = (10, 20, 50, 200, 1000)
DATES = (2, 12, 366)
# Standard deviations (item, date, item x date) on the probit scale.
SCENARIOS = {"item-dominated": (1.0, 0.05, 0.1), "date-dominated": (0.3, 0.3, 0.1), "interaction-heavy": (0.5, 0.1, 0.6),
             "no date effect": (0.5, 0.0, 0.6)}  # the tests' null: items differ, answers vary at random, no date part
ROBUST_SCENARIOS = ("item-dominated", "date-dominated", "interaction-heavy")


def se(share: float, reps: int) -> float:
    """The Monte-Carlo standard error of a share measured over ``reps`` simulations."""
    return math.sqrt(max(share * (1 - share), 1e-12) / reps)


def _dates(n: int) -> list:
    return list(pd.date_range("2024-01-01", periods=n))


def percentile_band(correct: np.ndarray, n_boot: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The per-date band the Curves page drew before: the 95% percentile bootstrap over questions (the baseline)."""
    weights = inference.resample_weights(correct.shape[1], n_boot, seed)
    return tuple(np.percentile(correct @ weights.T / correct.shape[1], [2.5, 97.5], axis=1))


def band_coverage(n_items: int, rate: float, reps: int, n_dates: int = 12, seed: int = 0) -> dict:
    """Coverage of the per-date accuracy band (and of the old percentile bootstrap) when every date's true rate is ``rate``."""
    rng = np.random.default_rng(seed)
    hits = old = 0
    for _ in range(reps):
        correct = (rng.random((n_dates, n_items)) < rate).astype(float)
        band = inference.date_band("e", _dates(n_dates), correct, np.full(correct.shape, 0.5), "accuracy")
        hits += int(((band["low"] <= rate) & (rate <= band["high"])).sum())
        low, high = percentile_band(correct, seed=int(rng.integers(1 << 31)))
        old += int(((low <= rate) & (rate <= high)).sum())
    total = reps * n_dates
    return {"items": n_items, "rate": rate, "coverage": hits / total, "se": se(hits / total, total), "percentile_bootstrap": old / total}


def simulate(rng: np.random.Generator, n_dates: int, n_items: int, rate: float, scenario: str, shift: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """One store (dates x items right/wrong) from the scenario's probit model with population-mean score ``rate``, and
    that truth. ``shift`` (per date, in probability) plants a date effect on top."""
    sd_item, sd_date, sd_cell = SCENARIOS[scenario]
    mu = stats.norm.ppf(rate) * math.sqrt(1 + sd_item**2 + sd_date**2 + sd_cell**2)
    latent = mu + sd_item * rng.standard_normal(n_items)[None, :] + sd_date * rng.standard_normal(n_dates)[:, None]
    probability = stats.norm.cdf(latent + sd_cell * rng.standard_normal((n_dates, n_items)))
    if shift is not None:
        probability = np.clip(probability + shift[:, None], 0, 1)
    return (rng.random((n_dates, n_items)) < probability).astype(float), rate


def robust_coverage(n_items: int, n_dates: int, rate: float, scenario: str, reps: int, seed: int = 0) -> dict:
    """Coverage of the printed date-robust interval, of the bootstrap it replaced and of the variance components' normal interval."""
    rng = np.random.default_rng(seed)
    printed = boot = anova = 0
    for _ in range(reps):
        correct, truth = simulate(rng, n_dates, n_items, rate, scenario)
        row = robust.entry_statistics(correct, seed=int(rng.integers(1 << 31)))
        printed += row["low"] <= truth <= row["high"]
        boot += row["bootstrap_low"] <= truth <= row["bootstrap_high"]
        anova += abs(row["score"] - truth) <= row["anova_half_width"]
    return {"scenario": scenario, "items": n_items, "dates": n_dates, "rate": rate, "korn_graubard": printed / reps,
            "two_way_bootstrap": boot / reps, "anova_normal": anova / reps, "se": se(0.95, reps)}  # fmt: skip


def _segments(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-segment BLEU statistics (hypothesis and reference length, then matches and totals of 1- to 4-grams) of
    translations of varying quality: each segment's n-gram precision is q^n with q ~ Beta(6, 4)."""
    length = 5 + rng.poisson(15, n)
    reference = np.maximum(1, length + np.rint(rng.normal(0, 3, n)))
    quality = rng.beta(6, 4, n)
    totals = np.stack([np.maximum(length - k + 1, 0) for k in range(1, 5)], 1)
    matches = rng.binomial(totals, quality[:, None] ** np.arange(1, 5)[None, :])
    return np.column_stack([length, reference, matches, totals]).astype(float)


def bleu_band_coverage(n_items: int, reps: int, n_dates: int = 3, seed: int = 0) -> dict:
    """Coverage of the Curves page's per-date BLEU band (``inference.corpus_band``: the paired bootstrap over segments)
    of the corpus BLEU of the segment population (from 200,000 segments' summed statistics)."""
    from dateeval.corpus import score_from_stats

    rng = np.random.default_rng(seed)
    truth = score_from_stats("bleu", [_segments(np.random.default_rng(12345), 200_000).sum(0)])
    hits = 0
    for _ in range(reps):
        stats = np.stack([_segments(rng, n_items) for _ in range(n_dates)])
        band = inference.corpus_band("e", _dates(n_dates), stats, "bleu", seed=int(rng.integers(1 << 31)))
        hits += int(((band["low"] <= truth) & (truth <= band["high"])).sum())
    total = reps * n_dates
    return {"items": n_items, "truth_bleu": round(truth, 2), "coverage": hits / total, "se": se(hits / total, total)}


def ece_band_coverage(n_items: int, reps: int, n_dates: int = 3, seed: int = 0) -> dict:
    """Coverage of the per-date ECE band (``inference.date_band(..., "ece")``, percentile bootstrap over questions) of the
    population's ECE, for a model whose confidence c ~ Beta(5, 2) is right with probability c^1.5 (overconfident)."""
    rng = np.random.default_rng(seed)
    population = rng.beta(5, 2, 1_000_000)
    truth = float(ece_rows(population[None, :], (rng.random(population.size) < population**1.5)[None, :].astype(float))[0])
    hits = 0
    for _ in range(reps):
        confidence = rng.beta(5, 2, (n_dates, n_items))
        correct = (rng.random(confidence.shape) < confidence**1.5).astype(float)
        band = inference.date_band("e", _dates(n_dates), correct, confidence, "ece", seed=int(rng.integers(1 << 31)))
        hits += int(((band["low"] <= truth) & (truth <= band["high"])).sum())
    total = reps * n_dates
    return {"items": n_items, "truth_ece": round(truth, 4), "coverage": hits / total, "se": se(hits / total, total)}


def cv_coverage(n_items: int, n_dates: int, effect: float, reps: int, rate: float = 0.3, seed: int = 0) -> dict:
    """Coverage of Table 5's CV interval over dates (``inference.bootstrap_cv``: the noise-free CV's noncentral-F
    interval) of the CV of the dates' true rates over the question population, with a planted date effect of ``effect``
    (worst to best); beside it, the percentile bootstrap of the measured CV over questions that the page showed before."""
    rng = np.random.default_rng(seed)
    sd_item, sd_cell = 0.5, 0.3
    scale = math.sqrt(1 + sd_item**2 + sd_cell**2)
    hits = old = 0
    for _ in range(reps):
        rates = rate + rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates))
        truth = float(inference.cv(rates))  # the dates' population rates: Phi(mu_d / scale) = rates
        latent = stats.norm.ppf(rates)[:, None] * scale + sd_item * rng.standard_normal(n_items)[None, :]
        correct = (rng.random((n_dates, n_items)) < stats.norm.cdf(latent + sd_cell * rng.standard_normal((n_dates, n_items)))).astype(float)
        found = inference.bootstrap_cv(correct, np.full(correct.shape, np.nan))
        hits += found["accuracy_cv_low"] <= truth <= found["accuracy_cv_high"]
        weights = inference.resample_weights(n_items, 200, int(rng.integers(1 << 31)))
        low, high = np.percentile(inference.cv(correct @ weights.T / n_items, axis=0), [2.5, 97.5])
        old += low <= truth <= high
    return {"items": n_items, "dates": n_dates, "effect_pp": 100 * effect, "coverage": hits / reps, "se": se(hits / reps, reps),
            "measured_cv_bootstrap": old / reps}  # fmt: skip


def test_rejections(n_items: int, n_dates: int, rate: float, effect: float, reps: int, scenario: str = "no date effect", seed: int = 0) -> dict:
    """How often the verdict's two tests reject at 5%: size when ``effect`` is 0, power against a planted date effect
    whose true worst-to-best range is ``effect`` (the dates' rates spread evenly over it, in shuffled order)."""
    rng = np.random.default_rng(seed)
    delta = cochran = permuted = left = 0
    for _ in range(reps):
        shift = rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates)) if effect else None
        correct, _ = simulate(rng, n_dates, n_items, rate, scenario, shift)
        found = inference.significance("e", "d", correct, N_PERM)
        delta += found["p_value"] < 0.05
        cochran += found["cochran_p"] < 0.05
        permuted += found["cochran_permutation_p"] < 0.05
        left += np.abs(correct.mean(1) - found["mean_accuracy"]).max() > found["chance_half_width"] + 1e-12
    return {"items": n_items, "dates": n_dates, "rate": rate, "effect_pp": 100 * effect, "delta_permutation": delta / reps,
            "cochran_q_chi2": cochran / reps, "cochran_q_permutation": permuted / reps, "leaves_chance_band": left / reps,
            "se_at_5pct": se(0.05, reps)}  # fmt: skip


def family_rejections(n_items: int, n_dates: int, k: int, effect: float, reps: int, seed: int = 0) -> dict:
    """The headline's family-wise tests over ``k`` entries (one of them with a planted date effect of ``effect``, none
    when 0): how often the verdict (Cochran's Q by permutation, min-p over the entries) and the largest delta against the
    largest of K shuffled deltas reject at 5%."""
    rng = np.random.default_rng(seed)
    verdict = largest = 0
    for _ in range(reps):
        rows = []
        for entry in range(k):
            shift = rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates)) if effect and entry == 0 else None
            rows.append(inference.significance("e", "d", simulate(rng, n_dates, n_items, 0.3, "no date effect", shift)[0], N_PERM))
        verdict += inference.smallest_p([row["spread_observed"] for row in rows], [row["spread_draws"] for row in rows]) < 0.05
        largest += inference.largest_of([row["delta"] for row in rows], [row["null_draws"] for row in rows])["p_value"] < 0.05
    return {"items": n_items, "dates": n_dates, "entries": k, "effect_pp": 100 * effect, "verdict_min_p": verdict / reps,
            "largest_delta_of_k": largest / reps, "se_at_5pct": se(0.05, reps)}  # fmt: skip


def _short(rows: list[dict], columns: tuple[str, ...], keys: tuple[str, ...], reps: int) -> str:
    """The cells where a coverage falls below nominal by more than 2 Monte-Carlo standard errors, in words."""
    limit = 0.95 - 2 * se(0.95, reps)
    found = [f"{column} {row[column]:.3f} at " + ", ".join(f"{key} {row[key]}" for key in keys) for row in rows for column in columns if row[column] < limit]
    return ("**Short of 0.95 (below 0.95 − 2 SE = " + f"{limit:.3f}):** " + "; ".join(found) + ".\n\n") if found else f"No cell below 0.95 − 2 SE ({limit:.3f}).\n\n"


def _table(rows: list[dict], fmt: dict[str, str] | None = None) -> str:
    frame = pd.DataFrame(rows)
    fmt = fmt or {}
    head = "| " + " | ".join(frame.columns) + " |\n|" + "|".join("---:" for _ in frame.columns) + "|\n"
    cell = lambda column, value: fmt[column].format(value) if column in fmt else f"{value:.3f}" if isinstance(value, float) else str(value)  # noqa: E731
    body = "".join("| " + " | ".join(cell(c, v) for c, v in row.items()) + " |\n" for row in frame.to_dict("records"))
    return head + body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced grid, printed, docs/coverage.md left alone")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "coverage.md"))
    args = parser.parse_args()
    started = time.perf_counter()
    items, dates = ((10, 20, 50), (2, 12)) if args.quick else (ITEMS, DATES)
    reps = 100 if args.quick else 400
    bands = [band_coverage(n, p, reps) for n in items for p in RATES]
    robust_rows = [robust_coverage(n, d, p, s, reps) for s in ROBUST_SCENARIOS for n in items if n <= 200 for d in dates
                   for p in (0.1, 0.3)]  # fmt: skip
    small = reps // 2  # the bootstrap cells are slower per store
    bleu = [bleu_band_coverage(n, small) for n in items]
    ece = [ece_band_coverage(n, small) for n in items]
    cvs = [cv_coverage(n, d, e, small) for n in items if n <= 200 for d in sorted({*dates, 3}) if d <= 12 for e in (0.0, 0.02, 0.1)]
    families = [family_rejections(n, 12, 6, e, small) for n in items if n <= 200 for e in (0, 0.05, 0.1)]
    tests = [test_rejections(n, d, 0.3, e, reps) for n in items if n <= 200 for d in dates for e in (0, 0.02, 0.05, 0.1)]
    text = (
        "# Coverage and power: does each interval and test keep its promise?\n\n"
        f"Written by `bench/coverage.py` ({'--quick, ' if args.quick else ''}{reps} simulated stores per cell; "
        f"{time.perf_counter() - started:.0f} s on this machine). Every figure calls the function the pages call; its Monte-Carlo "
        "standard error is in the `se` column (for a coverage of 0.95, or a size of 0.05). Nominal: 0.95 coverage, 0.05 size.\n\n"
        "## Per-date band of a rate (Curves): exact Clopper-Pearson, `inference.date_band`\n\n"
        "Every date's true rate is `rate`; 12 dates per store. `percentile_bootstrap` is the band the page drew before "
        "(200 resamples over questions), kept here as the baseline: it collapses to [0, 0] when a date has no right answer.\n\n"
        + _short(bands, ("coverage",), ("items", "rate"), reps * 12)
        + _table(bands)
        + "\n## Per-date BLEU band (Curves): `inference.corpus_band`\n\nThe paired bootstrap over segments (200 resamples), against the "
        "corpus BLEU of the segment population; synthetic per-segment statistics of translations of varying quality, 3 dates "
        f"per store, {small} stores per cell. chrF's band is the same method on chrF's statistics. It runs a little short (a "
        "percentile interval of a ratio of sums): the Curves page's band help says so.\n\n"
        + _short(bleu, ("coverage",), ("items",), small * 3)
        + _table(bleu)
        + "\n## Per-date ECE band (Curves): `inference.date_band(..., \"ece\")`\n\nThe percentile bootstrap over questions, against the "
        "population's ECE (10 bins), for an overconfident model. The sample ECE is biased upward with few questions (each bin's "
        "|confidence - accuracy| gains noise), so the band sits above the truth: the Curves page says so.\n\n"
        + _short(ece, ("coverage",), ("items",), small * 3)
        + _table(ece)
        + "\n## CV interval over dates (Table 5, Factors): `inference.noise_free_cv`\n\nAgainst the CV of the dates' true rates, a "
        "planted date effect of `effect_pp` (worst to best) at a 30% rate. Counting noise inflates a CV measured on few questions "
        "(it is a CV of noisy per-date scores), so the interval is the noise-free CV's: the two-way ANOVA's date variance, its "
        "noncentral F inverted, a continuity correction of half one answer's step on the upper end. `measured_cv_bootstrap` is the interval the "
        "page showed before (the percentile bootstrap of the measured CV over questions), kept as the baseline: it sits above a "
        "small true CV.\n\n"
        + _short(cvs, ("coverage",), ("items", "dates", "effect_pp"), small)
        + _table(cvs, {"effect_pp": "{:.0f}"})
        + "\n## The date-robust interval (What to report, `robust`): `robust.entry_statistics`\n\n"
        "`korn_graubard`: the printed [low, high] (Clopper-Pearson at the effective sample size the variance components give, "
        "Satterthwaite df). `two_way_bootstrap`: the percentile two-way bootstrap (Owen 2007, 1,000 resamples) it replaced, kept "
        "as a cross-check in `--json`. `anova_normal`: score ± `anova_half_width`, the normal approximation of the planning "
        "table's predicted widths and of 'the questions alone'.\n\n"
        + _short(robust_rows, ("korn_graubard",), ("scenario", "items", "dates", "rate"), reps)
        + "Where it is short (many dates, few questions, a skewed spread of question difficulty near a low rate) the What to "
        "report page and `robust` say so beside the sentence.\n\n"
        + _table(robust_rows)
        + "\n## The verdict's tests (Overview, Factors, `summary`): `inference.significance`\n\n"
        f"Rejections at 5% of the worst-to-best delta's permutation test ({N_PERM} permutations, as the explorer), of Cochran's "
        "Q by its chi-square approximation and of Cochran's Q as a permutation statistic (the same shuffles), and how often a "
        "date's accuracy leaves the Curves page's chance band (`chance_half_width`: simultaneous over the dates), on data with no date part (items differ, sd 0.5; each answer varies at random, sd 0.6; probit scale) at a 30% rate; `effect_pp` 0 is the size, the others the power against a planted date "
        "effect whose true worst-to-best range is that many points. The verdict (Overview, `summary`, the report) uses "
        "Cochran's Q by permutation, family-wise over the K entries by min-p: its size is exact, and where the three differ "
        "(many dates) it finds a real date effect far more often than the worst-to-best delta does; with 2 dates the two "
        "permutation tests are one test. The chi-square Q's size is not guaranteed with few questions.\n\n"
        + _table(tests, {"effect_pp": "{:.0f}"})
        + "\n## The headline's family-wise tests over K entries (Overview, `summary`): `inference.smallest_p`, `inference.largest_of`\n\n"
        f"Six entries of 12 dates, none or one of them with a planted date effect of `effect_pp`, {small} stores per cell: the "
        "verdict's min-p over the entries and the largest delta against the largest of six shuffled deltas. `effect_pp` 0 is "
        "the family-wise size.\n\n"
        + _table(families, {"effect_pp": "{:.0f}"})
        + "\n## Not intervals\n\nThe robust leaderboard's *central 95% of ranks* and *ranks over dates* describe the ranks the "
        "swept dates gave (quantiles of the observed ranks), not an estimate of anything beyond them: they have no coverage to "
        "measure. The planning table's predicted half-widths are the `anova_normal` interval at other numbers of dates; its "
        "coverage at the measured dates is the column above.\n"
    )
    print(text)
    if not args.quick:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
