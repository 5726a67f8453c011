"""GPQA (gated): the Hub with a token, or the authors' CSVs in a local folder. Never shipped here."""

from __future__ import annotations

import csv
import hashlib
import io
import random
from pathlib import Path

from dateeval.data.files import read_text, unique_ids
from dateeval.data.hub import load_hub_rows
from dateeval.data.items import MCItem
from dateeval.errors import DateEvalError

CONFIGS = ("main", "diamond", "extended")
_ACCESS = (
    "GPQA is gated: accept its terms at https://huggingface.co/datasets/Idavidrein/gpqa, then set HF_TOKEN "
    "(or run `huggingface-cli login`); offline, pass --data-dir DIR with DIR/gpqa/gpqa_{config}.csv from the authors' dataset.zip"
)


def _item(row: dict, config: str) -> MCItem:
    correct = row["Correct Answer"].strip()
    options = [correct] + [row[f"Incorrect Answer {n}"].strip() for n in (1, 2, 3)]
    record = row.get("Record ID") or hashlib.sha1(row["Question"].encode()).hexdigest()[:12]
    # The CSV always lists the correct answer first; shuffle with a per-item seed so the order is fixed forever.
    order = list(range(4))
    random.Random(f"gpqa/{record}").shuffle(order)
    return MCItem(
        f"gpqa_{config}/{record}",
        row["Question"].strip(),
        tuple(options[i] for i in order),
        order.index(0),
        row.get("High-level domain", ""),
    )


def load_gpqa(config: str, data_dir: Path | None) -> list[MCItem]:
    """GPQA main, diamond or extended (448 / 198 / 546 questions)."""
    if data_dir is not None:
        path = data_dir / "gpqa" / f"gpqa_{config}.csv"
        if not path.is_file():
            raise DateEvalError(f"no GPQA file {path}. {_ACCESS.replace('{config}', config)}")
        try:
            return unique_ids(
                [_item(row, config) for row in csv.DictReader(io.StringIO(read_text(path, "GPQA"), newline=""))], path
            )
        except KeyError as error:
            raise DateEvalError(f"malformed GPQA file {path}: missing column {error}") from None
        except (csv.Error, AttributeError) as error:  # AttributeError: a short row has None for its missing columns
            raise DateEvalError(f"malformed GPQA file {path}: {error}") from None
    from huggingface_hub import get_token

    if get_token() is None:
        raise DateEvalError(f"no Hugging Face token found. {_ACCESS.replace('{config}', config)}")
    rows = load_hub_rows(
        "Idavidrein/gpqa", f"gpqa_{config}", "train", f"pass --data-dir DIR with DIR/gpqa/gpqa_{config}.csv"
    )
    return unique_ids([_item(row, config) for row in rows], f"the Hub copy of Idavidrein/gpqa (gpqa_{config})")
