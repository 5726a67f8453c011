"""A sparse entry's design record: which dates its sweep covered, its pilot (the dates scored in full, or in
designs of round 2 the no-date baseline), and every budget's design, kept beside its units as ``STORE/<model>/<dataset>/design-<entry digest>.json``.

Why a file of its own: the drawn rows carry their design, but a date whose draw chose no cell has no row, and a unit
file that was deleted takes its date with it; a reader that knew the sweep's dates only from the rows it found would
estimate the entry over the dates the draw (or the deletion) left, with no word. The record is written before any
drawn cell is scored and says which dates were swept, so every reader estimates every one of them (a date with no
drawn cell from the pilot alone, with the interval that implies) and names a drawn cell that is missing. A rerun with
another seed, pilot or set of dates is refused against it before any work (``engine.drawn.check_record``), so an
entry never holds two samples that cannot be read as one.

The record is data: read with a size bound, every field checked, anything else named in one line.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

from dateeval import atomic
from dateeval.errors import DateEvalError

VERSION = 1
MAX_BYTES = 4 * 2**20  # 366 dates of keys and every budget's design are a few tens of KB
PREFIX = "design-"


@dataclass(frozen=True)
class DesignRecord:
    """One sparse entry's sweep: its identity, the seed, the plain dates swept (condition key -> ISO date, in date
    order, pilot dates included), the pilot's keys (dates', or a baseline's in designs of round 2), how many conditions of the dataset were scored in full, how many
    questions, and every budget's design as the drawn rows store it (``sparse.Design.to_json``), smallest first."""

    model_key: str
    hardware: str
    task_key: str
    seed: int
    dates: tuple[tuple[str, str], ...]
    pilot: tuple[str, ...]
    n_dense: int
    n_items: int
    designs: tuple[str, ...]

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": VERSION,
                "model_key": self.model_key,
                "hardware": self.hardware,
                "task_key": self.task_key,
                "seed": self.seed,
                "dates": [list(pair) for pair in self.dates],
                "pilot": list(self.pilot),
                "n_dense": self.n_dense,
                "n_items": self.n_items,
                "designs": list(self.designs),
            },
            indent=1,
        )

    def with_design(self, design: str) -> DesignRecord:
        """The record with one more budget's design (kept once)."""
        if design in self.designs:
            return self
        return DesignRecord(**{**self.__dict__, "designs": (*self.designs, design)})


def path_of(folder: Path, model_key: str, hardware: str, task_key: str) -> Path:
    """Where one entry's record lives in its ``<model>/<dataset>`` folder."""
    digest = hashlib.sha256("\0".join((model_key, hardware, task_key)).encode()).hexdigest()[:16]
    return folder / f"{PREFIX}{digest}.json"


def records(root: Path) -> list[Path]:
    """Every design record in a store (what a reader joins to its entries)."""
    return sorted(root.glob(f"*/*/{PREFIX}*.json")) if root.is_dir() else []


def write(path: Path, record: DesignRecord) -> None:
    """Replace the record in one step (a reader sees the old one or the new one)."""
    with atomic.replacing(path) as staging:
        staging.write_text(record.to_json())


def read(path: Path) -> DesignRecord:
    """A record as stored, checked; one line naming the file when it is not one."""
    try:
        if path.is_symlink() or path.stat().st_size > MAX_BYTES:
            raise ValueError("a link or larger than a design record can be")
        return _parsed(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise DateEvalError(f"the sparse design record {path} is not readable ({error})") from None


def _parsed(found: dict) -> DesignRecord:
    if found.get("version") != VERSION:
        raise ValueError(f"version {found.get('version')!r}, not {VERSION}")
    dates = tuple((str(key), str(day)) for key, day in found["dates"])
    pilot = tuple(str(key) for key in found["pilot"])
    record = DesignRecord(
        str(found["model_key"]),
        str(found["hardware"]),
        str(found["task_key"]),
        _whole(found["seed"]),
        dates,
        pilot,
        _whole(found["n_dense"]),
        _whole(found["n_items"]),
        tuple(str(text) for text in found["designs"]),
    )
    keys = [key for key, _ in dates]
    outside = set(pilot) - set(keys)  # the no-date baseline, the pilot of round 2's designs
    if len(set(keys)) != len(keys) or len(set(pilot)) != len(pilot) or not pilot or (outside and len(pilot) > 1):
        raise ValueError("its dates repeat, or its pilot is empty, repeats a key, or mixes dates and a baseline")
    if [day for _, day in dates] != sorted(day for _, day in dates) or not record.designs:
        raise ValueError("its dates are not in order, or it holds no design")
    return record


def _whole(value: object) -> int:
    """A count or seed: a whole number (JSON's ``true`` and ``1.5`` are not)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ValueError(f"{value!r} is not a whole number")
    return int(value)
