"""The keys a spec may set (:data:`KEYS`, one list: the spec reader knows these and no others, and ``run`` has one
``--spec-*`` flag per key), and how each key is read and named in a complaint: as the spec's key, or as its flag."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dateeval.data.custom import ANSWER_FORMATS
from dateeval.errors import DateEvalError
from dateeval.names import FEWSHOT_FORMATS, MULTI_TURN, SINGLE_TURN


@dataclass(frozen=True)
class Key:
    """One key a spec may set (``fields.question``: the key ``question`` of the table ``[fields]``).

    :data:`KEYS` is the one list of them: the spec reader knows these keys
    and no others, and ``run`` has one flag per key (:attr:`flag`), so a
    dataset described by flags is the spec those keys make.
    """

    name: str
    kind: type | tuple[type, ...]
    help: str
    file: bool = False  # a data location (a path, or hf:org/name), relative to the spec

    @property
    def table(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def flag(self) -> str:
        """``--spec-`` and the key, dots and underscores as dashes: ``--spec-fields-question``, ``--spec-grading-tolerance``."""
        return FLAG_PREFIX + self.name.replace(".", "-").replace("_", "-")


FLAG_PREFIX = "--spec-"
TABLES = ("fields", "grading", "fewshot")
KEYS = (
    Key("kind", str, "mcqa (next-token, the default), cot (chain of thought) or generation (open answers)"),
    Key("data", str, "the JSONL, CSV or Parquet file, or hf:org/name (through datasets)", file=True),
    Key("split", str, "the Hub dataset's split (default test)"),
    Key("config", str, "the Hub dataset's configuration"),
    Key("system_prompt", str, "replaces the default system message wording for this dataset"),
    Key("instruction", str, "generation: the text before each question"),
    Key("max_new_tokens", int, "generation: the longest reply (default 256)"),
    Key("fields.question", str, "the field holding the question (default question)"),
    Key(
        "fields.choices",
        (str, list),
        "a list field of options (default choices), or several option columns (default A, B, C...)",
    ),
    Key("fields.answer", str, "the field holding the answer (default answer)"),
    Key("fields.answer_format", str, f"how the answer names an option: {', '.join(ANSWER_FORMATS)} (default auto)"),
    Key("fields.id", str, "the field holding each item's id (default id, if the rows have one)"),
    Key("fields.subject", str, "the field holding each item's subject (default subject, if the rows have one)"),
    Key("grading.method", str, "generation: exact (default), regex, numeric or gsm8k"),
    Key("grading.extract", str, "generation: a regex picking the answer out of the reply (its group 1, last match)"),
    Key(
        "grading.pattern",
        str,
        "generation, method regex: the regex the reply must contain, {answer} the escaped reference",
    ),
    Key(
        "grading.tolerance",
        (int, float),
        "generation, methods numeric and gsm8k: how far the number may be off (default 0)",
    ),
    Key("fewshot.data", str, "a file of exemplars with the same fields (same-subject ones are preferred)", file=True),
    Key("fewshot.split", str, "the Hub split exemplars come from (a Hub dataset only)"),
    Key("fewshot.shots", int, "exemplars per question (default 0; K stores the dataset as NAME_Kshot)"),
    Key(
        "fewshot.format",
        str,
        f"how exemplars reach the model: {' or '.join(FEWSHOT_FORMATS)} (default {SINGLE_TURN}; "
        f"{MULTI_TURN} stores the dataset as NAME_Kshot_multiturn)",
    ),
)


def known(table: str) -> tuple[str, ...]:
    """The keys a table of the spec may hold (the top level: its keys and the tables)."""
    leaves = tuple(key.name.rpartition(".")[2] for key in KEYS if key.table == table)
    return leaves + (TABLES if not table else ())


@dataclass(frozen=True)
class SpecNames:
    """How a spec file's keys are named in messages: ``spec bench.toml, key 'grading.method': ...``."""

    path: Path

    def error(self, key: str, problem: str) -> DateEvalError:
        return DateEvalError(f"spec {self.path}, key {key!r}: {problem}")

    def key(self, key: str) -> str:
        return key

    def setting(self, key: str, value: str) -> str:
        return f"{key} = {json.dumps(value)}"


@dataclass(frozen=True)
class FlagNames:
    """How keys are named when ``run`` flags describe a dataset: by their flag (the data location is ``--dataset``, a
    table by the flags of it that were given)."""

    values: dict

    def error(self, key: str, problem: str) -> DateEvalError:
        return DateEvalError(f"{self.key(key)}: {problem}")

    def key(self, key: str) -> str:
        if key == "data":
            return "--dataset"
        if key in TABLES:
            return ", ".join(
                k.flag for k in KEYS if k.table == key and k.name.rpartition(".")[2] in self.values.get(key, {})
            )
        return next(k.flag for k in KEYS if k.name == key)

    def setting(self, key: str, value: str) -> str:
        return f"{self.key(key)} {value}"


Names = SpecNames | FlagNames


class Keys:
    """Reads one table of a spec, naming the dotted key in every complaint (as the spec's key, or as its flag)."""

    def __init__(self, names: Names, values: dict, prefix: str = "") -> None:
        self.names, self.values, self.prefix = names, values, prefix

    def error(self, key: str, problem: str) -> DateEvalError:
        return self.names.error(self.prefix + key, problem)

    def only(self, known: Sequence[str]) -> None:
        for key in self.values:
            if key not in known:
                raise self.error(str(key), f"unknown (known here: {', '.join(known)})")

    def get(self, key: str, kind: type | tuple[type, ...], default: object = None) -> object:
        value = self.values.get(key, default)
        if key in self.values and (isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind)):
            names = {
                str: "text",
                int: "a whole number",
                float: "a number",
                list: "a list",
                dict: "a table",
                bool: "true/false",
            }
            wanted = " or ".join(names[k] for k in (kind if isinstance(kind, tuple) else (kind,)))
            raise self.error(key, f"expected {wanted}, found {type(value).__name__} {value!r}")
        return value

    def one_of(self, key: str, choices: Sequence[str], default: str) -> str:
        value = self.get(key, str, default)
        if value not in choices:
            raise self.error(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def table(self, key: str) -> Keys:
        return Keys(self.names, self.get(key, dict, {}), f"{self.prefix}{key}.")
