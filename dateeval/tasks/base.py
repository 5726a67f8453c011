"""The task interface a sweep runs: build each item's messages, then ask for rendered prompts' answers and grade them.

A task owns everything benchmark-specific (prompt wording, few-shot
exemplars, how an output is graded, which settings change results); the
sweep owns dates, templates, the store and resumption. Two kinds exist:

* scoring tasks read the next-token distribution (multiple-choice QA);
* generation tasks decode a reply per prompt, store it verbatim, and grade it
  (chain-of-thought MCQA, GSM8K, HumanEval, translation), so grading can be
  redone and outputs compared across dates from the store alone.

A task never touches a backend: :meth:`Task.steps` yields requests and is
sent their answers (``dateeval/requests.py``); ``dateeval/engine/answers.py`` runs them.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dateeval.conditions import Condition
from dateeval.names import MULTI_TURN
from dateeval.requests import Generation, GenerationRequest, GenerationSettings, ModelView, Needs, PromptInput, Steps


@dataclass(frozen=True)
class Prompt:
    """One item's chat messages under one condition (``shown_from``: the option order shown, for MC items)."""

    messages: list[dict]
    shown_from: list[int] | None = None


def chat(condition: Condition, user: str, shown_from: list[int] | None = None) -> Prompt:
    """The system message of the condition (wording, location) and the task's user turn; every task's prompt."""
    return Prompt(
        [{"role": "system", "content": condition.system_message()}, {"role": "user", "content": user}], shown_from
    )


def few_shot_chat(
    condition: Condition,
    lead: str,
    shots: Sequence[tuple[str, str]],
    question: str,
    multiturn: bool,
    shown_from: list[int] | None = None,
) -> Prompt:
    """A few-shot prompt: ``lead`` (the instruction and its blank line, or nothing), solved exemplars as (question,
    answer) with the answer as the single-turn text continues the question (e.g. ``" A"``, ``"\nThe answer is A."``),
    then the question.

    Single-turn: one user message, each exemplar its question, answer and a blank line. Multi-turn, as lm-eval builds
    it: each exemplar is a user turn (the first led by ``lead``) and an assistant turn holding its answer (stripped of
    the text that joined it to the question), then the question as the last user turn. Without exemplars both are one
    user message.
    """
    if not multiturn or not shots:
        return chat(condition, lead + "".join(f"{asked}{answer}\n\n" for asked, answer in shots) + question, shown_from)
    turns = [{"role": "system", "content": condition.system_message()}]
    for index, (asked, answer) in enumerate(shots):
        turns += [
            {"role": "user", "content": (lead if index == 0 else "") + asked},
            {"role": "assistant", "content": answer.strip()},
        ]
    return Prompt(turns + [{"role": "user", "content": question}], shown_from)


class Task(ABC):
    """One benchmark, as a sweep sees it. ``dataset`` is the name results are stored and shown under."""

    dataset: str
    items: Sequence[Any]
    prompt_version: str
    shots: int = 0
    multiturn: bool = (
        False  # exemplars as turns of a conversation (``few_shot_chat``); set by ``build_task`` from the name
    )
    choice: bool = False  # items have lettered options (option order can be permuted)
    subset: str = "all"  # how the items were selected, recorded with every row

    @abstractmethod
    def prompt(self, item: Any, condition: Condition) -> Prompt:
        """The messages for ``item`` (the date is added later by the template or injection)."""

    def ensure_runnable(self) -> None:
        """Fail with one clear line, before any model is loaded, when something grading needs is missing."""

    def needs(self) -> Needs | None:
        """What the model must answer for this task to run at all (checked before any item); None: nothing beyond its requests."""
        return None

    def prepare(self, model: ModelView) -> None:
        """Settle anything that depends on the model (e.g. which token stands for each option label)."""

    @abstractmethod
    def key(self) -> str:
        """Hash of every task setting that changes results: part of each stored row's identity."""

    def format_parts(self) -> tuple[str, ...]:
        """The few-shot format as part of :meth:`key` where it changes the prompt (exemplars as turns): nothing for the
        single-turn default, so every key stored before the format was a choice stays the same."""
        return (MULTI_TURN,) if self.multiturn and self.shots else ()

    @abstractmethod
    def steps(self, items: list, prompts: list[Prompt], inputs: list[PromptInput], model: ModelView) -> Steps:
        """Per-item result columns, in order, for ``inputs`` (rendered prompt texts, or messages for a server's template):
        a generator that yields batches of requests, is sent their answers, and returns the columns."""

    @abstractmethod
    def item_record(self, item: Any) -> dict:
        """Columns describing the item itself (subject, options, reference)."""

    @abstractmethod
    def describe(self, item: Any) -> str:
        """The item as Markdown, for people reading flips (the store keeps ids and results, not benchmark text)."""

    def record(self) -> dict:
        """Columns describing the task's settings, stored with every row."""
        return {
            "task": self.kind,
            "task_key": self.key(),
            "prompt_version": self.prompt_version,
            "shots": self.shots,
            "subset": self.subset,
        }

    @property
    @abstractmethod
    def kind(self) -> str:
        """``mcqa``, ``cot``, ``gsm8k``, ``humaneval``, ``translation``, or ``generation`` (a user's open-generation dataset)."""


def without_confidence(model: ModelView, results: list[dict]) -> list[dict]:
    """Replies left without a confidence (NaN) because the backend's server cannot score them: each row states why (``confidence_note``)."""
    note = model.capabilities.scoring_note
    return [{**result, "confidence_note": note} for result in results] if note else results


def settings_key(*parts: object) -> str:
    """A short stable hash of task settings."""
    return hashlib.sha256(json.dumps([str(part) for part in parts]).encode()).hexdigest()[:16]


class GenerationTask(Task):
    """A task graded on a decoded reply; subclasses say how to grade one (or a batch of) replies."""

    settings: GenerationSettings

    def key(self) -> str:
        return settings_key(
            self.prompt_version, self.shots, json.dumps(asdict(self.settings), sort_keys=True), *self.format_parts()
        )

    def record(self) -> dict:
        decoding = "sample" if self.settings.sample else "greedy"
        return {
            **super().record(),
            "decoding": decoding,
            "max_new_tokens": self.settings.max_new_tokens,
            "generation_seed": self.settings.seed,
        }

    def steps(self, items: list, prompts: list[Prompt], inputs: list[PromptInput], model: ModelView) -> Steps:
        replies: list[Generation] = yield [GenerationRequest(prompt, self.settings) for prompt in inputs]
        graded = self.grade(items, [reply.text for reply in replies], prompts)
        return [
            {
                "prompt_tokens": reply.prompt_tokens,
                "output": reply.text,
                "output_tokens": reply.n_tokens,
                "confidence": float("nan"),
                **reply.usage.columns(),
                **result,
            }
            for reply, result in zip(replies, graded)
        ]

    @abstractmethod
    def grade(self, items: list, outputs: list[str], prompts: list[Prompt]) -> list[dict]:
        """Per-item grading columns: ``parsed`` (the extracted answer, None when unparseable), ``correct``, ..."""
