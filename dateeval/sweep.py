"""Sweeps: models x datasets x conditions, split into independent work units.

A work unit is one (model, dataset, condition): render every item's prompt
under that condition, score the items the store does not hold yet, write
them as one file. Units share nothing but the store, so they can run in any
order, be interrupted at any point and resume, or (later) be spread across
workers: each unit is claimed with a lock file before it runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dateeval.backends.transformers import TransformersBackend
from dateeval.conditions import Condition
from dateeval.data import MCItem, Subset, load_items
from dateeval.errors import DateEvalError
from dateeval.models import resolve
from dateeval.store import ROW_KEY, Store
from dateeval.tasks import mcqa


@dataclass(frozen=True)
class SweepSpec:
    """Everything a sweep needs; the CLI and the app both build one."""

    models: tuple[str, ...]
    datasets: tuple[str, ...]
    conditions: tuple[Condition, ...]
    data_dir: str | None = None
    subset: Subset = Subset()
    dtypes: tuple[str, ...] = ("auto",)
    device: str = "auto"
    batch_size: int = 32
    label_style: str = "auto"
    trust_remote_code: bool = False


@dataclass
class Progress:
    """Where a sweep stands, passed to the progress callback after every unit."""

    units_total: int
    units_done: int = 0
    units_skipped: int = 0
    items_scored: int = 0
    tokens_scored: int = 0
    seconds: float = 0.0
    current: str = ""
    messages: list[str] = field(default_factory=list)

    @property
    def items_per_second(self) -> float:
        return self.items_scored / self.seconds if self.seconds else 0.0


ProgressCallback = Callable[[Progress], None]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


def _prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def check_dates_distinct(backend: TransformersBackend, item: MCItem, conditions: list[Condition]) -> None:
    """Refuse to sweep dates that render identical prompts (the date would not be varied at all)."""
    seen: dict[tuple, dt.date] = {}
    for condition in conditions:
        if condition.factor != "date":
            continue
        text = backend.template.render(mcqa.messages(item, condition.system_message()), mode="date", day=condition.date, injection=condition.injection).text
        key = (condition.system_prompt, condition.injection, text)
        if key in seen:
            raise DateEvalError(
                f"dates {seen[key]} and {condition.date} render identical prompts for {backend.identity.model}: "
                "the date format or template drops the difference; use a format with the day (e.g. %d %b %Y) or fewer dates"
            )
        seen[key] = condition.date


class Sweep:
    """Runs a :class:`SweepSpec` against a store, skipping what is already there."""

    def __init__(self, spec: SweepSpec, store: Store, *, on_progress: ProgressCallback | None = None, cancel: threading.Event | None = None) -> None:
        self.spec = spec
        self.store = store
        self.on_progress = on_progress or (lambda progress: None)
        self.cancel = cancel or threading.Event()
        self.run_id = uuid.uuid4().hex[:12]

    def run(self) -> Progress:
        """Execute every unit; returns the final progress (what ran, what was skipped)."""
        if self.spec.batch_size < 1:
            raise DateEvalError(f"batch size must be at least 1, not {self.spec.batch_size}")
        self.store.ensure_writable()
        sources = [resolve(model) for model in self.spec.models]
        datasets = {name: load_items(name, self.spec.data_dir, self._subset(name)) for name in self.spec.datasets}
        progress = Progress(units_total=len(sources) * len(self.spec.dtypes) * len(datasets) * len(self.spec.conditions))
        started = time.perf_counter()
        for source, dtype in ((source, dtype) for source in sources for dtype in self.spec.dtypes):
            backend = TransformersBackend(source, dtype=dtype, device=self.spec.device, trust_remote_code=self.spec.trust_remote_code)
            for dataset, items in datasets.items():
                check_dates_distinct(backend, items[0], list(self.spec.conditions))
                self._run_dataset(backend, dataset, items, progress, started)
                if self.cancel.is_set():
                    return progress
        return progress

    def _subset(self, dataset: str) -> Subset:
        """Subjects select within MMLU only; other datasets in the same sweep take the rest of the subset."""
        return self.spec.subset if dataset == "mmlu" else replace(self.spec.subset, subjects=())

    def _model_dir(self, backend: TransformersBackend) -> str:
        identity = backend.identity
        return f"{_slug(identity.model)}-{identity.dtype}-{identity.key[:8]}"

    def _run_dataset(self, backend: TransformersBackend, dataset: str, items: list[MCItem], progress: Progress, started: float) -> None:
        labels = mcqa.label_tokens(backend.tokenizer, max(len(item.options) for item in items), self.spec.label_style)
        model_dir = self._model_dir(backend)
        folder = self.store.root / model_dir / dataset
        existing, problems = self.store.read(columns=ROW_KEY, paths=sorted(folder.glob("*.parquet")))
        progress.messages += problems.messages()
        done = set(map(tuple, existing[ROW_KEY].itertuples(index=False))) if len(existing) else set()
        for condition in self.spec.conditions:
            if self.cancel.is_set():
                return
            progress.current = f"{backend.identity.model} / {dataset} / {condition.label}"
            self._run_unit(backend, dataset, items, condition, labels, model_dir, done, progress)
            progress.units_done += 1
            progress.seconds = time.perf_counter() - started
            self.on_progress(progress)

    def _run_unit(self, backend, dataset, items, condition, labels, model_dir, done, progress) -> None:  # noqa: ANN001, PLR0913
        shown = [mcqa.permute(item, condition.option_order) for item in items]
        rendered = [
            backend.template.render(mcqa.messages(item, condition.system_message()), mode=condition.date_mode, day=condition.date, injection=condition.injection)
            for item, _ in shown
        ]
        hashes = [_prompt_hash(prompt.text) for prompt in rendered]
        model_key, hardware = backend.identity.key, backend.identity.hardware
        todo = [i for i, item in enumerate(items) if (model_key, hardware, labels.key, condition.key, item.id, hashes[i]) not in done]
        if not todo:
            progress.units_skipped += 1
            return
        unit_key = hashlib.sha256("|".join([model_key, hardware, labels.key, condition.key, *(hashes[i] for i in todo)]).encode()).hexdigest()[:16]
        path = self.store.unit_path(model_dir, dataset, _slug(condition.label), unit_key)
        if path.exists() and not self.store.readable(path):
            # The same unit's earlier file is corrupted: recompute beside it, never over it.
            path = self.store.unit_path(model_dir, dataset, _slug(condition.label), f"{unit_key}-{self.run_id}")
        if path.exists() or not self.store.claim(path):
            progress.units_skipped += 1  # finished meanwhile, or running, in another worker
            return
        batch_size = condition.batch_size or self.spec.batch_size
        try:
            encoded = backend.encode([rendered[i].text for i in todo])
            candidates = [list(labels.token_ids[: len(items[i].options)]) for i in todo]
            scores = backend.next_token_logprobs(encoded, candidates, batch_size)
            rows = []
            for i, tokens, score in zip(todo, encoded, scores):
                original = mcqa.to_original_order(score, shown[i][1])
                unit = UnitContext(dataset, condition, labels, batch_size)
                rows.append(self._row(backend, unit, items[i], shown[i][1], rendered[i].date_text, hashes[i], len(tokens), original))
            self.store.write(path, rows)
        finally:
            self.store.release(path)
        done.update((model_key, hardware, labels.key, condition.key, items[i].id, hashes[i]) for i in todo)
        progress.items_scored += len(todo)
        progress.tokens_scored += sum(len(tokens) for tokens in encoded)

    def _row(self, backend, unit, item, shown_from, date_text, prompt_hash, n_tokens, logprobs) -> dict:  # noqa: ANN001, PLR0913
        """One stored result: the item's outcome and everything that produced it."""
        graded = mcqa.grade(logprobs, item.answer)
        identity = backend.identity
        return {
            "run_id": self.run_id,
            "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "model": identity.model,
            "model_key": identity.key,
            "model_source": identity.source,
            "model_revision": identity.revision,
            "dtype": identity.dtype,
            "device": identity.device,
            "hardware": identity.hardware,
            "torch_version": identity.torch_version,
            "transformers_version": identity.transformers_version,
            "template_date_kind": backend.template.support.kind,
            "dataset": unit.dataset,
            "subset": self._subset(unit.dataset).describe(),
            "item_id": item.id,
            "subject": item.subject,
            "n_options": len(item.options),
            "answer": item.answer,
            "shown_order": shown_from,
            "condition": unit.condition.label,
            "condition_key": unit.condition.key,
            "factor": unit.condition.factor,
            **unit.condition.record(),
            "date_text": date_text,
            "task": "mcqa",
            "task_key": unit.labels.key,
            "label_variant": unit.labels.variant,
            "prompt_version": mcqa.PROMPT_VERSION,
            "prompt_hash": prompt_hash,
            "prompt_tokens": n_tokens,
            "batch_size": unit.batch_size,
            "probs": [float(p) for p in graded.probs],
            "label_mass": graded.label_mass,
            "pred": graded.pred,
            "correct": graded.correct,
            "confidence": graded.confidence,
        }


@dataclass(frozen=True)
class UnitContext:
    """What every row of one work unit shares."""

    dataset: str
    condition: Condition
    labels: mcqa.LabelTokens
    batch_size: int
