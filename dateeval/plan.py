"""What a sweep is and what is left of it: the spec, and serializable work units computed against the store.

A :class:`SweepSpec` says what to measure (models, datasets, conditions,
subset, backend options). A :class:`Unit` is one (model, precision, dataset,
condition) with exactly the items still missing from the store and the prompt
hash each must have: it travels to any executor (this process, a background
thread, a Ray actor on another host), which computes it and sends its rows
back, and the hashes let the executor prove it rendered the prompts the plan
was made for. Plans hold only missing work, longest units first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dateeval.backends.base import BackendOptions
from dateeval.conditions import Condition
from dateeval.data import Subset
from dateeval.tasks import GenerationOptions


@dataclass(frozen=True)
class SweepSpec:
    """Everything a sweep needs; the CLI and the app both build one."""

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
    sources: tuple[str, ...] = ()  # users' dataset files and specs behind custom names: each process registers them (``tasks.sources``)
    trust_task_code: bool = False  # the CLI's --trust-task-code: lm-eval task YAMLs' !function helpers may run (never from the explorer)


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
