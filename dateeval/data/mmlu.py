"""MMLU: the original per-subject CSVs (headerless, or with a header and numeric answers), or the Hub."""

from __future__ import annotations

import csv
from pathlib import Path

from dateeval.data.hub import load_hub_rows
from dateeval.data.items import LABELS, MCItem, content_id, dedupe_ids
from dateeval.errors import DateEvalError

_LAYOUT = "DIR/mmlu/<any>/{split}/<subject>_{split}.csv (the original hendrycks/test layout)"


def _split_dir(data_dir: Path, split: str) -> Path:
    """The first ``split`` folder of subject CSVs under DIR/mmlu (sorted, so the choice is stable)."""
    candidates = sorted({path.parent for path in (data_dir / "mmlu").glob(f"**/{split}/*_{split}.csv")})
    if not candidates:
        raise DateEvalError(f"no MMLU {split} files under {data_dir}: expected {_LAYOUT.format(split=split)}")
    return candidates[0]


def _answer_index(value: str, where: str) -> int:
    value = value.strip()
    if value.isdigit():
        return int(value)
    if len(value) == 1 and value in LABELS:
        return LABELS.index(value)
    raise DateEvalError(f"malformed MMLU answer {value!r} in {where}: expected a letter A-D or an index 0-3")


def _read_subject(path: Path, subject: str) -> list[MCItem]:
    try:
        rows = list(csv.reader(path.open(encoding="utf-8", newline="")))
    except (OSError, csv.Error, UnicodeDecodeError) as error:
        raise DateEvalError(f"cannot read MMLU file {path}: {error}") from None
    if rows and rows[0][:2] == ["question", "choice0"]:
        rows = rows[1:]
    items = []
    for number, row in enumerate(rows, 1):
        if len(row) < 4:
            raise DateEvalError(f"malformed MMLU file {path}, row {number}: expected question, options and answer")
        question, options = row[0], tuple(row[1:-1])
        answer = _answer_index(row[-1], f"{path}, row {number}")
        if answer >= len(options):
            raise DateEvalError(f"malformed MMLU file {path}, row {number}: answer {row[-1]!r} has no option")
        items.append(MCItem(content_id(f"mmlu/{subject}", question, options), question, options, answer, subject))
    return items


def load_mmlu(subjects: tuple[str, ...], data_dir: Path | None, split: str = "test") -> list[MCItem]:
    """An MMLU split (``test``; ``dev`` holds the 5 few-shot exemplars per subject), all subjects or the chosen ones."""
    if data_dir is None:
        configs = subjects or ("all",)
        items = []
        for config in configs:
            rows = load_hub_rows("cais/mmlu", config, split, f"pass --data-dir DIR with {_LAYOUT.format(split=split)}")
            for row in rows:
                options = tuple(row["choices"])
                items.append(
                    MCItem(
                        content_id(f"mmlu/{row['subject']}", row["question"], options),
                        row["question"],
                        options,
                        int(row["answer"]),
                        row["subject"],
                    )
                )
        return dedupe_ids(items)
    folder = _split_dir(data_dir, split)
    available = sorted(path.name.removesuffix(f"_{split}.csv") for path in folder.glob(f"*_{split}.csv"))
    unknown = sorted(set(subjects) - set(available))
    if unknown:
        raise DateEvalError(f"unknown MMLU subject(s) {', '.join(unknown)}: available are {', '.join(available)}")
    return dedupe_ids(
        [
            item
            for subject in (subjects or tuple(available))
            for item in _read_subject(folder / f"{subject}_{split}.csv", subject)
        ]
    )
