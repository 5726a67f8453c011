"""How a user's open-generation dataset grades a reply (a spec's ``[grading]``): extract the answer, compare it with
the reference by one of :data:`GRADERS`. Split from :mod:`dateeval.tasks.custom`, which reads specs; its regexes run
under a time limit (``REGEX_SECONDS``), as a spec is the user's text."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

import regex

from dateeval.data.limits import REGEX_SECONDS
from dateeval.tasks.parsing import gsm8k_reference, normalize_number, parse_number

_ANSWER_LINE = re.compile(r"answer\s*[:=]\s*(.*)", re.IGNORECASE)
_EDGES = " \t\n\"'`*_.,;:!?()[]"  # decoration around an answer that exact match ignores


@dataclass(frozen=True)
class Grading:
    """How a generated reply is graded: ``extract`` (a regex; group 1, else the match) picks the answer out of the reply,
    ``method`` compares it with the reference; ``pattern`` is the regex method's test, ``{answer}`` the escaped reference."""

    method: str = "exact"
    extract: str | None = None
    pattern: str = r"(?i)(?<!\w){answer}(?!\w)"
    tolerance: float = 0.0


@dataclass(frozen=True)
class Grader:
    """One grading method: how a reference is checked when the data loads, whether a reply's answer is numeric, and the comparison."""

    reference: Callable[[str], str]
    numeric: bool
    correct: Callable[[str, str, Grading], bool]


def _number_reference(text: str) -> str:
    value = normalize_number(text)
    if value is None:
        raise ValueError(f"{text!r} is not a number (grading method numeric)")
    return str(value)


def _gsm8k_reference(text: str) -> str:
    """A GSM8K-style answer ("... #### 42") or a plain number."""
    return str(gsm8k_reference(text)) if "####" in text else _number_reference(text)


def _exact(answer: str, reference: str, grading: Grading) -> bool:
    def normal(text: str) -> str:
        return " ".join(text.strip(_EDGES).casefold().split())

    return normal(answer) == normal(reference)


def _matches(pattern: str, text: str) -> list[regex.Match] | None:
    """Every match of a spec's grading regex in a reply, or None when finding them takes over ``REGEX_SECONDS`` of CPU.

    A spec's pattern is the user's, the reply the model's: ``(a+)+$`` on a
    27-character reply backtracks for seconds in ``re``, and the pattern that
    blows up cannot be told from one that does not. The ``regex`` module
    (re's syntax; a dependency of transformers) stops such a search at a time
    bound, and the reply is then graded as one the pattern cannot read.
    """
    try:
        return list(regex.finditer(pattern, text, timeout=REGEX_SECONDS))
    except TimeoutError:
        return None


def _regex(answer: str, reference: str, grading: Grading) -> bool:
    return bool(_matches(grading.pattern.replace("{answer}", regex.escape(reference)), answer))


def _within(answer: str, reference: str, grading: Grading) -> bool:
    return abs(Decimal(answer) - Decimal(reference)) <= Decimal(str(grading.tolerance))


GRADERS: dict[str, Grader] = {
    "exact": Grader(
        str, False, _exact
    ),  # the answer equals the reference (case, spacing, surrounding punctuation ignored)
    "regex": Grader(str, False, _regex),  # ``pattern`` (with the reference in it) is found in the answer
    "numeric": Grader(_number_reference, True, _within),  # the final number is within ``tolerance`` of the reference
    "gsm8k": Grader(_gsm8k_reference, True, _within),  # GSM8K's grader: final number, references as "... #### 42"
}


def extract_answer(output: str, grading: Grading) -> str | None:
    """The answer a reply gives (None: unparseable, graded wrong).

    With ``extract``, its last match; otherwise numeric methods take the final
    number as GSM8K does (after the last "Answer:", else the last number) and
    text methods the rest of the last "Answer:" line, else the whole reply.
    """
    numeric = GRADERS[grading.method].numeric
    if grading.extract:
        matches = _matches(grading.extract, output)
        if matches is None:
            return None
        text = ((matches[-1].group(1) if matches[-1].re.groups else matches[-1].group(0)) or "") if matches else ""
        number = normalize_number(text) if numeric else None
    elif numeric:
        number = parse_number(output)
    else:
        lines = list(_ANSWER_LINE.finditer(output))
        text = lines[-1].group(1) if lines else output
    if numeric:
        return None if number is None else str(number)
    return text.strip() or None
