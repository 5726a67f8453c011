"""A KV-cache layer with room to grow, and the running batch of cache rows it serves (continuous batching in ``backends.transformers``).

transformers' ``DynamicLayer.update`` concatenates, copying the layer's whole
cache at every decoding step: 35% of a continuous batch's time on CPU (torch
profiler, 8 GSM8K prompts x 64 new tokens, SmolLM2-135M, float32). A
:class:`RoomyLayer` keeps ``CACHE_ROOM`` spare columns, so a step writes its
keys and values in place. Its own module because it subclasses a transformers
class, and transformers is imported only once a model generates.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

CACHE_ROOM = 64  # spare columns: a buffer is copied once per this many decoding steps instead of at each


class RoomyLayer(DynamicLayer):
    """A full-attention cache layer whose ``keys`` and ``values`` are views of the columns written so far.

    Assigning them (rows joined or dropped, leading columns trimmed) copies
    once into a new buffer with room; a step that finds no room left does the
    same. The values read are those a ``DynamicLayer`` would hold.
    """

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:  # [batch, heads, columns, head_dim]
        # no super().__init__(): it would assign None to the views
        self.device, self.is_initialized = keys.device, True
        self.keys, self.values = keys, values

    keys = property(
        lambda self: self._keys[..., : self._keys_length, :], lambda self, tensor: self._store("_keys", tensor)
    )
    values = property(
        lambda self: self._values[..., : self._values_length, :], lambda self, tensor: self._store("_values", tensor)
    )

    def _store(self, name: str, tensor: torch.Tensor) -> None:
        """A new buffer for ``tensor``'s columns and ``CACHE_ROOM`` more; each of keys and values keeps its own length,
        since the two are assigned one after the other."""
        buffer = tensor.new_empty((*tensor.shape[:-2], tensor.shape[-2] + CACHE_ROOM, tensor.shape[-1]))
        buffer[..., : tensor.shape[-2], :] = tensor
        setattr(self, name, buffer)
        setattr(self, f"{name}_length", tensor.shape[-2])

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new columns after the last one (into a new buffer with room where this one is full); return every column."""
        start = self._keys_length
        end = start + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            self.keys, self.values = self.keys, self.values
        self._keys[..., start:end, :] = key_states
        self._values[..., start:end, :] = value_states
        self._keys_length = self._values_length = end
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self._keys_length


def _left_pad(tensor: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """Zeros before ``tensor``'s entries along ``dim`` (a negative index) up to ``width``: masked, never attended."""
    import torch.nn.functional as F

    missing = width - tensor.shape[dim]
    return F.pad(tensor, [0, 0] * (-dim - 1) + [missing, 0]) if missing else tensor


class RunningBatch:
    """A continuous batch's KV cache rows and attention mask: rows join (left-padded to one length) and leave.

    The runner's half of ``backends.scheduler.continuous``: the scheduler
    decides which rows join, decode and leave; this holds their cache.
    """

    def __init__(self, cache: Cache, mask: torch.Tensor) -> None:
        cache.layers = [RoomyLayer(layer.keys, layer.values) for layer in cache.layers]
        self.cache, self.mask = cache, mask

    def join(self, cache: Cache, mask: torch.Tensor) -> None:
        """Append admitted rows' cache and mask, left-padding the shorter to one length."""
        width = max(self.mask.shape[1], mask.shape[1])
        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.keys = torch.cat([_left_pad(mine.keys, width, -2), _left_pad(theirs.keys, width, -2)])
            mine.values = torch.cat([_left_pad(mine.values, width, -2), _left_pad(theirs.values, width, -2)])
        self.mask = torch.cat([_left_pad(self.mask, width, -1), _left_pad(mask, width, -1)])

    def step(self) -> None:
        """One more column for every row: the token a decoding step feeds."""
        self.mask = torch.cat(
            [self.mask, torch.ones((self.mask.shape[0], 1), dtype=self.mask.dtype, device=self.mask.device)], dim=1
        )

    def keep(self, rows: list[int]) -> None:
        """Keep only ``rows``, and drop the leading cache columns no remaining row uses."""
        index = torch.tensor(rows, device=self.mask.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        unused = int(self.mask.any(dim=0).int().argmax())  # leading columns only the dropped rows used
        if unused:
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[..., unused:, :], layer.values[..., unused:, :]
            self.mask = self.mask[:, unused:]
