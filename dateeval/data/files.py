"""Reading benchmark files, so that every bad file ends in one line naming it.

A data file may be in another encoding, truncated, not JSON, or lack a field
in one row; each loader reads through these helpers, and the message says
which file (and line) to fix instead of a traceback from deep in a parser.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, TypeVar

from dateeval.errors import DateEvalError

T = TypeVar("T")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


Item = TypeVar("Item", bound=_HasId)


def read_text(path: Path, what: str) -> str:
    """The file's UTF-8 text (every benchmark release is UTF-8), decompressed when it ends in ``.gz``."""
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as text mode reads
    except UnicodeDecodeError as error:  # decoded whole, so the offset and line are the file's own
        line = error.object[: error.start].count(b"\n") + 1
        raise DateEvalError(f"{what} file {path} is not UTF-8 text (byte {error.start}) on line {line}: convert it or restore the original") from None
    except (OSError, EOFError, zlib.error) as error:  # gzip: not gzip at all, or cut short
        raise DateEvalError(f"cannot read {what} file {path}: {getattr(error, 'strerror', None) or error}") from None


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
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
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
        raise ValueError(f"text with a lone surrogate escape \\u{ord(error.object[error.start]):04x} (half a UTF-16 pair), which is not a character") from None


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
