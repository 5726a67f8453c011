"""lm-evaluation-harness tasks, run with dateeval's date-controlled chat templates and backends (optional extra).

``--dataset lmeval:arc_easy`` (a task lm-eval registers) or
``--dataset lmeval:path/task.yaml`` (a task YAML; a ``.yaml`` with lm-eval's
keys is recognised without the prefix) runs the task as lm-eval defines it:
its documents, ``doc_to_text``/``doc_to_choice``/``doc_to_target``, few-shot
sampler, filters and metrics come from lm-eval's own objects; dateeval
decides only the date. The prompt is what lm-eval builds with
``--apply_chat_template --system_instruction S`` (its chat messages, captured
from ``Task.fewshot_context``), rendered by dateeval's template under each
date condition. Then:

* ``multiple_choice``: each choice's log-likelihood after the rendered prompt,
  split into context and continuation as lm-eval's HF model does (trailing
  whitespace of the context moves to the continuation), scored by the
  backend's ``continuation_logprobs``;
* ``generate_until``: the backend generates with the task's ``until`` and
  ``max_gen_toks``;

and lm-eval's filters and ``process_results`` grade each document, so every
metric is lm-eval's. A row's ``correct`` is the task's first metric under its
first filter (``acc``, ``exact_match``, ...); all of them are kept per row in
``lmeval_metrics``, and each choice's log-likelihood in ``choice_logprobs``.
Where the system instruction is the sweep's system prompt and no date is
shown, the log-likelihoods equal lm-eval's own run (``tests/tasks/test_lmeval.py``).

Exemplars are drawn once per document, in document order from lm-eval's
fewshot seed, as lm-eval does, so every date shows the same ones.

**Which task files may run code.** lm-eval imports the Python a YAML's
``!function module.name`` names when it loads the task, and renders its Jinja
templates in an environment that reaches Python; dateeval loads YAMLs users
downloaded or received, so before lm-eval sees a YAML, dateeval reads it and
everything it ``include``s as data (``!function`` an inert tag) and:

* a YAML in lm-eval's installed task folder runs its helpers (lm-eval's own
  code, trusted as lm-eval itself is);
* any other YAML with a ``!function`` is refused unless the command line says
  ``--trust-task-code`` (so never from the explorer, nor from a look-up of a
  stored dataset by name); even then a helper must be a ``.py`` file inside
  that YAML's own folder: an absolute path, a link out of the folder or an
  installed module (``os.system``) would run code from anywhere on the machine;
* every template renders in Jinja's sandbox, which refuses ``__globals__``
  and the like (``SecurityError: ... unsafe``);
* a *name* lm-eval would turn into code is refused as ``!function`` is (without
  ``--trust-task-code``, outside lm-eval's own folder): lm-eval 0.4.13 hands a
  ``metric_list`` metric it does not register, and any metric with
  ``hf_evaluate: true``, to ``evaluate.load``, which imports a local ``.py``
  file or folder (or a Hub script); an ``aggregation``, a ``filter_list``
  ``function`` or a ``fewshot_config`` ``sampler`` must be one lm-eval
  registers (its registries, no look-up by path); ``use_prompt`` reads a file
  the YAML names (``x.yaml:name``) or promptsource's unsandboxed templates.
  ``process_results``, ``class``, ``custom_dataset`` and callable
  aggregations are code only as ``!function``, refused above
  (``docs/security-hardening.md`` lists each door).

Finding a stored ``lmeval_*`` dataset in a data folder reads each YAML's
``task:`` this way and loads only the one that matches. Recognising, loading
and naming a source is :mod:`dateeval.tasks.lmeval_source`'s; this module
builds the requests and grades the answers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from dateeval.conditions import Condition
from dateeval.data.files import check_table
from dateeval.errors import DateEvalError
from dateeval.data.limits import (
    LMEVAL_MAX_CHOICES,
    MAX_STOP_CHARS,
    MAX_TASK_STOPS,
)
from dateeval.metrics import KIND_METRICS
from dateeval.requests import (
    CONTINUATION_LOGPROBS,
    GENERATE,
    ContinuationRequest,
    GenerationSettings,
    ModelView,
    Needs,
    PromptInput,
    Steps,
)
from dateeval.tasks.base import (
    GenerationTask,
    Prompt,
    Task,
    settings_key,
)
from dateeval.tasks.lmeval_bounds import lm_eval_module
from dateeval.tasks.lmeval_source import KINDS, PREFIX, SUPPORTED, canonical, dataset_name, load_task
from dateeval.tasks.registry import Benchmark, TaskRequest, register

if TYPE_CHECKING:
    from lm_eval.api.task import Task as LmEvalTask

PROMPT_VERSION = "lmeval-v1"
_SYSTEM = "\x00dateeval-system\x00"  # stands for the condition's system message until a prompt is asked for


@dataclass(frozen=True)
class Document:
    """One lm-eval document: its index in the task's evaluation split (the item id), the document, and its chat messages."""

    id: str
    doc: dict
    messages: tuple[dict, ...]


def register_source(reference: str, trust: bool = False) -> str:
    """Register an lm-eval task under its dataset name; returns that name (workers call it again with the same source
    and ``trust``, the command line's ``--trust-task-code``)."""
    source = canonical(reference)
    task = load_task(source, trust)
    name = dataset_name(task.config.task)
    register(
        Benchmark(
            name,
            SUPPORTED[task.OUTPUT_TYPE],
            functools.partial(_build, source, trust),
            few_shot=True,
            multiturn=True,
            source=source,
            metrics=KIND_METRICS[KINDS[task.OUTPUT_TYPE]],
        )
    )
    return name


# ---------------------------------------------------------------- building


def _messages_of(task, doc: dict, shots: int, multiturn: bool) -> tuple[dict, ...]:
    """The chat lm-eval builds for ``doc`` with ``--apply_chat_template`` (and ``--fewshot_as_multiturn`` where
    ``multiturn``, as lm-eval's CLI sets it with a chat template): its template callback is handed the messages,
    which are what dateeval renders (a prefilled reply, ``gen_prefix``, is refused: dateeval renders a new turn)."""
    captured: list[tuple[dict, ...]] = []

    def capture(messages: list[dict], add_generation_prompt: bool = True) -> str:
        if not add_generation_prompt:
            raise DateEvalError(
                "lm-eval tasks with gen_prefix (a prefilled assistant reply) are not supported by dateeval yet"
            )
        captured.append(tuple(dict(message) for message in messages))
        return ""

    context = task.fewshot_context(
        doc,
        shots,
        system_instruction=_SYSTEM,
        apply_chat_template=True,
        fewshot_as_multiturn=multiturn and shots > 0,
        chat_template=capture,
    )
    if isinstance(context, list):
        raise DateEvalError("it gives several contexts per document (multiple inputs): not supported yet")
    return captured[0]


def _documents(task, shots: int, multiturn: bool, target: str) -> list[Document]:
    """Every evaluation document with its messages, exemplars drawn in document order from lm-eval's fewshot seed."""
    if shots:
        task.set_fewshot_seed(seed=1234)  # lm-eval's default --fewshot_random_seed
    _check_documents(task.eval_docs, target)
    documents = []
    try:
        for index, doc in enumerate(task.eval_docs):
            _check_choices(task, doc)
            documents.append(Document(str(index), doc, _messages_of(task, doc, shots, multiturn)))
    except Exception as error:  # a template or field error in the user's task
        problem = str(error) if isinstance(error, DateEvalError) else f"{type(error).__name__}: {error}"
        raise DateEvalError(f"lm-eval task {target}, document {len(documents)}: {problem}") from None
    if not documents:
        raise DateEvalError(f"lm-eval task {target} has no evaluation documents")
    return documents


def _check_choices(task: LmEvalTask, doc: dict) -> None:
    """A multiple-choice document's choices within :data:`LMEVAL_MAX_CHOICES` (each is scored) before any is scored."""
    if task.OUTPUT_TYPE == "multiple_choice" and (count := len(task.doc_to_choice(doc))) > LMEVAL_MAX_CHOICES:
        raise DateEvalError(f"{count:,} choices, over the {LMEVAL_MAX_CHOICES:,} a document may have (each is scored)")


def _stops(until: object, target: str) -> tuple[str, ...]:
    """A task's ``until`` as stop strings, within :data:`MAX_TASK_STOPS` of :data:`MAX_STOP_CHARS` characters each."""
    stop = (until,) if isinstance(until, str) else tuple(until) if isinstance(until, (list, tuple)) else None
    if stop is None or not all(isinstance(text, str) for text in stop):
        raise DateEvalError(f"lm-eval task {target}: generation_kwargs.until must be a string or a list of strings")
    if len(stop) > MAX_TASK_STOPS or not all(0 < len(text) <= MAX_STOP_CHARS for text in stop):
        raise DateEvalError(
            f"lm-eval task {target}: generation_kwargs.until may hold at most {MAX_TASK_STOPS} stop strings of 1 to "
            f"{MAX_STOP_CHARS} characters each (the generator prepares each against the whole vocabulary)"
        )
    return stop


def _check_documents(
    docs: Iterable[dict], target: str
) -> None:  # a datasets.Dataset, or what a task's process_docs returned
    """The task's evaluation documents within a data file's bounds before each becomes a dict (and all of them JSON in
    the content key): lm-eval reads them with datasets, from a Hub dataset or a local file of any size. A list that a
    task's own ``process_docs`` returned is already built: only a dataset's memory-mapped table can be measured first."""
    if hasattr(docs, "data") and hasattr(docs.data, "table"):
        check_table(
            docs.data.table,
            f"lm-eval task {target}: its evaluation split",
            "point the task at a smaller split or data file",
        )


def _content_key(task, shots: int) -> str:
    """A hash of the task's configuration and documents: an edited YAML or data file makes a new entry."""
    lm_eval = lm_eval_module()
    config = json.dumps(task.dump_config(), sort_keys=True, default=str)
    docs = json.dumps(list(task.eval_docs), sort_keys=True, default=str, ensure_ascii=False)
    payload = "|".join((lm_eval.__version__, config, hashlib.sha256(docs.encode()).hexdigest(), str(shots)))
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _build(source: str, trust: bool, request: TaskRequest) -> Task:
    target = source.removeprefix(PREFIX)
    if request.cot:
        raise DateEvalError(f"{request.name}: _cot does not apply to lm-eval tasks (the task's own prompt is run)")
    task = load_task(source, trust)
    shots = request.shots or int(task.config.num_fewshot or 0)
    documents = request.subset.select(_documents(task, shots, request.multiturn, target), request.name)
    kind = LMEvalChoiceTask if task.OUTPUT_TYPE == "multiple_choice" else LMEvalGenerationTask
    return kind(request.name, task, documents, shots, _content_key(task, shots), request)


# ---------------------------------------------------------------- grading as lm-eval does


def _graded(task, docs: list[dict], instances: list[list], responses: list) -> list[dict]:
    """lm-eval's own grading: every filter over every response, then ``process_results`` per document and filter."""
    flat = [instance for group in instances for instance in group]
    for instance, response in zip(flat, responses):
        instance.resps = [response]
    for ensemble in task._filters:
        ensemble.apply(flat)
    graded = []
    for doc, group in zip(docs, instances):
        metrics: dict[str, float] = {}
        for ensemble in task._filters:
            results = task.process_results(doc, [instance.filtered_resps[ensemble.name] for instance in group])
            metrics |= {f"{metric},{ensemble.name}": value for metric, value in results.items()}
        graded.append(metrics)
    return graded


def _primary(task, graded: dict) -> bool:
    """The task's first metric under its first filter, as a right/wrong outcome."""
    metric = task.config.metric_list[0]["metric"] if task.config.metric_list else next(iter(graded)).split(",")[0]
    key = f"{metric},{task._filters[0].name}"
    value = graded.get(key)
    if value not in (0, 1, True, False):
        raise DateEvalError(
            f"lm-eval task {task.config.task}: its first metric {metric} is not right/wrong per document ({value!r}); "
            "put a 0/1 metric (acc, exact_match) first in metric_list"
        )
    return bool(value)


def _encode_pair(context: str, continuation: str) -> ContinuationRequest:
    """lm-eval's split: trailing whitespace of the context belongs to the continuation (``LM._encode_pair``)."""
    stripped = context.rstrip()
    return ContinuationRequest(stripped, context[len(stripped) :] + continuation)


class _LMEval:
    """What both output types share: the document's messages under a condition, identity, and how items are shown."""

    def __init__(
        self, dataset: str, task, documents: list[Document], shots: int, content_key: str, request: TaskRequest
    ) -> None:
        self.dataset, self.lm_task, self.items, self.shots, self.content_key = (
            dataset,
            task,
            documents,
            shots,
            content_key,
        )

    def prompt(self, item: Document, condition: Condition) -> Prompt:
        """lm-eval's messages with the condition's system message where ``--system_instruction`` would be."""
        return Prompt(
            [{**m, "content": m["content"].replace(_SYSTEM, condition.system_message())} for m in item.messages]
        )

    def _requests(self, item: Document, text: str) -> list:
        """lm-eval's requests for the document after ``text`` (``prepare`` made sure prompts are rendered text)."""
        made = self.lm_task.construct_requests(item.doc, text, apply_chat_template=True)
        return made if isinstance(made, list) else [made]

    def item_record(self, item: Document) -> dict:
        return {"subject": None, "reference": str(self.lm_task.doc_to_target(item.doc))}

    def describe(self, item: Document) -> str:
        text = str(self.lm_task.doc_to_text(item.doc))
        if self.lm_task.OUTPUT_TYPE != "multiple_choice":
            return f"**{text}**\n\nReference answer: **{self.lm_task.doc_to_target(item.doc)}**"
        gold = self.lm_task.doc_to_target(item.doc)
        choices = self.lm_task.doc_to_choice(item.doc)
        gold = choices.index(gold) if isinstance(gold, str) and gold in choices else gold
        lines = "\n".join(
            f"- {choice}" + (" :green[:material/check_circle: **correct**]" if i == gold else "")
            for i, choice in enumerate(choices)
        )
        return f"**{text}**\n\n{lines}"


class LMEvalChoiceTask(_LMEval, Task):
    """An lm-eval ``multiple_choice`` task: one log-likelihood per choice, graded by lm-eval (acc, acc_norm...)."""

    kind = "mcqa"
    prompt_version = PROMPT_VERSION
    choice = False  # the choices are continuations, not lettered options: no option-order factor

    def needs(self) -> Needs:
        refusal = f"{self.dataset} scores each choice's log-likelihood after the rendered prompt, which backend {{backend}} cannot give"
        return Needs(frozenset({CONTINUATION_LOGPROBS}), refusal, renders_locally=True)

    def key(self) -> str:
        return settings_key(PROMPT_VERSION, self.shots, self.content_key, *self.format_parts())

    def record(self) -> dict:
        return {**super().record(), "label_variant": "loglikelihood"}

    def item_record(self, item: Document) -> dict:
        return {**super().item_record(item), "n_options": len(self.lm_task.doc_to_choice(item.doc))}

    def steps(self, items: list, prompts: list[Prompt], inputs: list[PromptInput], model: ModelView) -> Steps:
        instances = [self._requests(item, text) for item, text in zip(items, inputs)]
        lls: list[float] = yield [_encode_pair(*instance.arguments) for group in instances for instance in group]
        graded = _graded(self.lm_task, [item.doc for item in items], instances, [(ll, False) for ll in lls])
        results, start = [], 0
        for group, metrics, length in zip(instances, graded, model.prompt_lengths(inputs)):
            scores = np.array(lls[start : start + len(group)], dtype=np.float64)
            start += len(group)
            probs = np.exp(scores - scores.max())
            probs /= probs.sum()
            pred = int(np.argmax(scores))
            results.append(
                {
                    "prompt_tokens": length,
                    "choice_logprobs": scores.tolist(),
                    "probs": probs.tolist(),
                    "label_mass": math.nan,
                    "pred": pred,
                    "correct": _primary(self.lm_task, metrics),
                    "confidence": float(probs[pred]),
                    "lmeval_metrics": json.dumps(metrics, sort_keys=True),
                }
            )
        return results


class LMEvalGenerationTask(_LMEval, GenerationTask):
    """An lm-eval ``generate_until`` task: the reply is generated under the task's ``until``, then lm-eval filters and grades it."""

    kind = "generation"
    prompt_version = PROMPT_VERSION

    def __init__(
        self, dataset: str, task, documents: list[Document], shots: int, content_key: str, request: TaskRequest
    ) -> None:
        super().__init__(dataset, task, documents, shots, content_key, request)
        kwargs = dict(task.config.generation_kwargs or {})
        stop = _stops(kwargs.get("until") or [], str(task.config.task))
        own = GenerationSettings(
            max_new_tokens=int(kwargs.get("max_gen_toks", 256)), stop=stop, sample=bool(kwargs.get("do_sample", False))
        )
        self.settings = replace(request.generation.apply(own), sample=request.generation.sample or own.sample)

    def needs(self) -> Needs:
        return Needs(
            frozenset({GENERATE}),
            f"{self.dataset} generates after the rendered prompt, which backend {{backend}} cannot do",
            renders_locally=True,
        )

    def key(self) -> str:
        return settings_key(super().key(), self.content_key)

    def grade(self, items: list, outputs: list[str], prompts: list[Prompt]) -> list[dict]:
        """lm-eval's filters and metrics over the replies (after generating, and when regrading stored outputs)."""
        instances = [self._requests(item, "") for item in items]
        graded = _graded(self.lm_task, [item.doc for item in items], instances, outputs)
        first = self.lm_task._filters[0].name
        return [
            {
                "parsed": str(group[0].filtered_resps[first]),
                "correct": _primary(self.lm_task, metrics),
                "lmeval_metrics": json.dumps(metrics, sort_keys=True),
            }
            for group, metrics in zip(instances, graded)
        ]
