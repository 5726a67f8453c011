"""Continuous batching: which prompts decode together at each step, pooled across units (vLLM's scheduler, on CPU scale).

The scheduler plans and the runner runs: :class:`ContinuousBatch` decides at
every step whether waiting prompts are admitted (prefilled after their
unit's shared prefix, whose cache it asks for once and releases after the
unit's last admission) or every running row decodes one token, and which
rows end (end of sequence, a stop string, ``max_new_tokens``, cancellation).
It never touches the model, a tensor or a cache: the :class:`Runner`'s
primitives do (``backends.transformers.runner``), so a backend with another cache
(paged, variable-length) is its own runner.

Why not transformers' ``generate_batch`` (continuous batching over a paged
cache, in 5.x): on CPU it was slower than the static batches this replaces,
and it has no stop strings and no per-request seed, both of which the tasks
need. Measured figures: ``docs/benchmarks.md``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Protocol

from dateeval.backends.base import Generation, GenerationSettings
from dateeval.backends.scheduler.plans import common_prefix_length

Logits = Any  # the runner's float32 logits, one row per prompt, opaque here
Batch = Any  # the runner's running batch (its KV cache rows and mask), opaque here


class Runner(Protocol):
    """What continuous batching needs of a backend: the model's primitives, nothing that decides what runs."""

    end_ids: set[int]

    def prefix_cache(self, prefix: list[int]) -> object: ...
    def prefill(
        self, batch: Batch | None, groups: list[tuple[list[list[int]], object, int]]
    ) -> tuple[Logits, Batch]: ...
    def decode(self, batch: Batch, last_tokens: list[int], positions: list[int]) -> Logits: ...
    def drop(self, batch: Batch, keep: list[int]) -> Batch | None: ...
    def sampler(self, settings: GenerationSettings) -> Callable[[Logits, list[object]], list[int]]: ...
    def generator(self, settings: GenerationSettings, prompt: list[int]) -> object: ...
    def stop_checker(self, stop: tuple[str, ...]) -> Callable[[list[list[int]]], list[bool]] | None: ...
    def reply(self, tokens: list[int], stop: tuple[str, ...], prompt_tokens: int) -> Generation: ...


@dataclass
class _Row:
    """One prompt in a continuous batch: its tokens so far (prompt, then reply; the last is not yet in the cache)."""

    index: int
    tokens: list[int]
    prompt_len: int
    generator: object  # the runner's random generator when sampling, else None


class ContinuousBatch:
    """At most ``slots`` prompts decode together; a reply that ends frees its slot for a waiting prompt at once.

    Waiting prompts are taken group by group (a group is a unit, one date
    say, sharing its prompt prefix), shortest first within a group; the
    prompts admitted at one step are prefilled together into the free slots,
    and each running row is fed its own positions, so its tokens are those
    it would get alone (greedy; sampling draws from one generator per prompt).
    """

    def __init__(
        self,
        runner: Runner,
        encoded: list[list[int]],
        settings: GenerationSettings,
        slots: int,
        should_stop: Callable[[int], bool] | None = None,
        groups: list[list[int]] | None = None,
    ) -> None:
        self.runner, self.encoded, self.settings, self.slots = runner, encoded, settings, max(slots, 1)
        self.should_stop = should_stop or (lambda _: False)
        groups = [group for group in groups or [list(range(len(encoded)))] if group]
        self.group_of = {i: g for g, group in enumerate(groups) for i in group}
        self.prefix_lens = [common_prefix_length([encoded[i] for i in group]) for group in groups]
        self.prefixes: dict[int, object] = {}  # a group's prefix cache, from its first admission to its last
        self.left = [len(group) for group in groups]  # prompts of each group not yet admitted
        self.waiting = deque(i for group in groups for i in sorted(group, key=lambda i: (len(encoded[i]), i)))
        self.rows: list[_Row] = []
        self.batch: Batch | None = None
        self.replies: list[Generation | None] = [None] * len(encoded)
        self.stopped = runner.stop_checker(settings.stop) if settings.stop else None
        self.choose = runner.sampler(settings)

    def run(self) -> list[Generation]:
        """Admit waiting prompts whenever a slot is free, else decode one token for every running row."""
        while self.waiting or self.rows:
            if self.waiting and len(self.rows) < self.slots:
                first = len(self.rows)
                logits = self._admit()
            else:
                first = 0
                logits = self.runner.decode(
                    self.batch, [row.tokens[-1] for row in self.rows], [len(row.tokens) - 1 for row in self.rows]
                )
            self._advance(first, logits)
        return self.replies  # type: ignore[return-value]

    def _admit(self) -> Logits:
        """Prefill waiting prompts into the free slots, each group after its prefix cache (asked for at its first admission)."""
        taken = [self.waiting.popleft() for _ in range(min(self.slots - len(self.rows), len(self.waiting)))]
        work, admitted = [], []
        for group, indices in groupby(taken, key=self.group_of.__getitem__):
            indices = list(indices)
            prefix_len = self.prefix_lens[group]
            if group not in self.prefixes:
                self.prefixes[group] = self.runner.prefix_cache(self.encoded[indices[0]][:prefix_len])
            work.append(([self.encoded[i][prefix_len:] for i in indices], self.prefixes[group], prefix_len))
            self.left[group] -= len(indices)
            if not self.left[group]:
                del self.prefixes[group]  # its last prompt is in: the cache rows hold what it is needed for
            admitted += indices
        logits, self.batch = self.runner.prefill(self.batch, work)
        self.rows += [
            _Row(i, list(self.encoded[i]), len(self.encoded[i]), self.runner.generator(self.settings, self.encoded[i]))
            for i in admitted
        ]
        return logits

    def _advance(self, first: int, logits: Logits) -> None:
        """Append each row's chosen token (rows from ``first`` on own ``logits``); rows that ended leave the batch."""
        rows = self.rows[first:]
        for row, token in zip(rows, self.choose(logits, [row.generator for row in rows])):
            row.tokens.append(token)
        ended = {first + r for r, done in enumerate(self._ended(rows)) if done}
        for r in ended:
            row = self.rows[r]
            self.replies[row.index] = self.runner.reply(
                row.tokens[row.prompt_len :], self.settings.stop, row.prompt_len
            )
        if ended:
            keep = [r for r in range(len(self.rows)) if r not in ended]
            self.rows = [self.rows[r] for r in keep]
            self.batch = self.runner.drop(self.batch, keep) if keep else None

    def _ended(self, rows: list[_Row]) -> list[bool]:
        """End-of-sequence, ``max_new_tokens`` reached, ``should_stop``, or a stop string at the end of prompt + reply (as ``generate`` checks)."""
        ends, limit = self.runner.end_ids, self.settings.max_new_tokens
        done = [
            row.tokens[-1] in ends or len(row.tokens) - row.prompt_len >= limit or self.should_stop(row.index)
            for row in rows
        ]
        if self.stopped is None:
            return done
        return [a or b for a, b in zip(done, self.stopped([row.tokens for row in rows]))]
