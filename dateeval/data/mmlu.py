"""MMLU: the original per-subject CSVs (headerless, or with a header and numeric answers), or the Hub."""

from __future__ import annotations

import csv
from pathlib import Path

from dateeval.data.hub import load_hub_rows
from dateeval.data.items import LABELS, MCItem, content_id, dedupe_ids
from dateeval.errors import DateEvalError

_LAYOUT = "DIR/mmlu/<any>/test/<subject>_test.csv (the original hendrycks/test layout)"


def _test_dir(data_dir: Path) -> Path:
    """The first ``test`` folder of subject CSVs under DIR/mmlu (sorted, so the choice is stable)."""
    candidates = sorted({path.parent for path in (data_dir / "mmlu").glob("**/test/*_test.csv")})
    if not candidates:
        raise DateEvalError(f"no MMLU test files under {data_dir}: expected {_LAYOUT}")
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


def load_mmlu(subjects: tuple[str, ...], data_dir: Path | None) -> list[MCItem]:
    """MMLU test split, all subjects or the chosen ones, in subject order."""
    if data_dir is None:
        configs = subjects or ("all",)
        items = []
        for config in configs:
            rows = load_hub_rows("cais/mmlu", config, "test", f"pass --data-dir DIR with {_LAYOUT}")
            for row in rows:
                options = tuple(row["choices"])
                items.append(MCItem(content_id(f"mmlu/{row['subject']}", row["question"], options), row["question"], options, int(row["answer"]), row["subject"]))
        return dedupe_ids(items)
    test_dir = _test_dir(data_dir)
    available = sorted(path.name.removesuffix("_test.csv") for path in test_dir.glob("*_test.csv"))
    unknown = sorted(set(subjects) - set(available))
    if unknown:
        raise DateEvalError(f"unknown MMLU subject(s) {', '.join(unknown)}: available are {', '.join(available)}")
    return dedupe_ids([item for subject in (subjects or tuple(available)) for item in _read_subject(test_dir / f"{subject}_test.csv", subject)])
