"""WMT16 newstest2016 English to German, Finnish, Czech (paper Figure 10): corpus BLEU and chrF with sacrebleu.

Prompting, data and scoring only; wiring into sweeps comes with the open-ended tasks issue.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dateeval.errors import DateEvalError

LANGUAGES = {"de": "German", "fi": "Finnish", "cs": "Czech"}


@dataclass(frozen=True)
class Segment:
    id: str
    source: str
    reference: str


def load_segments(target: str, data_dir: Path) -> list[Segment]:
    """Aligned plain-text files ``DIR/wmt16/en-XX/newstest2016-enXX.{en,XX}`` (sacrebleu's wmt16 test sets)."""
    if target not in LANGUAGES:
        raise DateEvalError(f"unknown target language {target!r}: choose one of {', '.join(LANGUAGES)}")
    folder = Path(data_dir) / "wmt16" / f"en-{target}"
    source_path, reference_path = folder / f"newstest2016-en{target}.en", folder / f"newstest2016-en{target}.{target}"
    if not source_path.is_file() or not reference_path.is_file():
        raise DateEvalError(f"no WMT16 en-{target} files: expected {source_path} and {reference_path}")
    sources = source_path.read_text(encoding="utf-8").splitlines()
    references = reference_path.read_text(encoding="utf-8").splitlines()
    if len(sources) != len(references):
        raise DateEvalError(f"WMT16 en-{target}: {len(sources)} source lines but {len(references)} reference lines")
    return [Segment(f"wmt16-en{target}/{n}", s, r) for n, (s, r) in enumerate(zip(sources, references))]


def user_message(segment: Segment, target: str) -> str:
    return f"Translate the following English text into {LANGUAGES[target]}. Reply with the translation only.\n\n{segment.source}"


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
