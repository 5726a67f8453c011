"""The scheduler: one per loaded model, the only place that decides which prompts run together.

Modelled on vLLM's: the scheduler plans, a runner (the backend's ``ModelRunner``) runs, and
the scheduler never runs the model itself. A backend that batches exposes a
few primitives (:class:`ScoringRunner` for scoring, ``continuous.Runner`` for
generation: prefill/extend, a decode step, score) and its request methods
call into its scheduler. Sweeps (the local and Ray executors, through the
backend's methods) and ``dateeval serve`` (through ``serve.queue``) all go
through it.

What it plans:

* scoring: packed forwards after the shared prefix, or padded batches by
  length within the backend's memory budget (``plans``);
* generation: continuous batches pooled across units, each unit after its
  own shared prefix (``continuous``), or static batches of a
  :class:`~dateeval.backends.base.FixedBatch` (the paper's batch-size
  factor) and for models whose cache rows cannot be joined;
* cancellation: a ``should_stop`` per prompt, asked after every decoding step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from dateeval.backends.base import FixedBatch, Generation, GenerationRequest, GenerationSettings
from dateeval.backends.scheduler.continuous import ContinuousBatch, Runner
from dateeval.backends.scheduler.plans import common_prefix_length, plan_scoring, static_batches

__all__ = ["Scheduler", "ScoringRunner", "common_prefix_length"]


class ScoringRunner(Runner, Protocol):
    """A backend's primitives for scoring and static generation, beside those of continuous batching."""

    packs: bool  # scores packed prompts (their values then do not depend on their batch)
    batches_continuously: (
        bool  # its cache rows can be joined and dropped (plain full attention, no extra logits processor)
    )

    def position_budget(self, widest: int, *, logits: bool) -> int: ...
    def score_last(
        self, suffixes: list[list[int]], prefix_cache: object, prefix_len: int, *, packed: bool
    ) -> np.ndarray: ...
    def score_every_position(self, inputs: list[list[int]], *, packed: bool) -> list[Any]: ...
    def echo_logprobs(self, prompts: list[list[int]]) -> Any: ...
    def generate_static(
        self, encoded: list[list[int]], settings: GenerationSettings, should_stop: Callable[[int], bool] | None
    ) -> list[Generation]: ...
    def inference(self) -> Any: ...


class Scheduler:
    """Plans every batch one loaded model runs; ``runner`` computes them."""

    def __init__(self, runner: ScoringRunner) -> None:
        self.runner = runner

    def label_logprobs(self, encoded: list[list[int]], token_ids: list[list[int]], batch_size: int) -> list[np.ndarray]:
        """Per prompt, the log-probabilities (full vocabulary) of its candidate next tokens, float64, in input order.

        The prompts run after their shared prefix, packed where the backend
        packs, else in batches by length; a :class:`FixedBatch` always in
        padded batches of exactly that size.
        """
        if not encoded:
            return []
        prefix_len = common_prefix_length(encoded)
        results: list[np.ndarray | None] = [None] * len(encoded)
        lengths = [len(tokens) - prefix_len for tokens in encoded]
        budget = self.runner.position_budget(prefix_len + max(lengths), logits=False)
        plan = plan_scoring(lengths, batch_size, budget, packs=self.runner.packs, shared=prefix_len)
        with self.runner.inference():
            prefix_cache = self.runner.prefix_cache(encoded[0][:prefix_len])
            for chunk in plan.batches:
                logprobs = self.runner.score_last(
                    [encoded[i][prefix_len:] for i in chunk], prefix_cache, prefix_len, packed=plan.packed
                )
                for row, index in enumerate(chunk):
                    results[index] = logprobs[row, token_ids[index]].astype(np.float64)
        return results  # type: ignore[return-value]

    def continuation_logprobs(self, pairs: list[tuple[list[int], int]], batch_size: int) -> list[float]:
        """Total log-probability of each text's tokens from its index ``first`` on, given those before (float64 sums).

        Every position but the last is run (its prediction is never read), as
        lm-eval's HF model does, so a text scored alone equals lm-eval's.
        """
        totals: list[float] = [0.0] * len(pairs)
        lengths = [len(tokens) - 1 for tokens, _ in pairs]
        budget = self.runner.position_budget(max(lengths, default=1), logits=True)
        plan = plan_scoring(lengths, batch_size, budget, packs=self.runner.packs)
        with self.runner.inference():
            for chunk in plan.batches:
                rows = self.runner.score_every_position([pairs[i][0][:-1] for i in chunk], packed=plan.packed)
                for row, i in zip(rows, chunk):
                    tokens, first = pairs[i]
                    totals[i] = _continuation_total(row, tokens, first)
        return totals

    def echo_logprobs(self, prompts: list[list[int]]) -> Any:  # the runner's log-probabilities, opaque here
        """Every position's log-probabilities of prompts right-padded into one forward pass (a server's ``echo``).

        The caller sizes the batch (``serve.queue``: at most ``MAX_ECHO_POSITIONS``
        positions, each holding a full-vocabulary row), so the plan is the one batch.
        """
        with self.runner.inference():
            return self.runner.echo_logprobs(prompts)

    def generate(
        self,
        encoded: list[list[int]],
        settings: GenerationSettings,
        batch_size: int,
        should_stop: Callable[[int], bool] | None = None,
        groups: list[list[int]] | None = None,
    ) -> list[Generation]:
        """Replies in input order, cut at the first stop sequence: continuous batches, or static ones.

        ``groups`` (lists of prompt indices, default all in one) decode
        together, each after its own shared prefix, run once. A
        :class:`FixedBatch` and a backend that cannot join cache rows keep
        static batches by length, group by group. ``should_stop(i)`` is
        asked after every decoding step: True ends prompt ``i``'s reply there
        and leaves the other replies as they would be.
        """
        with self.runner.inference():
            if not isinstance(batch_size, FixedBatch) and self.runner.batches_continuously:
                return ContinuousBatch(self.runner, encoded, settings, batch_size, should_stop, groups).run()
            replies: list[Generation | None] = [None] * len(encoded)
            for group in groups or [list(range(len(encoded)))]:
                for chunk in static_batches([len(encoded[i]) for i in group], batch_size):
                    stop = (
                        None
                        if should_stop is None
                        else (lambda r, chunk=chunk, group=group: should_stop(group[chunk[r]]))
                    )
                    for row, reply in zip(
                        chunk, self.runner.generate_static([encoded[group[i]] for i in chunk], settings, stop)
                    ):
                        replies[group[row]] = reply
            return replies  # type: ignore[return-value]

    def generate_units(
        self, units: list[list[GenerationRequest]], encode: Callable[[list], list[list[int]]], batch_size: int
    ) -> list[list[Generation]]:
        """Several units' requests, one batch per generation settings over every unit, each unit after its own prefix.

        A sweep's units (dates) pool into one continuous batch, so one
        unit's last long replies decode beside the next unit's first ones;
        a backend's ``generate`` is this with one unit.
        """
        flat = [(u, r) for u, unit in enumerate(units) for r in range(len(unit))]
        replies: list[list[Generation | None]] = [[None] * len(unit) for unit in units]

        def key(k: int) -> str:
            return repr(units[flat[k][0]][flat[k][1]].settings)

        for indices in _grouped(sorted(range(len(flat)), key=key), key):
            requests = [units[flat[k][0]][flat[k][1]] for k in indices]
            groups = [[j for j, k in enumerate(indices) if flat[k][0] == u] for u in range(len(units))]
            generated = self.generate(
                encode([r.prompt for r in requests]), requests[0].settings, batch_size, groups=[g for g in groups if g]
            )
            for k, reply in zip(indices, generated):
                replies[flat[k][0]][flat[k][1]] = reply
        return replies  # type: ignore[return-value]


def _grouped(indices: list[int], key: Callable[[int], str]) -> list[list[int]]:
    """Runs of equal ``key`` in ``indices`` (sorted by it)."""
    from itertools import groupby

    return [list(group) for _, group in groupby(indices, key=key)]


def _continuation_total(row: Any, tokens: list[int], first: int) -> float:  # row: a torch tensor of log-probabilities
    """The sum of a text's continuation tokens' log-probabilities, read from its row (position i predicts token i + 1)."""
    import torch

    positions = torch.arange(first - 1, len(tokens) - 1, device=row.device)
    return float(row[positions, torch.tensor(tokens[first:], device=row.device)].double().sum())
