"""The results store: one Parquet file per executed work unit, written atomically.

Results are the primary artifact (like Inspect's logs): every per-item row
carries what produced it (model identity, condition factors, prompt hash,
scoring settings), so every table and figure can be recomputed from the
store alone. Layout::

    STORE/<model>-<model_key>/<dataset>/<condition>-<unit_key>.parquet

A file appears only complete (written to a hidden temporary name, fsynced,
then renamed), so a sweep killed at any instant leaves no partial rows. A
row's identity is (model_key, hardware, task_key, condition_key,
item_id, prompt_hash); reads drop any duplicate of it (two workers racing on one
unit), and a corrupted file is reported, never deleted or silently skipped.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dateeval.errors import DateEvalError

# What makes a result unique. The hardware is part of it so that results of one model from two
# machines (two GPU models, say) both stay in one store and can be compared.
ROW_KEY = ["model_key", "hardware", "task_key", "condition_key", "item_id", "prompt_hash"]
SUMMARY_COLUMNS = [
    "model", "model_key", "dtype", "device", "hardware", "dataset", "task_key", "condition", "condition_key", "date_mode", "date",
    "system_prompt", "item_id", "correct", "confidence", "pred", "answer", "prompt_hash", "created_at", "date_text", "factor",
]  # fmt: skip
# Columns only open-ended tasks have: read where present, never filled in for stores of MCQA only
# (filling them would add four empty columns to tens of millions of rows).
GENERATION_COLUMNS = ["parsed", "score", "bleu_stats", "chrf_stats"]


@dataclass
class StoreProblems:
    """Files that could not be read, with the reason, for the caller to report."""

    corrupted: list[tuple[Path, str]] = field(default_factory=list)

    def messages(self) -> list[str]:
        return [f"store: cannot read {path} ({reason}); left in place, its rows are not included" for path, reason in self.corrupted]


class Store:
    """A folder of result files that many sweeps (and workers) add to."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def ensure_writable(self) -> None:
        """Fail early, with one line, when results could not be saved."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-test-{uuid.uuid4().hex}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            raise DateEvalError(f"store {self.root} is not writable: {error.strerror or error}") from None

    def files(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(self.root.glob("*/*/*.parquet"))

    def fingerprint(self) -> tuple:
        """Changes whenever a file is added or replaced: the cache key for the app's aggregates."""
        return tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in self.files())

    def unit_path(self, model_dir: str, dataset: str, condition: str, unit_key: str) -> Path:
        return self.root / model_dir / dataset / f"{condition}-{unit_key}.parquet"

    def write(self, path: Path, rows: list[dict] | pd.DataFrame) -> None:
        """Write a unit's rows (or a merged frame) atomically: temporary file, fsync, rename."""
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.parent / f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        # A merged frame holds NaN where a unit lacked a value (e.g. a generated answer nobody could parse):
        # from_pandas reads that as missing, where from_pylist would take the column for a float one.
        table = pa.Table.from_pandas(rows, preserve_index=False) if isinstance(rows, pd.DataFrame) else pa.Table.from_pylist(rows)
        try:
            with staging.open("wb") as handle:
                pq.write_table(table, handle, compression="zstd")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(staging, path)
        except OSError as error:
            staging.unlink(missing_ok=True)
            raise DateEvalError(f"cannot write results to {path}: {error.strerror or error}") from None

    @staticmethod
    def readable(path: Path) -> bool:
        try:
            pq.read_metadata(path)
        except (OSError, pa.ArrowException):
            return False
        return True

    def claim(self, path: Path) -> bool:
        """Take a unit for this worker (a lock file next to it); False if another live worker has it."""
        lock = path.with_name(f".{path.name}.lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        owner = f"{socket.gethostname()} {os.getpid()}"
        for _ in range(2):
            try:
                descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                if not _stale(lock):
                    return False
                lock.unlink(missing_ok=True)
                continue
            with os.fdopen(descriptor, "w") as handle:
                handle.write(owner)
            return True
        return False

    def release(self, path: Path) -> None:
        path.with_name(f".{path.name}.lock").unlink(missing_ok=True)

    def compact(self) -> tuple[int, int, StoreProblems]:
        """Merge each model/dataset folder's unit files into one file; returns (folders, files removed, problems).

        Thousands of small files slow every read; one file per folder is
        faster and smaller. The merged file is written (atomically) before
        any original is removed, and duplicates are dropped on read, so a
        kill at any point loses nothing. Unreadable files are left in place.
        """
        folders = sorted({path.parent for path in self.files()})
        removed = 0
        all_problems = StoreProblems()
        for folder in folders:
            paths = sorted(folder.glob("*.parquet"))
            frame, problems = self.read(paths=paths)
            all_problems.corrupted += problems.corrupted
            broken = {path for path, _ in problems.corrupted}
            readable = [path for path in paths if path not in broken]
            if len(readable) < 2:
                continue
            digest = uuid.uuid5(uuid.NAMESPACE_URL, "|".join(p.name for p in readable)).hex[:16]
            target = folder / f"compacted-{digest}.parquet"
            self.write(target, frame)
            for path in readable:
                if path != target:
                    path.unlink()
                    removed += 1
        return len(folders), removed, all_problems

    def read(
        self, columns: list[str] | None = None, paths: Iterable[Path] | None = None, filters: list[tuple] | None = None,
        optional: Iterable[str] = (),
    ) -> tuple[pd.DataFrame, StoreProblems]:  # fmt: skip
        """All rows (or the chosen columns and pyarrow ``filters``), duplicates removed, plus any unreadable files.

        A chosen column missing from every file comes back empty, except the
        ``optional`` ones, which are read where present and otherwise left out.
        """
        problems = StoreProblems()
        frames = []
        for path in self.files() if paths is None else paths:
            try:
                # Files written before a column existed (e.g. `factor`) still read; the column comes back empty.
                wanted = None if columns is None else [c for c in [*columns, *optional] if c in pq.read_schema(path).names]
                table = pq.read_table(path, columns=wanted, filters=filters)
                if table.num_rows:
                    frames.append(table.to_pandas())
            except (OSError, pa.ArrowException, ValueError) as error:
                problems.corrupted.append((path, str(error).splitlines()[0][:160] if str(error) else type(error).__name__))
        if not frames:
            return pd.DataFrame(columns=columns or []), problems
        frame = pd.concat(frames, ignore_index=True)
        for column in columns or []:
            if column not in frame.columns:
                frame[column] = None
        key = [column for column in ROW_KEY if column in frame.columns]
        if key and len(key) == len(ROW_KEY):
            frame = frame.drop_duplicates(subset=key, keep="first", ignore_index=True)
        return frame, problems


def _stale(lock: Path) -> bool:
    """A lock left by a dead process on this host (a killed sweep) may be taken over."""
    try:
        host, pid = lock.read_text().split()
    except (OSError, ValueError):
        return True
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
