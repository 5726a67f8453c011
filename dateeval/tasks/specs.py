"""A spec (TOML or YAML) or ``--spec-*`` flags read into a :class:`Spec`: the task kind, where the rows are, how
fields map, how a generated answer is graded, few-shot exemplars and the prompt's wording. Every key is checked, and
every mistake ends in one line naming the spec (or the flag) and the key. ``custom`` builds the tasks a spec describes.
"""

from __future__ import annotations

import math
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
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
from dateeval.tasks.spec_keys import Keys, Names, SpecNames, known
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


def _regex_key(keys: Keys, key: str, default: str | None, probe: str = "") -> str | None:
    value = keys.get(key, str, default)
    if value is not None:
        try:
            regex.compile(value.replace("{answer}", probe))
        except regex.error as error:
            raise keys.error(key, f"not a regular expression ({error})") from None
    return value


def _table(keys: Keys, location: str, base: Path, confined: bool) -> Table:
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


def _fields(keys: Keys) -> Fields:
    keys.only(known("fields"))
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


def _grading(keys: Keys) -> Grading:
    keys.only(known("grading"))
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
    keys = Keys(names, values)
    keys.only(known(""))
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


def _fewshot_format(keys: Keys) -> str:
    """``fewshot.format``, one of :data:`FEWSHOT_FORMATS` (single-turn when not given)."""
    return keys.one_of("format", FEWSHOT_FORMATS, SINGLE_TURN)


def _fewshot(keys: Keys, table: Table, base: Path, confined: bool) -> tuple[Table | None, int]:
    """The exemplar pool (a file, or another split of the same Hub dataset) and the default number of shots."""
    keys.only(known("fewshot"))
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
