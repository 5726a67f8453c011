"""Where and in what precision a local model runs, and what that hardware is: shared by the transformers and vLLM backends."""

from __future__ import annotations

import os
import platform

from dateeval.errors import DateEvalError

DTYPES = ("auto", "bfloat16", "float16", "float32")
DEVICES = ("auto", "cuda", "mps", "cpu")
UNKNOWN_FREE_MEMORY = (
    1 << 32
)  # bytes assumed free where the platform does not say (no CUDA, no /proc/meminfo, no sysconf)


def pick_device(device: str) -> str:
    import torch

    if device not in DEVICES:
        raise DateEvalError(f"unknown device {device!r}: choose one of {', '.join(DEVICES)}")
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}
    if not available[device]:
        raise DateEvalError(f"device {device} is not available on this machine")
    return device


def pick_dtype(dtype: str, device: str) -> str:
    """``auto``: bfloat16 on a GPU that supports it, float16 on other GPUs, float32 on CPU.

    float32 on CPU because half precision there is emulated on many
    processors and because it is the reference precision of the paper's
    comparison (Table 5); pass ``--dtype bfloat16`` for speed.
    """
    import torch

    if dtype not in DTYPES:
        raise DateEvalError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    if dtype != "auto":
        return dtype
    if device == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "float16" if device == "mps" else "float32"


def hardware(device: str) -> str:
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def free_memory(device: str) -> int:
    """Bytes free for the next forward: the GPU's, else the host's available memory."""
    import torch

    if device == "cuda":
        return torch.cuda.mem_get_info()[0]
    try:
        with open("/proc/meminfo") as meminfo:
            return next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (OSError, ValueError):
        return UNKNOWN_FREE_MEMORY
