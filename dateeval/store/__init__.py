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
reads and verifies one file.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dateeval import atomic, leftovers
from dateeval.errors import DateEvalError
from dateeval.schema import ROW_KEY
from dateeval.store import checksums, unit_file
from dateeval.store.text import arrow_table, unescaped

# A write's staging file: `.{name}.{host}-{pid}-{hex}.tmp` (files from before the host was recorded lack it).
_STAGING = re.compile(r"^\..+?\.parquet\.(?:(?P<host>[^-/]+)-)?(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")


@dataclass
class StoreProblems:
    """Files that could not be read, with the reason, for the caller to report.

    ``unreachable`` are those that failed with an operating-system error
    (permissions, a vanished network mount): maybe transient, so never
    treated as damaged content. ``removed`` are leftovers of killed writes
    that were cleaned up.
    """

    corrupted: list[tuple[Path, str]] = field(default_factory=list)
    foreign: list[tuple[Path, str]] = field(
        default_factory=list
    )  # Parquet files dateeval did not write: named, left alone
    unreachable: set[Path] = field(default_factory=set)
    removed: list[Path] = field(default_factory=list)

    def messages(self) -> list[str]:
        unread = [
            f"store: cannot read {path} ({reason}); left in place, its rows are not included"
            for path, reason in self.corrupted
        ]
        unread += [
            f"store: {path} was not written by dateeval ({reason}); left alone and not read"
            for path, reason in self.foreign
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
        """Changes whenever a file is added or replaced: the cache key for the app's aggregates."""
        return tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in self.files())

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

        ``row_group_size`` rows per row group (Parquet's default where None): see ``COMPACTED_ROW_GROUP``.
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

    @staticmethod
    def set_aside(path: Path) -> Path:
        """Rename a damaged file so that no read sees it any more (it stops ending in .parquet); its bytes stay."""
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{os.getpid()}")
        path.rename(aside)
        return aside

    def set_aside_damaged(self, problems: StoreProblems) -> list[str]:
        """Move the damaged files a read reported out of the way, so that their units run again; one line each (and one
        for each file dateeval did not write, which stays where it is).

        A file that failed with an operating-system error is left alone: the
        error may pass, and its content is not known to be damaged.
        """
        lines = [
            f"store: {path} was not written by dateeval ({reason}); left alone and not read"
            for path, reason in problems.foreign
        ]
        for path, reason in problems.corrupted:
            if path in problems.unreachable:
                lines.append(
                    f"store: cannot read {path} ({reason}); left in place, its rows are computed again beside it"
                )
                continue
            try:
                aside = self.set_aside(path)
            except FileNotFoundError:
                continue  # another worker moved it aside first
            except OSError as error:
                lines.append(
                    f"store: {path} is damaged ({reason}) and cannot be moved aside ({error.strerror}); its rows are computed again beside it"
                )
                continue
            lines.append(
                f"store: {path} is damaged ({reason}); moved aside to {aside.name}, its rows are computed again"
            )
        return lines

    def remove_leftovers(self) -> list[Path]:
        """Remove staging files of writes killed before their rename (never one a live process is writing): in the unit
        folders (``<model>/<dataset>``) and in the folders kept beside them (the sidecars' ``.aggregates/<model>/<dataset>``)."""
        removed = []
        for path in (
            [path for pattern in ("*/*/.*.tmp", "*/*/*/.*.tmp") for path in self.root.glob(pattern)]
            if self.root.is_dir()
            else []
        ):
            match = _STAGING.match(path.name)
            if match and leftovers.abandoned(path, match["host"], int(match["pid"])):
                path.unlink(missing_ok=True)
                removed.append(path)
        return removed

    def compact(self, merged: Callable[[Path, list[Path]], None] | None = None) -> tuple[int, int, StoreProblems]:
        """Merge each model/dataset folder's unit files into one file; returns (folders, files removed, problems).

        Thousands of small files slow every read; one file per folder is
        faster and smaller. Its rows are ordered by question, in row groups
        of ``COMPACTED_ROW_GROUP``, so that reading one question's rows
        touches one or two groups of it. Every input is verified in full (the read checks
        all its columns), the merged file is written (atomically), read back
        and compared with what was merged before any original is removed,
        and duplicates are dropped on read, so a kill at any point loses
        nothing. Unreadable or damaged files are left in place. Each merged
        file and the files it replaced are passed to ``merged`` (the sidecars'
        hook, ``sidecars.merged``, rebuilds theirs there).
        """
        all_problems = StoreProblems(removed=self.remove_leftovers())
        folders = sorted({path.parent for path in self.files()})
        removed = 0
        for folder in folders:
            paths = sorted(folder.glob("*.parquet"))
            frame, problems = self.read(paths=paths)
            all_problems.corrupted += problems.corrupted
            all_problems.foreign += problems.foreign
            all_problems.unreachable |= problems.unreachable
            broken = {path for path, _ in problems.corrupted + problems.foreign}
            readable = [path for path in paths if path not in broken]
            if len(readable) < 2:
                continue
            digest = uuid.uuid5(uuid.NAMESPACE_URL, "|".join(p.name for p in readable)).hex[:16]
            target = folder / f"compacted-{digest}.parquet"
            table = arrow_table(frame.sort_values("item_id", kind="stable", ignore_index=True))
            self.write(target, table, COMPACTED_ROW_GROUP)
            mismatch = unit_file.differs(target, table)
            if mismatch:
                if target not in readable:
                    target.unlink(missing_ok=True)
                all_problems.corrupted.append(
                    (target, f"the merged file did not read back as written ({mismatch}); the originals are kept")
                )
                continue
            replaced = [path for path in readable if path != target]
            for path in replaced:
                path.unlink()
            removed += len(replaced)
            if merged is not None:
                merged(target, replaced)
        return len(folders), removed, all_problems

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


# Rows per row group of a compacted file (Parquet's default is 1 Mi). Its rows are ordered by question, so one
# question's rows (every date of it) lie in one or two groups, and a per-item read (``queries.item_rows``: DuckDB
# with the item pushed down) skips every other group by its item_id statistics: a paper-scale file's question is read
# in about 0.1 s instead of 0.4-0.6 s (a date-major file, every group holding every question), for a file about 10% larger.
COMPACTED_ROW_GROUP = 1 << 16


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]
