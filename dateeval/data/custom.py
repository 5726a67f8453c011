"""A user's own benchmark: rows from a JSONL, CSV or Parquet file (or a Hub dataset), mapped to items.

A researcher's file is not a curated release: a row may lack a field, give
an answer no option has, repeat an id, hold a list where text belongs, or the
file may be empty or in another encoding. Every such mistake ends in one line
naming the file, the row and the field (``dataset bench.jsonl, line 4, field
'answer': 7 is out of range ...``), before any model is loaded, instead of a
traceback or a silently wrong score.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from dateeval.data.files import Cells, jsonl_rows, read_parquet, read_text
from dateeval.data.hub import load_hub_rows
from dateeval.data.items import LABELS, MCItem, content_id
from dateeval.errors import DateEvalError

DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".csv", ".parquet")
HUB_PREFIX = "hf:"
ANSWER_FORMATS = ("auto", "index", "letter", "text")

Row = tuple[str, dict]  # where the row is ("line 4", "row 4") and its values


class FieldError(ValueError):
    """What is wrong with one field of one row (the caller adds the file and the row)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field


@dataclass(frozen=True)
class TextItem:
    """One open-ended question and its reference answer (as the grader will compare it)."""

    id: str
    question: str
    reference: str
    subject: str = ""


T = TypeVar("T", MCItem, TextItem)


@dataclass(frozen=True)
class Table:
    """Where rows come from: a local file, or a Hub dataset (``hf:org/name``) with its config and split."""

    location: str
    config: str | None = None
    split: str = "test"

    @property
    def hub(self) -> bool:
        return self.location.startswith(HUB_PREFIX)

    def __str__(self) -> str:
        return f"{self.location} ({self.split})" if self.hub else self.location

    def rows(self) -> list[Row]:
        """Every row, with where it is; an empty table is refused here."""
        rows = self._hub() if self.hub else _read_file(Path(self.location))
        if not rows:
            raise DateEvalError(f"dataset {self} has no rows: it needs at least one question")
        return rows

    def _hub(self) -> list[Row]:
        name = self.location.removeprefix(HUB_PREFIX)
        rows = load_hub_rows(
            name, self.config, self.split, "save it as a JSONL, CSV or Parquet file and give that file instead"
        )
        return [(f"row {number}", row) for number, row in enumerate(rows, 1)]


def is_data_file(path: Path) -> bool:
    return path.name.endswith(DATA_SUFFIXES)


def _read_file(path: Path) -> list[Row]:
    if not path.is_file():
        raise DateEvalError(f"dataset file {path} does not exist")
    if path.suffix == ".parquet":
        return _parquet(path)
    text = read_text(path, "dataset").removeprefix(
        "\ufeff"
    )  # spreadsheets often start CSV/JSONL with a byte-order mark
    if path.suffix == ".csv":
        return _csv(text, path)
    return [(f"line {number}", row) for number, row in jsonl_rows(text.split("\n"), path, "dataset")]


def _csv(text: str, path: Path) -> list[Row]:
    """CSV rows by header; a row with more or fewer values than the header is named, not padded or cut."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows, cells = [], Cells(path, "dataset")
    try:
        for row in reader:
            where = f"line {reader.line_num}"
            cells.add(where, len(row))
            if None in row:
                raise DateEvalError(
                    f"malformed dataset {path}, {where}: {len(reader.fieldnames) + len(row[None])} values for "
                    f"{len(reader.fieldnames)} header columns"
                )
            short = [name for name, value in row.items() if value is None]
            if short:
                raise DateEvalError(
                    f"dataset {path}, {where}, field {short[0]!r}: missing (the row has fewer values than the header has columns)"
                )
            rows.append((where, row))
    except csv.Error as error:
        raise DateEvalError(f"malformed dataset {path}, line {reader.line_num}: {error}") from None
    return rows


def _parquet(path: Path) -> list[Row]:
    """Every row of a Parquet file, read within a data file's bounds (:func:`dateeval.data.files.read_parquet`)."""
    table = read_parquet(path, f"dataset file {path}", "cut it into smaller files")
    return [(f"row {number}", row) for number, row in enumerate(table.to_pylist(), 1)]


@dataclass(frozen=True)
class Fields:
    """Which field holds what. ``None`` means "find it": ``choices`` is a list field ``choices`` or the columns
    A, B, C...; ``id`` and ``subject`` are used where the rows have them. Answers are a 0-based index, a letter,
    or an option's text; ``auto`` takes whichever the value is, unless it reads as two different options."""

    question: str = "question"
    choices: str | tuple[str, ...] | None = None
    answer: str = "answer"
    answer_format: str = "auto"
    id: str | None = None
    subject: str | None = None

    def settle(self, first: dict) -> Fields:
        """The mapping with every "find it" decided from the first row ("" where there is no such field)."""
        choices = self.choices
        if choices is None:
            columns = tuple(label for label in LABELS if label in first)
            choices = columns if "choices" not in first and columns[:2] == ("A", "B") else "choices"
        return replace(
            self, choices=choices, id=_optional(self.id, "id", first), subject=_optional(self.subject, "subject", first)
        )


def _optional(field: str | None, default: str, first: dict) -> str:
    if field is not None:
        return field
    return default if default in first else ""


def _kind(value: object) -> str:
    """How a value's type reads in a message."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _value(row: dict, field: str) -> object:
    if field not in row:
        raise FieldError(field, f"missing (the row has {', '.join(map(repr, row)) or 'no fields'})")
    if row[field] is None:
        raise FieldError(field, "missing (null)")
    return row[field]


def _text(value: object, field: str) -> str:
    """Text for a prompt: a string or a number; anything else (a list, an object, true/false) is a mistake."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FieldError(field, f"expected text, found {_kind(value)}")
    text = str(value)
    if not text.strip():
        raise FieldError(field, "is empty")
    return text


def _options(row: dict, choices: str | tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(choices, tuple):  # one column per option; trailing empty columns: a question with fewer options
        values = [row.get(column) for column in choices]
        while values and (values[-1] is None or str(values[-1]).strip() == ""):
            values.pop()
        options = tuple(_text(_value(row, column), column) for column in choices[: len(values)])
        field = ", ".join(choices)
    else:
        field = choices
        value = _value(row, choices)
        if isinstance(value, str) and value.lstrip().startswith("["):  # a list written as JSON in a CSV cell
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                raise FieldError(choices, f"not a JSON list ({error.msg})") from None
        if not isinstance(value, (list, tuple)):
            raise FieldError(choices, f"expected a list of options, found {_kind(value)}")
        options = tuple(_text(option, f"{choices}[{index}]") for index, option in enumerate(value))
    if not 2 <= len(options) <= len(LABELS):
        raise FieldError(field, f"needs 2 to {len(LABELS)} options, found {len(options)}")
    return options


def _answer(value: object, field: str, answer_format: str, options: tuple[str, ...]) -> int:
    """The option index an answer names: a 0-based index, a letter, or an option's own text.

    ``auto`` accepts any of them, but refuses a value they read differently
    (answer "3" among options "1".."4": index 3 or the option "3"?): a guess
    there would score every such item against the wrong option, silently.
    """
    n = len(options)
    expected = f"the row has {n} options (index 0-{n - 1} or letter A-{LABELS[n - 1]})"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FieldError(field, f"expected an index, a letter or an option's text, found {_kind(value)}")
    if isinstance(value, float) and not value.is_integer():
        raise FieldError(field, f"{value!r} is not a whole number: {expected}")
    text = str(int(value)) if isinstance(value, float) else str(value).strip()
    texts = [option.strip() for option in options]
    readings = {
        "index": int(text) if text.isascii() and text.isdigit() else None,
        "letter": LABELS.index(text.upper()) if len(text) == 1 and text.upper() in LABELS else None,
        "text": texts.index(text) if text in texts else None,
    }
    found = {form: index for form, index in readings.items() if index is not None and answer_format in ("auto", form)}
    if not found:
        wanted = {"index": "a 0-based index", "letter": "a letter", "text": "the text of one of its options"}.get(
            answer_format, "an index, a letter or an option's text"
        )
        raise FieldError(field, f"{value!r} is not {wanted}: {expected}")
    if len(set(found.values())) > 1:
        readings_text = ", ".join(
            f"as {form} " + (f"option {LABELS[index]}" if index < n else "out of range")
            for form, index in found.items()
        )
        raise FieldError(
            field, f"{value!r} is ambiguous ({readings_text}): set answer_format (index, letter or text) in a spec"
        )
    index = next(iter(found.values()))
    if index >= n:
        raise FieldError(field, f"{value!r} is out of range: {expected}")
    return index


def mc_item(fields: Fields, prefix: str) -> Callable[[dict], MCItem]:
    """How one row becomes a multiple-choice item under a settled mapping."""

    def build(row: dict) -> MCItem:
        question = _text(_value(row, fields.question), fields.question)
        options = _options(row, fields.choices)
        answer = _answer(_value(row, fields.answer), fields.answer, fields.answer_format, options)
        subject = _text(_value(row, fields.subject), fields.subject) if fields.subject else ""
        item_id = _text(_value(row, fields.id), fields.id) if fields.id else content_id(prefix, question, options)
        return MCItem(item_id, question, options, answer, subject)

    return build


def text_item(fields: Fields, prefix: str, reference: Callable[[str], str]) -> Callable[[dict], TextItem]:
    """How one row becomes an open-ended item; ``reference`` checks the answer is one the grader can compare (or raises ValueError)."""

    def build(row: dict) -> TextItem:
        question = _text(_value(row, fields.question), fields.question)
        answer = _text(_value(row, fields.answer), fields.answer)
        try:
            checked = reference(answer)
        except ValueError as error:
            raise FieldError(fields.answer, str(error)) from None
        subject = _text(_value(row, fields.subject), fields.subject) if fields.subject else ""
        item_id = _text(_value(row, fields.id), fields.id) if fields.id else content_id(prefix, question, (answer,))
        return TextItem(item_id, question, checked, subject)

    return build


def load(table: Table, fields: Fields, make: Callable[[Fields], Callable[[dict], T]]) -> list[T]:
    """Every row of ``table`` as an item, or one line naming the file, row and field of the first mistake.

    ``make`` builds the row converter from the mapping settled on the first
    row. Ids must be unique: results are keyed by them, and two rows under
    one id would be scored twice and counted once.
    """
    rows = table.rows()
    settled = fields.settle(rows[0][1])
    build = make(settled)
    items: list[T] = []
    first: dict[str, str] = {}
    for where, row in rows:
        try:
            item = build(row)
        except FieldError as error:
            raise DateEvalError(f"dataset {table}, {where}, field {error.field!r}: {error}") from None
        if item.id in first:
            raise DateEvalError(
                f"dataset {table}, {where}, "
                + (
                    f"field {settled.id!r}: duplicate id {item.id!r} (first on {first[item.id]}): every item needs its own id"
                    if settled.id
                    else f"field {settled.question!r}: the same question as on {first[item.id]}: remove one, or give every row an id"
                )
            )
        first[item.id] = where
        items.append(item)
    return items
