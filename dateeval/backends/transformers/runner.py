"""The runner: the forward passes the scheduler plans (vLLM's model runner), and nothing that decides what runs together.

Within one date every prompt starts with the same tokens (chat header,
system message, the date), so that shared prefix runs once and its KV cache
is kept for reuse (``prefixes``); the item-specific suffixes run after
it, packed end to end (``packing``) or right-padded, and only the positions
whose logits are read go through the output layer. Generation prefills
admitted prompts into a running batch of cache rows (``roomy_cache``) and
decodes it one token a step; the token rules come from :class:`Decoding`.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import numpy as np

from dateeval.backends import interrupt, packing
from dateeval.backends.base import Generation, GenerationSettings
from dateeval.backends.devices import free_memory
from dateeval.backends.transformers.decoding import Decoding, continuous_batching_fits, rows_stopping
from dateeval.backends.transformers.prefixes import PrefixCaches, cache_of

if TYPE_CHECKING:
    import torch
    from transformers import Cache, PreTrainedModel, PreTrainedTokenizerBase

    from dateeval.backends.roomy_cache import RunningBatch

# of the memory free when a unit is scored, what one scoring forward may hold (batches are split to fit)
MEMORY_SHARE = 0.5


class ModelRunner(Decoding):
    """One loaded model's primitives (``scheduler.ScoringRunner``): each runs the batch it is given, as it is given."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, device: str) -> None:
        super().__init__(model, tokenizer, device)
        # transformers 5.x renamed the forward argument `past_key_values` to `cache`.
        self.cache_argument = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        self.batches_continuously = continuous_batching_fits(model)
        # On CUDA the per-prompt attention would launch kernels per prompt and layer: batches by length there (``packing``).
        self.packs = device == "cpu" and packing.install(model)
        self.prefixes = PrefixCaches(model, device)

    def inference(self) -> torch.inference_mode:
        import torch

        return torch.inference_mode()

    def interruptible(self, stop: Callable[[], bool], error: type[BaseException]) -> AbstractContextManager[None]:
        """Raise ``error`` out of this model's forward passes once ``stop()`` (``interrupt.abandoned_when``)."""
        return interrupt.abandoned_when(self.model, stop, error)

    def position_budget(self, widest: int, *, logits: bool) -> int:
        """Padded positions one scoring forward may hold: ``MEMORY_SHARE`` of the free memory over what a position takes."""
        return max(
            1, int(free_memory(self.device) * MEMORY_SHARE) // _position_bytes(self.model, widest, logits=logits)
        )

    def score_last(
        self, suffixes: list[list[int]], prefix_cache: Cache | None, prefix_len: int, *, packed: bool
    ) -> np.ndarray:
        """Log-softmax at each suffix's last token, the suffixes run after the shared prefix, packed or right-padded."""
        import torch

        logits = (
            self._packed_logits(suffixes, prefix_cache, prefix_len)
            if packed
            else self._run_suffixes(suffixes, prefix_cache, prefix_len)[0]
        )
        return torch.log_softmax(logits, dim=-1).cpu().numpy()

    def score_every_position(self, inputs: list[list[int]], *, packed: bool) -> list:
        """Each input's log-softmax at every one of its positions (one tensor per input), packed or right-padded."""
        import torch

        if not packed:
            ids, mask = _pad(inputs, self.pad_id, left=False)
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
            return list(torch.log_softmax(logits, dim=-1))
        logprobs = torch.log_softmax(self._packed_logits(inputs, None, 0, every_position=True), dim=-1)
        starts = [sum(len(s) for s in inputs[:row]) for row in range(len(inputs))]
        return [logprobs[start : start + len(s)] for start, s in zip(starts, inputs)]

    def echo_logprobs(self, prompts: list[list[int]]) -> torch.Tensor:  # float32 [prompts, longest, vocabulary]
        """Log-softmax at every position of prompts right-padded into one forward pass (a server's ``echo``), in place:
        the batch holds one copy of its logits."""
        import torch

        ids, mask = _pad(prompts, self.pad_id, left=False)  # right-padded: no read position sees the padding
        logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
        logits -= torch.logsumexp(logits, dim=-1, keepdim=True)
        return logits

    def generate_static(
        self, encoded: list[list[int]], settings: GenerationSettings, should_stop: Callable[[int], bool] | None = None
    ) -> list[Generation]:
        """One static batch through ``model.generate``, left-padded, running until its longest reply ends.

        At a fixed batch composition the output is identical run to run
        (greedy, or sampling with the seed reset before every batch).
        ``should_stop(r)`` ends row ``r`` after a decoding step.
        """
        import torch

        ids, mask = _pad(encoded, self.pad_id, left=True)
        width = ids.shape[1]
        torch.manual_seed(settings.seed)
        stopping = (
            {} if should_stop is None else {"stopping_criteria": rows_stopping(should_stop, list(range(len(encoded))))}
        )
        out = self.model.generate(
            input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **self.options(settings), **stopping
        )
        return [self.reply(out[row, width:].tolist(), settings.stop, len(tokens)) for row, tokens in enumerate(encoded)]

    def prefill(
        self, batch: RunningBatch | None, groups: list[tuple[list[list[int]], Cache | None, int]]
    ) -> tuple[torch.Tensor, RunningBatch]:
        """Run each group's suffixes after its prefix cache and join their cache rows to ``batch`` (a new one if None);
        the float32 logits of every admitted row's first reply token."""
        import torch

        from dateeval.backends.roomy_cache import RunningBatch  # imports transformers: only once a model generates

        logits = []
        for suffixes, prefix_cache, prefix_len in groups:
            first, mask, cache = self._run_suffixes(suffixes, prefix_cache, prefix_len, keep_cache=True)
            if batch is None:
                batch = RunningBatch(cache, mask)
            else:
                batch.join(cache, mask)
            logits.append(first)
        return torch.cat(logits), batch

    def decode(self, batch: RunningBatch, last_tokens: list[int], positions: list[int]) -> torch.Tensor:
        """One decoding step for every row of ``batch``: each fed its last token at its own position (float32 logits)."""
        import torch

        ids = torch.tensor([[token] for token in last_tokens], device=self.device)
        position_ids = torch.tensor([[position] for position in positions], device=self.device)
        batch.step()
        cache = {self.cache_argument: batch.cache}
        out = self.model(
            input_ids=ids,
            attention_mask=batch.mask,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1,
            **cache,
        )
        batch.cache = cache_of(out)
        return out.logits[:, -1].float()

    def drop(self, batch: RunningBatch, keep: list[int]) -> RunningBatch:
        batch.keep(keep)
        return batch

    def prefix_cache(self, prefix: list[int]) -> Cache | None:
        """The KV cache of a shared prefix, kept for the next call that shares it (``prefixes.PrefixCaches``)."""
        return self.prefixes.get(prefix)

    def _run_suffixes(
        self, suffixes: list[list[int]], prefix_cache: Cache | None, prefix_len: int, *, keep_cache: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, Cache | None]:
        """Run right-padded suffixes after the shared prefix: float32 logits at each row's last token, the mask, the cache.

        Scoring reads the logits; generation also keeps the cache (``keep_cache``)
        to decode from. Only the positions read go through the output layer.
        """
        import torch

        ids, suffix_mask = _pad(suffixes, self.pad_id, left=False)
        mask = torch.cat([torch.ones((len(suffixes), prefix_len), dtype=torch.long), suffix_mask], dim=1).to(
            self.device
        )
        last = torch.tensor([len(s) - 1 for s in suffixes])
        keep = torch.unique(last)
        kwargs = {}
        if prefix_cache is not None:
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(len(suffixes))
            kwargs[self.cache_argument] = cache
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask,
            use_cache=keep_cache or prefix_cache is not None,
            logits_to_keep=keep.to(self.device),
            **kwargs,
        )
        column = torch.searchsorted(keep, last)
        logits = out.logits[torch.arange(len(suffixes)), column.to(self.device)].float()
        return logits, mask, cache_of(out) if keep_cache else None

    def _packed_logits(
        self, suffixes: list[list[int]], prefix_cache: Cache | None, prefix_len: int, *, every_position: bool = False
    ) -> torch.Tensor:
        """float32 logits of suffixes packed end to end after the shared prefix (``packing``): at each suffix's last
        token, or at every position of the packed row in order (``every_position``; filler last).

        A segment of padding tokens tops the row up to ``packing.MIN_ROWS``
        positions, and the last suffix's logits are read again up to that many
        rows, so no matrix product runs on fewer rows than that.
        """
        import torch

        lengths = [len(s) for s in suffixes]
        filler = max(0, packing.MIN_ROWS - sum(lengths))
        segments = lengths + ([filler] if filler else [])
        ids = torch.tensor([[token for s in suffixes for token in s] + [self.pad_id] * filler], device=self.device)
        positions = torch.cat([torch.arange(prefix_len, prefix_len + length) for length in segments])[None]
        ends = (torch.tensor(lengths).cumsum(0) - 1).tolist()
        keep = (
            0
            if every_position
            else torch.tensor(ends + ends[-1:] * max(0, packing.MIN_ROWS - len(ends)), device=self.device)
        )
        kwargs = {self.cache_argument: copy.deepcopy(prefix_cache)} if prefix_cache is not None else {}
        with packing.segments(prefix_len, segments):
            out = self.model(
                input_ids=ids,
                position_ids=positions.to(self.device),
                use_cache=prefix_cache is not None,
                logits_to_keep=keep,
                **kwargs,
            )
        return out.logits[0].float() if every_position else out.logits[0, : len(suffixes)].float()


def _position_bytes(model: PreTrainedModel, widest: int, *, logits: bool) -> int:
    """What one padded position of a scoring forward holds: its keys and values in every layer, a few hidden states
    and the MLP's intermediate ones at a time, one attention score per head for each of up to ``widest`` positions,
    and, where every position's prediction is read (``logits``), its float32 logits and their log-softmax."""
    import torch

    config = model.config.get_text_config()
    heads, hidden = config.num_attention_heads, config.hidden_size
    element = torch.empty((), dtype=model.dtype).element_size()
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    cache = 2 * config.num_hidden_layers * (getattr(config, "num_key_value_heads", None) or heads) * head_dim * element
    working = (
        element * (4 * hidden + 2 * (getattr(config, "intermediate_size", None) or 4 * hidden)) + 4 * heads * widest
    )
    vocabulary = model.get_output_embeddings().weight.shape[0]
    return cache + working + (8 * vocabulary if logits else 0)


def _pad(sequences: list[list[int]], pad_id: int, *, left: bool) -> tuple[torch.Tensor, torch.Tensor]:  # (ids, mask)
    """Pad token sequences to one width: left for generation, right for scoring after a shared prefix."""
    import torch

    width = max(len(tokens) for tokens in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, tokens in enumerate(sequences):
        span = slice(width - len(tokens), width) if left else slice(0, len(tokens))
        ids[row, span] = torch.tensor(tokens)
        mask[row, span] = 1
    return ids, mask
