"""What parsing a file may build: the bounds every parser of a spec or data file checks before it builds the document.

A few KB can describe gigabytes: a YAML "billion laughs" (anchors of anchors),
a run-length encoded Parquet column, a gzip of blank lines, a sparse file. A
file's size on disk says nothing about what parsing it builds, so each parser
counts what it is about to build (nodes, rows, cells, decompressed bytes)
against these bounds and stops with one line past them, in bounded memory
and seconds. Every bound is far above any real benchmark (MMLU's largest file
is 1.9 MB, 1,534 rows of 6 fields), and is named in its message.
"""

from __future__ import annotations

MAX_TEXT_BYTES = 64 * 2**20  # a data file's bytes after decompression; the largest real benchmark file is 1.9 MB
MAX_SPEC_BYTES = 2**20  # a spec is a few dozen keys
MAX_ROWS = 250_000  # rows of one data file, lines of a text file (MMLU's test split is 14,042 rows in all)
MAX_CELLS = 2_000_000  # rows × fields of one data file: each cell is a Python object of ~100 bytes once built
MAX_ROW_CHARS = 4 * 2**20  # one JSONL line or CSV line: a long-context question is a few hundred KB
MAX_FIELDS = 1_000  # columns of one data file
YAML_MAX_NODES = 10_000  # a spec's YAML nodes, every alias counted as the nodes it expands to
YAML_MAX_DEPTH = 32  # nesting of a spec's YAML (a spec is three levels deep)
REGEX_SECONDS = 1.0  # CPU seconds of one grading regex of a spec on one reply; a sane pattern takes microseconds


def mib(size: int) -> str:
    """A byte bound as a message names it."""
    return f"{size / 2**20:g} MiB"
