"""GSM8K (paper Figure 8): step-by-step solution ending "Answer: {number}", graded on the final number.

Prompting and grading only; wiring into sweeps comes with the open-ended tasks issue.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from dateeval.data.hub import load_hub_rows
from dateeval.errors import DateEvalError
from dateeval.tasks.parsing import gsm8k_reference, parse_number

INSTRUCTION = "Solve the following math problem step by step. End your response with a line of the form 'Answer: <number>'."


@dataclass(frozen=True)
class MathItem:
    id: str
    question: str
    reference: Decimal


def load_items(data_dir: Path | None = None) -> list[MathItem]:
    """The 1,319 test problems: ``DIR/gsm8k/test.jsonl`` (the original release), or the Hub."""
    if data_dir is None:
        rows = load_hub_rows("openai/gsm8k", "main", "test", "pass --data-dir DIR with DIR/gsm8k/test.jsonl")
    else:
        path = Path(data_dir) / "gsm8k" / "test.jsonl"
        if not path.is_file():
            raise DateEvalError(f"no GSM8K file under {data_dir}: expected {path}")
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [MathItem(f"gsm8k/{hashlib.sha1(r['question'].encode()).hexdigest()[:12]}", r["question"], gsm8k_reference(r["answer"])) for r in rows]


def user_message(item: MathItem) -> str:
    return f"{INSTRUCTION}\n\nQuestion: {item.question}"


def grade(output: str, item: MathItem) -> tuple[Decimal | None, bool]:
    """The parsed number (None when unparseable, graded wrong) and whether it equals the reference."""
    number = parse_number(output)
    return number, number is not None and number == item.reference
