"""An lm-eval task YAML read as data, before lm-eval reads it: its ``include`` chain within bounds, and the code it names
(``!function`` helpers, metrics, filters and samplers lm-eval would import by name) refused unless the command line
trusts it (:data:`TRUST_FLAG`). Split from :mod:`dateeval.tasks.lmeval`, which builds the tasks."""

from __future__ import annotations

import importlib
from pathlib import Path

import yaml

from dateeval.data.files import load_yaml, read_bytes
from dateeval.errors import DateEvalError
from dateeval.data.limits import MAX_SPEC_BYTES, TASK_YAML_MAX_FILES
from dateeval.tasks.lmeval_bounds import lm_eval_module

TRUST_FLAG = "--trust-task-code"


class _Function(str):
    """A ``!function`` reference read as text: reading a task YAML as data imports nothing."""


class _InertLoader(yaml.SafeLoader):
    """YAML as plain data, lm-eval's ``!function`` tag as a :class:`_Function` (any other tag is refused, as safe_load does)."""


_InertLoader.add_constructor("!function", lambda loader, node: _Function(loader.construct_scalar(node)))


def _as_data(path: Path) -> dict:
    """One task YAML read as data, within the bounds of :mod:`dateeval.data.limits` (lm-eval parses it again, and hashes
    and copies what it builds: an alias bomb must end here), refused in one line when it is past them, unreadable,
    or not a mapping."""
    try:
        config = load_yaml(read_bytes(path, "lm-eval task", MAX_SPEC_BYTES), path, "lm-eval task file", _InertLoader)
    except OSError as error:
        raise DateEvalError(f"cannot read lm-eval task file {path}: {error.strerror or error}") from None
    except (yaml.YAMLError, RecursionError) as error:
        raise DateEvalError(
            f"lm-eval task file {path} is not valid YAML: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
        ) from None
    if not isinstance(config, dict):
        raise DateEvalError(f"lm-eval task file {path} is not a mapping of task keys")
    return config


def _nodes(config: dict) -> list[object]:
    """Every key and value anywhere in a config, each shared node visited once (aliases cannot make the walk explode)."""
    found, pending, seen = [], [config], set()
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        found.append(value)
        if isinstance(value, dict):
            pending += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            pending += value
    return found


def _functions(config: dict) -> list[_Function]:
    """Every ``!function`` anywhere in a config."""
    return [node for node in _nodes(config) if isinstance(node, _Function)]


def read_config(path: Path) -> tuple[dict, list[tuple[Path, _Function]]]:
    """A task YAML's configuration as lm-eval merges it (each ``include`` first, its own keys winning), read as data,
    with every ``!function`` and the (resolved) file that names it: lm-eval resolves a helper beside that file."""
    files = 0

    def read(path: Path, including: frozenset) -> tuple[dict, list[tuple[Path, _Function]]]:
        nonlocal files
        path, files = path.resolve(), files + 1
        if path in including or files > TASK_YAML_MAX_FILES:
            raise DateEvalError(f"lm-eval task file {path}: includes loop or exceed {TASK_YAML_MAX_FILES} files")
        config = _as_data(path)
        functions = [(path, function) for function in _functions(config)]
        merged: dict = {}
        includes = config.pop("include", None) or []
        for include in includes if isinstance(includes, list) else [includes]:
            included, more = read(path.parent / str(include), including | {path})
            included.pop("task_list", None)  # as lm-eval merges: it names the included file's own tasks
            merged |= included
            functions += more
        return merged | config, functions

    return read(path, frozenset())


def _helper(yaml_path: Path, reference: str) -> Path | None:
    """The ``.py`` file lm-eval would import for ``!function reference`` in ``yaml_path``, where it lies in that YAML's own
    folder (links followed), else None (lm-eval would import an absolute path, or an installed module, as readily)."""
    module, _, function = reference.rpartition(".")
    if not module or not function:
        return None
    file = (yaml_path.parent / f"{module.replace('.', '/')}.py").resolve()
    return file if file.is_file() and file.is_relative_to(yaml_path.parent) else None


def _registered() -> dict[str, object]:
    """lm-eval's registries that a task YAML's names are looked up in (metrics, aggregations, filters, samplers)."""
    importlib.import_module("lm_eval.api.metrics")  # fills the metric and aggregation registries
    importlib.import_module("lm_eval.filters")  # fills the filter registry
    from lm_eval.api import registry, samplers

    return {
        "metric": registry.metric_registry,
        "aggregation": registry.aggregation_registry,
        "filter": registry.filter_registry,
        "sampler": samplers.SAMPLER_REGISTRY,
    }


def _dicts(config: dict) -> list[dict]:
    """Every mapping in a config (a group's inline tasks too)."""
    return [node for node in _nodes(config) if isinstance(node, dict)]


def _named_code(config: dict) -> list[str]:
    """Where a config names code by a name rather than by ``!function`` (the module docstring's list), one phrase each."""
    known, found = _registered(), []
    for table in _dicts(config):
        for entry in table.get("metric_list") or [] if isinstance(table.get("metric_list"), list) else []:
            metric, aggregation = (
                (entry.get("metric"), entry.get("aggregation")) if isinstance(entry, dict) else (None, None)
            )
            if isinstance(metric, str) and not isinstance(metric, _Function):
                if entry.get("hf_evaluate") is True:
                    found.append(
                        f"metric {metric!r} with hf_evaluate: true (lm-eval hands it to evaluate.load, which imports its script)"
                    )
                elif metric not in known["metric"]:
                    found.append(
                        f"metric {metric!r}, which lm-eval does not register (it would hand it to evaluate.load, which imports a file or folder of that name)"
                    )
            if (
                isinstance(aggregation, str)
                and not isinstance(aggregation, _Function)
                and aggregation not in known["aggregation"]
            ):
                found.append(f"aggregation {aggregation!r}, which lm-eval does not register")
        for pipeline in table.get("filter_list") or [] if isinstance(table.get("filter_list"), list) else []:
            steps = pipeline.get("filter") if isinstance(pipeline, dict) else None
            for step in steps if isinstance(steps, list) else []:
                function = step.get("function") if isinstance(step, dict) else None
                if (
                    isinstance(function, str)
                    and not isinstance(function, _Function)
                    and function not in known["filter"]
                ):
                    found.append(f"filter function {function!r}, which lm-eval does not register")
        sampler = table.get("sampler")
        if isinstance(sampler, str) and not isinstance(sampler, _Function) and sampler not in known["sampler"]:
            found.append(f"fewshot sampler {sampler!r}, which lm-eval does not register")
        if table.get("use_prompt") is not None:
            found.append(
                f"use_prompt {table['use_prompt']!r} (lm-eval reads the file it names, or promptsource's unsandboxed templates)"
            )
    return found


def check_code(path: Path, trust: bool) -> None:
    """Refuse a task YAML whose ``!function`` helpers, or code it names by name, dateeval may not run (the trust model in
    the module's docstring)."""
    own = Path(lm_eval_module().tasks.__file__).parent.resolve()
    config, functions = read_config(path)
    if not trust and not path.resolve().is_relative_to(own) and (named := _named_code(config)):
        raise DateEvalError(
            f"lm-eval task {path}: its {named[0]} would run Python code; dateeval runs a task file's code only when "
            f"the command line says {TRUST_FLAG} (never from the explorer)"
        )
    for file, reference in functions:
        if file.is_relative_to(own):
            continue
        if not trust:
            raise DateEvalError(
                f"lm-eval task {path}: `!function {reference}` in {file} would run Python code; dateeval runs a task "
                f"file's code only when the command line says {TRUST_FLAG} (never from the explorer)"
            )
        if _helper(file, reference) is None:
            raise DateEvalError(
                f"lm-eval task {path}: `!function {reference}` in {file} names no .py file in {file.parent}: "
                f"only helpers beside the task YAML run, even with {TRUST_FLAG}"
            )
