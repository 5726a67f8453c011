"""The benchmarks a dataset name can mean: each task module declares its own, nothing dispatches on names.

A :class:`Benchmark` says what a name supports (chain of thought, few-shot,
MMLU-style subjects) and how to build its task. The name grammar, the CLI's
``--dataset`` help and the explorer's dataset lists are all read from
:data:`REGISTRY` (a :class:`dateeval.registry.Registry`), so a new benchmark is
one entry in its module's ``BENCHMARKS`` and that module in ``dateeval.tasks``'s
list. A user's own dataset (a file or a spec, :mod:`dateeval.tasks.custom`) is
registered the same way when it is first named. Each benchmark declares the metrics
its rows support, those of its task kind (``metrics.KIND_METRICS``): every reader
asks ``metrics.dataset_metrics``, never a metric which datasets it applies to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dateeval.data.items import Subset
from dateeval.errors import DateEvalError
from dateeval.metrics import ACCURACY, METRICS
from dateeval.registry import Registry

if TYPE_CHECKING:
    from dateeval.tasks import GenerationOptions
    from dateeval.tasks.base import Task

MULTIPLE_CHOICE = "multiple-choice"
GENERATION = "generation"


@dataclass(frozen=True)
class TaskRequest:
    """Everything a benchmark needs to build one task: the stored name, its variant, where the data is, which items."""

    name: str
    cot: bool
    shots: int
    data_dir: Path | None
    subset: Subset
    generation: GenerationOptions
    label_style: str
    multiturn: bool = False  # exemplars as conversation turns (the name's ``_multiturn``, or the benchmark's default)


@dataclass(frozen=True)
class Benchmark:
    """One registered benchmark. ``family`` decides whether ``_cot`` applies; ``few_shot`` whether ``_<k>shot`` does."""

    name: str
    family: str
    build: Callable[[TaskRequest], Task]
    few_shot: bool = False
    multiturn: bool = (
        False  # the default few-shot format: single-turn for dateeval's tasks, multi-turn for lm-eval's (as its CLI)
    )
    subjects: bool = False  # --subjects selects within it (MMLU)
    source: str | None = None  # the user's file or spec, for a custom dataset
    metrics: tuple[str, ...] = ACCURACY  # keys of metrics.METRICS its rows support (as Inspect's @scorer(metrics=...))

    @property
    def choice(self) -> bool:
        return self.family == MULTIPLE_CHOICE


def _taken(name: str, known: Benchmark, new: Benchmark) -> str:
    where = f"{known.source}" if known.source else "a built-in benchmark"
    return (
        f"dataset name {name!r} of {new.source} is already taken by {where}: "
        "give the dataset another name (the `name` key of its spec, or rename the file)"
    )


# Benchmarks by name: the built-in ones registered by ``dateeval.tasks`` from each task module's ``BENCHMARKS``, users'
# files and lm-eval tasks when first named. One file registered again (another process, a rerun) is the same entry.
REGISTRY: Registry[Benchmark] = Registry(
    "dataset name", same=lambda known, new: known.source == new.source, taken=_taken
)


def register(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark; a second, different one under a taken name is refused (results are stored by name), and so is
    a metric no one defined (a typo would otherwise leave its column off every page without a word)."""
    unknown = [key for key in benchmark.metrics if key not in METRICS]
    if unknown:
        raise DateEvalError(
            f"benchmark {benchmark.name!r} declares unknown metrics {unknown}: choose from {', '.join(METRICS)}"
        )
    return REGISTRY.register(benchmark.name, benchmark)


def builtin(family: str | None = None, few_shot: bool | None = None) -> tuple[str, ...]:
    """Names of the built-in benchmarks, in registration order, optionally of one family or with exemplars."""
    return tuple(
        b.name
        for b in REGISTRY.values()
        if b.source is None and family in (None, b.family) and few_shot in (None, b.few_shot)
    )


def dataset_help() -> str:
    """The ``--dataset`` help, from what is registered."""
    return (
        f"repeatable: next-token MCQA {', '.join(builtin(MULTIPLE_CHOICE))} (add _cot for chain of thought); "
        f"generation {', '.join(builtin(GENERATION))}; _<k>shot for few-shot ({', '.join(builtin(few_shot=True))}); "
        "or your own benchmark: a .jsonl/.csv/.parquet file with question, choices and answer, a .toml/.yaml spec, "
        "or an lm-eval task, lmeval:NAME or lmeval:task.yaml (docs/own-benchmark.md)"
    )
