"""Benchmark loaders: one per benchmark, each returning uniform :class:`MCItem` lists.

``load_items(name, data_dir, subset)`` is the only entry point the rest of the
tool uses. With ``data_dir`` the benchmark's original files are read from disk
(the layout each loader expects is named in its error messages); without it,
the Hugging Face Hub is used.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dateeval.data.arc import load_arc
from dateeval.data.gpqa import load_gpqa
from dateeval.data.items import MCItem, Subset
from dateeval.data.mmlu import load_mmlu
from dateeval.errors import DateEvalError

Loader = Callable[[tuple[str, ...], Path | None], list[MCItem]]

LOADERS: dict[str, Loader] = {
    "mmlu": load_mmlu,
    "arc_challenge": lambda subjects, data_dir: load_arc("ARC-Challenge", data_dir),
    "arc_easy": lambda subjects, data_dir: load_arc("ARC-Easy", data_dir),
    "gpqa_main": lambda subjects, data_dir: load_gpqa("main", data_dir),
    "gpqa_diamond": lambda subjects, data_dir: load_gpqa("diamond", data_dir),
    "gpqa_extended": lambda subjects, data_dir: load_gpqa("extended", data_dir),
}

# Where few-shot exemplars come from (paper §5.4): MMLU's dev split (5 per subject), ARC's train split.
EXEMPLAR_LOADERS: dict[str, Callable[[Path | None], list[MCItem]]] = {
    "mmlu": lambda data_dir: load_mmlu((), data_dir, split="dev"),
    "arc_challenge": lambda data_dir: load_arc("ARC-Challenge", data_dir, split="train"),
    "arc_easy": lambda data_dir: load_arc("ARC-Easy", data_dir, split="train"),
}

__all__ = ["EXEMPLAR_LOADERS", "LOADERS", "MCItem", "Subset", "load_exemplars", "load_items"]


def _directory(data_dir: str | Path | None) -> Path | None:
    if data_dir is None:
        return None
    directory = Path(data_dir)
    if not directory.is_dir():
        raise DateEvalError(f"data directory {directory} does not exist")
    return directory


def load_items(name: str, data_dir: str | Path | None = None, subset: Subset = Subset()) -> list[MCItem]:
    """Load a benchmark's test items and select the subset."""
    if name not in LOADERS:
        raise DateEvalError(f"unknown dataset {name!r}: choose one of {', '.join(LOADERS)}")
    if subset.subjects and name != "mmlu":
        raise DateEvalError(f"--subjects applies to mmlu only, not {name}")
    directory = _directory(data_dir)
    items = LOADERS[name](subset.subjects, directory)
    if not items:
        raise DateEvalError(f"{name} has no items in {directory or 'the Hub copy'}")
    return subset.select(items, name)


def load_exemplars(name: str, data_dir: str | Path | None = None) -> list[MCItem]:
    """The pool few-shot exemplars are drawn from (never the test split)."""
    if name not in EXEMPLAR_LOADERS:
        raise DateEvalError(f"few-shot prompting needs exemplars; {name} has none here (available for {', '.join(EXEMPLAR_LOADERS)})")
    return EXEMPLAR_LOADERS[name](_directory(data_dir))
