"""A worker: one loaded model and the sweep's tasks, wherever the model runs (this process or a Ray actor).

It describes the candidate units once (every item's prompt hash under every
condition, from which the driver plans only missing work) and executes the
units it is given: renders the prompts, checks they hash to what the plan
expects, answers the task's requests for them (``answers.py``), and returns the rows as an Arrow
table with everything that produced them. It never touches the store: one
driver writes, so workers need no shared filesystem.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from dateeval.backends import Backend, locate
from dateeval.backends.base import GENERATE, FixedBatch, PromptInput
from dateeval.conditions import Condition
from dateeval.engine import answers
from dateeval.engine.answers import Asked
from dateeval.engine.plan import Candidate, Description, SweepSpec, Unit
from dateeval.errors import DateEvalError
from dateeval.prompting import dated_messages
from dateeval.store import Store
from dateeval.store.text import arrow_table
from dateeval.tasks import mcqa
from dateeval.tasks.base import GenerationTask, Prompt, Task


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
        rendered = backend.template.render(
            messages, mode=condition.date_mode, day=condition.date, injection=condition.injection
        )
        return rendered.text, rendered.date_text
    dated, date_text = dated_messages(
        messages, mode=condition.date_mode, day=condition.date, injection=condition.injection
    )
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


def check_asked_on(condition: Condition, results: list[dict]) -> None:
    """A server-clock unit stands for the provider's date on one UTC day (by its Date header): keep none of it if its answers crossed midnight."""
    if not condition.server_clock:
        return
    stamps = (result.get("server_date") or result.get("request_utc") for result in results)
    days = sorted({stamp[:10] for stamp in stamps if stamp} - {condition.date.isoformat()})
    if days:
        raise DateEvalError(
            f"requests of the server-clock run for {condition.date} were answered on {', '.join(days)} (UTC, by the server's clock): the provider's date "
            "changed during the unit, so none of it was stored; run again (away from midnight UTC) to ask under one date"
        )


def build_tasks(spec: SweepSpec) -> dict[str, Task]:
    """The sweep's tasks by stored name, built from its resolved datasets (``spec.tasks``: a worker resolves nothing),
    checked before any model loads. Subjects select within MMLU only; other datasets take the rest."""
    tasks = {}
    for source in spec.tasks:
        source.register()
        subset = spec.subset if source.benchmark.subjects else replace(spec.subset, subjects=())
        task = source.build(spec.data_dir, subset, spec.generation, spec.label_style)
        highest = max((condition.option_order or 0 for condition in spec.conditions), default=0)
        if not task.choice and highest:
            raise DateEvalError(f"option orders apply to multiple-choice datasets only, not {source.name}")
        if task.choice:
            mcqa.check_orders(task.items, highest)
        task.ensure_runnable()
        tasks[task.dataset] = task
    return tasks


@dataclass(frozen=True)
class UnitResult:
    """A computed unit: its rows, and what it took."""

    rows: pa.Table
    items: int
    tokens_scored: int
    tokens_generated: int
    seconds: float


class Worker:
    """A model loaded once, answering many units."""

    def __init__(self, spec: SweepSpec, model: str, dtype: str, run_id: str) -> None:
        self.spec, self.run_id = spec, run_id
        cls, source = locate(model, spec.backend)
        self.tasks = build_tasks(spec)
        self.backend = cls.open(source, replace(spec.options, dtype=dtype))
        self.model = answers.model_view(self.backend)
        try:
            for task in self.tasks.values():
                answers.check_needs(task, self.backend)
                task.prepare(self.model)
                check_dates_distinct(self.backend, task, list(spec.conditions))
                check_context(self.backend, task, list(spec.conditions))
        except BaseException:
            self.backend.close()
            raise

    def describe(self, condition_indices: Sequence[int] | None = None) -> Description:
        """The candidate units under the given conditions (all by default): workers can share planning's rendering."""
        identity = self.backend.identity
        indices = range(len(self.spec.conditions)) if condition_indices is None else condition_indices
        candidates = tuple(self._candidate(task, index) for task in self.tasks.values() for index in indices)
        return Description(
            Store.model_dir(identity.model, identity.dtype, identity.key),
            identity.model,
            identity.key,
            identity.hardware,
            candidates,
        )

    def _candidate(self, task: Task, index: int) -> Candidate:
        condition = self.spec.conditions[index]
        hashes = tuple(_prompt_hash(self._input(task, item, condition)[0]) for item in task.items)
        identity = (self.backend.identity.key, self.backend.identity.hardware, task.key(), condition.key)
        cost = len(task.items) * (1 + _reply_budget(task))  # a generated token costs about one forward pass
        return Candidate(task.dataset, index, identity, tuple(item.id for item in task.items), hashes, float(cost))

    def _input(self, task: Task, item: object, condition: Condition) -> tuple[PromptInput, str | None]:
        return prompt_input(self.backend, task.prompt(item, condition).messages, condition)

    def pools(self, unit: Unit) -> bool:
        """Whether ``unit`` may generate in one call with other units of its dataset (:meth:`execute_units`)."""
        return pools(self.spec, self.generating(), unit)

    def generating(self) -> set[str]:
        """The datasets whose units generate their replies (a Ray driver asks its actors once)."""
        return {
            name
            for name, task in self.tasks.items()
            if isinstance(task, GenerationTask) and self.backend.supports(GENERATE)
        }

    def execute_units(self, units: list[Unit]) -> list[UnitResult]:
        """Units of one generation dataset (:meth:`pools`): every reply generated in one call, then each unit as :meth:`execute`
        (a single unit, of any dataset, is :meth:`execute` itself).

        Why: a unit's last long replies would otherwise decode alone, its
        slots idle; here the next unit's prompts take them
        (``answers.answer_together``). Greedy replies equal those each unit
        gets alone and sampled ones draw from per-prompt generators
        (tests/engine/test_engine.py compares pooled and unpooled sweeps). The
        generation's seconds are shared among the units by their items.
        """
        if len(units) == 1:
            return [self.execute(units[0])]
        started = time.perf_counter()
        rendered = [self._rendered(unit) for unit in units]
        asked = [self._ask(unit, found) for unit, found in zip(units, rendered)]
        answers.answer_together(self.backend, asked, self.spec.batch_size)
        shared = (time.perf_counter() - started) / sum(len(unit.item_ids) for unit in units)
        return [
            self._execute(unit, found, steps, shared * len(unit.item_ids))
            for unit, found, steps in zip(units, rendered, asked)
        ]

    def execute(self, unit: Unit) -> UnitResult:
        """Compute one unit's rows; refuses if a prompt does not hash to what the plan expected."""
        rendered = self._rendered(unit)
        return self._execute(unit, rendered, self._ask(unit, rendered))

    def _ask(self, unit: Unit, rendered: tuple) -> Asked:
        """The unit's task steps started on its :meth:`_rendered` prompts: waiting on their first requests."""
        items, prompts, inputs = rendered
        return Asked(self.tasks[unit.dataset].steps(items, prompts, [text for text, _ in inputs], self.model))

    def _rendered(self, unit: Unit) -> tuple[list, list[Prompt], list[tuple[PromptInput, str | None]]]:
        """The unit's items, prompts and rendered inputs, each checked against the hash the plan expects."""
        task, condition = self.tasks[unit.dataset], self.spec.conditions[unit.condition_index]
        by_id = {item.id: item for item in task.items}
        items = [by_id[item_id] for item_id in unit.item_ids]
        prompts = [task.prompt(item, condition) for item in items]
        inputs = [prompt_input(self.backend, prompt.messages, condition) for prompt in prompts]
        for item, (prompt, _), expected in zip(items, inputs, unit.prompt_hashes):
            if _prompt_hash(prompt) != expected:
                raise DateEvalError(
                    f"{unit.label}: item {item.id} renders a different prompt here than when the sweep was planned "
                    "(workers must share the model, template and data)"
                )
        return items, prompts, inputs

    def _execute(self, unit: Unit, rendered: tuple, asked: Asked, seconds: float = 0.0) -> UnitResult:
        """One unit's rows from its :meth:`_rendered` prompts, its task's steps answered from where ``asked`` stands,
        ``seconds`` already spent on it."""
        started = time.perf_counter() - seconds
        task, condition = self.tasks[unit.dataset], self.spec.conditions[unit.condition_index]
        items, prompts, inputs = rendered
        # the batch-size factor fixes its batches; the sweep's batch size is the most a forward holds (backends.base.FixedBatch)
        batch_size = FixedBatch(condition.batch_size) if condition.batch_size else self.spec.batch_size
        results = answers.run(asked, self.backend, batch_size)
        check_asked_on(condition, results)
        shared = self._shared(task, condition, batch_size)
        rows = [
            {
                **shared,
                "item_id": item.id,
                **task.item_record(item),
                "shown_order": prompt.shown_from,
                "date_text": date_text,
                "prompt_hash": prompt_hash,
                **result,
            }
            for item, prompt, (_, date_text), prompt_hash, result in zip(
                items, prompts, inputs, unit.prompt_hashes, results
            )
        ]
        return UnitResult(
            arrow_table(rows),
            len(items),
            sum(r.get("prompt_tokens") or 0 for r in results),
            sum(r.get("output_tokens") or 0 for r in results),
            time.perf_counter() - started,
        )

    def _shared(self, task: Task, condition: Condition, batch_size: int) -> dict:
        """What every row of one work unit shares: who produced it, under which condition and task settings."""
        identity, backend = self.backend.identity, self.backend
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
            "batch_size": int(batch_size),
        }

    def close(self) -> None:
        self.backend.close()


def pools(spec: SweepSpec, generating: set[str], unit: Unit) -> bool:
    """Whether ``unit`` may generate in one call with other units of its dataset: its dataset generates
    (``Worker.generating``) and its condition is not the batch-size factor, whose batches are what it measures."""
    return unit.dataset in generating and not spec.conditions[unit.condition_index].batch_size
