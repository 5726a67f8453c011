"""Benchmark loaders: one per benchmark, each returning uniform :class:`MCItem` lists.

``load_items(name, data_dir, subset)`` is the only entry point the rest of the
tool uses. With ``data_dir`` the benchmark's original files are read from disk
(the layout each loader expects is named in its error messages); without it,
the Hugging Face Hub is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dateeval.data.arc import load_arc
from dateeval.data.gpqa import load_gpqa
from dateeval.data.items import MCItem, Subset
from dateeval.data.mmlu import load_mmlu
from dateeval.errors import DateEvalError


@dataclass(frozen=True)
class Source:
    """Where a multiple-choice benchmark's items come from, and its few-shot pool if it has one (never the test split)."""

    items: Callable[[tuple[str, ...], Path | None], list[MCItem]]
    exemplars: Callable[[Path | None], list[MCItem]] | None = None
    subjects: bool = False  # ``--subjects`` selects within it


# The one table of multiple-choice benchmarks; exemplars as in paper §5.4: MMLU's dev split (5 per subject), ARC's train split.
SOURCES: dict[str, Source] = {
    "mmlu": Source(load_mmlu, lambda data_dir: load_mmlu((), data_dir, split="dev"), subjects=True),
    "arc_challenge": Source(
        lambda subjects, data_dir: load_arc("ARC-Challenge", data_dir),
        lambda data_dir: load_arc("ARC-Challenge", data_dir, split="train"),
    ),
    "arc_easy": Source(
        lambda subjects, data_dir: load_arc("ARC-Easy", data_dir),
        lambda data_dir: load_arc("ARC-Easy", data_dir, split="train"),
    ),
    "gpqa_main": Source(lambda subjects, data_dir: load_gpqa("main", data_dir)),
    "gpqa_diamond": Source(lambda subjects, data_dir: load_gpqa("diamond", data_dir)),
    "gpqa_extended": Source(lambda subjects, data_dir: load_gpqa("extended", data_dir)),
}

__all__ = ["SOURCES", "MCItem", "Source", "Subset", "load_exemplars", "load_items"]


def _directory(data_dir: str | Path | None) -> Path | None:
    if data_dir is None:
        return None
    directory = Path(data_dir)
    if not directory.is_dir():
        raise DateEvalError(f"data directory {directory} does not exist")
    return directory


def load_items(name: str, data_dir: str | Path | None = None, subset: Subset = Subset()) -> list[MCItem]:
    """Load a benchmark's test items and select the subset."""
    if name not in SOURCES:
        raise DateEvalError(f"unknown dataset {name!r}: choose one of {', '.join(SOURCES)}")
    if subset.subjects and not SOURCES[name].subjects:
        raise DateEvalError(
            f"--subjects applies to {', '.join(n for n, s in SOURCES.items() if s.subjects)} only, not {name}"
        )
    directory = _directory(data_dir)
    items = SOURCES[name].items(subset.subjects, directory)
    if not items:
        raise DateEvalError(f"{name} has no items in {directory or 'the Hub copy'}")
    return subset.select(items, name)


def load_exemplars(name: str, data_dir: str | Path | None = None) -> list[MCItem]:
    """The pool few-shot exemplars are drawn from (never the test split)."""
    exemplars = SOURCES[name].exemplars if name in SOURCES else None
    if exemplars is None:
        with_pool = ", ".join(n for n, s in SOURCES.items() if s.exemplars)
        raise DateEvalError(f"few-shot prompting needs exemplars; {name} has none here (available for {with_pool})")
    return exemplars(_directory(data_dir))
