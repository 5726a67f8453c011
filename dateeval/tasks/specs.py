"""A spec (TOML or YAML) or ``--spec-*`` flags read into a :class:`Spec`: the task kind, where the rows are, how
fields map, how a generated answer is graded, few-shot exemplars and the prompt's wording. Every key is checked, and
every mistake ends in one line naming the spec (or the flag) and the key. ``custom`` builds the tasks a spec describes.
"""

from __future__ import annotations

import json
import math
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import regex

from dateeval.data.custom import (
    ANSWER_FORMATS,
    DATA_SUFFIXES,
    Fields,
    Table,
    TextItem,
    is_data_file,
    load,
    mc_item,
    text_item,
)
from dateeval.data.files import load_yaml, read_text
from dateeval.data.items import MCItem
from dateeval.errors import DateEvalError
from dateeval.data.limits import MAX_SPEC_BYTES
from dateeval.names import FEWSHOT_FORMATS, MULTI_TURN, SINGLE_TURN, SUFFIXES, DatasetName, ends_like_variant
from dateeval.tasks.grading import GRADERS, Grading
from dateeval.tasks.registry import GENERATION

SPEC_SUFFIXES = (".toml", ".yaml", ".yml")
KINDS = ("mcqa", "cot", "generation")


# ---------------------------------------------------------------- the spec


@dataclass(frozen=True)
class Spec:
    """A custom dataset: where its rows are, how fields map, what kind of task, how it is graded and prompted."""

    name: str
    table: Table
    kind: str = "mcqa"
    fields: Fields = field(default_factory=Fields)
    grading: Grading = field(default_factory=Grading)
    exemplars: Table | None = None
    shots: int = 0
    multiturn: bool = False  # fewshot.format: the exemplars as conversation turns
    system_prompt: str | None = None
    instruction: str | None = None
    max_new_tokens: int | None = None

    @property
    def dataset(self) -> str:
        """The name results are stored under: the stem, plus the variant its kind, shots and few-shot format make."""
        return str(
            DatasetName(
                self.name, self.kind == "cot", self.shots, MULTI_TURN if self.multiturn and self.shots else None
            )
        )

    def settings(self) -> dict:
        """Everything that changes results except the rows themselves (and where the files are, which does not)."""
        return {
            "kind": self.kind,
            "fields": asdict(self.fields),
            "grading": asdict(self.grading) if self.kind == GENERATION else None,
            "system_prompt": self.system_prompt,
            "instruction": self.instruction,
            "max_new_tokens": self.max_new_tokens,
        }

    def load(self, table: Table, prefix: str) -> list[MCItem] | list[TextItem]:
        if self.kind == GENERATION:
            return load(
                table, self.fields, lambda fields: text_item(fields, prefix, GRADERS[self.grading.method].reference)
            )
        return load(table, self.fields, lambda fields: mc_item(fields, prefix))


def stem_name(path: Path) -> str:
    """A file's stem as a dataset name: lower case, ``_`` for anything else."""
    suffix = next((s for s in (*SPEC_SUFFIXES, *DATA_SUFFIXES) if path.name.endswith(s)), path.suffix)
    return re.sub(r"[^a-z0-9]+", "_", path.name.removesuffix(suffix).lower()).strip("_")


def dataset_name(path: Path) -> str:
    """The name a file's dataset is stored under; a stem that makes no name, or reads as a variant suffix, is refused."""
    name = stem_name(path)
    if not name or ends_like_variant(name):
        problem = "gives no name" if not name else f"ends like a variant ({SUFFIXES})"
        raise DateEvalError(f"{path}: a dataset is named after its file, and its name {problem}: rename the file")
    return name


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


def _known(table: str) -> tuple[str, ...]:
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


class _Keys:
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

    def table(self, key: str) -> _Keys:
        return _Keys(self.names, self.get(key, dict, {}), f"{self.prefix}{key}.")


def _parse(path: Path) -> dict:
    """The spec file's top-level table (TOML, or YAML through PyYAML, which datasets and transformers already require)."""
    text = read_text(path, "spec", MAX_SPEC_BYTES)
    if path.suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise DateEvalError(f"spec {path} is not valid TOML: {error}") from None
        except RecursionError:  # arrays in arrays: tomllib recurses once a level
            raise DateEvalError(f"spec {path} is not valid TOML: nested too deeply") from None
    import yaml

    try:
        values = load_yaml(text, path, "spec")
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise DateEvalError(
            f"spec {path} is not valid YAML"
            + (f" (line {mark.line + 1})" if mark else "")
            + f": {getattr(error, 'problem', None) or error}"
        ) from None
    if not isinstance(values, dict):
        raise DateEvalError(
            f"spec {path}: expected a mapping of keys (kind, data, fields...), found {type(values).__name__}"
        )
    return values


def _regex_key(keys: _Keys, key: str, default: str | None, probe: str = "") -> str | None:
    value = keys.get(key, str, default)
    if value is not None:
        try:
            regex.compile(value.replace("{answer}", probe))
        except regex.error as error:
            raise keys.error(key, f"not a regular expression ({error})") from None
    return value


def _table(keys: _Keys, location: str, base: Path, confined: bool) -> Table:
    """A data location: a file relative to ``base`` (the spec's folder), or ``hf:org/name`` with ``split`` and ``config``.

    A ``confined`` spec (uploaded on the Run page) may name only files beside
    it: checked before the path is looked at, so a spec cannot read, nor probe
    for, a file elsewhere on the machine that serves the app.
    """
    if location.startswith("hf:"):
        return Table(location, keys.get("config", str), keys.get("split", str, "test"))
    if "split" in keys.values or "config" in keys.values:
        raise keys.error(
            "split" if "split" in keys.values else "config",
            f"applies to Hub datasets ({keys.names.setting('data', 'hf:org/name')}) only",
        )
    if confined and (Path(location).name != location or location.startswith(".")):
        raise keys.error(
            "data",
            f"{location!r} is not a file uploaded beside the spec: an uploaded spec names files uploaded with it (or hf:org/name)",
        )
    path = base / location
    if not is_data_file(path):
        raise keys.error("data", f"{location!r} is not a {', '.join(DATA_SUFFIXES)} file nor hf:org/name")
    if not path.is_file():
        raise keys.error("data", f"no file {path}")
    return Table(str(path))


def _fields(keys: _Keys) -> Fields:
    keys.only(_known("fields"))
    choices = keys.get("choices", (str, list))
    if isinstance(choices, list):
        if len(choices) < 2 or not all(isinstance(column, str) for column in choices):
            raise keys.error("choices", "a list of option columns needs at least two column names")
        choices = tuple(choices)
    return Fields(
        keys.get("question", str, "question"),
        choices,
        keys.get("answer", str, "answer"),
        keys.one_of("answer_format", ANSWER_FORMATS, "auto"),
        keys.get("id", str),
        keys.get("subject", str),
    )


def _grading(keys: _Keys) -> Grading:
    keys.only(_known("grading"))
    tolerance = keys.get("tolerance", (int, float), 0.0)
    if not math.isfinite(tolerance):  # TOML's nan and inf, YAML's .nan and .inf: grading would fail after generation
        raise keys.error("tolerance", f"must be a finite number, not {tolerance}")
    if tolerance < 0:
        raise keys.error("tolerance", f"must be 0 or more, not {tolerance}")
    return Grading(
        keys.one_of("method", tuple(GRADERS), "exact"),
        _regex_key(keys, "extract", None),
        _regex_key(keys, "pattern", Grading.pattern, "x"),
        float(tolerance),
    )


def read_spec(path: Path, confined: bool = False) -> Spec:
    """A spec file, every key checked before any data is read (``confined``: its files must lie beside it)."""
    return spec_from(_parse(path), SpecNames(path), dataset_name(path), path.parent, confined)


def spec_from(values: dict, names: Names, name: str, base: Path, confined: bool = False) -> Spec:
    """A spec from its keys' values (a spec file's, or ``run`` flags'), every key checked before any data is read.

    ``names`` says how a mistake names the key (the spec's key, or the flag),
    ``base`` is the folder that relative files are in.
    """
    keys = _Keys(names, values)
    keys.only(_known(""))
    kind = keys.one_of("kind", KINDS, "mcqa")
    for key in ("grading", "instruction", "max_new_tokens"):
        if key in keys.values and kind != GENERATION:
            raise keys.error(
                key,
                f"applies to {names.setting('kind', GENERATION)} only, and this spec has {names.setting('kind', kind)}",
            )
    location = keys.get("data", str)
    if location is None:
        raise keys.error("data", "missing: the JSONL, CSV or Parquet file (relative to the spec), or hf:org/name")
    table = _table(keys, location, base, confined)
    max_new_tokens = keys.get("max_new_tokens", int)
    if max_new_tokens is not None and max_new_tokens < 1:
        raise keys.error("max_new_tokens", f"must be 1 or more, not {max_new_tokens}")
    exemplars, shots = _fewshot(keys.table("fewshot"), table, base, confined)
    return Spec(
        name,
        table,
        kind,
        _fields(keys.table("fields")),
        _grading(keys.table("grading")),
        exemplars,
        shots,
        _fewshot_format(keys.table("fewshot")) == MULTI_TURN,
        keys.get("system_prompt", str),
        keys.get("instruction", str),
        max_new_tokens,
    )


def _fewshot_format(keys: _Keys) -> str:
    """``fewshot.format``, one of :data:`FEWSHOT_FORMATS` (single-turn when not given)."""
    return keys.one_of("format", FEWSHOT_FORMATS, SINGLE_TURN)


def _fewshot(keys: _Keys, table: Table, base: Path, confined: bool) -> tuple[Table | None, int]:
    """The exemplar pool (a file, or another split of the same Hub dataset) and the default number of shots."""
    keys.only(_known("fewshot"))
    shots = keys.get("shots", int, 0)
    if shots < 0:
        raise keys.error("shots", f"must be 0 or more, not {shots}")
    if "data" in keys.values:
        return _table(keys, keys.get("data", str), base, confined), shots
    if "split" in keys.values:
        if not table.hub:
            raise keys.error(
                "split",
                f"another split of the same dataset needs a Hub dataset ({keys.names.setting('data', 'hf:org/name')}); "
                f"give a file as {keys.names.key('fewshot.data')}",
            )
        return replace(table, split=keys.get("split", str)), shots
    if shots:
        raise keys.error(
            "shots",
            f"needs exemplars: {keys.names.key('fewshot.data')} (a file) or {keys.names.key('fewshot.split')} (a Hub split)",
        )
    return None, 0


# ---------------------------------------------------------------- tasks
