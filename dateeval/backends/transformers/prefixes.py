"""The KV caches of shared prompt prefixes, kept for reuse (vLLM keeps its prefix caching beside the model runner, not
in it). Within one date every prompt starts with the same tokens (chat header, system message, the date), so that
prefix runs once; a server's batches of one date, or a unit scored again for its answers' confidence, reuse it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import Cache, PreTrainedModel
    from transformers.utils import ModelOutput

# KV caches of recent shared prefixes kept for reuse (SmolLM2-135M float32: 5,500 tokens)
PREFIX_CACHE_BYTES = 256 << 20


class PrefixCaches:
    """One model's kept prefix caches, the latest last, within ``PREFIX_CACHE_BYTES``."""

    def __init__(self, model: PreTrainedModel, device: str) -> None:
        self.model, self.device = model, device
        self.kept: dict[tuple[int, ...], tuple[Cache, int]] = {}  # each prefix's cache and its bytes, oldest first

    def get(self, prefix: list[int]) -> Cache | None:
        """The KV cache of ``prefix``, run now unless kept, and kept for the next call that shares it.

        One row run on the same tokens gives the same cache, so reusing it
        changes no value. Callers copy it before they extend it.
        """
        import torch

        if not prefix:
            return None
        key = tuple(prefix)
        kept = self.kept.pop(key, None)
        if kept is None:
            # only the cache is read: no logits over the whole prefix (an 8,191-token prefix held 1.6 GB of them)
            cache = cache_of(
                self.model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True, logits_to_keep=1)
            )
            kept = (cache, sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers))
        self.kept[key] = kept  # the latest last
        while sum(size for _, size in self.kept.values()) > PREFIX_CACHE_BYTES:
            del self.kept[next(iter(self.kept))]
        return kept[0]

    def clear(self) -> None:
        """Forget every kept cache (the next call of each prefix runs it)."""
        self.kept.clear()


def cache_of(out: ModelOutput) -> Cache:
    """transformers 5.x names the returned cache ``cache``, 4.x ``past_key_values``."""
    return out.cache if hasattr(out, "cache") else out.past_key_values
