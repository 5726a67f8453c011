"""ARC (AI2 Reasoning Challenge): local JSONL in the original release format, or the Hub."""

from __future__ import annotations

from pathlib import Path

from dateeval.data.files import parse_jsonl, read_lines, unique_ids
from dateeval.data.hub import load_hub_rows
from dateeval.data.items import MCItem
from dateeval.errors import DateEvalError


def _item(item_id: str, stem: str, texts: list[str], labels: list[str], key: str) -> MCItem:
    """One question; ValueError names what is wrong with it (the caller adds the file and line, or the Hub copy)."""
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        # The key is matched by label: with a label twice, which option is correct is a guess.
        raise ValueError(
            f"ARC item {item_id}: option labels {', '.join(labels)} repeat {', '.join(repeated)}, so answer key {key!r} is ambiguous"
        )
    if key not in labels:
        raise ValueError(f"ARC item {item_id}: answer key {key!r} is not one of its labels {labels}")
    # Options are shown as A, B, C... by position; the key ("C" or "3") is matched by label.
    return MCItem(item_id, stem, tuple(texts), labels.index(key))


def _row(row: dict) -> MCItem:
    choices = row["question"]["choices"]
    return _item(
        row["id"],
        row["question"]["stem"],
        [c["text"] for c in choices],
        [c["label"] for c in choices],
        row["answerKey"],
    )


def _local(data_dir: Path, config: str, split: str) -> list[MCItem]:
    path = data_dir / "arc" / config / f"{config}-{split.title()}.jsonl"
    if not path.is_file():
        raise DateEvalError(f"no {config} {split} file under {data_dir}: expected {path} (the ARC-V1 release's JSONL)")
    return unique_ids(parse_jsonl(read_lines(path, "ARC"), path, "ARC", _row), path)


def load_arc(config: str, data_dir: Path | None, split: str = "test") -> list[MCItem]:
    """ARC-Challenge or ARC-Easy (config ``ARC-Challenge`` or ``ARC-Easy``); ``train`` holds the few-shot pool."""
    if data_dir is not None:
        return _local(data_dir, config, split)
    hint = f"pass --data-dir DIR with DIR/arc/{config}/{config}-{split.title()}.jsonl"
    rows = load_hub_rows("allenai/ai2_arc", config, split, hint)
    where = f"the Hub copy of allenai/ai2_arc ({config})"
    try:
        items = [
            _item(r["id"], r["question"], list(r["choices"]["text"]), list(r["choices"]["label"]), r["answerKey"])
            for r in rows
        ]
    except ValueError as error:
        raise DateEvalError(f"malformed {where}: {error}") from None
    return unique_ids(items, where)
