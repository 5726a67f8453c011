"""Content checksums of a stored unit: one per column, over its values, kept in the Parquet file's metadata.

Parquet page checksums (CRC32) catch damage inside a data page, but not in
what surrounds the pages: page headers, the footer (column names, types,
row counts, offsets) and the schema metadata. One flipped bit there can
still decode into different values, with no error. So the writer also
stores a digest of every column's *values* and of the schema metadata, and
every read recomputes the digests of the columns it reads: a projected
read (the explorer reads a few of many columns) checks exactly what it
returns, nothing more.

A digest covers values, never raw Arrow buffers: the bytes under a null
slot, a slice offset or padding may differ between the table written and
the one read back, while the values may not. Nulls enter as their
positions, valid values as their exact bytes (strings as lengths plus
text, lists as lengths plus their flattened values), so a digest does not
depend on chunking or memory layout. The hash is XXH3-128: it guards
against damage, not forgery, and is several times faster than sha256, so that
verifying costs a small part of a read (figures: docs/benchmarks.md, "Checksums
on every read").
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

METADATA_KEY = b"dateeval.checksums"
_VERSION = 1


class Damaged(Exception):
    """A file whose content does not match its stored checksums (or whose checksums are unreadable)."""


def with_checksums(table: pa.Table) -> pa.Table:
    """The table with the digests of its columns and schema metadata added to its schema metadata."""
    metadata = dict(table.schema.metadata or {})
    record = {
        "version": _VERSION,
        "rows": table.num_rows,
        "metadata": _metadata_digest(metadata),
        "columns": column_digests(table),
    }
    return table.replace_schema_metadata({**metadata, METADATA_KEY: json.dumps(record, sort_keys=True).encode()})


def stored(metadata: dict[bytes, bytes] | None) -> dict | None:
    """The checksums a file's schema metadata holds; None for a file written before checksums existed."""
    if not metadata or METADATA_KEY not in metadata:
        return None
    try:
        record = json.loads(metadata[METADATA_KEY])
        intact = (
            record["version"] == _VERSION and isinstance(record["columns"], dict) and isinstance(record["rows"], int)
        )
        matches = record["metadata"] == _metadata_digest(metadata)
    except (ValueError, KeyError, TypeError):
        raise Damaged("its checksum record is unreadable") from None
    if not intact:
        raise Damaged("its checksum record is unreadable")
    if not matches:
        raise Damaged("its schema metadata does not match its checksum")
    return record


def check_columns(record: dict, names: list[str]) -> None:
    """The file's columns must be exactly the ones that were written (a damaged footer can rename one)."""
    if sorted(record["columns"]) != sorted(names):
        raise Damaged("its column names do not match its checksums")


def verify(table: pa.Table, record: dict) -> None:
    """Raise :class:`Damaged` unless every column of ``table`` (all rows) has the digest it was written with."""
    if table.num_rows != record["rows"]:
        raise Damaged(f"it holds {table.num_rows} rows where {record['rows']} were written")
    for name, digest in column_digests(table).items():
        if digest != record["columns"].get(name):
            raise Damaged(f"column {name!r} does not match its checksum")


def column_digests(table: pa.Table) -> dict[str, str]:
    return {name: column_digest(name, table.column(name)) for name in table.column_names}


def column_digest(name: str, column: pa.ChunkedArray) -> str:
    """Digest of one column's name, type and values (independent of how its values are chunked)."""
    digest = xxhash.xxh3_128(f"{name}\0{_type_tag(column.type)}\0".encode())
    _feed(column.chunk(0) if column.num_chunks == 1 else column.combine_chunks(), digest)
    return digest.hexdigest()


def _type_tag(kind: pa.DataType) -> str:
    """The type without what a round trip may rename (a list's child is ``item`` written, ``element`` read)."""
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"{'large_' if pa.types.is_large_list(kind) else ''}list<{_type_tag(kind.value_type)}>"
    if pa.types.is_fixed_size_list(kind):
        return f"fixed_size_list<{_type_tag(kind.value_type)}>[{kind.list_size}]"
    if pa.types.is_struct(kind):
        return "struct<" + ", ".join(f"{field.name}: {_type_tag(field.type)}" for field in kind) + ">"
    if pa.types.is_dictionary(kind):
        return _type_tag(kind.value_type)
    return str(kind)


def _metadata_digest(metadata: dict[bytes, bytes]) -> str:
    """Digest of the schema metadata other than the checksums (pandas' record, which shapes ``to_pandas``)."""
    digest = xxhash.xxh3_128()
    for key in sorted(key for key in metadata if key != METADATA_KEY):
        digest.update(struct.pack("<qq", len(key), len(metadata[key])) + key + metadata[key])
    return digest.hexdigest()


def _feed(array: pa.Array, digest: xxhash.xxh3_128) -> None:
    """Add an array's values to ``digest``: length, null positions, then the valid values' exact bytes."""
    digest.update(struct.pack("<qq", len(array), array.null_count))
    if array.null_count:
        digest.update(_exact(pc.indices_nonzero(array.is_null())))
        array = array.drop_null()
    kind = array.type
    if pa.types.is_null(kind):
        return
    if pa.types.is_dictionary(kind):
        _feed(array.dictionary_decode(), digest)
    elif pa.types.is_boolean(kind):
        digest.update(_exact(array.cast(pa.uint8())))
    elif (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_temporal(kind)
        or pa.types.is_decimal(kind)
    ):
        digest.update(_exact(array))
    elif (
        pa.types.is_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_large_binary(kind)
    ):
        _feed_binary(array, digest)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        digest.update(_exact(pc.list_value_length(array)))
        _feed(array.flatten(), digest)
    elif pa.types.is_struct(kind):
        for child in array.flatten():
            _feed(child, digest)
    else:  # rarer types (maps, unions, views): their Python values, slow but exact
        digest.update(repr(array.to_pylist()).encode())


def _exact(array: pa.Array) -> memoryview | bytes:
    """The value bytes of a fixed-width array without nulls, exactly its slice of the buffer."""
    width = array.type.bit_width // 8
    data = array.buffers()[1]
    if not len(array) or data is None:
        return b""
    return memoryview(data)[array.offset * width : (array.offset + len(array)) * width]


def _feed_binary(array: pa.Array, digest: xxhash.xxh3_128) -> None:
    """Strings and bytes (no nulls): each value's length, then the text they span."""
    if not len(array):
        return
    digest.update(_exact(pc.binary_length(array)))
    offset_type = np.int64 if pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type) else np.int32
    offsets = np.frombuffer(
        array.buffers()[1],
        dtype=offset_type,
        count=len(array) + 1,
        offset=array.offset * np.dtype(offset_type).itemsize,
    )
    data = array.buffers()[2]
    if data is not None:
        digest.update(memoryview(data)[int(offsets[0]) : int(offsets[-1])])
