"""Reading benchmark files, so that every bad file ends in one line naming it.

A data file may be in another encoding, truncated, not JSON, or lack a field
in one row; each loader reads through these helpers, and the message says
which file (and line) to fix instead of a traceback from deep in a parser.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, TypeVar

from dateeval.errors import DateEvalError
from dateeval.data.limits import (
    MAX_CELLS,
    MAX_FIELDS,
    MAX_ROW_CHARS,
    MAX_ROWS,
    MAX_TEXT_BYTES,
    YAML_MAX_CHARS,
    YAML_MAX_DEPTH,
    YAML_MAX_NODES,
    mib,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

T = TypeVar("T")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


Item = TypeVar("Item", bound=_HasId)


def read_text(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The file's UTF-8 text (every benchmark release is UTF-8), decompressed when it ends in ``.gz``; past ``limit``
    bytes (decompressed), one line, having read no more than that (a gzip of blank lines or a sparse file is a bomb)."""
    try:
        data = read_bytes(path, what, limit)
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as text mode reads
    except UnicodeDecodeError as error:  # decoded whole, so the offset and line are the file's own
        line = error.object[: error.start].count(b"\n") + 1
        raise DateEvalError(
            f"{what} file {path} is not UTF-8 text (byte {error.start}) on line {line}: convert it or restore the original"
        ) from None
    except (OSError, EOFError, zlib.error) as error:  # gzip: not gzip at all, or cut short
        raise DateEvalError(f"cannot read {what} file {path}: {getattr(error, 'strerror', None) or error}") from None


def read_bytes(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> bytes:
    """At most ``limit`` bytes of the file, decompressed as they are read: its size is checked first, and a gzip is
    streamed, so neither a sparse file nor a small gzip that decompresses to gigabytes is ever held whole."""
    compressed = path.suffix == ".gz"
    with open(path, "rb") as handle:
        if not compressed and os.fstat(handle.fileno()).st_size > limit:
            raise DateEvalError(
                f"{what} file {path} is over the {mib(limit)} a file may hold: cut it into smaller files"
            )
        data = (gzip.GzipFile(fileobj=handle) if compressed else handle).read(limit + 1)
    if len(data) > limit:
        raise DateEvalError(
            f"{what} file {path} is over the {mib(limit)} a file may hold"
            + (" decompressed" if compressed else "")
            + ": cut it into smaller files"
        )
    if data.count(b"\n") >= MAX_ROWS:  # counted in C before any line is split off: a file of blank lines is a bomb too
        raise DateEvalError(
            f"{what} file {path} has over the {MAX_ROWS:,} lines a file may hold: cut it into smaller files"
        )
    return data


def read_lines(path: Path, what: str) -> list[str]:
    """The file's lines, split at line feeds only (``splitlines`` would also split a JSON string at a form feed or
    U+2028, and make a line of each)."""
    return read_text(path, what).split("\n")


class Cells:
    """Counts the cells (rows × fields) a data file builds, so that a file of many short rows or one wide row ends in
    one line naming the bound instead of gigabytes of Python objects (each cell is ~100 bytes once built)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what, self.count = path, what, 0

    def add(self, where: str, fields: int, cells: int | None = None) -> None:
        """Count a row of ``fields`` fields, ``where`` in the file, as ``cells`` cells (by default one a field)."""
        if fields > MAX_FIELDS:
            raise DateEvalError(
                f"{self.what} file {self.path}, {where}: {fields:,} fields, over the {MAX_FIELDS:,} a row may have"
            )
        self.count += fields if cells is None else cells
        if self.count > MAX_CELLS:
            raise DateEvalError(
                f"{self.what} file {self.path}, {where}: over the {MAX_CELLS:,} cells (rows × fields) a file may hold: "
                "cut it into smaller files"
            )


def check_table(table: pa.Table, what: str, remedy: str) -> None:
    """Refuse an Arrow table past the bounds of a data file (rows, fields, cells, decoded bytes) before any of its
    values becomes a Python object (a cell is ~100 bytes once built); ``what`` names it, ``remedy`` says what to do.
    Measured on Arrow's own buffers: a memory-mapped table is not read to be measured."""
    if table.num_rows > MAX_ROWS:
        raise DateEvalError(f"{what} has {table.num_rows:,} rows, over the {MAX_ROWS:,} a file may hold: {remedy}")
    if table.num_columns > MAX_FIELDS:
        raise DateEvalError(
            f"{what} has {table.num_columns:,} fields, over the {MAX_FIELDS:,} a row may have: {remedy}"
        )
    chunks = [chunk for column in table.columns for chunk in column.chunks]
    if sum(map(_values, chunks)) > MAX_CELLS:
        raise DateEvalError(
            f"{what} holds over the {MAX_CELLS:,} cells (rows × fields, a list's elements each counted) a file may hold: {remedy}"
        )
    if sum(map(_decoded_bytes, chunks)) > MAX_TEXT_BYTES:
        raise DateEvalError(f"{what} is over the {mib(MAX_TEXT_BYTES)} a file may hold decoded: {remedy}")


def read_parquet(source: str | os.PathLike[str] | BinaryIO, what: str, remedy: str) -> pa.Table:
    """A Parquet file's table, its size checked before its values are decoded: run-length and dictionary encoding let
    a few KB stand for gigabytes, so rows, cells and decompressed bytes come from the footer, and the text columns are
    read as dictionaries (each distinct value once) and measured (:func:`check_table`) before any value is decoded.
    ``what`` names the file in an error, ``remedy`` says what to do."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(source) as file:
            texts = _check_parquet_footer(file.metadata, file.schema, what, remedy)
            if hasattr(source, "seek"):
                source.seek(0)
        with pq.ParquetFile(source, read_dictionary=texts) as file:
            table = file.read()
    except (OSError, pa.ArrowException) as error:
        raise DateEvalError(
            f"cannot read {what}: not a readable Parquet file ({str(error).splitlines()[0][:200]})"
        ) from None
    check_table(table, what, remedy)
    return table


def _check_parquet_footer(metadata: pq.FileMetaData, schema: pq.ParquetSchema, what: str, remedy: str) -> list[str]:
    """The text (byte array) columns' paths, once the footer's rows, cells (every value of every column, a list's
    elements each counted) and decompressed bytes are within the bounds."""
    if metadata.num_rows > MAX_ROWS:
        raise DateEvalError(f"{what} has {metadata.num_rows:,} rows, over the {MAX_ROWS:,} a file may hold: {remedy}")
    chunks = [
        metadata.row_group(group).column(column)
        for group in range(metadata.num_row_groups)
        for column in range(metadata.num_columns)
    ]
    if metadata.num_columns > MAX_FIELDS:
        raise DateEvalError(
            f"{what}, its footer: {metadata.num_columns:,} fields, over the {MAX_FIELDS:,} a row may have: {remedy}"
        )
    if sum(chunk.num_values for chunk in chunks) > MAX_CELLS:
        raise DateEvalError(
            f"{what}, its footer: over the {MAX_CELLS:,} cells (rows × fields) a file may hold: {remedy}"
        )
    if sum(chunk.total_uncompressed_size for chunk in chunks) > MAX_TEXT_BYTES:
        raise DateEvalError(f"{what} is over the {mib(MAX_TEXT_BYTES)} a file may hold decompressed: {remedy}")
    return [
        schema.column(index).path
        for index in range(metadata.num_columns)
        if schema.column(index).physical_type == "BYTE_ARRAY"
    ]


def _values(array: pa.Array) -> int:
    """The values an Arrow array holds, a list's elements and a struct's fields each counted (as a Parquet footer
    counts them)."""
    import pyarrow as pa

    if isinstance(array, (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray)):
        return _values(array.flatten())
    if isinstance(array, pa.StructArray):
        return sum(_values(array.field(index)) for index in range(array.type.num_fields))
    return len(array)


def _decoded_bytes(array: pa.Array) -> int:
    """The bytes an Arrow array takes once decoded: a dictionary's values counted once per row that uses them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(array.type):
        dictionary = array.dictionary
        if not (pa.types.is_string(dictionary.type) or pa.types.is_binary(dictionary.type)):
            return array.indices.nbytes + dictionary.nbytes
        return array.indices.nbytes + (pc.sum(pc.take(pc.binary_length(dictionary), array.indices)).as_py() or 0)
    if isinstance(array, (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray)):
        return _decoded_bytes(array.flatten())
    if isinstance(array, pa.StructArray):
        return sum(_decoded_bytes(array.field(index)) for index in range(array.type.num_fields))
    return array.nbytes


class _YAMLBound(Exception):
    """A YAML document past a bound of :mod:`dateeval.data.limits` (the caller names the file)."""


@functools.cache
def _bounded_loader(base: type | None = None) -> type:
    """``base`` (PyYAML's safe loader where None), refusing nesting deeper than ``YAML_MAX_DEPTH`` as it composes
    (PyYAML imported when first needed)."""
    import yaml

    class BoundedLoader(base or yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent: yaml.Node | None, index: int | yaml.Node | None) -> yaml.Node:
            self.depth += 1
            try:
                if self.depth > YAML_MAX_DEPTH:
                    raise _YAMLBound(
                        f"is nested over {YAML_MAX_DEPTH} levels deep (line {self.peek_event().start_mark.line + 1}), the most it may be"
                    )
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def load_yaml(text: str | bytes, path: Path, what: str, base: type | None = None) -> object:
    """A YAML document, read by ``base`` (a ``yaml.SafeLoader`` with tags of its own; the safe loader where None), its
    size checked between composing and constructing: anchors let a few KB name a billion values (the "billion
    laughs"), so every alias is counted as the values and text it stands for, and past ``YAML_MAX_NODES`` or
    ``YAML_MAX_CHARS`` nothing is built. PyYAML's own errors (``yaml.YAMLError``) are the caller's to word."""
    loader = _bounded_loader(base)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    except _YAMLBound as error:
        raise DateEvalError(f"{what} {path}: its YAML {error}") from None
    finally:
        loader.dispose()


def _expanded_size(root: yaml.Node) -> tuple[int, int]:
    """The values and characters ``root`` expands to, an alias counted as what it stands for, in as many steps as
    there are distinct nodes (each is sized once, from its children's sizes); past ``YAML_MAX_NODES`` or
    ``YAML_MAX_CHARS``, or a cycle, refused."""
    sizes: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_sized = stack.pop()
        children = (
            [item for pair in node.value for item in pair]
            if node.id == "mapping"
            else node.value
            if node.id == "sequence"
            else []
        )
        if children_sized:
            open_nodes.discard(id(node))
            values = 1 + sum(sizes[id(child)][0] for child in children)
            chars = len(node.value) if node.id == "scalar" else sum(sizes[id(child)][1] for child in children)
            sizes[id(node)] = values, chars
            where = f"line {node.start_mark.line + 1}; an alias counts as what it stands for"
            if values > YAML_MAX_NODES:
                raise _YAMLBound(f"expands to over {YAML_MAX_NODES:,} values, the most it may hold ({where})")
            if chars > YAML_MAX_CHARS:
                raise _YAMLBound(
                    f"expands to over {YAML_MAX_CHARS:,} characters of text, the most it may hold ({where})"
                )
        elif id(node) in open_nodes:
            raise _YAMLBound(
                f"has an alias inside its own anchor (line {node.start_mark.line + 1}), which would hold itself"
            )
        elif id(node) not in sizes:
            open_nodes.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def parse_jsonl(lines: Iterable[str], path: Path, what: str, build: Callable[[dict], T]) -> list[T]:
    """One item per non-empty JSON line, built by ``build``; a line that is not JSON or lacks a field is named by its number."""
    items = []
    for number, row in jsonl_rows(lines, path, what):
        try:
            items.append(build(row))
        except KeyError as error:
            raise DateEvalError(f"malformed {what} file {path}, line {number}: no field {error}") from None
        except (AttributeError, TypeError, ValueError) as error:  # a field of the wrong type, a value out of place
            raise DateEvalError(f"malformed {what} file {path}, line {number}: {error}") from None
    return items


def jsonl_rows(lines: Iterable[str], path: Path, what: str) -> list[tuple[int, dict]]:
    """(line number, object) of every non-empty JSON line; a line that is not one JSON object is named by its number."""
    rows, cells = [], Cells(path, what)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if len(line) > MAX_ROW_CHARS:
            raise DateEvalError(
                f"{what} file {path}, line {number}: {len(line):,} characters, over the {MAX_ROW_CHARS:,} a line may have"
            )
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise TypeError(f"expected a JSON object, found {type(row).__name__}")
            _refuse_lone_surrogates(line, row)
        except json.JSONDecodeError as error:
            raise DateEvalError(f"malformed {what} file {path}, line {number}: not JSON ({error.msg})") from None
        except RecursionError:
            raise DateEvalError(f"malformed {what} file {path}, line {number}: JSON nested too deeply") from None
        except (TypeError, ValueError) as error:
            raise DateEvalError(f"malformed {what} file {path}, line {number}: {error}") from None
        cells.add(f"line {number}", len(row))
        rows.append((number, row))
    return rows


def _refuse_lone_surrogates(line: str, row: dict) -> None:
    """Refuse a JSON escape of half a UTF-16 pair (``"\\ud800"``): no UTF-8 text holds it, so the prompt could not be hashed or sent.

    Only an escape can produce one (the file itself was decoded as UTF-8),
    so lines without ``\\ud`` are not looked at again.
    """
    if "\\ud" not in line.lower():
        return
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"text with a lone surrogate escape \\u{ord(error.object[error.start]):04x} (half a UTF-16 pair), which is not a character"
        ) from None


def unique_ids(items: list[Item], where: str | Path) -> list[Item]:
    """``items`` unchanged, once every id is known to occur once.

    Results are keyed by item id: two items sharing one would both be
    scored and stored, then count as one in every table.
    """
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise DateEvalError(f"duplicate item id {item.id!r} in {where}: every item needs its own id")
        seen.add(item.id)
    return items
