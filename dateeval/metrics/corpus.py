"""Corpus BLEU and chrF with sacrebleu's standard settings, and the sufficient statistics they are scored from.

Below both the translation task (which records each segment's statistics) and the metrics and statistics (which
sum them over any set of segments and score the sums), so that reading results never imports a task.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sacrebleu.metrics import BLEU, CHRF

METRICS = ("bleu", "chrf")


def _metric(name: str) -> BLEU | CHRF:  # with sacrebleu's standard settings
    from sacrebleu.metrics import BLEU, CHRF

    return {"bleu": BLEU, "chrf": CHRF}[name]()


@functools.cache
def signatures() -> dict[str, str]:
    """sacrebleu's signatures of the settings used (recorded with every row; known once a metric has scored with one reference)."""
    out = {}
    for name in METRICS:
        metric = _metric(name)
        metric.corpus_score(["a"], [["a"]])
        out[f"{name}_signature"] = str(metric.get_signature())
    return out


def segment_stats(hypotheses: list[str], references: list[str]) -> dict[str, list[list[float]]]:
    """Per-segment sufficient statistics of BLEU and chrF, one list per segment."""
    return {
        name: [list(map(float, row)) for row in _metric(name)._extract_corpus_statistics(hypotheses, [references])]
        for name in METRICS
    }


def score_from_stats(name: str, stats: Sequence[Sequence[float]]) -> float:
    """Corpus BLEU or chrF from segments' summed statistics (equal to sacrebleu's ``corpus_score``)."""
    total = np.asarray(stats, dtype=float).sum(0)
    return float(_metric(name)._compute_score_from_stats([int(v) if float(v).is_integer() else v for v in total]).score)


def corpus_scores(hypotheses: list[str], references: list[str]) -> dict[str, object]:
    """Corpus BLEU and chrF with sacrebleu's standard settings, and their signatures (recorded with results)."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(), CHRF()
    return {
        "bleu": bleu.corpus_score(hypotheses, [references]).score,
        "chrf": chrf.corpus_score(hypotheses, [references]).score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def sentence_chrf(hypothesis: str, reference: str) -> float:
    """Per-segment chrF, for the flips page."""
    from sacrebleu.metrics import CHRF

    return CHRF().sentence_score(hypothesis, [reference]).score
