"""An ``lmeval:`` source: recognised (a name lm-eval registers, or a task YAML), resolved to one canonical source,
loaded as lm-eval's task object (its helpers only as :func:`dateeval.tasks.lmeval_config.check_code` allows), named
as results store it, and found again from a stored name. :mod:`dateeval.tasks.lmeval` builds and grades the task."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from dateeval.errors import DateEvalError
from dateeval.data.limits import MAX_SPEC_BYTES
from dateeval.names import SUFFIXES, ends_like_variant
from dateeval.tasks.lmeval_bounds import lm_eval_module
from dateeval.tasks.lmeval_config import check_code, read_config
from dateeval.tasks.registry import GENERATION, MULTIPLE_CHOICE

PREFIX = "lmeval:"
SUPPORTED = {"multiple_choice": MULTIPLE_CHOICE, "generate_until": GENERATION}
KINDS = {"multiple_choice": "mcqa", "generate_until": "generation"}  # the task kind its rows record
_LMEVAL_KEYS = re.compile(r"^(output_type|dataset_path|doc_to_text|doc_to_choice|include)\s*:", re.MULTILINE)


def is_reference(reference: str) -> bool:
    """``lmeval:NAME_OR_YAML``, or a YAML file with lm-eval's task keys (``output_type``, ``doc_to_text``...)."""
    if reference.startswith(PREFIX):
        return True
    path = Path(reference)
    if not reference.endswith((".yaml", ".yml")) or not path.is_file():
        return False
    try:
        with path.open(
            encoding="utf-8", errors="replace"
        ) as handle:  # its head only: a sparse 2 GB .yaml is read as a spec, and refused
            return _LMEVAL_KEYS.search(handle.read(MAX_SPEC_BYTES)) is not None
    except OSError:
        return False


def canonical(reference: str) -> str:
    """The canonical ``lmeval:`` source: a registered name as given, a YAML file by its absolute path."""
    target = reference.removeprefix(PREFIX).strip()
    if not target:
        raise DateEvalError("--dataset lmeval: needs a task name or a task YAML file after 'lmeval:'")
    path = Path(target)
    if target.endswith((".yaml", ".yml")):
        if not path.is_file():
            raise DateEvalError(f"lm-eval task file {target} does not exist")
        return PREFIX + str(path.resolve())
    return PREFIX + target


@functools.lru_cache(maxsize=2)
def _manager(defaults: bool):
    """lm-eval's task index: without its built-in tasks for a YAML file (seconds faster), with them for a name."""
    return lm_eval_module().tasks.TaskManager(include_defaults=defaults)


@functools.lru_cache(maxsize=16)
def load_task(source: str, trust: bool = False):
    """lm-eval's task object for an ``lmeval:`` source; one clear error for anything lm-eval cannot build.

    A YAML's helpers run only as :func:`check_code` allows (``trust``: the command line said ``--trust-task-code``).
    A name must be one lm-eval registers: lm-eval would read any other as a file path, helpers and all.
    """
    target = source.removeprefix(PREFIX)
    from_file = target.endswith((".yaml", ".yml"))
    manager = _manager(not from_file)
    if from_file:
        check_code(Path(target), trust)
    elif target not in manager.all_tasks:
        raise DateEvalError(f"lm-eval registers no task {target} (lm-eval's tasks by name, or a task YAML file)")
    try:
        tasks = manager.load(target)["tasks"]
    except Exception as error:  # lm-eval raises anything from a bad YAML, a missing dataset or an unknown name
        first = (str(error).strip().splitlines() or [""])[0]
        problem = (
            first if isinstance(error, DateEvalError) else f"{type(error).__name__}: {first}"
        )  # a template past dateeval's limits
        raise DateEvalError(f"lm-eval cannot load task {target}: {problem}") from None
    if len(tasks) != 1:
        raise DateEvalError(
            f"lm-eval task {target} is a group of {len(tasks)} tasks ({', '.join(sorted(tasks)[:5])}...): name one of them"
        )
    task = next(iter(tasks.values()))
    if task.OUTPUT_TYPE not in SUPPORTED:
        raise DateEvalError(
            f"lm-eval task {target} has output_type {task.OUTPUT_TYPE!r}: dateeval runs {' and '.join(SUPPORTED)} tasks"
        )
    return task


def dataset_name(task_name: object) -> str:
    """The name results are stored under: ``lmeval_`` and the task's name, so it never takes a built-in's."""
    name = "lmeval_" + re.sub(r"[^a-z0-9]+", "_", str(task_name).lower()).strip("_")
    if ends_like_variant(name):
        raise DateEvalError(
            f"lm-eval task {task_name}: its name ends like a dateeval variant ({SUFFIXES}); rename the task"
        )
    return name


def find(folder: Path | None, name: str) -> str | None:
    """The ``lmeval:`` source of a stored dataset name: a task YAML in ``folder`` whose task makes ``name``, else the task
    lm-eval registers under the rest of the name (how the explorer and regrade rebuild a stored lm-eval dataset).
    Each YAML's ``task`` is read as data: nothing of a YAML that is not the one asked for is run or loaded."""
    if not name.startswith("lmeval_"):
        return None
    for path in sorted(folder.glob("*.y*ml")) if folder is not None and folder.is_dir() else ():
        if is_reference(str(path)):
            try:
                task = read_config(path)[0].get("task")
                if isinstance(task, str) and dataset_name(task) == name:
                    return canonical(str(path))
            except DateEvalError:
                continue  # another task's YAML that cannot be read: not the one asked for
    return PREFIX + name.removeprefix("lmeval_")
