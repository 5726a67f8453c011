"""Do the intervals and tests the pages print keep their promise? A simulation with known truth (issue 27 §1).

Every figure calls the function the pages and the CLI call, with the arguments they use:

* per-date band of a rate (Curves): ``bands.date_band(..., "accuracy")``, against the percentile bootstrap it replaced;
* the date-robust interval (What to report, ``robust``): ``robust.entry_statistics`` -> ``low``, ``high``; and the
  variance components' normal interval ``score +- anova_half_width`` that the planning table predicts;
* the verdict's tests (Overview, Factors, ``summary``): ``chance.significance`` -> the permutation p-value of the
  worst-to-best delta and Cochran's Q p-value, their size with no date effect and their power against planted ones.

Truth. Outcomes are Bernoulli(P) with P = Phi(mu + a_item + b_date + c_item_date), a, b, c normal with standard
deviations chosen per scenario (item-dominated, date-dominated, interaction-heavy). The date-marginal score's truth,
the mean of P over the populations of items and dates, is Phi(mu / sqrt(1 + sd_a^2 + sd_b^2 + sd_c^2)) exactly. A
per-date band's truth is that date's rate over the question population: with no date or interaction part, the rate.
Each figure has its Monte-Carlo standard error sqrt(c (1 - c) / reps).

    .venv/bin/python bench/coverage.py                 # the full grid, writes docs/coverage.md (about 10 min on 2 cores)
    .venv/bin/python bench/coverage.py --quick         # a reduced grid, printed only
    .venv/bin/python bench/coverage.py --only robust   # one section recomputed and spliced into docs/coverage.md
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

from dateeval.metrics.calibration import ece_rows
from dateeval.results.bands import bands
from dateeval.results.chance import chance
from dateeval.results.robust import robust
from dateeval.results import variation
from dateeval.results.readers.chance import N_PERM

RATES = (0.02, 0.1, 0.3, 0.5)
ITEMS = (10, 20, 50, 200, 1000)
DATES = (2, 12, 366)
# Standard deviations (item, date, item x date) on the probit scale.
SCENARIOS = {
    "item-dominated": (1.0, 0.05, 0.1),
    "date-dominated": (0.3, 0.3, 0.1),
    "interaction-heavy": (0.5, 0.1, 0.6),
    "no date effect": (0.5, 0.0, 0.6),
}  # the tests' null: items differ, answers vary at random, no date part
ROBUST_SCENARIOS = ("item-dominated", "date-dominated", "interaction-heavy")


def se(share: float, reps: int) -> float:
    """The Monte-Carlo standard error of a share measured over ``reps`` simulations."""
    return math.sqrt(max(share * (1 - share), 1e-12) / reps)


def _dates(n: int) -> list:
    return list(pd.date_range("2024-01-01", periods=n))


def percentile_band(correct: np.ndarray, n_boot: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The per-date band the Curves page drew before: the 95% percentile bootstrap over questions (the baseline)."""
    weights = bands.resample_weights(correct.shape[1], n_boot, seed)
    return tuple(np.percentile(correct @ weights.T / correct.shape[1], [2.5, 97.5], axis=1))


def band_coverage(n_items: int, rate: float, reps: int, n_dates: int = 12, seed: int = 0) -> dict:
    """Coverage of the per-date accuracy band (and of the old percentile bootstrap) when every date's true rate is ``rate``."""
    rng = np.random.default_rng(seed)
    hits = old = 0
    for _ in range(reps):
        correct = (rng.random((n_dates, n_items)) < rate).astype(float)
        band = bands.date_band("e", _dates(n_dates), correct, np.full(correct.shape, 0.5), "accuracy")
        hits += int(((band["low"] <= rate) & (rate <= band["high"])).sum())
        low, high = percentile_band(correct, seed=int(rng.integers(1 << 31)))
        old += int(((low <= rate) & (rate <= high)).sum())
    total = reps * n_dates
    return {
        "items": n_items,
        "rate": rate,
        "coverage": hits / total,
        "se": se(hits / total, total),
        "percentile_bootstrap": old / total,
    }


def simulate(
    rng: np.random.Generator, n_dates: int, n_items: int, rate: float, scenario: str, shift: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
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
    """Coverage and mean width of the printed date-robust interval (``robust.date_robust``: Korn-Graubard widened by
    plus-two questions), of Korn-Graubard alone (the interval it replaced) and of the variance components' normal
    interval."""
    rng = np.random.default_rng(seed)
    printed = alone = anova = 0
    width = alone_width = 0.0
    for _ in range(reps):
        correct, truth = simulate(rng, n_dates, n_items, rate, scenario)
        score, low, high, _ = robust.date_robust(correct)
        _, kg_low, kg_high, _ = robust._korn_graubard_of(correct)
        printed += low <= truth <= high
        alone += kg_low <= truth <= kg_high
        width, alone_width = width + (high - low) / reps, alone_width + (kg_high - kg_low) / reps
        anova += abs(score - truth) <= variation.variance_components(correct).half_width()
    return {
        "scenario": scenario,
        "items": n_items,
        "dates": n_dates,
        "rate": rate,
        "printed": printed / reps,
        "width": width,
        "korn_graubard_alone": alone / reps,
        "kg_width": alone_width,
        "anova_normal": anova / reps,
        "se": se(0.95, reps),
    }


def _segments(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-segment BLEU statistics (hypothesis and reference length, then matches and totals of 1- to 4-grams) of
    translations of varying quality: each segment's n-gram precision is q^n with q ~ Beta(6, 4)."""
    length = 5 + rng.poisson(15, n)
    reference = np.maximum(1, length + np.rint(rng.normal(0, 3, n)))
    quality = rng.beta(6, 4, n)
    totals = np.stack([np.maximum(length - k + 1, 0) for k in range(1, 5)], 1)
    matches = rng.binomial(totals, quality[:, None] ** np.arange(1, 5)[None, :])
    return np.column_stack([length, reference, matches, totals]).astype(float)


def _chrf_segments(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-segment chrF statistics (sacrebleu's order: for each character n-gram order 1-6, the hypothesis's n-grams,
    the reference's and their matches) of translations of varying quality: q ~ Beta(6, 4) per segment, each n-gram
    order matching at rate q^(n/2) (characters match more often than words)."""
    length = 20 + rng.poisson(60, n)
    reference = np.maximum(6, length + np.rint(rng.normal(0, 8, n)))
    quality = rng.beta(6, 4, n)
    columns = []
    for order in range(1, 7):
        hyp, ref = np.maximum(length - order + 1, 0), np.maximum(reference - order + 1, 0)
        columns += [hyp, ref, rng.binomial(np.minimum(hyp, ref).astype(int), quality ** (order / 2))]
    return np.column_stack(columns).astype(float)


SEGMENTS = {"bleu": _segments, "chrf": _chrf_segments}


def bleu_band_coverage(n_items: int, reps: int, n_dates: int = 3, seed: int = 0, metric: str = "bleu") -> dict:
    """Coverage of the Curves page's per-date BLEU or chrF band (``bands.corpus_band``: the log-scale jackknife-t over
    segments) of the corpus score of the segment population (from 200,000 segments' summed statistics)."""
    from dateeval.metrics.corpus import score_from_stats

    rng, draw = np.random.default_rng(seed), SEGMENTS[metric]
    truth = score_from_stats(metric, [draw(np.random.default_rng(12345), 200_000).sum(0)])
    hits = printed = 0
    for _ in range(reps):
        stats = np.stack([draw(rng, n_items) for _ in range(n_dates)])
        band = bands.corpus_band("e", _dates(n_dates), stats, metric)
        hits += int(((band["low"] <= truth) & (truth <= band["high"])).sum())
        printed += int(band["low"].notna().sum())
    total = reps * n_dates
    return {
        "metric": metric,
        "items": n_items,
        "truth": round(truth, 2),
        "coverage": hits / total,
        "se": se(hits / total, total),
        "printed": printed / total,
    }


# Confidence models: each question's chance p of a right answer ~ Beta(kappa m, kappa (1 - m)) (accuracy m); the stated
# confidence is p (calibrated), p^0.8 (slightly overconfident: the hard case, a small true ECE under a large bias) or
# p^0.5 (overconfident).
ECE_MODELS = {"calibrated": 1.0, "slightly over": 0.8, "overconfident": 0.5}
ECE_ACCURACIES = (0.1, 0.5, 0.9)
ECE_ITEMS = (20, 50, 100, 200, 1000)


def _ece_draw(
    rng: np.random.Generator, shape: tuple[int, ...], accuracy: float, power: float
) -> tuple[np.ndarray, np.ndarray]:
    """Confidences and each one's chance of being right, under one confidence model."""
    right = rng.beta(6 * accuracy, 6 * (1 - accuracy), shape)
    return right**power, right


def ece_truth(accuracy: float, power: float) -> float:
    """The population ECE (10 bins): sum over bins of |E[1{bin} (p - confidence)]|, from 2,000,000 questions' p (no
    grading noise); exactly 0 for the calibrated model."""
    from dateeval.metrics.calibration import ece_bin_sums, ece_from_sums

    confidence, right = _ece_draw(np.random.default_rng(12345), (2_000_000,), accuracy, power)
    return float(
        ece_from_sums(*ece_bin_sums(np.zeros(right.size, dtype=np.int64), confidence, right, 1), debiased=False)[0]
    )


def ece_band_coverage(n_items: int, accuracy: float, model: str, reps: int, n_dates: int = 3, seed: int = 0) -> dict:
    """Coverage and mean width of the per-date ECE interval (``bands.ece_interval``: what the Curves page and
    ``dateeval.stats.ece`` print) of the population ECE, measured also below :data:`bands.ECE_BAND_MIN_ITEMS`; the
    mean error of the printed (debiased) ECE and of the paper's plug-in."""
    rng = np.random.default_rng(seed)
    power = ECE_MODELS[model]
    truth = ece_truth(accuracy, power)
    hits = printed = 0
    width = debiased = plug_in = 0.0
    for _ in range(reps):
        confidence, right = _ece_draw(rng, (n_dates, n_items), accuracy, power)
        correct = (rng.random(confidence.shape) < right).astype(float)
        low, high = bands.ece_interval(confidence, correct, seed=int(rng.integers(1 << 31)), min_items=1)
        shown = np.isfinite(low)  # NaN: fewer than 3 right or 3 wrong answers, no interval printed
        printed += int(shown.sum())
        hits += int(((low <= truth) & (truth <= high)).sum())
        width += float((high - low)[shown].sum())
        debiased += float((ece_rows(confidence, correct) - truth).sum())
        plug_in += float((ece_rows(confidence, correct, debiased=False) - truth).sum())
    total, shown = reps * n_dates, max(printed, 1)
    return {
        "model": model,
        "accuracy": accuracy,
        "items": n_items,
        "truth_ece": round(truth, 4),
        "coverage": hits / shown,
        "se": se(hits / shown, shown),
        "width": width / shown,
        "no_interval": 1 - printed / total,
        "debiased_error": debiased / total,
        "plug_in_error": plug_in / total,
        "printed": n_items >= bands.ECE_BAND_MIN_ITEMS,
    }


def ece_constant_coverage(n_items: int, accuracy: float, confidence: float, reps: int, seed: int = 0) -> dict:
    """Issue 47 section 3: one confidence for every question (a model that says 0.99 to everything) at an accuracy
    near 0 or 1, the population ECE |accuracy - confidence|: coverage among the printed intervals, and how often none
    is printed (fewer than ``bands.ECE_BAND_MIN_EACH`` right or wrong answers)."""
    rng = np.random.default_rng(seed)
    truth = abs(accuracy - confidence)
    correct = (rng.random((reps, n_items)) < accuracy).astype(float)
    low, high = bands.ece_interval(np.full((reps, n_items), confidence), correct, seed=seed, min_items=1)
    shown = np.isfinite(low)
    hits = int(((low - 1e-12 <= truth) & (truth <= high + 1e-12)).sum())
    coverage = hits / max(int(shown.sum()), 1)
    return {
        "accuracy": accuracy,
        "confidence": confidence,
        "items": n_items,
        "truth_ece": round(truth, 4),
        "coverage": coverage,
        "se": se(coverage, max(int(shown.sum()), 1)),
        "no_interval": 1 - shown.mean(),
        "width": float((high - low)[shown].mean()) if shown.any() else float("nan"),
    }


ECE_PAIRS = (
    ("calibrated", "calibrated"),
    ("slightly over", "slightly over"),
    ("overconfident", "slightly over"),
    ("overconfident", "calibrated"),
)


def ece_delta_coverage(n_items: int, accuracy: float, models: tuple[str, str], reps: int, seed: int = 0) -> dict:
    """Coverage of Table 8's interval on the ECE delta between two dates (``bands.ece_difference_interval``) of the
    difference of their population ECEs: the same questions (each one's chance p shared) on both dates, confidence
    p^a under each date's model, the grades drawn on each date."""
    rng = np.random.default_rng(seed)
    first, second = (ECE_MODELS[model] for model in models)
    truth = ece_truth(accuracy, first) - ece_truth(accuracy, second)
    hits = 0
    width = 0.0
    for _ in range(reps):
        _, right = _ece_draw(rng, (n_items,), accuracy, 1.0)
        confidence = np.stack([right**first, right**second])
        correct = (rng.random(confidence.shape) < right).astype(float)
        low, high = bands.ece_difference_interval(confidence, correct, seed=int(rng.integers(1 << 31)))
        hits += low <= truth <= high
        width += (high - low) / reps
    return {
        "dates": " - ".join(models),
        "accuracy": accuracy,
        "items": n_items,
        "truth_delta": round(truth, 4),
        "coverage": hits / reps,
        "se": se(hits / reps, reps),
        "width": width,
    }


def cv_coverage(n_items: int, n_dates: int, effect: float, reps: int, rate: float = 0.3, seed: int = 0) -> dict:
    """Coverage of Table 5's CV interval over dates (``variation.bootstrap_cv``: the noise-free CV's noncentral-F
    interval) of the CV of the dates' true rates over the question population, with a planted date effect of ``effect``
    (worst to best); beside it, the percentile bootstrap of the measured CV over questions that the page showed before."""
    rng = np.random.default_rng(seed)
    sd_item, sd_cell = 0.5, 0.3
    scale = math.sqrt(1 + sd_item**2 + sd_cell**2)
    hits = old = 0
    for _ in range(reps):
        rates = rate + rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates))
        truth = float(variation.cv(rates))  # the dates' population rates: Phi(mu_d / scale) = rates
        latent = stats.norm.ppf(rates)[:, None] * scale + sd_item * rng.standard_normal(n_items)[None, :]
        correct = (
            rng.random((n_dates, n_items)) < stats.norm.cdf(latent + sd_cell * rng.standard_normal((n_dates, n_items)))
        ).astype(float)
        found = variation.bootstrap_cv(correct, np.full(correct.shape, np.nan))
        hits += found["accuracy_cv_low"] <= truth <= found["accuracy_cv_high"]
        weights = bands.resample_weights(n_items, 200, int(rng.integers(1 << 31)))
        low, high = np.percentile(variation.cv(correct @ weights.T / n_items, axis=0), [2.5, 97.5])
        old += low <= truth <= high
    return {
        "items": n_items,
        "dates": n_dates,
        "effect_pp": 100 * effect,
        "coverage": hits / reps,
        "se": se(hits / reps, reps),
        "measured_cv_bootstrap": old / reps,
    }


def test_rejections(
    n_items: int, n_dates: int, rate: float, effect: float, reps: int, scenario: str = "no date effect", seed: int = 0
) -> dict:
    """How often the verdict's two tests reject at 5%: size when ``effect`` is 0, power against a planted date effect
    whose true worst-to-best range is ``effect`` (the dates' rates spread evenly over it, in shuffled order)."""
    rng = np.random.default_rng(seed)
    delta = cochran = permuted = left = 0
    for _ in range(reps):
        shift = rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates)) if effect else None
        correct, _ = simulate(rng, n_dates, n_items, rate, scenario, shift)
        found = chance.significance("e", "d", correct, N_PERM)
        delta += found.p_value < 0.05
        cochran += found.cochran_p < 0.05
        permuted += found.cochran_permutation_p < 0.05
        left += np.abs(correct.mean(1) - found.mean_accuracy).max() > found.chance_half_width + 1e-12
    return {
        "items": n_items,
        "dates": n_dates,
        "rate": rate,
        "effect_pp": 100 * effect,
        "delta_permutation": delta / reps,
        "cochran_q_chi2": cochran / reps,
        "cochran_q_permutation": permuted / reps,
        "leaves_chance_band": left / reps,
        "se_at_5pct": se(0.05, reps),
    }


FAMILY_PERM = (
    200  # joint shuffles per simulated store (the pages take chance.VERDICT_PERM; the size holds for any number)
)


def family_rejections(
    n_items: int,
    n_dates: int,
    k: int,
    effect: float,
    reps: int,
    planted: str = "one",
    shared: float = 0.8,
    n_perm: int = FAMILY_PERM,
    with_delta: bool = True,
    seed: int = 0,
) -> dict:
    """The headline's family-wise tests over ``k`` entries on the same questions and dates, as one model at several
    precisions: the questions' difficulty is shared, and a ``shared`` part of each answer's noise (probit scale).
    A date effect of ``effect`` (worst to best) is planted in one entry (``planted`` "one") or, one effect, in all
    ("all"); none when 0. How often each rejects at 5%: the verdict (``chance.date_effect_family``, min-p of the
    entries' Cochran's Q over joint shuffles), Cochran's Q per entry by chi-square with a Bonferroni correction, and
    (``with_delta``) the largest delta against the largest of K shuffled deltas (``chance.largest_of``)."""
    rng = np.random.default_rng(seed)
    sd_item, _, sd_cell = SCENARIOS["no date effect"]
    mu = stats.norm.ppf(0.3) * math.sqrt(1 + sd_item**2 + sd_cell**2)
    verdict = bonferroni = largest = 0
    for _ in range(reps):
        item = mu + sd_item * rng.standard_normal(n_items)[None, :]
        common = rng.standard_normal((n_dates, n_items))
        shift = rng.permutation(np.linspace(-effect / 2, effect / 2, n_dates))[:, None]
        matrices = []
        for entry in range(k):
            cell = math.sqrt(shared) * common + math.sqrt(1 - shared) * rng.standard_normal((n_dates, n_items))
            probability = stats.norm.cdf(item + sd_cell * cell)
            if effect and (planted == "all" or entry == 0):
                probability = np.clip(probability + shift, 0, 1)
            matrices.append((rng.random((n_dates, n_items)) < probability).astype(float))
        verdict += chance.date_effect_family([matrices], n_perm, int(rng.integers(1 << 31))) < 0.05
        bonferroni += min(chance.cochran_q(m)["p_value"] for m in matrices) * k < 0.05
        if with_delta:
            rows = [chance.significance("e", "d", m, N_PERM) for m in matrices]
            largest += (
                chance.largest_of([row.delta for row in rows], [row.null_draws for row in rows])["p_value"] < 0.05
            )
    return {
        "items": n_items,
        "dates": n_dates,
        "entries": k,
        "planted": planted if effect else "-",
        "effect_pp": 100 * effect,
        "verdict": verdict / reps,
        "bonferroni_q_chi2": bonferroni / reps,
        "largest_delta_of_k": largest / reps if with_delta else float("nan"),
        "se_at_5pct": se(0.05, reps),
    }


def _short(rows: list[dict], columns: tuple[str, ...], keys: tuple[str, ...], reps: int) -> str:
    """The cells where a coverage falls below nominal by more than 2 Monte-Carlo standard errors, in words."""
    limit = 0.95 - 2 * se(0.95, reps)
    found = [
        f"{column} {row[column]:.3f} at " + ", ".join(f"{key} {row[key]}" for key in keys)
        for row in rows
        for column in columns
        if row[column] < limit
    ]
    return (
        ("**Short of 0.95 (below 0.95 − 2 SE = " + f"{limit:.3f}):** " + "; ".join(found) + ".\n\n")
        if found
        else f"No cell below 0.95 − 2 SE ({limit:.3f}).\n\n"
    )


def _table(rows: list[dict], fmt: dict[str, str] | None = None) -> str:
    frame = pd.DataFrame(rows)
    fmt = fmt or {}
    head = "| " + " | ".join(frame.columns) + " |\n|" + "|".join("---:" for _ in frame.columns) + "|\n"

    def cell(column: str, value: object) -> str:
        return (
            fmt[column].format(value) if column in fmt else f"{value:.3f}" if isinstance(value, float) else str(value)
        )

    body = "".join("| " + " | ".join(cell(c, v) for c, v in row.items()) + " |\n" for row in frame.to_dict("records"))
    return head + body


COMPARE_HEADING = "## Model against model (`dateeval compare`, Leaderboard): `robust.paired_difference`, `robust.sensitivity_difference`"


def compare_cells(n_items: int, n_dates: int, reps: int, seed: int = 0) -> dict:
    """Two models on the same questions and dates (shared question and date effects, their own answer noise; probit
    sds 0.5, 0.2, 0.6): how often A - B's interval (``robust.paired_difference``) covers the true difference of their
    date-robust scores (rates 0.4 and 0.3), and how often the date-sensitivity test (``robust.sensitivity_difference``)
    rejects at 5% when both move alike with the date (both at 0.3: its size)."""
    rng = np.random.default_rng(seed)
    sd_item, sd_date, sd_cell = 0.5, 0.2, 0.6
    scale = math.sqrt(1 + sd_item**2 + sd_date**2 + sd_cell**2)
    covered = rejected = 0
    for _ in range(reps):
        shared = sd_item * rng.standard_normal(n_items)[None, :] + sd_date * rng.standard_normal(n_dates)[:, None]

        def draw(rate: float) -> np.ndarray:
            return (
                rng.random((n_dates, n_items))
                < stats.norm.cdf(
                    stats.norm.ppf(rate) * scale + shared + sd_cell * rng.standard_normal((n_dates, n_items))
                )
            ).astype(float)

        a, b, c = draw(0.4), draw(0.3), draw(0.3)
        _, low, high = robust.paired_difference(a, b)
        covered += low <= 0.1 <= high
        rejected += robust.sensitivity_difference(b, c, seed=int(rng.integers(1 << 31))).p_value < 0.05
    return {
        "items": n_items,
        "dates": n_dates,
        "difference_coverage": covered / reps,
        "sensitivity_size": rejected / reps,
        "se_at_95pct": se(0.95, reps),
        "se_at_5pct": se(0.05, reps),
    }


def compare_section(reps: int) -> str:
    """The docs' section on ``dateeval compare``'s interval and test."""
    started = time.perf_counter()
    rows = [compare_cells(n, d, reps) for n in (20, 50, 200) for d in DATES]
    return (
        f"\n{COMPARE_HEADING}\n\n{reps} simulated pairs per cell; {time.perf_counter() - started:.0f} s. `difference_coverage`: "
        "the A - B interval (clustered by question, the dates' share added where the difference moves with the date) "
        "against the true difference (0.1). `sensitivity_size`: the date-sensitivity test's rejections at 5% when both models "
        "move alike with the date (questions resampled, 1,000 resamples).\n\n"
        + _short(rows, ("difference_coverage",), ("items", "dates"), reps)
        + _table(rows)
    )


ECE_HEADING = (
    "## Per-date ECE and Table 8's ECE delta (Curves, `dateeval.stats.ece`): `bands.ece_interval`, "
    "`bands.ece_difference_interval`"
)


def ece_section(reps: int) -> str:
    """The docs' section on the debiased ECE, its interval (3 confidence models x 3 accuracies x 20-1,000 questions)
    and Table 8's delta interval."""
    started = time.perf_counter()
    rows = [ece_band_coverage(n, a, model, reps) for model in ECE_MODELS for a in ECE_ACCURACIES for n in ECE_ITEMS]
    deltas = [
        ece_delta_coverage(n, a, pair, reps) for pair in ECE_PAIRS for a in ECE_ACCURACIES for n in (50, 200, 1000)
    ]
    printed = [row for row in rows if row["printed"]]
    worst = min(printed, key=lambda row: row["coverage"])
    return (
        f"\n{ECE_HEADING}\n\n"
        f"{reps} simulated stores per cell, 3 dates each for the band (so {3 * reps} intervals per cell), one pair of dates "
        f"for the delta; {time.perf_counter() - started:.0f} s. Each question's chance p of a right answer ~ Beta(6m, 6(1 - m)) "
        "(`accuracy` m); its stated confidence is p (`calibrated`: the population ECE is exactly 0, the risky case: any "
        "estimate sits above it), p^0.8 (`slightly over`) or p^0.5 (`overconfident`). `truth_ece`: the population ECE over "
        "10 bins, from 2,000,000 questions' p. The value printed is the debiased ECE (Kumar, Liang & Ma 2019, each bin's "
        "gap less its counting noise's bias, closed form); `debiased_error` and `plug_in_error` are the mean errors of it and "
        "of the paper's plug-in. The interval: above, the plug-in + t(n-1) x sqrt(Brier / n) (the ECE is one fixed signed "
        "sum of the bins' gaps); below, the plug-in less the 97.5% point of the bins' summed sampling error (questions "
        "resampled, 200 times, grades redrawn at the bin's accuracy or mean confidence, whichever is nearer 0.5), floored at 0. "
        "The percentile bootstrap it replaced covered 0.50 at 50 questions and 0.87 at 200 (printed only from 1,000); the "
        "same bounds with the grades not redrawn covered 0.89-0.93 for calibrated models at 50-100 questions, accuracy 0.1 "
        f"or 0.9. `printed`: the pages print the band (from {bands.ECE_BAND_MIN_ITEMS} questions; none below, though it "
        "also covered at 20). The bounds are conservative (coverage near 1 where the model is miscalibrated): honest, wide "
        "on few questions. `se`: sqrt(c (1 - c) / N) over the cell's N intervals; 0 where all N covered (the miss rate is "
        "then below 3 / N at 95%).\n\n"
        + _short(printed, ("coverage",), ("model", "accuracy", "items"), 3 * reps)
        + f"Lowest printed cell: {worst['coverage']:.3f} ± {worst['se']:.3f} ({worst['model']}, accuracy {worst['accuracy']}, "
        f"{worst['items']} questions).\n\n"
        + _table(rows)
        + "\nTable 8's delta: the same questions on two dates, each date's confidence from the model named; the interval of "
        "ECE(first) - ECE(second) is [low_first - high_second, high_first - low_second] with each per-date end at 1.25% "
        "(`bands.ece_difference_interval`). The percentile bootstrap of the two debiased ECEs' difference, paired over "
        "questions, covered 0.49-0.83 when the second date was calibrated (its ECE at the floor 0, where every estimate is "
        "biased upward) and is not used.\n\n"
        + _short(deltas, ("coverage",), ("dates", "accuracy", "items"), reps)
        + _table(deltas)
    )


EXTREMES_HEADING = "## Rates near 0 and 1: the ECE interval and model against model (issue 47 sections 2 and 3)"
EXTREME_CELLS = ((0.97, 0.99), (0.98, 1.0), (0.95, 0.99), (0.99, 0.99), (0.9, 0.95), (0.03, 0.01), (0.01, 0.05))


def paired_extreme_coverage(rate_a: float, rate_b: float, items: int, dates: int, reps: int, seed: int = 0) -> dict:
    """``robust.paired_difference`` (``dateeval compare``, ``stats.paired_difference``) where the rates sit near 0 or 1:
    each question's own chance for A and for B near the rate (sd 0.02), answers drawn per date; the truth is the mean of
    the questions' differences. Coverage among the intervals printed, and how often none is (no spread: NaN bounds)."""
    from dateeval.results.robust.robust import paired_difference

    rng = np.random.default_rng(seed)
    hits = printed = 0
    for _ in range(reps):
        skill_a = np.clip(rng.normal(rate_a, 0.02, items), 0.001, 0.999)
        skill_b = np.clip(rng.normal(rate_b, 0.02, items), 0.001, 0.999)
        a = (rng.random((dates, items)) < skill_a).astype(float)
        b = (rng.random((dates, items)) < skill_b).astype(float)
        _, low, high = paired_difference(a, b)
        if np.isfinite(low):
            printed += 1
            hits += low <= float(np.mean(skill_a - skill_b)) <= high
    coverage = hits / max(printed, 1)
    return {
        "rate_a": rate_a,
        "rate_b": rate_b,
        "items": items,
        "dates": dates,
        "coverage": coverage,
        "se": se(coverage, max(printed, 1)),
        "no_interval": 1 - printed / reps,
    }


def extremes_section(reps: int) -> str:
    """Where the sample shows almost no spread: the ECE interval at accuracy near 0 or 1 with one confidence for every
    question, and the paired difference of two entries near opposite ends. Both print NaN bounds where no interval held."""
    started = time.perf_counter()
    eces = [ece_constant_coverage(n, a, c, reps) for a, c in EXTREME_CELLS for n in (50, 100, 200, 1000)]
    pairs = [
        paired_extreme_coverage(a, b, n, d, reps)
        for a, b in ((0.98, 0.02), (0.95, 0.05), (0.98, 0.5), (0.5, 0.02), (0.02, 0.05))
        for n in (10, 20, 50)
        for d in (2, 12)
    ]
    low_ece, low_pair = min(eces, key=lambda row: row["coverage"]), min(pairs, key=lambda row: row["coverage"])
    return (
        f"\n{EXTREMES_HEADING}\n\n"
        f"{reps} simulated stores per cell; {time.perf_counter() - started:.0f} s. Coverage is among the intervals printed; "
        "`no_interval` the share where none is (NaN bounds, said in words where shown).\n\n"
        f"**ECE** (`bands.ece_interval`, `stats.ece`): one stated confidence for every question, accuracy near 0 or 1, the "
        "population ECE |accuracy - confidence|. An interval read from a sample with almost no misses covered 0.58-0.80 at "
        f"50-100 questions; none is printed with fewer than {bands.ECE_BAND_MIN_EACH} right or {bands.ECE_BAND_MIN_EACH} "
        f"wrong answers. Lowest printed cell: {low_ece['coverage']:.3f} ± {low_ece['se']:.3f} (accuracy {low_ece['accuracy']}, "
        f"confidence {low_ece['confidence']}, {low_ece['items']} questions).\n\n"
        + _table(eces)
        + "\n**Model against model** (`robust.paired_difference`, `compare`, `stats.paired_difference`): A and B near opposite "
        "ends. Where every question differs by the same amount on every date the interval would be zero wide (13.5% of the "
        "intervals at 0.95 against 0.05, 20 questions x 2 dates, which pulled coverage to 0.86-0.90); NaN bounds there, and "
        f"everywhere else it covers. Lowest printed cell: {low_pair['coverage']:.3f} ± {low_pair['se']:.3f} (A {low_pair['rate_a']}, "
        f"B {low_pair['rate_b']}, {low_pair['items']} questions x {low_pair['dates']} dates).\n\n" + _table(pairs)
    )


CV_YEAR_HEADING = "## CV interval over a year of dates (Table 5, Factors, 366 levels): `variation.noise_free_cv`"


def cv_year_section(reps: int) -> str:
    """The docs' section on Table 5's CV interval at 366 dates (a full year's sweep), 10-200 questions."""
    started = time.perf_counter()
    rows = [cv_coverage(n, 366, e, reps) for n in (10, 20, 50, 200) for e in (0.0, 0.02, 0.1)]
    return (
        f"\n{CV_YEAR_HEADING}\n\nThe section above's simulation at 366 dates (a daily sweep over 2024), {reps} stores per "
        f"cell; {time.perf_counter() - started:.0f} s. `effect_pp` 0: no date effect (true CV 0).\n\n"
        + _short(rows, ("coverage",), ("items", "effect_pp"), reps)
        + _table(rows, {"effect_pp": "{:.0f}"})
    )


BLEU_HEADING = "## Per-date BLEU and chrF band (Curves): `bands.corpus_band`"


def bleu_section(reps: int) -> str:
    """The docs' section on the per-date BLEU band, 10-1,000 segments."""
    started = time.perf_counter()
    rows = [bleu_band_coverage(n, reps, metric=metric) for metric in SEGMENTS for n in ITEMS]
    return (
        f"\n{BLEU_HEADING}\n\nThe log-scale jackknife-t over segments (each leave-one-out corpus score from the summed "
        "statistics, sacrebleu's own score; score x exp(-+ t x the jackknife SE of log score)), against the corpus BLEU of the "
        f"segment population; synthetic per-segment statistics of translations of varying quality (BLEU: word n-gram "
        "precision q^n; chrF: character n-gram match rate q^(n/2), q ~ Beta(6, 4) per segment), 3 dates per store, "
        f"{reps} stores per cell; {time.perf_counter() - started:.0f} s. `printed`: the share of dates given a band (none "
        "where a score or a leave-one-out score is 0). The percentile bootstrap it replaced covered 0.853 at 10 segments, "
        "0.913-0.930 from 20 to 1,000 (BLEU).\n\n"
        + _short(rows, ("coverage",), ("metric", "items"), reps * 3)
        + _table(rows)
    )


ROBUST_HEADING = (
    "## The date-robust interval (What to report, `robust`, `dateeval.stats.robust_score`): `robust.date_robust`"
)
ROBUST_RATES = (0.02, 0.05, 0.1, 0.3, 0.5, 0.9, 0.95, 0.98)
FLOOR = 0.93  # the coverage every printed interval must keep (issue 35)
RECHECK_REPS = 2000


def robust_section(reps: int) -> str:
    """The docs' section on the date-robust interval over the extended grid: 8 rates, 10-200 questions, 2-366 dates."""
    started = time.perf_counter()
    rows = [
        robust_coverage(n, d, p, s, reps)
        for s in ROBUST_SCENARIOS
        for n in (10, 20, 50, 200)
        for d in DATES
        for p in ROBUST_RATES
    ]
    # A cell under the 0.93 floor at `reps` stores (SE ~0.018: of 288 cells a few fall there by chance) is measured
    # again on RECHECK_REPS fresh stores, and the table holds that figure with its SE; the first figure is named.
    rechecked = []
    for index, row in enumerate(rows):
        if row["printed"] < FLOOR:
            rows[index] = robust_coverage(
                row["items"], row["dates"], row["rate"], row["scenario"], RECHECK_REPS, seed=1
            )
            rechecked.append(
                f"{row['scenario']}, {row['items']} questions, {row['dates']} dates, rate {row['rate']}: {row['printed']:.3f} at {reps} "
                f"stores, {rows[index]['printed']:.3f} (SE {rows[index]['se']:.3f}) at {RECHECK_REPS}"
            )
    worst = min(rows, key=lambda row: row["printed"])
    return (
        f"\n{ROBUST_HEADING}\n\n"
        f"{reps} simulated stores per cell; {time.perf_counter() - started:.0f} s. `printed`: the [low, high] the pages print, "
        "Korn-Graubard (Clopper-Pearson at the effective sample size the variance components give, Satterthwaite df) widened "
        "to hold also the same interval with two questions added, one right on every date and one wrong on every date "
        "(plus-two questions); `width` its mean width. `korn_graubard_alone`, `kg_width`: the interval it replaced (0.78-0.89 "
        "at 10-20 questions, many dates, rates near 0 or 1, where the questions sampled miss the rare easy or hard one). "
        "`anova_normal`: score ± the variance components' normal half-width, the planning table's method.\n\n"
        + _short(rows, ("printed",), ("scenario", "items", "dates", "rate"), reps)
        + (
            f"Measured again on {RECHECK_REPS} fresh stores (under {FLOOR} at {reps}; the row below is the second figure): "
            + "; ".join(rechecked)
            + ".\n\n"
            if rechecked
            else ""
        )
        + f"Lowest `printed` cell: {worst['printed']:.3f} ({worst['scenario']}, {worst['items']} questions, {worst['dates']} dates, rate "
        f"{worst['rate']}); every printed cell >= {FLOOR}: {all(row['printed'] >= FLOOR for row in rows)}.\n\n"
        + _table(rows)
    )


RATES_HEADING = "## The verdict's tests at rates near 0 and 1 (Overview, Factors, `summary`): `chance.significance`"
EXTREME_RATES = (0.02, 0.05, 0.5, 0.95, 0.98)


def rates_section(reps: int) -> str:
    """The docs' section on the tests' size where the section above (rate 0.3) is silent: rates near 0 and 1."""
    started = time.perf_counter()
    rows = [test_rejections(n, d, p, 0.0, reps) for n in (10, 50) for d in (2, 12) for p in EXTREME_RATES]
    rows += [test_rejections(20, 366, p, 0.0, reps // 4) for p in (0.02, 0.98)]
    over = [
        f"{column} {row[column]:.3f} at {row['items']} questions, {row['dates']} dates, rate {row['rate']}"
        for row in rows
        for column in ("delta_permutation", "cochran_q_chi2", "cochran_q_permutation", "leaves_chance_band")
        if row[column] > 0.05 + 2 * row["se_at_5pct"]
    ]
    return (
        f"\n{RATES_HEADING}\n\n"
        f"The size (no date effect: `effect_pp` 0) of the tests above on stores whose population rate is near 0 or 1, "
        f"{reps} stores per cell ({reps // 4} at 366 dates); {time.perf_counter() - started:.0f} s. Where few answers are right "
        "(or wrong), many questions are constant over the dates and the permutation tests can seldom reject: their size "
        "falls below 0.05 (conservative), never above. "
        + (
            ("**Above 0.05 + 2 SE:** " + "; ".join(over) + ".")
            if over
            else "No test's size above 0.05 + 2 SE in any cell."
        )
        + "\n\n"
        + _table(rows)
    )


FAMILY_HEADING = "## The headline's family-wise tests over K entries (Overview, `summary`): `chance.date_effect_family`, `chance.largest_of`"
FAMILY_CELLS = [
    (k, effect, planted)
    for k in (2, 6, 20, 50)
    for effect, planted in ((0.0, "one"), (0.05, "one"), (0.1, "one"), (0.05, "all"))
]


def family_section(reps: int) -> str:
    """The docs' section on the verdict over K entries: size at 2-50 entries, power beside Bonferroni's Cochran's Q."""
    started = time.perf_counter()
    rows = [
        family_rejections(50, 12, k, effect, reps, planted, with_delta=k <= 6) for k, effect, planted in FAMILY_CELLS
    ]
    limit = 0.05 + 2 * se(0.05, reps)
    over = [f"{row['entries']} entries" for row in rows if row["effect_pp"] == 0 and row["verdict"] > limit]
    return (
        f"\n{FAMILY_HEADING}\n\n"
        f"K entries of 12 dates x 50 questions on the same questions (one model at several precisions: shared question "
        f"difficulty and 80% of each answer's noise shared), {reps} stores per cell, {FAMILY_PERM} joint shuffles per store; "
        f"{time.perf_counter() - started:.0f} s. `effect_pp` 0 is the family-wise size; otherwise a date effect of that many "
        "points (worst to best) planted in one entry (`planted` one) or in all (`all`). `verdict`: the headline's test, the "
        "smallest of the entries' Cochran's Q chi-square p-values against the same smallest over joint shuffles (each "
        "question's dates permuted alike in every entry, so the entries' dependence is kept; the observed table counted "
        "among the shuffled ones). `bonferroni_q_chi2`: Cochran's Q per entry by chi-square, Bonferroni over K. "
        "`largest_delta_of_k` (K <= 6): the largest delta against the largest of K shuffled deltas. The min-p it replaced "
        "counted each shuffle's p among the shuffles only, and rejected 0.107-0.120 of null stores at 20 entries (issue 35).\n\n"
        + (
            f"**Above 0.05 + 2 SE ({limit:.3f}):** " + ", ".join(over) + ".\n\n"
            if over
            else f"No size above 0.05 + 2 SE ({limit:.3f}).\n\n"
        )
        + _table(rows, {"effect_pp": "{:.0f}"})
    )


def replace_section(text: str, heading: str, section: str) -> str:
    """``text`` with the section under ``heading`` (to the next level-2 heading) replaced by ``section``."""
    start = text.index("\n" + heading)
    end = text.find("\n## ", start + len(heading) + 1)
    return text[:start] + section + (text[end:] if end >= 0 else "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced grid, printed, docs/coverage.md left alone")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "coverage.md"))
    parser.add_argument(
        "--only",
        choices=("families", "robust", "bleu", "compare", "ece", "cv366", "rates", "extremes"),
        help="recompute only that section and splice it into --out",
    )
    args = parser.parse_args()
    if args.only:
        out = Path(args.out)
        heading, section, reps = {
            "families": (FAMILY_HEADING, family_section, 200),
            "robust": (ROBUST_HEADING, robust_section, 150),
            "bleu": (BLEU_HEADING, bleu_section, 200),
            "compare": (COMPARE_HEADING, compare_section, 200),
            "ece": (ECE_HEADING, ece_section, 200),
            "cv366": (CV_YEAR_HEADING, cv_year_section, 400),
            "rates": (RATES_HEADING, rates_section, 400),
            "extremes": (EXTREMES_HEADING, extremes_section, 200),
        }[args.only]
        text = out.read_text()
        out.write_text(
            replace_section(text, heading, section(reps))
            if heading in text
            else text.replace("\n## Not intervals", section(reps) + "\n## Not intervals")
        )
        return
    started = time.perf_counter()
    items, dates = ((10, 20, 50), (2, 12)) if args.quick else (ITEMS, DATES)
    reps = 100 if args.quick else 400
    bands = [band_coverage(n, p, reps) for n in items for p in RATES]
    small = reps // 2  # the bootstrap cells are slower per store
    cvs = [
        cv_coverage(n, d, e, small)
        for n in items
        if n <= 200
        for d in sorted({*dates, 3})
        if d <= 12
        for e in (0.0, 0.02, 0.1)
    ]
    tests = [
        test_rejections(n, d, 0.3, e, reps) for n in items if n <= 200 for d in dates for e in (0, 0.02, 0.05, 0.1)
    ]
    text = (
        "# Coverage and power: does each interval and test keep its promise?\n\n"
        f"Written by `bench/coverage.py` ({'--quick, ' if args.quick else ''}{reps} simulated stores per cell; "
        f"{time.perf_counter() - started:.0f} s on this machine). Every figure calls the function the pages call; its Monte-Carlo "
        "standard error is in the `se` column (for a coverage of 0.95, or a size of 0.05). Nominal: 0.95 coverage, 0.05 size. "
        "A section that states its own number of stores and seconds was recomputed alone (`bench/coverage.py --only "
        "families|robust|bleu|compare|ece|cv366|rates|extremes`, under `nice -n 19`).\n\n"
        "## Per-date band of a rate (Curves): exact Clopper-Pearson, `bands.date_band`\n\n"
        "Every date's true rate is `rate`; 12 dates per store. `percentile_bootstrap` is the band the page drew before "
        "(200 resamples over questions), kept here as the baseline: it collapses to [0, 0] when a date has no right answer.\n\n"
        + _short(bands, ("coverage",), ("items", "rate"), reps * 12)
        + _table(bands)
        + bleu_section(small)
        + ece_section(small)
        + "\n## CV interval over dates (Table 5, Factors): `variation.noise_free_cv`\n\nAgainst the CV of the dates' true rates, a "
        "planted date effect of `effect_pp` (worst to best) at a 30% rate. Counting noise inflates a CV measured on few questions "
        "(it is a CV of noisy per-date scores), so the interval is the noise-free CV's: the two-way ANOVA's date variance, its "
        "noncentral F inverted, a continuity correction of half one answer's step on the upper end. `measured_cv_bootstrap` is the interval the "
        "page showed before (the percentile bootstrap of the measured CV over questions), kept as the baseline: it sits above a "
        "small true CV.\n\n"
        + _short(cvs, ("coverage",), ("items", "dates", "effect_pp"), small)
        + _table(cvs, {"effect_pp": "{:.0f}"})
        + cv_year_section(small)
        + robust_section(reps // 2)
        + "\n## The verdict's tests (Overview, Factors, `summary`): `chance.significance`\n\n"
        f"Rejections at 5% of the worst-to-best delta's permutation test ({N_PERM} permutations, as the explorer), of Cochran's "
        "Q by its chi-square approximation and of Cochran's Q as a permutation statistic (the same shuffles), and how often a "
        "date's accuracy leaves the Curves page's chance band (`chance_half_width`: simultaneous over the dates), on data with no "
        "date part (items differ, sd 0.5; each answer varies at random, sd 0.6; probit scale) at a 30% rate; `effect_pp` 0 is "
        "the size, the others the power against a planted date "
        "effect whose true worst-to-best range is that many points. The verdict (Overview, `summary`, the report) uses "
        "Cochran's Q by permutation, family-wise over the K entries (next section): its size is exact, and where the three differ "
        "(many dates) it finds a real date effect far more often than the worst-to-best delta does; with 2 dates the two "
        "permutation tests are one test. The chi-square Q's size is not guaranteed with few questions.\n\n"
        + _table(tests, {"effect_pp": "{:.0f}"})
        + family_section(small)
        + compare_section(small)
        + rates_section(reps)
        + extremes_section(small)
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
