"""Reading one unit's file, verified: its checksums, then what its columns may hold; a file dateeval did not write
is :class:`Foreign` (never read, moved or merged), a damaged one raises one of :data:`READ_ERRORS`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dateeval.store import checksums

# Columns every unit dateeval ever wrote has: a file with neither these nor dateeval's checksums is someone else's.
IDENTITY = ["model_key", "condition_key", "item_id"]


class Foreign(Exception):
    """A Parquet file in the store that dateeval did not write (a user's own, another tool's): never read, moved or merged."""


# What reading a damaged file can raise: the reader's own errors, a failed page checksum (OSError), a
# mismatched content checksum, undecodable pandas metadata (ValueError).
READ_ERRORS = (OSError, pa.ArrowException, ValueError, checksums.Damaged)


def load(path: Path, columns: list[str] | None, filters: list[tuple] | None, full_check: bool) -> pa.Table:
    """One file's chosen columns (those it has) and rows, verified; raises one of ``READ_ERRORS`` when damaged.

    Rows are filtered after verification, in memory: a digest covers a whole
    column, and the footer statistics that would let the reader skip row
    groups are themselves unprotected.
    """
    with pq.ParquetFile(path, page_checksum_verification=True) as file:
        names = file.schema_arrow.names
        record = checksums.stored(file.schema_arrow.metadata)
        if record is None and not set(IDENTITY) <= set(names):
            raise Foreign(f"no checksums and no {', '.join(sorted(set(IDENTITY) - set(names)))} column")
        if record is not None:
            checksums.check_columns(record, names)
        # Files written before a column existed (e.g. `factor`) still read; the column comes back empty.
        wanted = names if columns is None else [name for name in dict.fromkeys(columns) if name in names]
        needed = names if full_check else [name for name in names if name in {*wanted, *_filter_columns(filters)}]
        table = file.read(columns=needed)
    if record is not None:
        checksums.verify(table, record)
    _check_values(table)
    if filters:
        table = table.filter(pq.filters_to_expression(filters))
    return table.select(wanted)


class OutOfRange(ValueError):
    """A column holding what it cannot hold (a grade of 2, a probability of 1.5, grades as text): the file is not read,
    checksums or not (a unit written without them, or rewritten with new ones, is caught here)."""


_SHARES = ("correct", "confidence", "probs")  # per-item shares in [0, 1] (grades 0/1), NaN or null where absent
_ROUNDING = 1e-9  # a share computed in floating point may pass 1 by a rounding step
_TEXT_KEYS = (*IDENTITY, "dataset", "task_key")


def _check_values(table: pa.Table) -> None:
    """Raise :class:`OutOfRange` where a column read holds values outside what dateeval writes there."""
    for name in set(_TEXT_KEYS) & set(table.column_names):
        kind = table.schema.field(name).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise OutOfRange(f"column {name} holds {kind}, not text")
    for name in _SHARES:
        if name not in table.column_names:
            continue
        column = table[name]
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
            column = pc.list_flatten(column)
        kind = column.type
        if not (
            pa.types.is_boolean(kind)
            or pa.types.is_integer(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_null(kind)
        ):
            raise OutOfRange(f"column {name} holds {kind}, not numbers")
        if pa.types.is_boolean(kind) or pa.types.is_null(kind) or len(column) == 0:
            continue
        values = column.to_numpy(zero_copy_only=False).astype(float)
        values = values[~np.isnan(values)]
        bad = values[
            (values < -_ROUNDING)
            | (values > 1 + _ROUNDING)
            | ((values != 0) & (values != 1) if name == "correct" else False)
        ]
        if bad.size:
            raise OutOfRange(f"column {name} holds {bad[0]:g}, outside {'0/1' if name == 'correct' else '[0, 1]'}")


def _filter_columns(filters: list[tuple] | list[list[tuple]] | None) -> list[str]:
    """The columns pyarrow ``filters`` (one conjunction, or a disjunction of them) refer to."""
    if not filters:
        return []
    groups = filters if isinstance(filters[0], list) else [filters]
    return [term[0] for group in groups for term in group]


def differs(path: Path, table: pa.Table) -> str | None:
    """Why the file at ``path`` does not hold exactly ``table``'s values, or None when it does."""
    try:
        written = load(path, None, None, full_check=True)
    except READ_ERRORS as error:
        return reason(error)
    if checksums.column_digests(written) != checksums.column_digests(table):
        return "its values differ from the merged rows"
    return None


def reason(error: Exception) -> str:
    text = str(error)
    return text.splitlines()[0][:160] if text else type(error).__name__
