"""Rows as Arrow tables and back, text exactly as written: a reply is stored as the model sent it.

Arrow text is UTF-8, which cannot hold a lone surrogate (an API's JSON may send one); a column holding one, in its
text or in the text of its lists and structs, is stored escaped and named in the file's metadata
(:data:`ESCAPED_KEY`), and :func:`unescaped` gives back exactly what was written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa


def arrow_table(rows: list[dict] | pd.DataFrame | pa.Table) -> pa.Table:
    """Rows as an Arrow table, text columns holding lone surrogates escaped (see ``ESCAPED_KEY``).

    A merged frame holds NaN where a unit lacked a value (e.g. a generated answer
    nobody could parse): from_pandas reads that as missing, where from_pylist would take the column for a float one.
    """
    if isinstance(rows, pa.Table):
        return rows
    try:
        return _arrow(rows)
    except UnicodeEncodeError:  # only then are the strings searched: no cost to rows that UTF-8 holds
        pass
    columns = (
        rows.columns if isinstance(rows, pd.DataFrame) else list(dict.fromkeys(name for row in rows for name in row))
    )
    escaped = [name for name in columns if any(map(_holds_surrogates, _values(rows, name)))]
    if isinstance(rows, pd.DataFrame):
        table = _arrow(rows.assign(**{name: rows[name].map(escape_text) for name in escaped}))
    else:
        table = _arrow([{**row, **{name: escape_text(row[name]) for name in escaped if name in row}} for row in rows])
    return table.replace_schema_metadata({**(table.schema.metadata or {}), ESCAPED_KEY: json.dumps(escaped).encode()})


# Schema metadata naming the columns stored escaped: in each of their strings (those inside lists and structs too) a
# backslash is doubled and a lone surrogate written as \udXXXX (lower-case hex), so that UTF-8 holds it. Readers outside
# the store (DuckDB) see the escapes.
ESCAPED_KEY = b"dateeval.escaped"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(\\|u(d[89a-f][0-9a-f]{2}))")


def _arrow(rows: list[dict] | pd.DataFrame) -> pa.Table:
    return (
        pa.Table.from_pandas(rows, preserve_index=False)
        if isinstance(rows, pd.DataFrame)
        else pa.Table.from_pylist(rows)
    )


def _values(rows: list[dict] | pd.DataFrame, name: str) -> Iterable[object]:
    return rows[name] if isinstance(rows, pd.DataFrame) else (row.get(name) for row in rows)


def has_surrogates(value: object) -> bool:
    """Whether ``value`` is text that UTF-8 (so Arrow) cannot hold."""
    return isinstance(value, str) and _SURROGATE.search(value) is not None


def _holds_surrogates(value: object) -> bool:
    """Whether ``value`` is, or holds anywhere in its lists and structs, text that UTF-8 cannot hold."""
    if isinstance(value, dict):
        return any(map(_holds_surrogates, value.keys())) or any(map(_holds_surrogates, value.values()))
    if isinstance(value, np.ndarray):
        return value.dtype == object and any(map(_holds_surrogates, value))
    if isinstance(value, (list, tuple)):
        return any(map(_holds_surrogates, value))
    return has_surrogates(value)


def escape_text(value: object) -> object:
    """Text as an escaped column stores it, in lists and structs too (other values unchanged): reversible, so equal
    exactly where the texts are."""
    if isinstance(value, str):
        return _SURROGATE.sub(lambda found: f"\\u{ord(found[0]):04x}", value.replace("\\", "\\\\"))
    return _mapped(value, escape_text)


def _unescape(value: object) -> object:
    if isinstance(value, str):
        return _ESCAPE.sub(lambda found: "\\" if found[1] == "\\" else chr(int(found[2], 16)), value)
    return _mapped(value, _unescape)


def _mapped(value: object, convert: Callable[[object], object]) -> object:
    """``value`` with ``convert`` applied to every element of its lists and structs (keys too), as the same kind of
    container; a value that is no container unchanged."""
    if isinstance(value, dict):
        return {convert(key): convert(item) for key, item in value.items()}
    if isinstance(value, np.ndarray) and value.dtype == object:  # a list column as pandas reads it
        converted = np.empty(len(value), dtype=object)
        for index, item in enumerate(value):  # one by one: numpy would make equal-length lists a second dimension
            converted[index] = convert(item)
        return converted
    if isinstance(value, (list, tuple)):
        return type(value)(map(convert, value))
    return value


def unescaped(table: pa.Table) -> pd.DataFrame:
    """A file's table as pandas, its escaped columns decoded back into exactly the text that was written (as Python
    objects: pandas' Arrow-backed strings cannot hold a lone surrogate either)."""
    frame = table.to_pandas()
    names = json.loads((table.schema.metadata or {}).get(ESCAPED_KEY, b"[]"))
    for name in (name for name in names if name in frame.columns):
        frame[name] = pd.Series([_unescape(value) for value in frame[name]], index=frame.index, dtype=object)
    return frame
