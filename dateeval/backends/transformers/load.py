"""Opening a transformers model: device and dtype chosen, weights and tokenizer loaded once, what produced them recorded.

Kept apart from the runner so that what a row records about its model (its
``ModelIdentity``: source, revision, dtype, device, library versions and CPU
numerics) is decided in one place, before any forward pass runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dateeval import numerics
from dateeval.backends.base import ModelIdentity
from dateeval.backends.devices import hardware, pick_device, pick_dtype
from dateeval.errors import DateEvalError
from dateeval.models import ModelSource, converted_gguf_dir

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class Loaded:
    """A model in eval mode on its device, its tokenizer, and what a stored row says produced them."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: str
    dtype: str
    identity: ModelIdentity
    governor: numerics.ThreadGovernor | None  # CPU threads follow the load; None when fixed or on a GPU


def load(source: ModelSource, *, dtype: str, device: str, trust_remote_code: bool) -> Loaded:
    """Load ``source`` (a converted GGUF file, a local folder or a Hub repository at its revision)."""
    import torch
    import transformers

    device = pick_device(device)
    dtype = pick_dtype(dtype, device)
    if device == "cpu":
        numerics.check_environment()
    location, kwargs = source.location, {}
    if source.kind == "gguf":
        location = str(converted_gguf_dir(source))
    elif source.kind == "hub" and source.revision:
        kwargs["revision"] = source.revision
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(location, trust_remote_code=trust_remote_code, **kwargs)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            location, dtype=getattr(torch, dtype), trust_remote_code=trust_remote_code, **kwargs
        ).to(device)
    except (OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DateEvalError(f"cannot load model {source.name}: {first_line}") from None
    model.eval()
    governor = numerics.govern(model, dtype) if device == "cpu" else None
    if device == "cuda":
        _deterministic_cuda()
    return Loaded(model, tokenizer, device, dtype, _identity(source, model, dtype, device), governor)


def _deterministic_cuda() -> None:
    """Deterministic CUDA kernels and no TF32 (App. C.2); cuBLAS needs its workspace setting for that."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)


def _identity(source: ModelSource, model: PreTrainedModel, dtype: str, device: str) -> ModelIdentity:
    import torch
    import transformers

    return ModelIdentity(
        model=source.name,
        source=f"{source.kind}:{source.location if source.kind == 'hub' else (source.gguf_file or source.name)}",
        revision=source.revision or getattr(model.config, "_commit_hash", None),
        dtype=dtype,
        device=device,
        hardware=hardware(device),
        versions={
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            **(numerics.settings(dtype) if device == "cpu" else {}),
        },
    )


def context_length(config: PretrainedConfig) -> int | None:
    """The longest sequence (prompt plus reply) the model was trained on, where its config states it."""
    lengths = (
        getattr(config, name, None) for name in ("max_position_embeddings", "n_positions", "max_sequence_length")
    )
    return next((length for length in lengths if isinstance(length, int)), None)
