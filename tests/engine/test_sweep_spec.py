"""One builder of a sweep's spec (``plan.build_spec``) for the CLI and the Run page, its datasets resolved once into
frozen task sources that workers build from; the task-name grammar and the registry it reads (issue 37, item 3)."""

import json

import pytest

from dateeval import cli
from dateeval import tasks as tasks_package
from dateeval.conditions import Condition
from dateeval.engine.plan import SweepSpec, build_spec
from dateeval.engine.worker import build_tasks
from dateeval.errors import DateEvalError
from dateeval.names import MULTI_TURN, DatasetName, ends_like_variant, split
from dateeval.registry import Registry
from dateeval.tasks import TaskSource, custom
from dateeval.tasks.registry import REGISTRY

pytestmark = pytest.mark.usefixtures("fresh_registry")  # tests register their own files (conftest)
CONDITIONS = (Condition(date_mode="none"),)


def _quiz(folder, name="quiz.jsonl"):
    path = folder / name
    path.write_text(
        "".join(json.dumps({"question": f"{i}?", "choices": ["a", "b"], "answer": i % 2}) + "\n" for i in range(3))
    )
    return path


@pytest.mark.parametrize(
    "name", ["mmlu", "mmlu_cot", "mmlu_5shot", "quiz_cot_2shot_multiturn", "lmeval_x_singleturn", "wmt16_en_de"]
)
def test_the_grammar_reads_back_what_it_writes(name):
    assert str(split(name)) == name


def test_the_grammar_writes_a_format_only_where_asked_and_knows_every_suffix():
    assert str(DatasetName("quiz", cot=True, shots=5, turns=MULTI_TURN)) == "quiz_cot_5shot_multiturn"
    assert split("lmeval:arc_easy") is None
    assert [
        ends_like_variant(stem) for stem in ("quiz", "quiz_cot", "quiz_3shot", "quiz_multiturn", "quiz_singleturn")
    ] == [False] + [True] * 4


def test_a_registry_refuses_another_entry_under_a_taken_name_and_takes_the_same_one_again():
    registry = Registry("thing")
    registry.register("a", 1)
    registry.register("a", 1)  # another process registering the same file
    with pytest.raises(DateEvalError, match="thing 'a' is already registered"):
        registry.register("a", 2)
    assert dict(registry) == {"a": 1}


def test_the_built_in_benchmarks_are_registered_explicitly_in_their_modules_order():
    from dateeval.tasks import gsm8k, humaneval, mcqa, translation

    declared = [b.name for module in (mcqa, gsm8k, humaneval, translation) for b in module.BENCHMARKS]
    assert [name for name, b in REGISTRY.items() if b.source is None] == declared


def test_the_builder_names_every_variant_and_resolves_each_dataset_once(tmp_path):
    quiz = _quiz(tmp_path)
    spec = build_spec(
        ("smollm2-135m",),
        ("arc_challenge", "arc_challenge_cot", "arc_challenge"),
        CONDITIONS,
        shots=2,
        fewshot_formats=(None, MULTI_TURN),
    )
    assert spec.datasets == (
        "arc_challenge_2shot",
        "arc_challenge_2shot_multiturn",
        "arc_challenge_cot_2shot",
        "arc_challenge_cot_2shot_multiturn",
    )
    assert spec.tasks[0] == TaskSource(DatasetName("arc_challenge", shots=2)) and len(spec.tasks) == 4
    own = build_spec(("smollm2-135m",), (str(quiz),), CONDITIONS, cot=True)
    assert own.datasets == ("quiz_cot",) and own.tasks == (
        TaskSource(DatasetName("quiz", cot=True), str(quiz.resolve())),
    )
    assert hash(spec.tasks) == hash(tuple(spec.tasks))  # frozen and hashable: it travels to Ray actors as is
    assert spec.resolved() is spec  # Sweep.run resolves nothing again


def test_the_cli_and_the_run_page_build_the_same_spec(tmp_path):
    """The CLI's flags go through the same builder as the page's form (pages/run.py calls build_spec with its choices)."""
    args = cli.parser().parse_args(
        [
            "run",
            "--dataset",
            "arc_challenge_cot",
            "--shots",
            "2",
            "--dates",
            "2024-01-01",
            "--no-date",
            "--limit",
            "3",
            "--store",
            str(tmp_path / "store"),
        ]
    )
    captured = {}

    class Stop(Exception):
        pass

    def capture(sweep, spec, *rest, **keywords):
        captured["spec"] = spec
        raise Stop

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("dateeval.engine.sweep.Sweep.__init__", capture)
        with pytest.raises(Stop):
            cli.run.cmd_run(args)
    from dateeval.engine.plan import dated_conditions

    page = build_spec(
        ("smollm2-135m",),
        ("arc_challenge",),
        dated_conditions("2024-01-01..2024-01-01/1", no_date=True),
        cot=True,
        shots=2,
        limit=3,
    )
    assert captured["spec"].datasets == page.datasets == ("arc_challenge_cot_2shot",)
    assert (
        captured["spec"].tasks == page.tasks
        and captured["spec"].conditions == page.conditions
        and captured["spec"].subset == page.subset
    )


def test_subjects_without_mmlu_are_refused_by_the_builder_for_every_caller():
    with pytest.raises(DateEvalError, match="--subjects selects MMLU subjects, and this sweep has no mmlu dataset"):
        build_spec(("smollm2-135m",), ("arc_challenge",), CONDITIONS, subjects="anatomy")


def test_a_worker_builds_from_the_task_source_without_looking_the_name_up(tmp_path, monkeypatch):
    """Another process (a Ray actor) registers the user's file the driver resolved; no data folder is searched by name,
    and no name is read again: the parsed name travels in the task source."""
    folder = tmp_path / "data"
    folder.mkdir()
    quiz = _quiz(folder)
    spec = build_spec(("smollm2-135m",), (str(quiz),), CONDITIONS, data_dir=str(folder))
    REGISTRY.pop("quiz")  # the worker's process: nothing registered yet
    monkeypatch.setattr(custom, "find", lambda *args: pytest.fail("a worker looked a dataset up by name"))
    for reader in ("parse_name", "resolve", "source_of"):
        monkeypatch.setattr(tasks_package, reader, lambda *args, name=reader: pytest.fail(f"a worker called {name}"))
    tasks = build_tasks(spec)
    assert list(tasks) == ["quiz"] and len(tasks["quiz"].items) == 3
    assert REGISTRY["quiz"].source == str(quiz.resolve())


def test_a_spec_made_by_hand_is_resolved_once_by_its_sweep():
    spec = SweepSpec(models=("smollm2-135m",), datasets=("arc_challenge", "arc_challenge"), conditions=CONDITIONS)
    assert spec.resolved().tasks == (TaskSource(DatasetName("arc_challenge")),)
