"""A dataset described by ``run`` flags instead of a spec file: the flags make the spec, kept in the store.

``--dataset bench.jsonl --spec-kind generation --spec-grading-method numeric``
says what ``kind = "generation"`` and ``[grading] method = "numeric"`` say in
a spec: every spec key is one flag (:data:`dateeval.tasks.spec_keys.KEYS`), so
the two cannot drift apart. The spec the flags make is checked key by key
(a mistake names its flag), then written to ``STORE/.specs/<name>.toml`` and
registered like a spec a user wrote: worker processes and Ray workers
register the same file (``tasks.sources``), ``regrade`` and the explorer find
it in the store by the stored name (``custom.register_kept``), and the user
can run it again, or edit it, as a spec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from dateeval import atomic
from dateeval.data.custom import HUB_PREFIX, is_data_file
from dateeval.errors import DateEvalError
from dateeval.tasks.custom import SPECS_DIR, is_reference, register_file
from dateeval.tasks.spec_keys import KEYS, FlagNames, Key
from dateeval.tasks.specs import SPEC_SUFFIXES, Spec, dataset_name, spec_from


def dest(key: Key) -> str:
    """Where argparse keeps a key's flag value (one attribute per key, never clashing with ``run``'s own options)."""
    return f"spec:{key.name}"


def values_from(args: Mapping[str, object]) -> dict:
    """The spec's keys as the given flags set them (a nested dict, as a spec file parses); empty when no flag is given.

    ``--spec-fields-choices A,B,C,D`` names several option columns, a name
    without a comma one list field; files are made absolute, so the spec
    written into the store reads them wherever it is.
    """
    values: dict = {}
    for key in KEYS:
        value = args.get(dest(key))
        if value is None:
            continue
        if key.name == "fields.choices" and "," in value:
            value = [column.strip() for column in value.split(",")]
        if key.file and not value.startswith(HUB_PREFIX):
            value = str(Path(value).resolve())
        table, _, leaf = key.name.rpartition(".")
        (values.setdefault(table, {}) if table else values)[leaf] = value
    return values


def given(values: Mapping) -> list[str]:
    """The flags a description was given with, for messages."""
    return [
        key.flag
        for key in KEYS
        if (values.get(key.table, {}) if key.table else values).get(key.name.rpartition(".")[2]) is not None
    ]


def describes(reference: str, values: Mapping) -> bool:
    """Whether a ``--dataset`` value becomes a spec in the store: a data file described by flags, or any Hub dataset
    (``hf:org/name``: only a spec can name one, so plain ``--dataset hf:org/name`` gets one too)."""
    return reference.startswith(HUB_PREFIX) or (bool(values) and is_data_file(Path(reference)))


def check_references(references: Sequence[str], values: Mapping) -> None:
    """Flags describe data files: given beside a spec or a built-in name, they would be ignored, so that is refused."""
    other = next((reference for reference in references if not describes(reference, values)), None) if values else None
    if other is None:
        return
    if other.endswith(SPEC_SUFFIXES):
        what = "a spec: put these settings in the spec instead"
    elif is_reference(other) or Path(other).suffix:
        what = "not a .jsonl, .jsonl.gz, .csv or .parquet file"
    else:
        what = "a dataset name: the flags describe your own data files"
    raise DateEvalError(
        f"--spec-* flags ({', '.join(given(values))}) describe data files or hf:org/name given as --dataset, "
        f"and --dataset {other} is {what}"
    )


def spec_path(reference: str, store_root: Path) -> Path:
    """Where the spec of a described data file (or Hub dataset) is kept: ``STORE/.specs/<its dataset name>.toml``."""
    return (
        Path(store_root).resolve()
        / SPECS_DIR
        / f"{dataset_name(Path(reference.removeprefix(HUB_PREFIX).rsplit('/', 1)[-1]))}.toml"
    )


def write_spec(reference: str, values: Mapping, store_root: Path) -> Path:
    """Check the description of one data file (a mistake names its flag), write it as ``STORE/.specs/<name>.toml`` and
    register it; returns the spec's path. The spec holds the data file's absolute path, so it runs from anywhere."""
    path = spec_path(reference, store_root)
    described = {"data": reference if reference.startswith(HUB_PREFIX) else str(Path(reference).resolve()), **values}
    _check_fields(spec_from(described, FlagNames(described), path.stem, Path.cwd()), values)
    header = f"# Written by `python -m dateeval run` from its --spec-* flags; run it again with --dataset {path}\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic.replacing(path) as staging:
            staging.write_text(header + toml(described), encoding="utf-8")
    except OSError as error:
        raise DateEvalError(f"cannot keep the dataset's spec in {path.parent}: {error.strerror or error}") from None
    register_file(path)
    return path


def _check_fields(spec: Spec, values: Mapping) -> None:
    """A field a flag names must be in the data (its first row): the mistake is the flag's, so the flag is named."""
    first, mapped = spec.table.rows()[0][1], values.get("fields", {})
    for key in KEYS:
        leaf = key.name.rpartition(".")[2]
        if key.table != "fields" or leaf == "answer_format" or leaf not in mapped:
            continue
        for field in [mapped[leaf]] if isinstance(mapped[leaf], str) else mapped[leaf]:
            if field not in first:
                raise DateEvalError(
                    f"{key.flag}: no field {field!r} in {spec.table} (its first row has {', '.join(map(repr, first))})"
                )


def toml(values: Mapping) -> str:
    """A spec as TOML: top-level keys, then one table per nested dict (the values are text, numbers and lists of text)."""
    lines = [f"{key} = {_value(value)}" for key, value in values.items() if not isinstance(value, Mapping)]
    for table, keys in values.items():
        if isinstance(keys, Mapping):
            lines += ["", f"[{table}]", *(f"{key} = {_value(value)}" for key, value in keys.items())]
    return "\n".join(lines) + "\n"


def _value(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(_value, value)) + "]"
    if isinstance(value, str):
        return _string(value)
    return repr(value)  # int, or float: repr is valid TOML (0.01, 1e-05, inf)


def _string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, everything else as it is."""
    escaped = "".join(
        f"\\u{ord(char):04x}" if ord(char) < 0x20 or ord(char) == 0x7F else char
        for char in text.replace("\\", "\\\\").replace('"', '\\"')
    )
    return f'"{escaped}"'


def describe_all(references: Sequence[str], values: Mapping, store_root: Path) -> dict[str, Path]:
    """Write (and register) the spec of every ``--dataset`` value that needs one; returns them by value.

    Two files whose names make one dataset name would write one spec: refused before either is written.
    """
    check_references(references, values)
    described = list(dict.fromkeys(reference for reference in references if describes(reference, values)))
    paths = {reference: spec_path(reference, store_root) for reference in described}
    for reference, path in paths.items():
        twin = next((other for other in described if other != reference and paths[other] == path), None)
        if twin is not None:
            raise DateEvalError(
                f"--dataset {reference} and --dataset {twin} would both be stored as {path.stem}: rename one of the files"
            )
    return {reference: write_spec(reference, values, store_root) for reference in described}
