"""Packed scoring: several prompts in one forward, no padding, each prompt attending only to its own tokens.

Why: a padded batch computes positions nobody reads, and it makes a prompt's
float32 result depend on its batch. The attention kernels reduce over the keys
in vector-width blocks, so a prompt's sums change with how many padded keys
follow it (measured on MMLU prompts: a prompt's option probabilities move by up
to 2.6e-6 as its batch's padded width crosses multiples of 16 keys). Packed,
the prompts after a shared prefix are laid end to end in one row; attention
runs prompt by prompt over exactly the shared prefix and the prompt's own
tokens (``_attention``), and every other layer works position by position. A
prompt's probabilities are then the same whatever it is scored with, as long as
the matrix library's per-row results do not change with the number of rows:
MKL's did not from ``MIN_ROWS`` rows on (fewer rows take other kernels: 1 row a
matrix-vector product, 5-11 rows with 2 threads), so a packed forward always
holds at least that many positions and reads at least that many rows of logits.

Packing is used where it computes exactly what the model computes: transformers'
SDPA attention over plain full-attention layers (no sliding window). The
model's attention implementation is replaced by ``IMPLEMENTATION``, which is
SDPA itself outside a packed forward. The backend packs on the CPU only: on a
GPU one SDPA call per prompt and layer would cost more in kernel launches than
a small model's whole forward (a variable-length attention kernel would serve
there; none was measured without a device).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

IMPLEMENTATION = "dateeval_packed_sdpa"
MIN_ROWS = (
    16  # positions (and logit rows) a packed forward always holds: MKL's row results are the same from 12 rows on
)


@dataclass
class _Layout:
    """A packed forward's segments: ``prefix`` shared tokens in the cache, then segments of ``lengths`` tokens end to end."""

    prefix: int
    lengths: list[int]
    masks: dict[int, object] = field(default_factory=dict)  # a segment length -> its causal mask after the prefix

    def mask(self, length: int, device: torch.device) -> torch.Tensor | None:  # bool; None: a plain causal segment
        """Each of ``length`` queries sees the whole prefix and its own segment up to itself (no mask: SDPA's causal path)."""
        import torch

        if not self.prefix:
            return None
        if length not in self.masks:
            self.masks[length] = torch.ones((1, 1, length, self.prefix + length), dtype=torch.bool, device=device).tril(
                diagonal=self.prefix
            )
        return self.masks[length]


_LAYOUT: ContextVar[_Layout | None] = ContextVar("dateeval_packed_layout", default=None)


@contextmanager
def segments(prefix: int, lengths: list[int]) -> Iterator[None]:
    """Forwards run inside see ``lengths`` packed segments after ``prefix`` cached tokens."""
    token = _LAYOUT.set(_Layout(prefix, lengths))
    try:
        yield
    finally:
        _LAYOUT.reset(token)


def _attention(  # transformers' attention signature
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: object,
) -> tuple[torch.Tensor, None]:
    """SDPA; inside ``segments``, SDPA segment by segment, each over the prefix's keys and its own."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    layout = _LAYOUT.get()
    if layout is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    prefix, outputs, start = layout.prefix, [], 0
    for length in layout.lengths:
        keys = slice(prefix + start, prefix + start + length)
        own_key = torch.cat([key[:, :, :prefix], key[:, :, keys]], dim=2) if prefix else key[:, :, keys]
        own_value = torch.cat([value[:, :, :prefix], value[:, :, keys]], dim=2) if prefix else value[:, :, keys]
        output, _ = sdpa_attention_forward(
            module, query[:, :, start : start + length], own_key, own_value, layout.mask(length, query.device), **kwargs
        )
        outputs.append(output)
        start += length
    return torch.cat(outputs, dim=1), None


def _mask(*args: object, **kwargs: object) -> torch.Tensor | None:  # transformers' mask-function signature
    """SDPA's mask; none inside ``segments`` (``_attention`` masks each segment itself)."""
    from transformers.masking_utils import sdpa_mask

    return None if _LAYOUT.get() is not None else sdpa_mask(*args, **kwargs)


def install(model: PreTrainedModel) -> bool:
    """Let ``model`` score packed prompts where that computes what it computes; whether it now can.

    transformers releases before these interfaces (requirements.txt admits
    4.46) score in padded batches instead.
    """
    try:
        from transformers import AttentionInterface, DynamicCache
        from transformers.cache_utils import DynamicLayer
        from transformers.masking_utils import AttentionMaskInterface
    except ImportError:
        return False
    if not hasattr(model, "set_attn_implementation"):
        return False
    config = model.config.get_text_config()
    full_attention = all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)
    if (
        model.config._attn_implementation != "sdpa"
        or not full_attention
        or getattr(config, "attn_logit_softcapping", None)
    ):
        return False
    AttentionInterface.register(IMPLEMENTATION, _attention)
    AttentionMaskInterface.register(IMPLEMENTATION, _mask)
    model.set_attn_implementation(IMPLEMENTATION)
    return True
