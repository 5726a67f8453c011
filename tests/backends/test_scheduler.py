"""The scheduler plans, a runner runs: its plans checked against a runner that records what it is asked (no model).

The runner's "model" continues a sequence by adding one to its last token
(its end of sequence is token 0), so every reply is known in advance and a
plan that mixed rows up, decoded a finished row or ran a prefix twice shows.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import numpy as np

from dateeval.backends.base import FixedBatch, Generation, GenerationRequest, GenerationSettings
from dateeval.backends.scheduler import Scheduler
from dateeval.backends.scheduler.plans import common_prefix_length, scoring_batches

END = 0
VOCABULARY = 50


class CountingRunner:
    """Primitives over a counting "model": it records every prefix, prefill, decode step and scoring batch."""

    packs = True
    batches_continuously = True
    end_ids = {END}

    def __init__(self) -> None:
        self.prefixes: list[list[int]] = []
        self.steps: list[int] = []  # rows per decoding step
        self.prefills: list[int] = []  # rows per prefill
        self.scored: list[tuple[bool, int]] = []  # (packed, rows) per scoring forward
        self.static: list[int] = []

    def inference(self) -> nullcontext:
        return nullcontext()

    def position_budget(self, widest: int, *, logits: bool) -> int:
        return 10**6

    def prefix_cache(self, prefix: list[int]) -> object:
        self.prefixes.append(list(prefix))
        return tuple(prefix)

    def prefill(self, batch: int | None, groups: list[tuple[list[list[int]], object, int]]) -> tuple[list[int], int]:
        rows = [(suffix[-1] + 1) % VOCABULARY for suffixes, _, _ in groups for suffix in suffixes]
        self.prefills.append(len(rows))
        return rows, (batch or 0) + len(rows)

    def decode(self, batch: int, last_tokens: list[int], positions: list[int]) -> list[int]:
        assert batch == len(last_tokens)  # the runner's batch holds exactly the running rows
        self.steps.append(len(last_tokens))
        return [(token + 1) % VOCABULARY for token in last_tokens]

    def drop(self, batch: int, keep: list[int]) -> int:
        return len(keep)

    def sampler(self, settings: GenerationSettings) -> Callable[[list[int], list[object]], list[int]]:
        return lambda logits, _: list(logits)

    def generator(self, settings: GenerationSettings, prompt: list[int]) -> None:
        return None

    def stop_checker(self, stop: tuple[str, ...]) -> Callable[[list[list[int]]], list[bool]]:
        return lambda sequences: [False for _ in sequences]

    def reply(self, tokens: list[int], stop: tuple[str, ...], prompt_tokens: int) -> Generation:
        return Generation(" ".join(map(str, tokens)), len(tokens), prompt_tokens)

    def score_last(
        self, suffixes: list[list[int]], prefix_cache: object, prefix_len: int, *, packed: bool
    ) -> np.ndarray:
        self.scored.append((packed, len(suffixes)))
        return np.array([[float(len(s))] * VOCABULARY for s in suffixes])

    def generate_static(
        self,
        encoded: list[list[int]],
        settings: GenerationSettings,
        should_stop: Callable[[int], bool] | None,
    ) -> list[Generation]:
        self.static.append(len(encoded))
        return [self.alone(tokens, settings) for tokens in encoded]

    def alone(self, prompt: list[int], settings: GenerationSettings) -> Generation:
        """The reply a prompt gets by itself."""
        tokens = [(prompt[-1] + 1) % VOCABULARY]
        while tokens[-1] != END and len(tokens) < settings.max_new_tokens:
            tokens.append((tokens[-1] + 1) % VOCABULARY)
        return self.reply(tokens, (), len(prompt))


def _units() -> list[list[list[int]]]:
    """Three units (two dates of five prompts, each date with its own shared prefix, and one prompt); replies of 5 to 10 tokens."""
    return [[[7, 7, day, 40 + k] for k in range(5)] for day in (1, 2)] + [[[9, 9, 47, 38, 45]]]


def test_units_pool_into_one_continuous_batch_and_each_reply_is_the_prompts_own():
    runner, settings = CountingRunner(), GenerationSettings(max_new_tokens=12)
    units = _units()
    requests = [[GenerationRequest(str(prompt), settings) for prompt in unit] for unit in units]
    by_text = {str(prompt): prompt for unit in units for prompt in unit}
    replies = Scheduler(runner).generate_units(requests, lambda texts: [by_text[t] for t in texts], batch_size=3)
    assert replies == [[runner.alone(prompt, settings) for prompt in unit] for unit in units]
    assert runner.prefixes == [unit[0][: common_prefix_length(unit)] for unit in units]  # each unit's prefix, once
    assert (
        max(runner.steps) == 3 and sum(runner.prefills) == 11
    )  # never more rows than slots; each prompt prefilled once
    assert sum(runner.steps) == sum(
        reply.n_tokens - 1 for unit in replies for reply in unit
    )  # no step for an ended row


def test_a_cancelled_row_stops_and_leaves_the_others_as_they_were():
    runner, settings = CountingRunner(), GenerationSettings(max_new_tokens=12)
    prompts = _units()[0]
    replies = Scheduler(runner).generate(prompts, settings, 5, should_stop=lambda i: i == 0)
    assert replies[0].n_tokens == 1 and replies[1:] == [runner.alone(prompt, settings) for prompt in prompts[1:]]


def test_a_fixed_batch_runs_static_batches_of_its_size_and_pads_its_scoring():
    runner, settings = CountingRunner(), GenerationSettings(max_new_tokens=12)
    prompts = _units()[0] + _units()[1]
    assert Scheduler(runner).generate(prompts, settings, FixedBatch(4)) == [
        runner.alone(prompt, settings) for prompt in prompts
    ]
    assert runner.static == [4, 4, 2] and runner.steps == []
    scored = Scheduler(runner).label_logprobs(prompts, [[0, 1]] * len(prompts), FixedBatch(4))
    assert runner.scored == [(False, 4), (False, 4), (False, 2)] and all(len(row) == 2 for row in scored)
    runner.scored.clear()
    Scheduler(runner).label_logprobs(prompts, [[0]] * len(prompts), 4)
    assert runner.scored == [(True, 4), (True, 4), (True, 2)]  # packed when the size is only the most a forward holds
    assert scoring_batches([3, 1, 2], FixedBatch(2), 10**6) == [[1, 2], [0]]  # sorted by length, exact size
