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
unit), and a corrupted file is reported, never deleted or silently skipped:
reads leave it in place, a sweep renames it aside and computes its rows again.

Every file carries Parquet page checksums and a digest of each column's
values (``dateeval.store.checksums``); every read verifies both for what it reads,
so a damaged file is reported and its rows left out rather than read as
different numbers. Files from before checksums existed read unverified.

A reply is stored as the model sent it, lone surrogates included, and
:meth:`Store.read` gives back exactly what was written
(:mod:`dateeval.store.text` says how); :mod:`dateeval.store.unit_file`
reads and verifies one file, and :mod:`dateeval.store.upkeep` sets damaged
files aside, removes killed writes' staging files and compacts.
"""

from __future__ import annotations


import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dateeval import atomic
from dateeval.errors import DateEvalError
from dateeval.schema import ROW_KEY
from dateeval.store import checksums, designs, unit_file
from dateeval.store.text import arrow_table, unescaped


@dataclass
class StoreProblems:
    """Files that could not be read, with the reason, for the caller to report.

    ``unreachable`` are those that failed with an operating-system error
    (permissions, a vanished network mount): maybe transient, so never
    treated as damaged content. ``removed`` are leftovers of killed writes
    that were cleaned up. ``unread_sidecars`` are sidecar folders this user
    may not read: their units were read instead, as in a store without them.
    """

    corrupted: list[tuple[Path, str]] = field(default_factory=list)
    # Parquet files dateeval did not write: named, left alone
    foreign: list[tuple[Path, str]] = field(default_factory=list)
    unreachable: set[Path] = field(default_factory=set)
    removed: list[Path] = field(default_factory=list)
    unread_sidecars: set[Path] = field(default_factory=set)

    def messages(self) -> list[str]:
        unread = [
            f"store: cannot read {path} ({reason}); left in place, its rows are not included"
            for path, reason in self.corrupted
        ]
        unread += [
            f"store: {path} was not written by dateeval ({reason}); left alone and not read"
            for path, reason in self.foreign
        ]
        unread += [
            f"store: cannot read {folder} (permission denied): the units are read instead of the sums and statistics kept "
            "there (the same numbers, more slowly)"
            for folder in sorted(self.unread_sidecars)
        ]
        return unread + [f"store: removed {path}, a staging file left by a killed write" for path in self.removed]


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
        """Changes whenever a file is added or replaced (units and sparse design records): the cache key for the app's
        aggregates."""
        return tuple(
            (str(path), path.stat().st_mtime_ns, path.stat().st_size)
            for path in [*self.files(), *designs.records(self.root)]
        )

    @staticmethod
    def model_dir(model: str, dtype: str, model_key: str) -> str:
        """The folder of one model at one precision (the layout's first level)."""
        return f"{_slug(model)}-{dtype}-{model_key[:8]}"

    def unit_path(self, model_dir: str, dataset: str, condition: str, unit_key: str) -> Path:
        return self.root / model_dir / dataset / f"{_slug(condition)}-{unit_key}.parquet"

    def dataset_names(self) -> set[str]:
        """The datasets this store holds results of (its ``model/dataset`` folders), read from the layout alone."""
        return {path.name for path in self.root.glob("*/*") if path.is_dir() and not path.parent.name.startswith(".")}

    def unit_files(self, model_dir: str, dataset: str) -> list[Path]:
        """The unit files of one model and dataset (what a sweep reads to plan)."""
        return sorted((self.root / model_dir / dataset).glob("*.parquet"))

    def write(self, path: Path, rows: list[dict] | pd.DataFrame | pa.Table, row_group_size: int | None = None) -> None:
        """Write a unit's rows (or a merged frame) atomically, with checksums: temporary file, fsync, rename.

        ``row_group_size`` rows per row group (Parquet's default where None): see ``upkeep.COMPACTED_ROW_GROUP``.
        """
        table = checksums.with_checksums(arrow_table(rows))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic.replacing(path) as staging, staging.open("wb") as handle:
                pq.write_table(
                    table, handle, compression="zstd", write_page_checksum=True, row_group_size=row_group_size
                )
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as error:
            raise DateEvalError(f"cannot write results to {path}: {error.strerror or error}") from None

    @staticmethod
    def read_table(path: Path) -> pa.Table | None:
        """One file's rows as an Arrow table, every column verified; None when it is damaged or unreadable.

        For bulk per-item columns that are used as arrays: no pandas frame, no duplicate removal. Escaped text
        columns stay escaped (``text.ESCAPED_KEY``: Arrow cannot hold what they decode to).
        """
        try:
            return unit_file.load(path, None, None, full_check=True)
        except (unit_file.Foreign, *unit_file.READ_ERRORS):
            return None

    @staticmethod
    def damage(path: Path) -> str | None:
        """Why a unit file cannot be trusted (every column and page verified), or None when it reads intact."""
        try:
            unit_file.load(path, None, None, full_check=True)
        except unit_file.Foreign as error:
            return str(error)
        except unit_file.READ_ERRORS as error:
            return unit_file.reason(error)
        return None

    def readable(self, path: Path) -> bool:
        return self.damage(path) is None

    def read(
        self,
        columns: list[str] | None = None,
        paths: Iterable[Path] | None = None,
        filters: list[tuple] | None = None,
        optional: Iterable[str] = (),
        full_check: bool = False,
    ) -> tuple[pd.DataFrame, StoreProblems]:
        """All rows (or the chosen columns and pyarrow ``filters``), duplicates removed, plus any unreadable files.

        A chosen column missing from every file comes back empty, except the
        ``optional`` ones, which are read where present and otherwise left out.
        Each file's columns that are read are verified against its checksums;
        ``full_check`` verifies every column, even those not returned (a
        sweep deciding what is done must not trust a file a later read rejects).
        """
        problems = StoreProblems()
        frames = []
        for path in self.files() if paths is None else paths:
            try:
                wanted = None if columns is None else [*columns, *optional]
                table = unit_file.load(path, wanted, filters, full_check=full_check)
                if table.num_rows:
                    frames.append(unescaped(table))
            except unit_file.Foreign as error:
                problems.foreign.append((path, str(error)))
            except unit_file.READ_ERRORS as error:
                problems.corrupted.append((path, unit_file.reason(error)))
                if isinstance(error, OSError) and error.errno is not None:
                    problems.unreachable.add(path)
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


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]
