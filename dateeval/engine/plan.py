"""What a sweep is and what is left of it: the spec, and serializable work units computed against the store.

A :class:`SweepSpec` says what to measure (models, datasets, conditions,
subset, backend options); :func:`build_spec` is the one way the CLI's flags and
the Run page's form make one, its datasets resolved there, once, into
:class:`dateeval.tasks.TaskSource` s that every worker builds its tasks from. A :class:`Unit` is one (model, precision, dataset,
condition) with exactly the items still missing from the store and the prompt
hash each must have: it travels to any executor (this process, a background
thread, a Ray actor on another host), which computes it and sends its rows
back, and the hashes let the executor prove it rendered the prompts the plan
was made for. Plans hold only missing work, longest units first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from dateeval.backends.base import BackendOptions
from dateeval.conditions import Condition, expand
from dateeval.data import Subset
from dateeval.conditions.dates import parse_date, parse_dates
from dateeval.errors import DateEvalError
from dateeval.tasks import GenerationOptions, TaskSource, resolve_all, variants


@dataclass(frozen=True)
class SweepSpec:
    """Everything a sweep needs; the CLI and the app both build one (:func:`build_spec`)."""

    models: tuple[str, ...]
    datasets: tuple[str, ...]
    conditions: tuple[Condition, ...]
    data_dir: str | None = None
    subset: Subset = Subset()
    dtypes: tuple[str, ...] = ("auto",)
    batch_size: int = 32
    label_style: str = "auto"
    generation: GenerationOptions = GenerationOptions()
    backend: str | None = None  # None: as each model names it (``vllm:PATH``), else transformers
    options: BackendOptions = BackendOptions()  # device, remote code, endpoint settings (dtype comes from ``dtypes``)
    budget: float | None = (
        None  # a sparse sweep's share of the dense grid's item-dates (``dateeval.sparse``); None: dense
    )
    budget_seed: int = 0  # the sparse draw's seed: the same seed draws the same cells
    looks: int = 1  # the budgets a ``--target-width`` sweep may stop at, of which this budget is one (``sparse.LOOKS``)
    # ``datasets`` resolved once by the driver (:func:`build_spec`, else ``Sweep.run``): what workers build tasks from
    tasks: tuple[TaskSource, ...] = ()

    def resolved(self) -> SweepSpec:
        """This spec with its datasets resolved (``tasks``): as built, or resolved now for a spec made by hand (built-in
        names, files without lm-eval task code)."""
        return self if self.tasks else replace(self, tasks=resolve_all(self.datasets, self.data_dir))

    def describe(self) -> str:
        """One line that tells sweeps apart in a list: models, precisions, datasets, dates and baselines, items."""
        dates = sorted(condition.date for condition in self.conditions if condition.date is not None)
        span = "" if not dates else (dates[0].isoformat() if len(dates) == 1 else f"{dates[0]}..{dates[-1]}")
        baselines = sorted({condition.label.split(",")[0] for condition in self.conditions if condition.date is None})
        counted = ", ".join(filter(None, [span and f"{len(set(dates))} dates {span}", *baselines]))
        parts = [
            ", ".join(self.models),
            ", ".join(self.dtypes),
            ", ".join(self.datasets),
            f"{len(self.conditions)} conditions ({counted})",
            self.subset.describe() or "all items",
        ]
        return " · ".join(parts)

    def key(self) -> str:
        """The same key for the same sweep: a rerun that resumes a cancelled one replaces it in the store's record."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


def dated_conditions(dates: str | None, *, factor_date: str | None = None, **choices: object) -> tuple[Condition, ...]:
    """The conditions of a date sweep: ``dates`` as ``--dates`` writes them, the baselines and factors ``choices`` name
    (:func:`dateeval.conditions.expand`'s keywords)."""
    return tuple(expand(parse_dates(dates), factor_date=parse_date(factor_date) if factor_date else None, **choices))


def build_spec(
    models: tuple[str, ...],
    references: tuple[str, ...],
    conditions: tuple[Condition, ...],
    *,
    data_dir: str | None = None,
    cot: bool = False,
    shots: int = 0,
    fewshot_formats: tuple[str | None, ...] = (None,),
    trust_task_code: bool = False,
    subjects: str = "",
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    **settings: object,
) -> SweepSpec:
    """A sweep's spec from what a person chose (the CLI's flags, the Run page's form): its datasets named and resolved
    once, MMLU subjects read from comma-separated text; ``settings`` are :class:`SweepSpec`'s other fields."""
    tasks = variants(
        references, data_dir, cot=cot, shots=shots, fewshot_formats=fewshot_formats, trust_task_code=trust_task_code
    )
    datasets = tuple(str(task.name) for task in tasks)
    chosen = tuple(subject.strip() for subject in subjects.split(",") if subject.strip())
    # In a sweep with MMLU, subjects select within MMLU and the other datasets take the rest of the subset;
    # without MMLU they would select nothing, so that is refused rather than ignored.
    if chosen and not any(task.benchmark.subjects for task in tasks):
        raise DateEvalError(
            f"--subjects selects MMLU subjects, and this sweep has no mmlu dataset ({', '.join(datasets)})"
        )
    return SweepSpec(
        models=models,
        datasets=datasets,
        conditions=conditions,
        data_dir=data_dir,
        subset=Subset(subjects=chosen, sample=sample, seed=seed, limit=limit),
        tasks=tasks,
        **settings,
    )


@dataclass(frozen=True)
class Candidate:
    """One (dataset, condition) as a loaded model renders it: the row identity and every item's prompt hash."""

    dataset: str
    condition_index: int
    identity: tuple[str, str, str, str]  # model_key, hardware, task_key, condition_key
    item_ids: tuple[str, ...]
    prompt_hashes: tuple[str, ...]
    cost: float  # relative work, for longest-first scheduling


@dataclass(frozen=True)
class Description:
    """What a worker reports once its model is loaded: who it is (the store folder) and every candidate unit."""

    model_dir: str
    model: str
    identity_key: str
    hardware: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class Unit:
    """Work for one executor: the items of one candidate still missing, and the file their rows go to."""

    dataset: str
    condition_index: int
    condition_label: str
    item_ids: tuple[str, ...]
    prompt_hashes: tuple[str, ...]
    path: str  # relative to the store root
    cost: float

    @property
    def label(self) -> str:
        return f"{self.dataset} / {self.condition_label}"


@dataclass
class Progress:
    """Where a sweep stands, passed to the progress callback after every unit (aggregated over all workers)."""

    units_total: int
    units_done: int = 0
    units_skipped: int = 0
    items_scored: int = 0
    tokens_scored: int = 0
    tokens_generated: int = 0
    seconds: float = 0.0
    current: str = ""
    messages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a sweep says that is not a warning (a sparse sweep's draw)
    records: list[str] = field(default_factory=list)  # the design records of the entries it drew sparsely
    workers: dict[str, str] = field(default_factory=dict)  # worker -> the unit it runs now
    held_elsewhere: list[str] = field(default_factory=list)  # units another driver holds, waited for

    @property
    def items_per_second(self) -> float:
        return self.items_scored / self.seconds if self.seconds else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Time left at the pace of the units computed so far (None before the first)."""
        computed = self.units_done - self.units_skipped
        if computed <= 0 or not self.seconds:
            return None
        return (self.units_total - self.units_done) * self.seconds / computed
