"""Abandoning a forward pass part-way: what lets a server stop work whose client left (``dateeval serve``).

One pass over a full context takes seconds, a layer of it about a second on
a CPU (``docs/benchmarks.md``): a pass is abandoned between a layer's
attention and its MLP rather than run to its end for nobody.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

CHECKPOINT_S = 0.05  # how often a running forward pass looks whether it should stop


def checkpoints(model: torch.nn.Module) -> list[torch.nn.Module]:
    """Where a forward pass may be abandoned: before the model, each of its layers and each layer's parts (attention,
    MLP, norms), and its output layer. The layers are the members of the model's ``ModuleList`` containers (a
    transformer's blocks)."""
    import torch

    layers = [layer for module in model.modules() if isinstance(module, torch.nn.ModuleList) for layer in module]
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return [
        model,
        *(part for layer in layers for part in (layer, *layer.children())),
        *([head] if head is not None else []),
    ]


@contextlib.contextmanager
def abandoned_when(model: torch.nn.Module, stop: Callable[[], bool], error: type[BaseException]) -> Iterator[None]:
    """Raise ``error`` out of the model's forward passes once ``stop()``, asked at its :func:`checkpoints` at most
    every :data:`CHECKPOINT_S`: a decoding step passes some 150 checkpoints in milliseconds, and ``stop()`` may ask
    every client's socket."""
    asked = [time.monotonic()]

    def check(*_: object) -> None:
        if time.monotonic() - asked[0] >= CHECKPOINT_S:
            asked[0] = time.monotonic()
            if stop():
                raise error

    hooks = [module.register_forward_pre_hook(check) for module in checkpoints(model)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
