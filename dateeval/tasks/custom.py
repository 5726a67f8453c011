"""Your own benchmark, no code: a data file, or a small spec (TOML or YAML) describing one.

``--dataset bench.jsonl`` runs a multiple-choice file with the fields
``question``, ``choices`` (a list, or columns A, B, C...) and ``answer`` (an
index or a letter). A spec says more: the task kind (next-token MCQA, chain of
thought, open generation), the field mapping, how a generated answer is
extracted and graded, few-shot exemplars and a system prompt::

    kind = "generation"           # mcqa (default) | cot | generation
    data = "capitals.jsonl"       # relative to the spec; or "hf:org/name" with split/config
    system_prompt = "You are a geography teacher."
    [fields]
    question = "prompt"
    answer = "target"
    [grading]
    method = "regex"              # exact | regex | numeric | gsm8k
    [fewshot]
    data = "capitals_dev.jsonl"
    shots = 2

The dataset is stored under the spec's (or file's) stem, with the usual
``_cot`` / ``_<k>shot`` suffixes, and its content (items, mapping, grading,
prompts) is hashed into ``task_key``: an edited file makes a new entry
instead of mixing with old results. Every mistake in a spec ends in one line
naming the spec and the key; mistakes in the data are named by
:mod:`dateeval.data.custom`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from dateeval.conditions import DEFAULT_SYSTEM_PROMPT, Condition
from dateeval.data.custom import DATA_SUFFIXES, Table, TextItem, is_data_file
from dateeval.errors import DateEvalError
from dateeval.metrics import KIND_METRICS
from dateeval.names import split
from dateeval.requests import GenerationSettings
from dateeval.tasks import fewshot
from dateeval.tasks.base import GenerationTask, Prompt, Task, few_shot_chat, settings_key
from dateeval.tasks.grading import GRADERS, Grading, extract_answer
from dateeval.tasks.mcqa import ChainOfThoughtTask, MCQATask, choice_task
from dateeval.tasks.registry import GENERATION, MULTIPLE_CHOICE, REGISTRY, Benchmark, TaskRequest, register
from dateeval.tasks.specs import SPEC_SUFFIXES, Spec, dataset_name, read_spec, stem_name

OPEN_PROMPT_VERSION = "custom-generation-v1"
OPEN_SETTINGS = GenerationSettings(max_new_tokens=256)


class _Own:
    """What a user's dataset adds to a task: its content in the task key, and its own system prompt.

    The spec's system prompt replaces the sweep's default wording; a
    ``--system-prompts`` factor sweep still varies it, as for any dataset.
    """

    content_key = ""
    system_prompt: str | None = None

    def key(self) -> str:
        return settings_key(super().key(), self.content_key)

    def prompt(self, item: object, condition: Condition) -> Prompt:
        if self.system_prompt is not None and condition.system_prompt == DEFAULT_SYSTEM_PROMPT:
            condition = replace(condition, system_prompt=self.system_prompt)
        return super().prompt(item, condition)


class OpenAnswerTask(GenerationTask):
    """Open generation graded by a spec's method: the reply's answer is extracted, then compared with the item's reference."""

    kind = "generation"
    prompt_version = OPEN_PROMPT_VERSION

    def __init__(
        self,
        dataset: str,
        items: list[TextItem],
        pool: Sequence[TextItem],
        shots: int,
        settings: GenerationSettings,
        grading: Grading,
        instruction: str | None = None,
    ) -> None:
        self.dataset, self.items, self.shots, self.settings, self.grading, self.instruction = (
            dataset,
            items,
            shots,
            settings,
            grading,
            instruction,
        )
        self.exemplars = (
            {item.id: fewshot.choose(item.id, item.subject, pool, shots) for item in items} if shots else {}
        )

    def prompt(self, item: TextItem, condition: Condition) -> Prompt:
        """The instruction (if any), solved exemplars as "question / Answer: reference", then the question."""
        solved = [(e.question, f"\nAnswer: {e.reference}") for e in self.exemplars.get(item.id, [])]
        return few_shot_chat(
            condition, f"{self.instruction}\n\n" if self.instruction else "", solved, item.question, self.multiturn
        )

    def item_record(self, item: TextItem) -> dict:
        return {"subject": item.subject, "reference": item.reference}

    def describe(self, item: TextItem) -> str:
        return f"**{item.question}**\n\nReference answer: **{item.reference}**"

    def grade(self, items: list, outputs: list[str], prompts: list[Prompt]) -> list[dict]:
        correct = GRADERS[self.grading.method].correct
        answers = [extract_answer(output, self.grading) for output in outputs]
        return [
            {"parsed": answer, "correct": answer is not None and correct(answer, item.reference, self.grading)}
            for answer, item in zip(answers, items)
        ]


class OwnMCQATask(_Own, MCQATask):
    """A user's multiple-choice dataset, scored from the next token."""


class OwnChainOfThoughtTask(_Own, ChainOfThoughtTask):
    """A user's multiple-choice dataset, answered with reasoning."""


class OwnOpenAnswerTask(_Own, OpenAnswerTask):
    """A user's open-generation dataset."""


def content_key(spec: Spec, items: Sequence[object], pool: Sequence[object]) -> str:
    """A hash of what the dataset is (rows, exemplars, settings): stored in ``task_key``, so an edited file is a new entry."""
    payload = json.dumps(
        [spec.settings(), [asdict(item) for item in items], [asdict(item) for item in pool]],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _build(spec: Spec, request: TaskRequest) -> Task:
    items = spec.load(spec.table, spec.name)
    pool = spec.load(spec.exemplars, f"{spec.name}/fewshot") if request.shots else ()
    selected = request.subset.select(items, request.name)
    if spec.kind == GENERATION:
        settings = request.generation.apply(
            replace(OPEN_SETTINGS, max_new_tokens=spec.max_new_tokens or OPEN_SETTINGS.max_new_tokens)
        )
        task = OwnOpenAnswerTask(request.name, selected, pool, request.shots, settings, spec.grading, spec.instruction)
    else:
        task = choice_task(request, selected, pool, OwnMCQATask, OwnChainOfThoughtTask)
    task.content_key, task.system_prompt = content_key(spec, items, pool), spec.system_prompt
    return task


def is_reference(reference: str) -> bool:
    """Whether a ``--dataset`` value names a file (a spec or data) rather than a registered name."""
    return "/" in reference or reference.endswith((*SPEC_SUFFIXES, *DATA_SUFFIXES))


def spec_of(path: Path, confined: bool = False) -> Spec:
    """The spec a file makes: a spec file read, or a data file's defaults (``confined``: a spec's files must lie beside it)."""
    if path.name.endswith(SPEC_SUFFIXES):
        if not path.is_file():
            raise DateEvalError(f"spec {path} does not exist")
        return read_spec(path, confined)
    if is_data_file(path):
        return Spec(dataset_name(path), Table(str(path)))
    raise DateEvalError(
        f"{path}: a dataset file ends in {', '.join(DATA_SUFFIXES)}, a spec in {', '.join(SPEC_SUFFIXES)}"
    )


def register_file(path: Path, confined: bool = False) -> str:
    """Register a spec or a data file under its stem; returns the dataset name its results are stored under."""
    spec = spec_of(path, confined)
    family = GENERATION if spec.kind == GENERATION else MULTIPLE_CHOICE
    register(
        Benchmark(
            spec.name,
            family,
            functools.partial(_build, spec),
            few_shot=spec.exemplars is not None,
            source=str(path.resolve()),
            metrics=KIND_METRICS[spec.kind],
        )
    )
    return spec.dataset


def find(folder: Path, name: str) -> Path | None:
    """The spec (preferred) or data file in ``folder`` whose stem makes ``name``."""
    for suffix in (*SPEC_SUFFIXES, *DATA_SUFFIXES):
        found = [path for path in sorted(folder.glob(f"*{suffix}")) if stem_name(path) == name]
        if found:
            return found[0]
    return None


# Where a store keeps the datasets it was given without a file of the user's: the specs ``run`` writes for
# ``--spec-*`` flags, and the files uploaded on the Run page (flat folders: the store's results are two levels down).
SPECS_DIR = ".specs"
UPLOADS_DIR = ".datasets"


def register_kept(store_root: Path, name: str) -> None:
    """Register the dataset a store keeps for a stored name, so the store's results can be rebuilt (explorer, regrade)
    without knowing where its description lies. It goes before a data folder's file of the same name: the store's
    spec is what its results were made with (a folder may hold the bare data file it describes)."""
    parts = split(name)
    base = parts.base if parts else name
    if base in REGISTRY:
        return
    for folder in (SPECS_DIR, UPLOADS_DIR):
        found = find(Path(store_root) / folder, base)
        if found is not None:
            register_file(found, confined=folder == UPLOADS_DIR)
            return
