"""Which task a dataset name means, and building it.

Names follow one grammar, so every variant is stored and shown under its
own name: ``<benchmark>[_cot][_<k>shot]``, e.g. ``mmlu`` (next-token MCQA),
``mmlu_cot`` (chain-of-thought, §5.3), ``mmlu_5shot`` (Table 4),
``gsm8k_5shot``, ``humaneval``, ``wmt16_en_de``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from dateeval.backends.base import GenerationSettings
from dateeval.data import EXEMPLAR_LOADERS, LOADERS, Subset, load_exemplars, load_items
from dateeval.errors import DateEvalError
from dateeval.tasks.base import Task

GENERATION_BENCHMARKS = ("gsm8k", "humaneval", "wmt16_en_de", "wmt16_en_fi", "wmt16_en_cs")
BENCHMARKS = (*LOADERS, *GENERATION_BENCHMARKS)
_NAME = re.compile(r"(?P<base>[a-z0-9_]+?)(?P<cot>_cot)?(?:_(?P<shots>\d+)shot)?")


@dataclass(frozen=True)
class TaskName:
    """A dataset name taken apart: the benchmark, chain-of-thought or not, and the number of exemplars."""

    base: str
    cot: bool = False
    shots: int = 0

    def __str__(self) -> str:
        return self.base + ("_cot" if self.cot else "") + (f"_{self.shots}shot" if self.shots else "")


def parse_name(name: str) -> TaskName:
    """Read ``<benchmark>[_cot][_<k>shot]``; one clear error for anything else."""
    match = _NAME.fullmatch(name)
    if not match or match["base"] not in BENCHMARKS:
        raise DateEvalError(
            f"unknown dataset {name!r}: choose one of {', '.join(BENCHMARKS)}, optionally with _cot (multiple-choice ones) "
            "and/or _<k>shot (e.g. mmlu_cot, mmlu_5shot, gsm8k_5shot)"
        )
    parsed = TaskName(match["base"], bool(match["cot"]), int(match["shots"] or 0))
    if parsed.cot and parsed.base not in LOADERS:
        raise DateEvalError(f"{name}: chain-of-thought (_cot) applies to the multiple-choice datasets ({', '.join(LOADERS)})")
    if parsed.shots and parsed.base not in (*EXEMPLAR_LOADERS, "gsm8k"):
        raise DateEvalError(f"{name}: few-shot prompting is available for {', '.join([*EXEMPLAR_LOADERS, 'gsm8k'])}")
    return parsed


def generates(name: str) -> bool:
    """Whether a dataset's results come from generated replies (stored outputs to compare), not the next token alone."""
    try:
        parsed = parse_name(name)
    except DateEvalError:
        return False
    return parsed.cot or parsed.base in GENERATION_BENCHMARKS


def with_shots(name: str, shots: int) -> str:
    """The dataset name with ``shots`` exemplars (the CLI's ``--shots``); names that already say theirs keep it."""
    parsed = parse_name(name)
    return name if parsed.shots or not shots else str(replace(parsed, shots=shots))


@dataclass(frozen=True)
class GenerationOptions:
    """Decoding choices a user may override; ``None`` keeps each task's own default length."""

    max_new_tokens: int | None = None
    sample: bool = False
    seed: int = 0

    def apply(self, default: GenerationSettings) -> GenerationSettings:
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise DateEvalError(f"--max-new-tokens must be at least 1, not {self.max_new_tokens}")
        return replace(default, max_new_tokens=self.max_new_tokens or default.max_new_tokens, sample=self.sample, seed=self.seed)


def build_task(
    name: str, data_dir: str | Path | None = None, subset: Subset = Subset(), generation: GenerationOptions = GenerationOptions(),
    label_style: str = "auto",
) -> Task:  # fmt: skip
    """Load a dataset's items (and exemplars) and wrap them in the task that evaluates them."""
    task = _build(parse_name(name), name, data_dir, subset, generation, label_style)
    task.subset = subset.describe()
    return task


def _build(parsed: TaskName, name: str, data_dir: str | Path | None, subset: Subset, generation: GenerationOptions, label_style: str) -> Task:
    from dateeval.tasks import gsm8k, humaneval, mcqa, translation

    directory = Path(data_dir) if data_dir is not None else None
    if directory is not None and not directory.is_dir():
        raise DateEvalError(f"data directory {directory} does not exist")
    if parsed.base in LOADERS:
        items = load_items(parsed.base, directory, subset)
        pool = load_exemplars(parsed.base, directory) if parsed.shots else ()
        if parsed.cot:
            return mcqa.ChainOfThoughtTask(name, items, pool, parsed.shots, generation.apply(mcqa.COT_SETTINGS))
        return mcqa.MCQATask(name, items, pool, parsed.shots, label_style)
    if subset.subjects:
        raise DateEvalError(f"--subjects applies to mmlu only, not {name}")
    if parsed.base == "gsm8k":
        items = subset.select(gsm8k.load_items(directory), name)
        return gsm8k.GSM8KTask(name, items, parsed.shots, generation.apply(gsm8k.SETTINGS))
    if parsed.base == "humaneval":
        items = subset.select(humaneval.load_problems(directory), name)
        return humaneval.HumanEvalTask(name, items, generation.apply(humaneval.SETTINGS))
    target = parsed.base.rsplit("_", 1)[-1]
    items = subset.select(translation.load_segments(target, directory), name)
    return translation.TranslationTask(name, items, target, generation.apply(translation.SETTINGS))
