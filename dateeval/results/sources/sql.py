"""Per-item row reads through DuckDB: one question's rows across dates, a selection's rows for download, the rows
the statistics that compare entries (precision, hardware, repeats) read.

Reads, not statistics: every number is computed by ``unit_sums``, ``item_matrices`` or ``inference``. Only the
columns and rows asked for are read (DuckDB's projection and predicate pushdown, on every core), so a new selection
never loads the store into pandas.

DuckDB does not know the store's checksums. Callers therefore pass only *verified* files: units whose sidecars
exist for their current size and mtime, which the store makes only after verifying every column
(``dateeval.store.tables.unit_sums`` returns them as ``source``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from dateeval.schema import ENTRY_KEY, ROW_KEY


def _connect(
    paths: Sequence[Path], keys: pd.DataFrame, dedup: bool
) -> tuple[duckdb.DuckDBPyConnection, dict[str, str]]:
    """A connection with the files as view ``rows`` (joined to the chosen entries' ``keys``) and its column types.

    With ``dedup`` a row key seen twice keeps its first row in file order, as
    ``Store.read`` does; only needed where one entry x condition spans files.
    """
    con = duckdb.connect()
    files = ", ".join("'" + str(path).replace("'", "''") + "'" for path in sorted(paths))
    source = f"read_parquet([{files}], union_by_name = true, filename = {dedup}, file_row_number = {dedup})"
    con.execute(f"CREATE VIEW files AS SELECT * FROM {source}")
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE files)").fetchall())
    con.register("chosen", keys.astype({column: object for column in ENTRY_KEY}))
    hardware = "f.hardware IS NOT DISTINCT FROM c.hardware" if "hardware" in types else "c.hardware IS NULL"
    first = f"QUALIFY row_number() OVER (PARTITION BY {', '.join(f'f.{k}' for k in ROW_KEY)} ORDER BY filename, file_row_number) = 1"
    con.execute(f"""CREATE VIEW rows AS SELECT f.*, c.* EXCLUDE ({", ".join(ENTRY_KEY)}) FROM files f JOIN chosen c
                    ON f.model_key = c.model_key AND f.dataset = c.dataset AND f.task_key = c.task_key AND {hardware}
                    {first if dedup else ""}""")
    # the view's columns: the files' and the chosen entries' labels (``entry``), which no file holds
    return con, dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE rows)").fetchall())


def _column(types: dict[str, str], name: str, cast: str | None = None) -> str:
    """A column by name, NULL where no file has it; numbers with NaN read as missing (as pandas does)."""
    if name not in types:
        return "NULL"
    value = f"CAST({name} AS {cast})" if cast else name
    return f"CASE WHEN isnan({value}) THEN NULL ELSE {value} END" if cast == "DOUBLE" else value


def _factor(types: dict[str, str]) -> str:
    """``analysis.with_factor``: the stored factor, else the one the date mode implies (files from before it existed)."""
    derived = (
        "CASE date_mode WHEN 'date' THEN 'date' WHEN 'none' THEN 'no-date' WHEN 'default' THEN 'template-default' END"
    )
    return f"coalesce(factor, {derived})" if "factor" in types else derived


def item_rows(
    paths: Sequence[Path], keys: pd.DataFrame, dedup: bool, item_id: str, columns: Sequence[str]
) -> pd.DataFrame:
    """One item's chosen columns (NULL where no file has one) on every condition of the chosen entries, by date.

    The item is a predicate DuckDB pushes into the scan: only its rows are
    decoded, whatever else (option probabilities, outputs) the files hold.
    """
    wanted = list(dict.fromkeys(["date_mode", "date", "condition_key", "task_key", "model_key", "factor", *columns]))
    if not len(paths) or keys.empty:
        return pd.DataFrame(columns=wanted)
    con, types = _connect(paths, keys, dedup)
    selected = ", ".join(f"{_factor(types) if name == 'factor' else _column(types, name)} AS {name}" for name in wanted)
    frame = con.execute(f"SELECT {selected} FROM rows WHERE item_id = ? ORDER BY date, condition_key", [item_id]).df()
    con.close()
    return frame


def rows(
    paths: Sequence[Path],
    keys: pd.DataFrame,
    dedup: bool,
    columns: Sequence[str],
    dates: tuple[dt.date, dt.date] | None = None,
) -> pd.DataFrame:
    """The chosen entries' rows (with their ``entry``): the chosen columns, NULL where no file has one, ``factor`` filled.

    With ``dates``, date conditions outside [start, end] are left out (other
    conditions kept). Text columns come back as categoricals: tens of millions
    of rows cost a few bytes each, and copies of them stay cheap.
    """
    wanted = list(dict.fromkeys([*columns, "entry"]))
    if not len(paths) or keys.empty:
        return pd.DataFrame(columns=wanted)
    con, types = _connect(paths, keys, dedup)
    selected = ", ".join(f"{_factor(types) if name == 'factor' else _column(types, name)} AS {name}" for name in wanted)
    where = (
        "WHERE date IS NULL OR TRY_CAST(date AS DATE) BETWEEN ? AND ?" if dates else ""
    )  # baselines have no date; server-clock rows do
    reader = con.sql(f"SELECT {selected} FROM rows {where}", params=list(dates or ())).to_arrow_reader(1 << 20)
    batches = [_encoded(batch) for batch in reader]
    con.close()
    return pa.Table.from_batches(batches, reader.schema if not batches else None).unify_dictionaries().to_pandas()


def _encoded(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Text columns dictionary-encoded batch by batch, so the whole read never holds every value as text."""
    columns = [
        column.dictionary_encode()
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)
