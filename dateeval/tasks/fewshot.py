"""Few-shot exemplars (paper §5.4, Table 4), chosen once per item so that only the date changes across conditions.

Same-subject exemplars are used in their published order (MMLU's dev split
has exactly five per subject); otherwise the pool (e.g. ARC's
train split) is sampled with the item's id as the seed. Either way the
choice depends on the item alone: every date, run and machine shows the
same exemplars in the same order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from dateeval.errors import DateEvalError

T = TypeVar("T")

DEFAULT_SHOTS = 5


def choose(item_id: str, subject: str, pool: Sequence[T], k: int) -> list[T]:
    """``k`` exemplars for one item from ``pool`` (objects with ``id`` and ``subject``), never the item itself."""
    if k <= 0:
        return []
    candidates = [e for e in pool if getattr(e, "id", None) != item_id]
    same = [e for e in candidates if subject and getattr(e, "subject", "") == subject]
    if same:
        candidates = same
    if len(candidates) < k:
        raise DateEvalError(
            f"{k}-shot prompting needs {k} exemplars; only {len(candidates)} available for {subject or item_id}"
        )
    if same:
        return list(same[:k])
    return random.Random(item_id).sample(list(candidates), k)
