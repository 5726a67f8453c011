"""Coverage of the model-against-model interval (``robust.paired_difference``) where both rates sit near 0 or 1.

Issue 47 §2: both entries constant (A always right, B always wrong) give a zero-width interval. For each cell (A's
rate, B's rate, questions, dates) it simulates ``--reps`` pairs with known per-question rates and prints the coverage
of the true mean difference and the share of zero-width intervals, for the interval as it is and for its union with
the "plus two questions" interval (one question A gets right and B wrong on every date, and one the other way round),
with the latter's mean width.

    .venv/bin/python bench/paired_difference_extremes.py [--reps 400]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from dateeval.results.robust import paired_difference


def plus_two(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """The interval as it is, widened to hold the one with a +1 and a -1 question added on every date."""
    dates = a.shape[0]
    value, low, high = paired_difference(a, b)
    _, low2, high2 = paired_difference(np.hstack([a, np.ones((dates, 1)), np.zeros((dates, 1))]), np.hstack([b, np.zeros((dates, 1)), np.ones((dates, 1))]))
    return value, min(low, low2), max(high, high2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    reps = parser.parse_args().reps
    rng = np.random.default_rng(0)
    print("| A's rate | B's rate | questions | dates | coverage | zero-wide | plus-two coverage | zero-wide | mean width |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate_a, rate_b, items, dates in itertools.product((0.02, 0.5, 0.95, 0.98), (0.02, 0.05, 0.5), (10, 20, 50), (2, 12)):
        found = {"plain": np.zeros(3), "plus two": np.zeros(3)}
        for _ in range(reps):
            skill_a = np.clip(rng.normal(rate_a, 0.02, items), 0.001, 0.999)
            skill_b = np.clip(rng.normal(rate_b, 0.02, items), 0.001, 0.999)
            a = (rng.random((dates, items)) < skill_a).astype(float)
            b = (rng.random((dates, items)) < skill_b).astype(float)
            truth = float(np.mean(skill_a - skill_b))
            for name, interval in (("plain", paired_difference), ("plus two", plus_two)):
                _, low, high = interval(a, b)
                found[name] += (low <= truth <= high, high == low, high - low)
        plain, wider = found["plain"] / reps, found["plus two"] / reps
        print(f"| {rate_a} | {rate_b} | {items} | {dates} | {plain[0]:.3f} | {plain[1]:.3f} | {wider[0]:.3f} | {wider[1]:.3f} | {wider[2]:.3f} |")


if __name__ == "__main__":
    main()
