"""Which task a dataset name means, and building it.

Names follow one grammar, so every variant is stored and shown under its
own name: ``<benchmark>[_cot][_<k>shot][_multiturn|_singleturn]``, e.g. ``mmlu``
(next-token MCQA), ``mmlu_cot`` (chain-of-thought, §5.3), ``mmlu_5shot`` (Table 4),
``mmlu_5shot_multiturn`` (its exemplars as conversation turns), ``gsm8k_5shot``,
``humaneval``, ``wmt16_en_de``. The format suffix appears only where it is not
the benchmark's default (single-turn for dateeval's tasks, multi-turn for lm-eval's). The grammar is read and
written in one place (:mod:`dateeval.names`); what ``<benchmark>`` may be, and what
each supports, is read from the registry (:mod:`dateeval.tasks.registry`), which
this module fills from each task module's declared ``BENCHMARKS``; a user's own
file or spec (:mod:`dateeval.tasks.custom`) joins it under its own name when first named.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from dateeval.requests import GenerationSettings
from dateeval.data import Subset
from dateeval.errors import DateEvalError
from dateeval.names import MULTI_TURN, SINGLE_TURN, Parts, split
from dateeval.tasks.base import Task
from dateeval.tasks.registry import (
    GENERATION,
    MULTIPLE_CHOICE,
    REGISTRY,
    Benchmark,
    TaskRequest,
    builtin,
    dataset_help,  # noqa: F401 - dataset_help: the CLI's
    register,
)


@dataclass(frozen=True)
class TaskName:
    """A dataset name taken apart: the benchmark, chain-of-thought or not, the number of exemplars, and the few-shot
    format (``multiturn`` against ``default_multiturn``, the benchmark's own; the name says it only where it differs)."""

    base: str
    cot: bool = False
    shots: int = 0
    multiturn: bool = False
    default_multiturn: bool = False

    def __str__(self) -> str:
        turns = None if self.multiturn == self.default_multiturn else MULTI_TURN if self.multiturn else SINGLE_TURN
        return str(Parts(self.base, self.cot, self.shots, turns))


def parse_name(name: str) -> TaskName:
    """Read ``<benchmark>[_cot][_<k>shot][_multiturn|_singleturn]`` against the registry; one clear error for anything else."""
    parts = split(name)
    if parts is None or parts.base not in REGISTRY:
        raise DateEvalError(
            f"unknown dataset {name!r}: choose one of {', '.join(BENCHMARKS)}, optionally with _cot (multiple-choice ones) "
            "and/or _<k>shot (e.g. mmlu_cot, mmlu_5shot, gsm8k_5shot), or give a .jsonl/.csv/.parquet file, a .toml/.yaml spec "
            "or an lm-eval task (lmeval:NAME or lmeval:task.yaml)"
        )
    benchmark = REGISTRY[parts.base]
    multiturn = parts.turns == MULTI_TURN if parts.turns else benchmark.multiturn
    parsed = TaskName(parts.base, parts.cot, parts.shots, multiturn, benchmark.multiturn)
    if parsed.cot and not benchmark.choice:
        raise DateEvalError(
            f"{name}: chain-of-thought (_cot) applies to the multiple-choice datasets ({', '.join(MULTIPLE_CHOICE_BENCHMARKS)})"
        )
    if (parsed.shots or parts.turns) and not benchmark.few_shot:
        raise DateEvalError(
            f"{name}: few-shot prompting is available for {', '.join(builtin(few_shot=True))} and datasets whose spec names exemplars"
        )
    if (
        parts.turns and not parsed.shots and not benchmark.multiturn
    ):  # lm-eval's tasks may take their shots from their YAML
        raise DateEvalError(f"{name}: a few-shot format needs exemplars: name them, e.g. {replace(parsed, shots=5)}")
    return parsed


def base_of(name: str) -> str | None:
    """The benchmark a dataset name is built on (``mmlu`` of ``mmlu_cot_5shot``); None for text that is no dataset
    name (a path, an ``lmeval:`` reference), which only the command line may give."""
    parts = split(name)
    return parts.base if parts else None


def benchmark_of(name: str) -> Benchmark:
    """The registered benchmark a (parsed) dataset name belongs to."""
    return REGISTRY[parse_name(name).base]


def generates(name: str) -> bool:
    """Whether a dataset's results come from generated replies (stored outputs to compare), not the next token alone."""
    try:
        parsed = parse_name(name)
    except DateEvalError:
        return False
    return parsed.cot or REGISTRY[parsed.base].family == GENERATION


def takes_subjects(name: str) -> bool:
    """Whether ``--subjects`` selects within this dataset (MMLU); the other datasets of a sweep take the rest of the subset."""
    return benchmark_of(name).subjects


def with_shots(name: str, shots: int) -> str:
    """The dataset name with ``shots`` exemplars (the CLI's ``--shots``); names that already say theirs keep it."""
    parsed = parse_name(name)
    return name if parsed.shots or not shots else str(replace(parsed, shots=shots))


def with_cot(name: str, cot: bool) -> str:
    """The dataset name with chain of thought where ``cot`` asks for it (the Run page's checkbox); a name that says it keeps it."""
    parsed = parse_name(name)
    return name if parsed.cot or not cot else str(replace(parsed, cot=True))


def with_fewshot_format(name: str, fewshot_format: str | None) -> str:
    """The dataset name with its exemplars in ``fewshot_format`` (the CLI's ``--fewshot-format``; None: the
    benchmark's own), said in the name only where it differs from the benchmark's default; a name that already says
    its format, and a dataset without few-shot prompting, keep theirs."""
    parsed = parse_name(name)
    benchmark = REGISTRY[parsed.base]
    if (
        fewshot_format is None
        or split(name).turns
        or not benchmark.few_shot
        or not (parsed.shots or benchmark.multiturn)
    ):
        return str(parsed)
    return str(replace(parsed, multiturn=fewshot_format == MULTI_TURN))


def resolve(reference: str, data_dir: str | Path | None = None, trust_task_code: bool = False) -> str:
    """The dataset name a ``--dataset`` value stands for.

    A registered name is itself. A file or spec (``bench.jsonl``,
    ``specs/bench.toml``) is registered under the name it declares. A name
    nobody registered is looked for as ``DATA_DIR/<name>.{toml,yaml,jsonl,...}``,
    so stored results of a custom dataset can be rebuilt (explorer, regrade)
    from the folder that holds it. ``lmeval:TASK`` (or an lm-eval task YAML)
    is registered from lm-eval (:mod:`dateeval.tasks.lmeval`); its YAML's
    ``!function`` helpers run only with ``trust_task_code`` (the CLI's
    ``--trust-task-code``: never the explorer's look-ups).
    """
    if lmeval.is_reference(reference):
        return lmeval.register_source(reference, trust_task_code)
    if custom.is_reference(reference):
        return custom.register_file(Path(reference))
    base = base_of(reference)
    if base and base not in REGISTRY and data_dir is not None:
        found = custom.find(Path(data_dir), base)
        if found is not None:
            custom.register_file(found)
    if base and base not in REGISTRY and (source := lmeval.find(Path(data_dir) if data_dir else None, base)):
        lmeval.register_source(source, trust_task_code)
    return reference


@dataclass(frozen=True)
class TaskSource:
    """A dataset as the driver resolved it, once: the name its results are stored under, and the user's file or lm-eval
    task behind it (None: a built-in benchmark) with the trust its task code was given. Frozen and small, it travels to
    every worker (this process, a Ray actor), which builds the task from it without resolving anything again."""

    name: str
    source: str | None = None
    trust_task_code: bool = False

    def register(self) -> None:
        """Make the name mean the same benchmark in this process (a Ray actor registers the user's file; the driver's
        process has it already, and does not read the file again)."""
        parts = split(self.name)
        if self.source is None or (
            parts is not None and parts.base in REGISTRY and REGISTRY[parts.base].source == self.source
        ):
            return
        if lmeval.is_reference(self.source):
            lmeval.register_source(self.source, self.trust_task_code)
        else:
            custom.register_file(Path(self.source))


def resolve_all(
    references: Iterable[str], data_dir: str | Path | None = None, trust_task_code: bool = False
) -> tuple[TaskSource, ...]:
    """Each ``--dataset`` value resolved once (files and lm-eval tasks registered here), by stored name, in order."""
    names = dict.fromkeys(str(parse_name(resolve(reference, data_dir, trust_task_code))) for reference in references)
    return tuple(TaskSource(name, benchmark_of(name).source, trust_task_code) for name in names)


@dataclass(frozen=True)
class GenerationOptions:
    """Decoding choices a user may override; ``None`` keeps each task's own default length."""

    max_new_tokens: int | None = None
    sample: bool = False
    seed: int = 0

    def apply(self, default: GenerationSettings) -> GenerationSettings:
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise DateEvalError(f"--max-new-tokens must be at least 1, not {self.max_new_tokens}")
        return replace(
            default, max_new_tokens=self.max_new_tokens or default.max_new_tokens, sample=self.sample, seed=self.seed
        )


def build_task(
    name: str,
    data_dir: str | Path | None = None,
    subset: Subset = Subset(),
    generation: GenerationOptions = GenerationOptions(),
    label_style: str = "auto",
) -> Task:
    """Load a dataset's items (and exemplars) and wrap them in the task that evaluates them; ``name`` may be a file or spec."""
    directory = Path(data_dir) if data_dir is not None else None
    if directory is not None and not directory.is_dir():
        raise DateEvalError(f"data directory {directory} does not exist")
    parsed = parse_name(resolve(name, directory))
    name, benchmark = (
        str(parsed),
        REGISTRY[parsed.base],
    )  # the name results are stored under says a format only where it is not the default
    if subset.subjects and not benchmark.subjects:
        raise DateEvalError(
            f"--subjects applies to {', '.join(b.name for b in REGISTRY.values() if b.subjects)} only, not {name}"
        )
    task = benchmark.build(
        TaskRequest(name, parsed.cot, parsed.shots, directory, subset, generation, label_style, parsed.multiturn)
    )
    task.subset, task.multiturn = subset.describe(), parsed.multiturn
    return task


from dateeval.tasks import custom, gsm8k, humaneval, lmeval, mcqa, translation  # noqa: E402 - they import this package's names

# The built-in benchmarks, registered here and nowhere else (importing a task module registers nothing), in the order the
# CLI's help and the explorer's lists show them; users' files and lm-eval tasks join when first named (``resolve``).
for _benchmark in (*mcqa.BENCHMARKS, *gsm8k.BENCHMARKS, *humaneval.BENCHMARKS, *translation.BENCHMARKS):
    register(_benchmark)

MULTIPLE_CHOICE_BENCHMARKS = builtin(MULTIPLE_CHOICE)
GENERATION_BENCHMARKS = builtin(GENERATION)
BENCHMARKS = (*MULTIPLE_CHOICE_BENCHMARKS, *GENERATION_BENCHMARKS)
