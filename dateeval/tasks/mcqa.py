"""Multiple-choice QA scored from the next-token distribution (paper App. C.3).

One forward pass per prompt. The prediction is read from the probability of
each option label as the first token of the assistant's reply; the labels'
probabilities are renormalised over the options, the prediction is the
argmax and the confidence its probability (the quantity ECE bins, App. C.1).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

import numpy as np

from dateeval.data.items import LABELS, MCItem
from dateeval.errors import DateEvalError

PROMPT_VERSION = "mcqa-v1"
INSTRUCTION = "The following is a multiple-choice question{about}. Reply with the letter of the correct answer."


def user_message(item: MCItem) -> str:
    """The user turn: instruction, question, lettered options, and ``Answer:``."""
    about = f" about {item.subject.replace('_', ' ')}" if item.subject else ""
    options = "\n".join(f"{label}. {text}" for label, text in zip(item.labels, item.options))
    return f"{INSTRUCTION.format(about=about)}\n\n{item.question}\n{options}\nAnswer:"


COT_INSTRUCTION = (
    "Answer the following multiple-choice question{about}. Think step by step, then finish with "
    "'The answer is X.' where X is the letter of the correct option."
)


def cot_user_message(item: MCItem) -> str:
    """Chain-of-thought variant (paper Figure 7); the reply is parsed with ``parsing.parse_choice``."""
    about = f" about {item.subject.replace('_', ' ')}" if item.subject else ""
    options = "\n".join(f"{label}. {text}" for label, text in zip(item.labels, item.options))
    return f"{COT_INSTRUCTION.format(about=about)}\n\n{item.question}\n{options}"


def messages(item: MCItem, system_prompt: str) -> list[dict]:
    """System + user messages; the date is added later by the chat template or injection."""
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": user_message(item)}]


def permute(item: MCItem, order: int) -> tuple[MCItem, list[int]]:
    """The item with its options in the ``order``-th seeded permutation (0 = as published).

    Returns the shown item and ``shown_from``: position j shows original
    option ``shown_from[j]``. The seed is the item id and ``order``, so a
    permutation is the same on every date, run and machine (paper §5.5).
    """
    shown_from = list(range(len(item.options)))
    if order:
        random.Random(f"{item.id}#{order}").shuffle(shown_from)
    shown = MCItem(item.id, item.question, tuple(item.options[i] for i in shown_from), shown_from.index(item.answer), item.subject)
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
    token_ids: tuple[int, ...]

    @property
    def key(self) -> str:
        """Scoring settings that change results (token ids follow from the tokenizer, keyed with the model)."""
        return hashlib.sha256(f"{PROMPT_VERSION}|{self.variant}".encode()).hexdigest()[:16]


LABEL_STYLES = {"space+label": " {}", "label": "{}"}


def label_tokens(tokenizer, n_labels: int, style: str = "auto") -> LabelTokens:  # noqa: ANN001 - any HF tokenizer
    """Decide, per tokenizer, the single token for each of the first ``n_labels`` labels.

    ``style`` ``auto`` follows the paper (space + label when single tokens,
    else the bare label); ``space+label`` or ``label`` force one form.
    """
    if style != "auto" and style not in LABEL_STYLES:
        raise DateEvalError(f"unknown label style {style!r}: choose auto, {', '.join(LABEL_STYLES)}")
    labels = LABELS[:n_labels]
    for variant, template in LABEL_STYLES.items():
        if style not in ("auto", variant):
            continue
        ids = [tokenizer.encode(template.format(label), add_special_tokens=False) for label in labels]
        if all(len(token) == 1 for token in ids) and len({token[0] for token in ids}) == n_labels:
            return LabelTokens(variant, tuple(token[0] for token in ids))
    raise DateEvalError(f"tokenizer {tokenizer.name_or_path} has no single {style} token for each option label {labels}")


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
