"""Scoring plans: which prompts share a forward pass, decided from their lengths alone (no model, no torch).

The scheduler asks these for the batches it hands the backend; the backend
runs each batch as it is given. Two plans exist: packed (prompts end to end
in one row, ``packing``: a prompt's values do not depend on its batch) and
padded by length (models that cannot pack, and the paper's fixed batch sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from dateeval.backends.base import FixedBatch

PADDING_SHARE = (
    0.05  # the most of a scoring forward's computed positions that may be padding (a longer prompt starts a batch)
)


@dataclass(frozen=True)
class ScoringPlan:
    """How one call's prompts are scored: packed or padded, and the prompt indices of each forward pass."""

    packed: bool
    batches: list[list[int]]


def plan_scoring(lengths: list[int], batch_size: int, positions: int, *, packs: bool, shared: int = 0) -> ScoringPlan:
    """Packed where the backend packs and the batch size is not a :class:`FixedBatch`, else padded by length.

    ``positions`` is the backend's memory budget for one forward pass;
    ``shared`` the positions every prompt takes in the shared prefix's cache.
    """
    if packs and not isinstance(batch_size, FixedBatch):
        return ScoringPlan(True, packed_batches(lengths, batch_size, max(1, positions - shared)))
    return ScoringPlan(False, scoring_batches(lengths, batch_size, positions, shared=shared))


def packed_batches(lengths: list[int], rows: int, positions: int) -> list[list[int]]:
    """Prompts in input order, at most ``rows`` and ``positions`` tokens per forward (a longer prompt alone)."""
    out: list[list[int]] = []
    batch: list[int] = []
    tokens = 0
    for index, length in enumerate(lengths):
        if batch and (len(batch) == rows or tokens + length > positions):
            out.append(batch)
            batch, tokens = [], 0
        batch.append(index)
        tokens += length
    return out + [batch] if batch else out


def scoring_batches(lengths: list[int], rows: int, positions: int, shared: int = 0) -> list[list[int]]:
    """Indices of prompts by length, in batches of at most ``rows`` prompts and ``positions`` positions in all.

    Each row takes ``shared`` positions (the shared prefix's cache) plus the
    batch's widest length. A batch also ends before a prompt that would make
    more than ``PADDING_SHARE`` of its computed positions padding, so a unit
    of short and long prompts does not pad the short ones to the longest,
    unless ``rows`` is a :class:`FixedBatch` (the paper's batch-size factor,
    Table 5): then every batch holds exactly that many prompts, padded to
    the longest as the paper's were, unless memory ends it first.
    """
    padding = 1.0 if isinstance(rows, FixedBatch) else PADDING_SHARE
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0  # the batch's real positions
    for index in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        width, grown = lengths[index], len(batch) + 1  # sorted, so the newcomer is the widest
        if batch and (
            grown > rows or grown * (shared + width) > positions or tokens + width < (1 - padding) * grown * width
        ):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(index)
        tokens += width
    return batches + [batch] if batch else batches


def static_batches(lengths: list[int], rows: int) -> list[list[int]]:
    """Static generation batches: prompts sorted by length, fixed chunks of ``rows`` (each runs until its longest reply ends)."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [order[start : start + rows] for start in range(0, len(order), rows)]


def common_prefix_length(encoded: list[list[int]]) -> int:
    """Tokens shared by every prompt, leaving at least one token of each prompt to run."""
    first = encoded[0]
    length = min(len(e) for e in encoded) - 1
    for tokens in encoded[1:]:
        limit = min(length, len(tokens))
        mismatch = next((i for i in range(limit) if tokens[i] != first[i]), limit)
        length = mismatch
    return max(length, 0)
