"""The uniform multiple-choice item every loader produces, and subset selection."""

from __future__ import annotations

import hashlib
import random
import string
from dataclasses import dataclass

from dateeval.errors import DateEvalError

LABELS = string.ascii_uppercase


@dataclass(frozen=True)
class MCItem:
    """One multiple-choice question, whatever benchmark it came from.

    ``id`` is stable across runs and data sources, so results stored today
    join with items loaded tomorrow. Options are always labelled A, B, C...
    (ARC's numeric keys "1".."4" are mapped to letters by position).
    """

    id: str
    question: str
    options: tuple[str, ...]
    answer: int
    subject: str = ""

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(LABELS[: len(self.options)])


def content_id(prefix: str, question: str, options: tuple[str, ...]) -> str:
    """An id from the item's text, for benchmarks without ids of their own (MMLU)."""
    digest = hashlib.sha1("\x1f".join((question, *options)).encode()).hexdigest()[:12]
    return f"{prefix}/{digest}"


def dedupe_ids(items: list[MCItem]) -> list[MCItem]:
    """Suffix repeated ids (MMLU has a few verbatim duplicate questions) so every id is unique."""
    seen: dict[str, int] = {}
    out = []
    for item in items:
        count = seen.get(item.id, 0)
        seen[item.id] = count + 1
        out.append(
            item
            if count == 0
            else MCItem(f"{item.id}~{count + 1}", item.question, item.options, item.answer, item.subject)
        )
    return out


@dataclass(frozen=True)
class Subset:
    """Which items of a dataset to use: subjects, a seeded sample, then the first N."""

    subjects: tuple[str, ...] = ()
    sample: int | None = None
    seed: int = 0
    limit: int | None = None

    def describe(self) -> str:
        parts = []
        if self.subjects:
            parts.append("subjects=" + "+".join(self.subjects))
        if self.sample is not None:
            parts.append(f"sample={self.sample}@seed{self.seed}")
        if self.limit is not None:
            parts.append(f"first={self.limit}")
        return ",".join(parts) or "all"

    def select(self, items: list[MCItem], dataset: str) -> list[MCItem]:
        if self.sample is not None:
            if not 0 < self.sample <= len(items):
                raise DateEvalError(f"--sample {self.sample} is outside 1..{len(items)}, the number of {dataset} items")
            chosen = set(random.Random(self.seed).sample(range(len(items)), self.sample))
            items = [item for index, item in enumerate(items) if index in chosen]
        if self.limit is not None:
            if not 0 < self.limit <= len(items):
                raise DateEvalError(f"--limit {self.limit} is outside 1..{len(items)}, the number of {dataset} items")
            items = items[: self.limit]
        return items
