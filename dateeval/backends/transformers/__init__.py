"""The transformers backend: load a model once, score next-token distributions fast.

Speed matters because a sweep is hundreds of dates times thousands of items.
Split as vLLM splits its engine: ``load`` opens the model and records what
it is; the model's :class:`~dateeval.backends.scheduler.Scheduler` plans
every batch; ``runner`` runs them (forward passes over a shared prefix's
kept cache, ``decoding`` the token rules). :class:`TransformersBackend`
answers the backend requests by asking the scheduler, and runs nothing itself.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import numpy as np

from dateeval.backends.base import (
    CONTINUATION_LOGPROBS,
    GENERATE,
    LABEL_LOGPROBS,
    Backend,
    BackendOptions,
    Capabilities,
    ContinuationRequest,
    Generation,
    GenerationRequest,
    GenerationSettings,
    LabelRequest,
    LabelScores,
    continuation_tokens,
    register_backend,
)
from dateeval.backends.scheduler import Scheduler
from dateeval.backends.transformers.load import context_length, load
from dateeval.backends.transformers.runner import ModelRunner
from dateeval.backends.transformers.top import PromptScores, TopTokens, prompt_scores, top_tokens
from dateeval.models import ModelSource, resolve
from dateeval.prompting import ChatTemplate

if TYPE_CHECKING:
    import torch


@register_backend("transformers")
class TransformersBackend(Backend):
    """A causal LM and its tokenizer in this process, loaded once per sweep; dateeval renders every prompt."""

    capabilities = Capabilities(frozenset({LABEL_LOGPROBS, GENERATE, CONTINUATION_LOGPROBS}))

    @classmethod
    def locate(cls, spec: str) -> ModelSource:
        return resolve(spec)

    @classmethod
    def open(cls, located: ModelSource, options: BackendOptions) -> TransformersBackend:
        return cls(located, dtype=options.dtype, device=options.device, trust_remote_code=options.trust_remote_code)

    def __init__(
        self, source: ModelSource, *, dtype: str = "auto", device: str = "auto", trust_remote_code: bool = False
    ) -> None:
        loaded = load(source, dtype=dtype, device=device, trust_remote_code=trust_remote_code)
        self.model, self.tokenizer, self.device, self.dtype = (
            loaded.model,
            loaded.tokenizer,
            loaded.device,
            loaded.dtype,
        )
        self.identity, self.governor = loaded.identity, loaded.governor
        self.template = ChatTemplate.from_tokenizer(self.tokenizer, name=source.name)
        self.runner = ModelRunner(self.model, self.tokenizer, self.device)
        self.scheduler = Scheduler(self.runner)  # it plans every batch, the runner runs them

    @property
    def context_length(self) -> int | None:
        """The longest sequence (prompt plus reply) the model was trained on, where its config states it."""
        return context_length(self.model.config)

    def label_logprobs(self, requests: list[LabelRequest], batch_size: int) -> list[LabelScores]:
        scores = self.next_token_logprobs(
            self.encode([r.prompt for r in requests]),
            [[label.token_id for label in r.labels] for r in requests],
            batch_size,
        )
        return [LabelScores(score) for score in scores]

    def generate(self, requests: list[GenerationRequest], batch_size: int) -> list[Generation]:
        """Requests with the same settings are generated together (a task's requests all share theirs)."""
        return self.scheduler.generate_units([requests], self.encode, batch_size)[0]

    def generate_units(self, units: list[list[GenerationRequest]], batch_size: int) -> list[list[Generation]]:
        """One continuous batch per generation settings over every unit, each unit's prompts after their own shared prefix."""
        return self.scheduler.generate_units(units, self.encode, batch_size)

    def continuation_logprobs(self, requests: list[ContinuationRequest], batch_size: int) -> list[float]:
        return self.continuation_texts([r.context for r in requests], [r.continuation for r in requests], batch_size)

    # Token-level requests (``dateeval serve``, the benches): the same scheduler, prompts already tokenised.

    def next_token_logprobs(
        self, encoded: list[list[int]], token_ids: list[list[int]], batch_size: int = 32
    ) -> list[np.ndarray]:
        """Log-probabilities (over the full vocabulary) of chosen next tokens after each prompt, as the scheduler batches them.

        ``token_ids[i]`` are the candidate tokens for prompt ``i`` (its option
        labels). Returns one float64 array per prompt, in input order; packed
        (``packing``: a prompt's values do not depend on its batch) where the
        model allows, else in batches by length; a :class:`FixedBatch` (the
        paper's batch-size factor) always in padded batches of exactly that size.
        """
        return self.scheduler.label_logprobs(encoded, token_ids, batch_size)

    def continuation_texts(self, contexts: list[str], continuations: list[str], batch_size: int = 16) -> list[float]:
        """Total log-probability of each continuation after its context (a generated answer's tokens, say).

        The continuation's tokens are those that tokenising context +
        continuation adds after the context's own tokens, so the split follows
        the model's tokenisation of the whole text (``continuation_tokens``).
        """
        pairs = [continuation_tokens(self.encode, ContinuationRequest(c, k)) for c, k in zip(contexts, continuations)]
        return self.scheduler.continuation_logprobs(pairs, batch_size)

    def echo_logprobs(self, prompts: list[list[int]]) -> torch.Tensor:  # float32 [prompts, longest, vocabulary]
        """Log-softmax at every position of the prompts, one forward pass (a server's ``echo``)."""
        return self.scheduler.echo_logprobs(prompts)

    def top_next_tokens(self, encoded: list[list[int]], ks: list[int]) -> list[TopTokens]:
        """Each prompt's ``ks[i]`` most likely next tokens over the full vocabulary, the prompts scored as one batch of
        the scheduler's (a server's batch of next-token requests)."""
        import torch

        vocabulary = list(range(len(self.tokenizer)))
        arrays = self.next_token_logprobs(encoded, [vocabulary] * len(encoded), batch_size=len(encoded))
        return [top_tokens(torch.from_numpy(array)[None], k)[0] for array, k in zip(arrays, ks)]

    def score_prompts(self, prompts: list[list[int]], ks: list[int]) -> list[PromptScores]:
        """Each prompt scored token by token with every position's top ``ks[i]``, in one forward pass (a server's
        ``echo``); the batch's full-vocabulary rows are dropped on return (the caller sizes the batch)."""
        logprobs = self.echo_logprobs(prompts)
        return [
            prompt_scores(logprobs[row, : len(prompt)], prompt, k) for row, (prompt, k) in enumerate(zip(prompts, ks))
        ]

    def generate_texts(
        self,
        prompts: list[str],
        settings: GenerationSettings = GenerationSettings(),
        batch_size: int = 8,
        should_stop: Callable[[int], bool] | None = None,
        groups: list[list[int]] | None = None,
    ) -> list[Generation]:
        """Replies in input order, cut at the first stop sequence, as the scheduler batches them (``Scheduler.generate``).

        Greedy replies equal the static batches' to float32 rounding; sampled
        replies draw from one generator per prompt, seeded from the seed and
        the prompt, so the same seed gives the same replies whatever the batching.
        """
        return self.scheduler.generate(self.encode(prompts), settings, batch_size, should_stop, groups)

    def interruptible(self, stop: Callable[[], bool], error: type[BaseException]) -> AbstractContextManager[None]:
        """Raise ``error`` out of this model's forward passes once ``stop()`` (a server's caller left)."""
        return self.runner.interruptible(stop, error)
