"""The dataset-name grammar ``<benchmark>[_cot][_<k>shot][_multiturn|_singleturn]`` and the few-shot formats it names.

Below the tasks (which check a name against the benchmarks registered in the process, :func:`dateeval.tasks.parse_name`)
and the statistics (which read a stored name's parts to place it in the paper's tables), so that reading results
never imports a task module, and the grammar is written once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

NAME = re.compile(r"(?P<base>[a-z0-9_]+?)(?P<cot>_cot)?(?:_(?P<shots>\d+)shot)?(?:_(?P<turns>multiturn|singleturn))?")
# How solved exemplars reach the model: all in the one user message (dateeval's built-in tasks, lm-eval without a chat
# template), or as turns of a conversation (lm-eval's --fewshot_as_multiturn, on whenever --apply_chat_template is).
SINGLE_TURN, MULTI_TURN = "single-turn", "multi-turn"
FEWSHOT_FORMATS = (SINGLE_TURN, MULTI_TURN)
# The few-shot format a name asks for, by its suffix.
TURNS = {"multiturn": MULTI_TURN, "singleturn": SINGLE_TURN}
SUFFIXES = "_cot, _<k>shot, _multiturn, _singleturn"  # the variant suffixes, as messages list them


@dataclass(frozen=True)
class DatasetName:
    """A dataset name taken apart as written: ``turns`` is the suffix's format (:data:`TURNS`), None where the name
    says none (the benchmark's own). :func:`split` reads a name, ``str`` writes one: the grammar's only reader and
    writer. Read once where a name enters (a flag, a stored row), then carried as this value: the tasks check it
    against the registry (:func:`dateeval.tasks.parse_name`) and workers build from it."""

    base: str
    cot: bool = False
    shots: int = 0
    turns: str | None = None

    def __str__(self) -> str:
        suffix = next((word for word, named in TURNS.items() if named == self.turns), None) if self.turns else None
        return (
            self.base
            + ("_cot" if self.cot else "")
            + (f"_{self.shots}shot" if self.shots else "")
            + (f"_{suffix}" if suffix else "")
        )

    def with_cot(self, cot: bool) -> DatasetName:
        """This name with chain of thought where ``cot`` asks for it (``--cot``); a name that says it keeps it."""
        return self if self.cot or not cot else replace(self, cot=True)

    def with_shots(self, shots: int) -> DatasetName:
        """This name with ``shots`` exemplars (``--shots``); a name that says its number keeps it."""
        return self if self.shots or not shots else replace(self, shots=shots)


def split(name: str) -> DatasetName | None:
    """A name's parts, or None for text that is no name of the grammar (a path, an ``lmeval:`` reference)."""
    match = NAME.fullmatch(name)
    if not match:
        return None
    return DatasetName(
        match["base"], bool(match["cot"]), int(match["shots"] or 0), TURNS[match["turns"]] if match["turns"] else None
    )


def ends_like_variant(stem: str) -> bool:
    """Whether a would-be benchmark name ends in a variant suffix, so that a stored name built on it would read back
    as another benchmark (``quiz_2shot`` + ``_cot``): users' files and lm-eval tasks so named are refused."""
    parts = split(stem)
    return parts is not None and parts.base != stem


def shots(name: str) -> int:
    """The number of exemplars a stored dataset name says (0 where it says none, or is no name of the grammar)."""
    parts = split(name)
    return parts.shots if parts else 0


def says_cot(name: str) -> bool:
    """Whether a stored dataset name says chain of thought (``_cot``)."""
    parts = split(name)
    return bool(parts and parts.cot)
