"""Multiple-choice QA scored from the next-token distribution (paper App. C.3).

One forward pass per prompt. The prediction is read from the probability of
each option label as the first token of the assistant's reply; the labels'
probabilities are renormalised over the options, the prediction is the
argmax and the confidence its probability (the quantity ECE bins, App. C.1).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dateeval.conditions import Condition
from dateeval.data import SOURCES, Source, load_exemplars, load_items
from dateeval.data.items import LABELS, MCItem
from dateeval.errors import DateEvalError
from dateeval.metrics import CALIBRATED
from dateeval.requests import (
    LABEL_LOGPROBS,
    GenerationSettings,
    Label,
    LabelRequest,
    LabelScores,
    ModelView,
    Needs,
    PromptInput,
    Steps,
    Tokens,
)
from dateeval.tasks import fewshot
from dateeval.tasks.base import GenerationTask, Prompt, Task, few_shot_chat, settings_key, without_confidence
from dateeval.tasks.parsing import find_choice, parse_choice
from dateeval.tasks.registry import MULTIPLE_CHOICE, Benchmark, TaskRequest

PROMPT_VERSION = "mcqa-v1"
INSTRUCTION = "The following is a multiple-choice question{about}. Reply with the letter of the correct answer."
COT_PROMPT_VERSION = "mcqa-cot-v1"
COT_INSTRUCTION = (
    "Answer the following multiple-choice question{about}. Think step by step, then finish with "
    "'The answer is X.' where X is the letter of the correct option."
)


def _about(item: MCItem) -> str:
    return f" about {item.subject.replace('_', ' ')}" if item.subject else ""


def _question(item: MCItem) -> str:
    options = "\n".join(f"{label}. {text}" for label, text in zip(item.labels, item.options))
    return f"{item.question}\n{options}"


def scored_parts(item: MCItem, exemplars: Sequence[MCItem] = ()) -> tuple[str, list[tuple[str, str]], str]:
    """The user turn's parts (``base.few_shot_chat``): the instruction, the solved exemplars (question, ``" X"``), the
    question with its lettered options and ``Answer:``."""
    shots = [(f"{_question(e)}\nAnswer:", f" {LABELS[e.answer]}") for e in exemplars]
    return f"{INSTRUCTION.format(about=_about(item))}\n\n", shots, f"{_question(item)}\nAnswer:"


def cot_parts(item: MCItem, exemplars: Sequence[MCItem] = ()) -> tuple[str, list[tuple[str, str]], str]:
    """Chain-of-thought variant (paper Figure 7); the reply is parsed with ``parsing.parse_choice``.

    Exemplars show the expected ending ("The answer is X.") only: the
    benchmarks ship no reasoning chains, and invented ones would be a
    confound of their own.
    """
    shots = [(_question(e), f"\nThe answer is {LABELS[e.answer]}.") for e in exemplars]
    return f"{COT_INSTRUCTION.format(about=_about(item))}\n\n", shots, _question(item)


def _check_order(item: MCItem, order: int) -> None:
    """Refuse an order beyond the item's n! - 1 others: more would only repeat permutations, counted as new conditions."""
    orders = math.factorial(len(item.options))
    if order >= orders:
        raise DateEvalError(
            f"option order {order} asked of item {item.id}, whose {len(item.options)} options have only {orders} orders "
            f"(the published one and {orders - 1} others): use --option-orders {orders - 1} or fewer"
        )


def check_orders(items: list[MCItem], highest: int) -> None:
    """Before any model loads: refuse option orders the item with the fewest options cannot give (``_check_order``)."""
    if highest and items:
        _check_order(min(items, key=lambda item: len(item.options)), highest)


def permute(item: MCItem, order: int) -> tuple[MCItem, list[int]]:
    """The item with its options in the ``order``-th seeded permutation (0 = as published).

    Returns the shown item and ``shown_from``: position j shows original
    option ``shown_from[j]``. The seed is the item id and ``order``, so a
    permutation is the same on every date, run and machine (paper §5.5).
    """
    _check_order(item, order)
    shown_from = list(range(len(item.options)))
    if order:
        random.Random(f"{item.id}#{order}").shuffle(shown_from)
    shown = MCItem(
        item.id, item.question, tuple(item.options[i] for i in shown_from), shown_from.index(item.answer), item.subject
    )
    return shown, shown_from


def to_original_order(shown_values: np.ndarray, shown_from: list[int]) -> np.ndarray:
    """Map per-option values from shown positions back to the original options."""
    original = np.empty_like(shown_values)
    original[shown_from] = shown_values
    return original


@dataclass(frozen=True)
class LabelTokens:
    """Which token stands for each option label under one tokenizer.

    "space + label" (``" A"``) when the tokenizer has it as a single token for
    every label, as the paper prescribes; otherwise the bare label (``"A"``).
    """

    variant: str
    labels: tuple[Label, ...]

    @property
    def token_ids(self) -> tuple[int | None, ...]:
        return tuple(label.token_id for label in self.labels)

    @property
    def key(self) -> str:
        """Scoring settings that change results (token ids follow from the tokenizer, keyed with the model)."""
        return hashlib.sha256(f"{PROMPT_VERSION}|{self.variant}".encode()).hexdigest()[:16]


LABEL_STYLES = {"space+label": " {}", "label": "{}"}


def label_tokens(tokenizer: Tokens | None, n_labels: int, style: str = "auto") -> LabelTokens:
    """Decide, per tokenizer, the single token for each of the first ``n_labels`` labels.

    ``style`` ``auto`` follows the paper (space + label when single tokens,
    else the bare label); ``space+label`` or ``label`` force one form. Without
    a tokenizer (a chat endpoint) the labels are matched as text, and ``auto``
    is the bare label: what a reply's first token is.
    """
    if style != "auto" and style not in LABEL_STYLES:
        raise DateEvalError(f"unknown label style {style!r}: choose auto, {', '.join(LABEL_STYLES)}")
    labels = LABELS[:n_labels]
    if tokenizer is None:
        variant = "label" if style == "auto" else style
        return LabelTokens(variant, tuple(Label(LABEL_STYLES[variant].format(label)) for label in labels))
    for variant, template in LABEL_STYLES.items():
        if style not in ("auto", variant):
            continue
        ids = [tokenizer.encode(template.format(label), add_special_tokens=False) for label in labels]
        if all(len(token) == 1 for token in ids) and len({token[0] for token in ids}) == n_labels:
            return LabelTokens(
                variant, tuple(Label(template.format(label), token[0]) for label, token in zip(labels, ids))
            )
    raise DateEvalError(
        f"tokenizer {tokenizer.name_or_path} has no single {style} token for each option label {labels}"
    )


@dataclass(frozen=True)
class Graded:
    probs: np.ndarray
    pred: int
    confidence: float
    correct: bool
    label_mass: float


def grade(label_logprobs: np.ndarray, answer: int) -> Graded:
    """Renormalise the labels' log-probabilities over the options and grade the argmax.

    ``label_logprobs`` are full-vocabulary log-probabilities of this item's
    option tokens; ``label_mass`` (their total probability before
    renormalising) shows how much the model wanted to answer with a label at all.
    """
    shifted = np.exp(label_logprobs - label_logprobs.max())
    probs = shifted / shifted.sum()
    pred = int(np.argmax(probs))
    return Graded(probs, pred, float(probs[pred]), pred == answer, float(np.exp(label_logprobs).sum()))


class _Choice:
    """What scored and chain-of-thought MCQA share: items, per-item exemplars, option permutation."""

    choice = True

    def __init__(self, dataset: str, items: list[MCItem], exemplar_pool: Sequence[MCItem] = (), shots: int = 0) -> None:
        self.dataset, self.items, self.shots = dataset, items, shots
        self.exemplars = (
            {item.id: fewshot.choose(item.id, item.subject, exemplar_pool, shots) for item in items} if shots else {}
        )

    def shown(self, item: MCItem, condition: Condition) -> tuple[MCItem, list[int], list[MCItem]]:
        shown, shown_from = permute(item, condition.option_order)
        return shown, shown_from, self.exemplars.get(item.id, [])

    def item_record(self, item: MCItem) -> dict:
        return {"subject": item.subject, "n_options": len(item.options), "answer": item.answer}

    def describe(self, item: MCItem) -> str:
        # Material icons, not emoji: they render without an emoji font.
        options = "\n".join(
            f"- **{label}.** {text}" + (" :green[:material/check_circle: **correct**]" if i == item.answer else "")
            for i, (label, text) in enumerate(zip(item.labels, item.options))
        )
        return f"**{item.question}**\n\n{options}"


class MCQATask(_Choice, Task):
    """Next-token multiple-choice QA (paper Figure 6): one forward pass per prompt, probabilities over the labels."""

    kind = "mcqa"
    prompt_version = PROMPT_VERSION

    def __init__(
        self,
        dataset: str,
        items: list[MCItem],
        exemplar_pool: Sequence[MCItem] = (),
        shots: int = 0,
        label_style: str = "auto",
    ) -> None:
        super().__init__(dataset, items, exemplar_pool, shots)
        self.label_style = label_style
        self.labels: LabelTokens | None = None

    def prompt(self, item: MCItem, condition: Condition) -> Prompt:
        shown, shown_from, exemplars = self.shown(item, condition)
        return few_shot_chat(condition, *scored_parts(shown, exemplars), self.multiturn, shown_from)

    def needs(self) -> Needs:
        return Needs(
            frozenset({LABEL_LOGPROBS}),
            f"{self.dataset} reads next-token probabilities, which backend {{backend}} cannot give: use {self.dataset}_cot",
        )

    def prepare(self, model: ModelView) -> None:
        self.labels = label_tokens(model.tokens, max(len(item.options) for item in self.items), self.label_style)

    def key(self) -> str:
        # Zero-shot keeps the first release's key, so existing stores stay valid.
        return self.labels.key if not self.shots else settings_key(self.labels.key, self.shots, *self.format_parts())

    def record(self) -> dict:
        return {**super().record(), "label_variant": self.labels.variant}

    def steps(self, items: list, prompts: list[Prompt], inputs: list[PromptInput], model: ModelView) -> Steps:
        scores: list[LabelScores] = yield [
            LabelRequest(text, self.labels.labels[: len(item.options)]) for item, text in zip(items, inputs)
        ]
        results = []
        for item, prompt, length, score in zip(items, prompts, model.prompt_lengths(inputs), scores):
            graded = grade(to_original_order(score.logprobs, prompt.shown_from), item.answer)
            results.append(
                {
                    "prompt_tokens": length,
                    "probs": [float(p) for p in graded.probs],
                    "label_mass": graded.label_mass,
                    "pred": graded.pred,
                    "correct": graded.correct,
                    "confidence": graded.confidence,
                    **score.usage.columns(),
                }
            )
        return results


COT_SETTINGS = GenerationSettings(max_new_tokens=384)


class ChainOfThoughtTask(_Choice, GenerationTask):
    """MCQA with reasoning (paper Figure 7, §5.3): the model reasons, ends with "The answer is X.", X is parsed."""

    kind = "cot"
    prompt_version = COT_PROMPT_VERSION

    def __init__(
        self,
        dataset: str,
        items: list[MCItem],
        exemplar_pool: Sequence[MCItem] = (),
        shots: int = 0,
        settings: GenerationSettings = COT_SETTINGS,
    ) -> None:
        super().__init__(dataset, items, exemplar_pool, shots)
        self.settings = settings
        self.labels: dict[str, LabelTokens] = {}

    def prepare(self, model: ModelView) -> None:
        capabilities = model.capabilities
        if not (model.can(LABEL_LOGPROBS) and capabilities.renders_locally and capabilities.exact_labels):
            return  # answers keep no confidence: the backend cannot read every letter's probability after a reply we continue
        n_labels = max(len(item.options) for item in self.items)
        for style in LABEL_STYLES:
            try:
                self.labels[style] = label_tokens(model.tokens, n_labels, style)
            except DateEvalError:
                pass  # this tokenizer has no single token per label in that form: such answers get no confidence

    def steps(self, items: list, prompts: list[Prompt], inputs: list[PromptInput], model: ModelView) -> Steps:
        results = yield from super().steps(items, prompts, inputs, model)
        if not self.labels:
            return without_confidence(model, results)
        return (yield from self._answer_confidence(items, prompts, inputs, results))

    def _answer_confidence(
        self, items: list, prompts: list[Prompt], texts: list[PromptInput], results: list[dict]
    ) -> Steps:
        """The confidence of a reasoned answer, so that ECE and Table 7 extend to chain of thought.

        At the position where the model wrote its answer letter, the
        next-token probabilities of every option letter are read (one forward
        pass over prompt + reasoning, the same way as next-token MCQA: " X"
        after a space, the bare letter after "**" or "("), renormalised over
        the options and mapped back to the original order; the confidence is
        the probability of the letter the model wrote. Unparseable replies
        have none (NaN) and are left out of ECE; they still count as wrong.
        """
        todo = []
        for index, (item, text, result) in enumerate(zip(items, texts, results)):
            found = find_choice(result["output"], len(item.options))
            if found is None:
                continue
            before = result["output"][: found[1]]
            style = "space+label" if before.endswith(" ") else "label"
            if style in self.labels:
                todo.append(
                    (
                        index,
                        LabelRequest(
                            text + (before[:-1] if style == "space+label" else before),
                            self.labels[style].labels[: len(item.options)],
                        ),
                    )
                )
        scores: list[LabelScores] = yield [request for _, request in todo]
        for (index, _), score in zip(todo, scores):
            graded = grade(to_original_order(score.logprobs, prompts[index].shown_from), items[index].answer)
            pred = results[index]["pred"]
            results[index].update(
                probs=[float(p) for p in graded.probs],
                label_mass=graded.label_mass,
                confidence=float(graded.probs[pred]),
            )
        return results

    def prompt(self, item: MCItem, condition: Condition) -> Prompt:
        shown, shown_from, exemplars = self.shown(item, condition)
        return few_shot_chat(condition, *cot_parts(shown, exemplars), self.multiturn, shown_from)

    def grade(self, items: list, outputs: list[str], prompts: list[Prompt]) -> list[dict]:
        """The last "The answer is X" (shown letter), mapped back to the original option; unparseable is wrong."""
        results = []
        for item, output, prompt in zip(items, outputs, prompts):
            shown = parse_choice(output, len(item.options))
            pred = None if shown is None else prompt.shown_from[shown]
            results.append(
                {"pred": pred, "parsed": None if pred is None else LABELS[pred], "correct": pred == item.answer}
            )
        return results


def choice_task(
    request: TaskRequest,
    items: list[MCItem],
    pool: Sequence[MCItem],
    scored: type[MCQATask] = MCQATask,
    reasoned: type[ChainOfThoughtTask] = ChainOfThoughtTask,
) -> Task:
    """The next-token or chain-of-thought task over multiple-choice items, as the name's variant (``_cot``) says."""
    if request.cot:
        return reasoned(request.name, items, pool, request.shots, request.generation.apply(COT_SETTINGS))
    return scored(request.name, items, pool, request.shots, request.label_style)


def _benchmark(name: str, source: Source) -> Benchmark:
    """One built-in multiple-choice benchmark of the data table."""

    def build(request: TaskRequest) -> Task:
        pool = load_exemplars(name, request.data_dir) if request.shots else ()
        return choice_task(request, load_items(name, request.data_dir, request.subset), pool)

    return Benchmark(
        name,
        MULTIPLE_CHOICE,
        build,
        few_shot=source.exemplars is not None,
        subjects=source.subjects,
        metrics=CALIBRATED,
    )


BENCHMARKS = tuple(_benchmark(name, source) for name, source in SOURCES.items())
