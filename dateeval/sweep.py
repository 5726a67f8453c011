"""Sweeps: models x datasets x conditions, split into independent work units.

A work unit is one (model, dataset, condition): render every item's prompt
under that condition, evaluate the items the store does not hold yet (score
the next token or generate and grade a reply: the dataset's task decides, see
``dateeval.tasks``), write them as one file. Units share nothing but the store, so they can run in any
order, be interrupted at any point and resume, or (later) be spread across
workers: each unit is claimed with a lock file before it runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dateeval.backends import Backend, BackendOptions, locate
from dateeval.backends.base import PromptInput
from dateeval.conditions import Condition
from dateeval.data import Subset
from dateeval.errors import DateEvalError
from dateeval.prompting import dated_messages
from dateeval.store import ROW_KEY, Store, StoreProblems
from dateeval.tasks import GenerationOptions, build_task, parse_name
from dateeval.tasks.base import Task


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


@dataclass
class Progress:
    """Where a sweep stands, passed to the progress callback after every unit."""

    units_total: int
    units_done: int = 0
    units_skipped: int = 0
    items_scored: int = 0
    tokens_scored: int = 0
    tokens_generated: int = 0
    seconds: float = 0.0
    current: str = ""
    messages: list[str] = field(default_factory=list)

    @property
    def items_per_second(self) -> float:
        return self.items_scored / self.seconds if self.seconds else 0.0


ProgressCallback = Callable[[Progress], None]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


def _prompt_hash(prompt: PromptInput) -> str:
    text = prompt if isinstance(prompt, str) else json.dumps(list(prompt), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def prompt_input(backend: Backend, messages: list[dict], condition: Condition) -> tuple[PromptInput, str | None]:
    """What the backend is sent for one item under one condition, and the date text it carries.

    Text rendered by the model's own template where the backend takes text
    (every template kind under full date control); otherwise the messages,
    dated by the system line only, for the server's template.
    """
    if backend.capabilities.renders_locally:
        rendered = backend.template.render(messages, mode=condition.date_mode, day=condition.date, injection=condition.injection)
        return rendered.text, rendered.date_text
    dated, date_text = dated_messages(messages, mode=condition.date_mode, day=condition.date, injection=condition.injection)
    return tuple(dated), date_text


def check_dates_distinct(backend: Backend, task: Task, conditions: list[Condition]) -> None:
    """Refuse to sweep dates that render identical prompts (the date would not be varied at all)."""
    seen: dict[tuple, dt.date] = {}
    item = task.items[0]
    for condition in conditions:
        if condition.factor != "date":
            continue
        text, _ = prompt_input(backend, task.prompt(item, condition).messages, replace(condition, date_mode="date"))
        key = (condition.system_prompt, condition.injection, _prompt_hash(text))
        if key in seen:
            raise DateEvalError(
                f"dates {seen[key]} and {condition.date} render identical prompts for {backend.identity.model}: "
                "the date format or template drops the difference; use a format with the day (e.g. %d %b %Y) or fewer dates"
            )
        seen[key] = condition.date


def _render(backend: Backend, task: Task, item: object, condition: Condition) -> str:
    return prompt_input(backend, task.prompt(item, condition).messages, condition)[0]


def _reply_budget(task: Task) -> int:
    """Tokens a task may add after its prompt: the longest reply of a generation task, none for next-token scoring."""
    settings = getattr(task, "settings", None)
    return settings.max_new_tokens if settings is not None else 0


def check_context(backend: Backend, task: Task, conditions: list[Condition]) -> None:
    """Refuse, before any item is evaluated, prompts that (with the longest reply) exceed the model's context.

    Past its context a model runs on positions it was never trained on and
    its numbers come out silently wrong. Conditions differ only in text that
    every item shares (system message, date), so every item is measured
    under the condition that makes the first item's prompt longest.
    """
    limit = backend.context_length
    if limit is None or not backend.capabilities.renders_locally:
        return
    first = task.items[0]
    longest = max(conditions, key=lambda condition: len(backend.encode([_render(backend, task, first, condition)])[0]))
    lengths = [len(tokens) for tokens in backend.encode([_render(backend, task, item, longest) for item in task.items])]
    worst = max(range(len(lengths)), key=lengths.__getitem__)
    reply = _reply_budget(task)
    if lengths[worst] + reply > limit:
        with_reply = f" plus up to {reply} generated" if reply else ""
        raise DateEvalError(
            f"{task.dataset} item {task.items[worst].id} needs {lengths[worst]:,} prompt tokens{with_reply} under {longest.label}, "
            f"beyond {backend.identity.model}'s context of {limit:,}: shorten the system prompt, use fewer shots or a smaller --max-new-tokens"
        )


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
        sources = [locate(model, self.spec.backend) for model in self.spec.models]
        tasks = [self._task(name) for name in dict.fromkeys(self.spec.datasets)]
        progress = Progress(units_total=len(sources) * len(self.spec.dtypes) * len(tasks) * len(self.spec.conditions))
        progress.messages += StoreProblems(removed=self.store.remove_leftovers()).messages()
        started = time.perf_counter()
        for (cls, source), dtype in ((source, dtype) for source in sources for dtype in self.spec.dtypes):
            backend = cls.open(source, replace(self.spec.options, dtype=dtype))
            try:
                for task in tasks:
                    task.prepare(backend)
                    check_dates_distinct(backend, task, list(self.spec.conditions))
                    check_context(backend, task, list(self.spec.conditions))
                    self._run_task(backend, task, progress, started)
                    if self.cancel.is_set():
                        return progress
            finally:
                backend.close()
        return progress

    def _task(self, name: str) -> Task:
        """Subjects select within MMLU only; other datasets in the same sweep take the rest of the subset."""
        subset = self.spec.subset if parse_name(name).base == "mmlu" else replace(self.spec.subset, subjects=())
        task = build_task(name, self.spec.data_dir, subset, self.spec.generation, self.spec.label_style)
        if not task.choice and any(condition.option_order for condition in self.spec.conditions):
            raise DateEvalError(f"option orders apply to multiple-choice datasets only, not {name}")
        task.ensure_runnable()
        return task

    def _model_dir(self, backend: Backend) -> str:
        identity = backend.identity
        return f"{_slug(identity.model)}-{identity.dtype}-{identity.key[:8]}"

    def _run_task(self, backend: Backend, task: Task, progress: Progress, started: float) -> None:
        model_dir = self._model_dir(backend)
        folder = self.store.root / model_dir / task.dataset
        # Every column is verified, not only the keys read: a unit whose file is damaged anywhere is moved
        # aside and counts as missing, so it runs again (a later read would reject the whole file).
        existing, problems = self.store.read(columns=ROW_KEY, paths=sorted(folder.glob("*.parquet")), full_check=True)
        progress.messages += self.store.set_aside_damaged(problems)
        done = set(map(tuple, existing[ROW_KEY].itertuples(index=False))) if len(existing) else set()
        for condition in self.spec.conditions:
            if self.cancel.is_set():
                return
            progress.current = f"{backend.identity.model} / {task.dataset} / {condition.label}"
            self._run_unit(backend, task, condition, model_dir, done, progress)
            progress.units_done += 1
            progress.seconds = time.perf_counter() - started
            self.on_progress(progress)

    def _run_unit(self, backend: Backend, task: Task, condition: Condition, model_dir: str, done: set, progress: Progress) -> None:
        prompts = [task.prompt(item, condition) for item in task.items]
        inputs = [prompt_input(backend, p.messages, condition) for p in prompts]
        hashes = [_prompt_hash(prompt) for prompt, _ in inputs]
        identity = (backend.identity.key, backend.identity.hardware, task.key(), condition.key)
        todo = [i for i, item in enumerate(task.items) if (*identity, item.id, hashes[i]) not in done]
        if not todo:
            progress.units_skipped += 1
            return
        unit_key = hashlib.sha256("|".join([*identity, *(hashes[i] for i in todo)]).encode()).hexdigest()[:16]
        path = self.store.unit_path(model_dir, task.dataset, _slug(condition.label), unit_key)
        if path.exists() and not self.store.readable(path):
            # The same unit's earlier file is damaged and could not be moved aside: recompute beside it, never over it.
            path = self.store.unit_path(model_dir, task.dataset, _slug(condition.label), f"{unit_key}-{self.run_id}")
        if path.exists() or not self._claim(path):
            progress.units_skipped += 1  # finished meanwhile, or running, in another worker
            return
        batch_size = condition.batch_size or self.spec.batch_size
        try:
            items = [task.items[i] for i in todo]
            results = task.evaluate(backend, items, [prompts[i] for i in todo], [inputs[i][0] for i in todo], batch_size)
            shared = self._shared(backend, task, condition, batch_size)
            rows = [
                {**shared, "item_id": item.id, **task.item_record(item), "shown_order": prompts[i].shown_from,
                 "date_text": inputs[i][1], "prompt_hash": hashes[i], **result}
                for i, item, result in zip(todo, items, results)
            ]  # fmt: skip
            self.store.write(path, rows)
        finally:
            self.store.release(path)
        done.update((*identity, task.items[i].id, hashes[i]) for i in todo)
        progress.items_scored += len(todo)
        progress.tokens_scored += sum(result.get("prompt_tokens") or 0 for result in results)
        progress.tokens_generated += sum(result.get("output_tokens", 0) for result in results)

    def _claim(self, path: Path) -> bool:
        """Claim a unit; a lock that cannot be written (a full disk) is removed again and ends the sweep in one line."""
        try:
            return self.store.claim(path)
        except OSError as error:
            self.store.release(path)
            raise DateEvalError(f"cannot write to the store {self.store.root}: {error.strerror or error}") from None

    def _shared(self, backend: Backend, task: Task, condition: Condition, batch_size: int) -> dict:
        """What every row of one work unit shares: who produced it, under which condition and task settings."""
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
            "backend": identity.backend,
            "backend_versions": json.dumps(identity.versions, sort_keys=True),
            "date_control": backend.capabilities.date_control,
            "template_date_kind": backend.template.support.kind if backend.template is not None else "server",
            "dataset": task.dataset,
            "condition": condition.label,
            "condition_key": condition.key,
            "factor": condition.factor,
            **condition.record(),
            **task.record(),
            "batch_size": batch_size,
        }
