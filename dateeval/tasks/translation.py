"""WMT16 newstest2016 English to German, Finnish, Czech (paper Figure 10): corpus BLEU and chrF with sacrebleu.

Corpus BLEU and chrF are not averages of sentence scores, yet they must be
recomputed per date over whatever items a comparison keeps. So each stored
row carries sacrebleu's *sufficient statistics* for its segment (n-gram
matches and totals, lengths); summing them over any set of segments and
scoring the sums gives exactly sacrebleu's corpus score
(:func:`dateeval.metrics.corpus.score_from_stats`), without storing the references.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from dateeval.conditions import Condition
from dateeval.metrics.corpus import segment_stats, sentence_chrf, signatures
from dateeval.data.files import read_text
from dateeval.errors import DateEvalError
from dateeval.metrics import KIND_METRICS
from dateeval.requests import GenerationSettings
from dateeval.tasks.base import GenerationTask, Prompt, Task, chat
from dateeval.tasks.registry import GENERATION, Benchmark, TaskRequest

PROMPT_VERSION = "wmt16-v1"
SETTINGS = GenerationSettings(max_new_tokens=192)

LANGUAGES = {"de": "German", "fi": "Finnish", "cs": "Czech"}


@dataclass(frozen=True)
class Segment:
    """One test segment; ``origlang`` (from the official SGML files) says which side was originally written."""

    id: str
    source: str
    reference: str
    origlang: str = ""


_DOC = re.compile(r"<doc\b([^>]*)>(.*?)</doc>", re.DOTALL)
_SEG = re.compile(r"<seg\b[^>]*>(.*?)</seg>", re.DOTALL)


def _sgml(path: Path) -> list[tuple[str, str]]:
    """(text, origlang) of every segment of a WMT SGML file, in document order."""
    out = []
    for attributes, body in _DOC.findall(read_text(path, "WMT16")):
        origlang = re.search(r'origlang="([^"]*)"', attributes)
        out += [(text.strip(), origlang.group(1) if origlang else "") for text in _SEG.findall(body)]
    return out


def _local(target: str, data_dir: Path) -> list[Segment]:
    """The official SGML files (``DIR/wmt16/en-XX-sgm/newstest2016-enXX-{src.en,ref.XX}.sgm``, with origlang) if
    present, else aligned plain text (``DIR/wmt16/en-XX/newstest2016-enXX.{en,XX}``, sacrebleu's wmt16 test sets)."""
    sgml = data_dir / "wmt16" / f"en-{target}-sgm"
    source_sgml, reference_sgml = (
        sgml / f"newstest2016-en{target}-src.en.sgm",
        sgml / f"newstest2016-en{target}-ref.{target}.sgm",
    )
    folder = data_dir / "wmt16" / f"en-{target}"
    source_path, reference_path = folder / f"newstest2016-en{target}.en", folder / f"newstest2016-en{target}.{target}"
    if source_sgml.is_file() and reference_sgml.is_file():
        sources, references = _sgml(source_sgml), _sgml(reference_sgml)
        origlangs = [origlang for _, origlang in sources]
        sources, references = [text for text, _ in sources], [text for text, _ in references]
    elif source_path.is_file() and reference_path.is_file():
        sources = read_text(source_path, "WMT16").splitlines()
        references = read_text(reference_path, "WMT16").splitlines()
        origlangs = [""] * len(sources)
    else:
        raise DateEvalError(
            f"no WMT16 en-{target} files: expected {source_path} and {reference_path} (or the SGML pair in {sgml})"
        )
    if len(sources) != len(references):
        raise DateEvalError(
            f"WMT16 en-{target}: {len(sources)} source segments but {len(references)} reference segments"
        )
    return [
        Segment(f"wmt16-en{target}/{n}", s, r, o) for n, (s, r, o) in enumerate(zip(sources, references, origlangs))
    ]


def load_segments(target: str, data_dir: Path | None) -> list[Segment]:
    """newstest2016 English-to-``target`` from local files (SGML or plain text) or the Hub (``wmt/wmt16``)."""
    if target not in LANGUAGES:
        raise DateEvalError(f"unknown target language {target!r}: choose one of {', '.join(LANGUAGES)}")
    if data_dir is None:
        from dateeval.data.hub import load_hub_rows

        hint = f"pass --data-dir DIR with DIR/wmt16/en-{target}/newstest2016-en{target}.{{en,{target}}}"
        rows = load_hub_rows("wmt/wmt16", f"{target}-en", "test", hint)
        return [
            Segment(f"wmt16-en{target}/{n}", r["translation"]["en"], r["translation"][target])
            for n, r in enumerate(rows)
        ]
    return _local(target, Path(data_dir))


def user_message(segment: Segment, target: str) -> str:
    return f"Translate the following English text into {LANGUAGES[target]}. Reply with the translation only.\n\n{segment.source}"


def hypothesis(output: str) -> str:
    """The translation in a reply: its first non-empty line (segments are single lines; models may add notes after)."""
    return next((line.strip() for line in output.splitlines() if line.strip()), "")


class TranslationTask(GenerationTask):
    """English to ``target``: the reply's first line is the hypothesis; sentence chrF per item, corpus scores per date."""

    kind = "translation"
    prompt_version = PROMPT_VERSION

    def __init__(
        self, dataset: str, items: list[Segment], target: str, settings: GenerationSettings = SETTINGS
    ) -> None:
        self.dataset, self.items, self.target, self.settings = dataset, items, target, settings

    def prompt(self, item: Segment, condition: Condition) -> Prompt:
        return chat(condition, user_message(item, self.target))

    def item_record(self, item: Segment) -> dict:
        return {"subject": f"en-{self.target}", "origlang": item.origlang}

    def describe(self, item: Segment) -> str:
        return f"**Source (English):** {item.source}\n\n**Reference ({LANGUAGES[self.target]}):** {item.reference}"

    def record(self) -> dict:
        return {**super().record(), **signatures()}

    def grade(self, items: list, outputs: list[str], prompts: list[Prompt]) -> list[dict]:
        hypotheses = [hypothesis(output) for output in outputs]
        stats = segment_stats(hypotheses, [item.reference for item in items])
        return [
            {
                "parsed": text,
                "correct": None,
                "score": sentence_chrf(text, item.reference),
                "bleu_stats": bleu,
                "chrf_stats": chrf,
            }
            for text, item, bleu, chrf in zip(hypotheses, items, stats["bleu"], stats["chrf"])
        ]


def _build(target: str, request: TaskRequest) -> Task:
    items = request.subset.select(load_segments(target, request.data_dir), request.name)
    return TranslationTask(request.name, items, target, request.generation.apply(SETTINGS))


BENCHMARKS = tuple(
    Benchmark(
        f"wmt16_en_{target}", GENERATION, functools.partial(_build, target), metrics=KIND_METRICS[TranslationTask.kind]
    )
    for target in LANGUAGES
)
