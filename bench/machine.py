"""What the benchmarks measure a machine by: its dense matrix-multiply rate, the ceiling for any model's FLOP rate."""

from __future__ import annotations

import time

import torch


def matmul_rate(dtype: torch.dtype, device: str = "cpu", size: int = 2048, repeats: int = 8, trials: int = 5) -> float:
    """Measured dense matmul FLOP/s for ``dtype`` on ``device`` (this process's threads): the best of ``trials`` timed
    runs of ``repeats`` products of two ``size`` x ``size`` matrices, after a warm-up."""
    a, b = torch.randn(size, size, dtype=dtype, device=device), torch.randn(size, size, dtype=dtype, device=device)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(trials):
        sync(device)
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        sync(device)
        best = max(best, 2 * size**3 * repeats / (time.perf_counter() - start))
    return best


def sync(device: str) -> None:
    """Wait for the device's queued work (a no-op on CPU), so a timer measures it."""
    if device == "cuda":
        torch.cuda.synchronize()
