"""Reading final answers out of generated text (paper Figures 7 and 8), robustly.

Chain-of-thought MCQA ends with "The answer is X."; GSM8K with
"Answer: {number}". Models decorate both ("**B**", "(B)", "$1,200.00",
"18 dollars"), repeat themselves, or never finish: the last well-formed
occurrence wins, and anything unparseable is ``None``, graded as wrong
and recorded as unparseable.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_CHOICE = re.compile(
    r"answer\s*(?:is|:)?\s*(?:option\s*)?[\s:]*[\(\[\*\"'`]*\s*([A-Z])\s*[\)\]\*\"'`]*(?=[\s.,;:!)]|$)", re.IGNORECASE
)
_DECORATED_LETTER = re.compile(r"(?:\*\*|\(|\[)\s*([A-Z])\s*(?:\*\*|\)|\])")
_NUMBER = re.compile(r"-?\s*[$€£]?\s*-?\d[\d,]*(?:\.\d+)?")
_ANSWER_LINE = re.compile(r"answer\s*[:=]\s*(.*)", re.IGNORECASE)


def find_choice(text: str, n_options: int) -> tuple[int, int] | None:
    """(option index, character offset of its letter) from "The answer is X" (last occurrence), else the last decorated letter."""
    labels = {chr(ord("A") + i) for i in range(n_options)}
    for pattern in (_CHOICE, _DECORATED_LETTER):
        found = [m for m in pattern.finditer(text) if m.group(1).upper() in labels]
        if found:
            return ord(found[-1].group(1).upper()) - ord("A"), found[-1].start(1)
    return None


def parse_choice(text: str, n_options: int) -> int | None:
    """The option index from "The answer is X" (last occurrence), else the last decorated letter."""
    found = find_choice(text, n_options)
    return None if found is None else found[0]


def _value(number_text: str) -> Decimal | None:
    cleaned = re.sub(r"[\s$€£,]", "", number_text)
    try:
        return Decimal(cleaned).normalize() + 0  # "+ 0" turns -0 into 0
    except InvalidOperation:
        return None


def normalize_number(text: str) -> Decimal | None:
    """A number from text like "$1,200.00", "-3", "18 dollars", "0.50": commas, currency and units dropped."""
    match = _NUMBER.search(text)
    return _value(match.group(0)) if match else None


def find_number(text: str) -> tuple[Decimal, int, int] | None:
    """(value, start, end) of the final number: after the last "Answer:", else the last number in the text."""
    for line in reversed(list(_ANSWER_LINE.finditer(text))):
        match = _NUMBER.search(line.group(1))
        if match and (value := _value(match.group(0))) is not None:
            return value, line.start(1) + match.start(), line.start(1) + match.end()
    numbers = list(_NUMBER.finditer(text))
    if not numbers or (value := _value(numbers[-1].group(0))) is None:
        return None
    return value, numbers[-1].start(), numbers[-1].end()


def parse_number(text: str) -> Decimal | None:
    """The final number: after the last "Answer:", else the last number in the text."""
    found = find_number(text)
    return None if found is None else found[0]


def gsm8k_reference(answer: str) -> Decimal:
    """The reference number after ``####`` in a GSM8K answer."""
    _, marker, final = answer.rpartition("####")
    if not marker:
        raise ValueError(f"GSM8K answer without '####' before its final number: {answer[-80:]!r}")
    value = normalize_number(final)
    if value is None:
        raise ValueError(f"GSM8K answer without a final number: {answer[-80:]!r}")
    return value
