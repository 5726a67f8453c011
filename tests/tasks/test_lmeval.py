"""lm-evaluation-harness tasks run by dateeval: parity with lm-eval's own run, and clear errors.

The tasks are YAML files over local JSONL files made from ../shared/data (ARC-Challenge for a multiple-choice task,
GSM8K for a generate_until task with lm-eval's gsm8k filters), so nothing is downloaded. The parity target: with the
same system prompt and chat template and no date, the per-choice log-likelihoods equal lm-eval's own
``--apply_chat_template --system_instruction`` run to 1e-5 in float32, and every metric is equal.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import run_cli

from dateeval.conditions import DEFAULT_SYSTEM_PROMPT
from dateeval.errors import DateEvalError
from dateeval.store import Store
from dateeval.tasks import build_task, resolve

lm_eval = pytest.importorskip("lm_eval", reason="the optional lm-eval extra is not installed (./run.sh setup-lmeval)")

ARC_ITEMS, GSM_ITEMS, MAX_TOKENS = 12, 3, 32


pytestmark = pytest.mark.usefixtures("fresh_registry")  # each test registers its own files (conftest)


def _choice_yaml(folder: Path, data_dir: Path) -> Path:
    """An ARC-Challenge multiple-choice task as lm-eval's own arc_challenge YAML words it, over a local JSONL."""
    rows = [
        json.loads(line)
        for line in (data_dir / "arc" / "ARC-Challenge" / "ARC-Challenge-Test.jsonl")
        .read_text()
        .splitlines()[:ARC_ITEMS]
    ]
    with (folder / "arc.jsonl").open("w") as out:
        for row in rows:
            labels = [choice["label"] for choice in row["question"]["choices"]]
            choices = [choice["text"] for choice in row["question"]["choices"]]
            out.write(
                json.dumps(
                    {"question": row["question"]["stem"], "choices": choices, "gold": labels.index(row["answerKey"])}
                )
                + "\n"
            )
    config = {
        "task": "arc_local",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(folder / "arc.jsonl")}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "Question: {{question}}\nAnswer:",
        "doc_to_choice": "{{choices}}",
        "doc_to_target": "gold",
        "metric_list": [
            {"metric": "acc", "aggregation": "mean", "higher_is_better": True},
            {"metric": "acc_norm", "aggregation": "mean", "higher_is_better": True},
        ],
    }
    path = folder / "arc_local.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _generation_yaml(folder: Path, data_dir: Path) -> Path:
    """A GSM8K generate_until task with lm-eval's gsm8k filters (strict and flexible extraction) and exact match."""
    lines = (data_dir / "gsm8k" / "test.jsonl").read_text().splitlines()[:GSM_ITEMS]
    (folder / "gsm.jsonl").write_text("\n".join(lines) + "\n")
    config = {
        "task": "gsm_local",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(folder / "gsm.jsonl")}},
        "test_split": "test",
        "output_type": "generate_until",
        "doc_to_text": "Question: {{question}}\nAnswer:",
        "doc_to_target": "{{answer.split('####')[-1].strip()}}",
        "generation_kwargs": {"until": ["Question:", "\n\n"], "max_gen_toks": MAX_TOKENS, "do_sample": False},
        "filter_list": [
            {
                "name": "strict-match",
                "filter": [{"function": "regex", "regex_pattern": r"#### (\-?[0-9\.\,]+)"}, {"function": "take_first"}],
            },
            {
                "name": "flexible-extract",
                "filter": [
                    {"function": "regex", "group_select": -1, "regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)"},
                    {"function": "take_first"},
                ],
            },
        ],
        "metric_list": [
            {
                "metric": "exact_match",
                "aggregation": "mean",
                "higher_is_better": True,
                "ignore_case": True,
                "ignore_punctuation": False,
                "regexes_to_ignore": [",", r"\$", "(?s).*#### ", r"\.$"],
            }
        ],
    }
    path = folder / "gsm_local.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _lm_eval_own_run(folder: Path, model_dir: Path) -> dict:
    """lm-eval's own evaluation: its HF model, ``--apply_chat_template --system_instruction``, samples logged, one request at a time."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    return simple_evaluate(
        model="hf",
        model_args={"pretrained": str(model_dir), "dtype": "float32", "device": "cpu"},
        tasks=["arc_local", "gsm_local"],
        task_manager=TaskManager(include_defaults=False, include_path=str(folder)),
        apply_chat_template=True,
        system_instruction=DEFAULT_SYSTEM_PROMPT,
        log_samples=True,
        batch_size=1,
    )


@pytest.fixture(scope="module")
def swept(tmp_path_factory, data_dir) -> Path:
    """Both tasks swept by dateeval (the no-date baseline and one date); returns the folder with the YAMLs and the store."""
    folder = tmp_path_factory.mktemp("lmeval")
    arc, gsm = _choice_yaml(folder, data_dir), _generation_yaml(folder, data_dir)
    # Batch size 1: padding in a batch moves float32 sums by ~2e-5 (measured at 4 to 48), the batch-size
    # effect dateeval measures as a factor of its own.
    ran = run_cli(
        "run",
        "--dataset",
        f"lmeval:{arc}",
        "--dataset",
        str(gsm),
        "--dates",
        "2024-02-29",
        "--no-date",
        "--dtype",
        "float32",
        "--batch-size",
        "1",
        "--store",
        str(folder / "store"),
    )
    assert ran.returncode == 0, ran.stderr
    return folder


def test_an_lm_eval_task_scores_as_lm_eval_does_and_moves_with_the_date(swept):
    from dateeval.models import converted_gguf_dir
    from dateeval.models import resolve as resolve_model

    store = swept / "store"
    frame, problems = Store(store).read()
    assert not problems.corrupted and set(frame["dataset"]) == {"lmeval_arc_local", "lmeval_gsm_local"}
    ours = frame[frame["date_mode"] == "none"].set_index(["dataset", "item_id"])

    theirs = _lm_eval_own_run(swept, converted_gguf_dir(resolve_model("smollm2-135m")))
    for sample in theirs["samples"]["arc_local"]:
        row = ours.loc[("lmeval_arc_local", str(sample["doc_id"]))]
        expected = [float(resp[0][0]) for resp in sample["resps"]]
        assert row["choice_logprobs"] == pytest.approx(expected, abs=1e-5), sample["doc_id"]
        assert json.loads(row["lmeval_metrics"]) == {"acc,none": sample["acc"], "acc_norm,none": sample["acc_norm"]}
        assert bool(row["correct"]) == bool(sample["acc"])
    for sample in theirs["samples"]["gsm_local"]:
        row = ours.loc[("lmeval_gsm_local", str(sample["doc_id"]))]
        assert row["output"] == sample["resps"][0][0], sample["doc_id"]
        assert (
            json.loads(row["lmeval_metrics"])["exact_match,strict-match"] == sample["exact_match"]
            or sample["filter"] != "strict-match"
        )
    arc_rows = ours.loc["lmeval_arc_local"]
    assert arc_rows["correct"].mean() == pytest.approx(theirs["results"]["arc_local"]["acc,none"], abs=0)
    for name in ("strict-match", "flexible-extract"):
        metric = (
            ours.loc["lmeval_gsm_local"]["lmeval_metrics"]
            .map(lambda text, name=name: json.loads(text)[f"exact_match,{name}"])
            .mean()
        )
        assert metric == pytest.approx(theirs["results"]["gsm_local"][f"exact_match,{name}"], abs=0)

    dated = frame[frame["date_mode"] == "date"].set_index(["dataset", "item_id"]).loc["lmeval_arc_local"]
    assert (
        dated["choice_logprobs"].map(tuple) != arc_rows["choice_logprobs"].map(tuple)
    ).any()  # the date reached the prompt

    summary = run_cli("summary", "--store", str(store), "--json")
    assert summary.returncode == 0, summary.stderr
    by_dataset = {row["dataset"]: row for row in json.loads(summary.stdout)}
    assert set(by_dataset) == {"lmeval_arc_local", "lmeval_gsm_local"}
    task = build_task(
        resolve("lmeval_arc_local", swept), swept
    )  # the explorer's way back from a stored name to the items
    assert "Question:" in task.describe(task.items[0])
    regraded = run_cli(
        "regrade", "--store", str(store), "--data-dir", str(swept)
    )  # lm-eval's filters and metrics on stored replies
    assert (
        regraded.returncode == 0 and "lmeval_gsm_local: 6 stored outputs regraded, 0 grades differ" in regraded.stdout
    ), regraded.stderr


@pytest.mark.parametrize(
    "page", ["pages/overview.py", "pages/curves.py", "pages/leaderboard.py", "pages/flips.py", "pages/factors.py"]
)
def test_the_explorer_reads_an_lm_eval_store(swept, page, monkeypatch):
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DATEEVAL_STORE", str(swept / "store"))
    monkeypatch.setenv(
        "DATEEVAL_DATA_DIR", str(swept)
    )  # where the task YAMLs are: item text comes from lm-eval's documents
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page(page).run()
    at.sidebar.selectbox(key="store").set_value("mine").run()
    assert not at.exception and not at.error, ([e.message for e in at.exception], [e.value for e in at.error])


def test_few_shot_exemplars_are_lm_evals_and_the_same_under_every_date(tmp_path, data_dir):
    import datetime as dt

    from dateeval.conditions import expand

    arc = _choice_yaml(tmp_path, data_dir)
    name = resolve(f"lmeval:{arc}")
    first, second = expand([dt.date(2024, 1, 1), dt.date(2024, 6, 1)])[:2]
    for suffix, multiturn in (
        ("_2shot_singleturn", False),
        ("_2shot", True),
    ):  # lm-eval's CLI: multi-turn with a chat template
        task = build_task(f"{name}{suffix}")
        assert task.dataset == f"{name}{suffix}" and task.multiturn == multiturn
        messages = task.prompt(task.items[0], first).messages
        assert messages == task.prompt(task.items[0], second).messages  # the date is added by the template, later
        assert messages[0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
        assert [m["role"] for m in messages[1:]] == (["user", "assistant"] * 2 + ["user"] if multiturn else ["user"])
        assert sum(m["content"].count("Question:") for m in messages) == 3
        lm_task = task.lm_task
        lm_task.set_fewshot_seed(seed=1234)
        theirs = lm_task.fewshot_context(
            lm_task.eval_docs[0],
            2,
            system_instruction=DEFAULT_SYSTEM_PROMPT,
            apply_chat_template=True,
            fewshot_as_multiturn=multiturn,
            chat_template=lambda history, add_generation_prompt=True: json.dumps(history),
        )
        assert json.loads(theirs) == messages


def test_multi_turn_few_shot_scores_as_lm_evals_own_run(tmp_path, data_dir):
    """lm-eval's CLI turns --fewshot_as_multiturn on with --apply_chat_template: dateeval's lm-eval tasks default to it,
    and a 2-shot sweep's per-choice log-likelihoods equal lm-eval's own multi-turn run to 1e-5 (float32)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from dateeval.models import converted_gguf_dir
    from dateeval.models import resolve as resolve_model

    arc = _choice_yaml(tmp_path, data_dir)
    ran = run_cli(
        "run",
        "--dataset",
        f"lmeval:{arc}",
        "--shots",
        "2",
        "--no-date",
        "--dates",
        "2024-02-29",
        "--dtype",
        "float32",
        "--batch-size",
        "1",
        "--limit",
        "6",
        "--store",
        str(tmp_path / "store"),
    )
    assert ran.returncode == 0, ran.stderr
    frame, _ = Store(tmp_path / "store").read()
    assert set(frame["dataset"]) == {"lmeval_arc_local_2shot"}
    ours = frame[frame["date_mode"] == "none"].set_index("item_id")
    theirs = simple_evaluate(
        model="hf",
        model_args={
            "pretrained": str(converted_gguf_dir(resolve_model("smollm2-135m"))),
            "dtype": "float32",
            "device": "cpu",
        },
        tasks=["arc_local"],
        task_manager=TaskManager(include_defaults=False, include_path=str(tmp_path)),
        apply_chat_template=True,
        fewshot_as_multiturn=True,
        num_fewshot=2,
        system_instruction=DEFAULT_SYSTEM_PROMPT,
        log_samples=True,
        batch_size=1,
        limit=6,
    )
    for sample in theirs["samples"]["arc_local"]:
        expected = [float(resp[0][0]) for resp in sample["resps"]]
        assert ours.loc[str(sample["doc_id"]), "choice_logprobs"] == pytest.approx(expected, abs=1e-5), sample["doc_id"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"output_type": "loglikelihood_rolling"}, "dateeval runs multiple_choice and generate_until tasks"),
        ({"dataset_kwargs": {"data_files": {"test": "/nonexistent/arc.jsonl"}}}, "lm-eval cannot load task"),
        ({"doc_to_text": "{{no_such_field.x}}"}, "'no_such_field' is undefined"),
        ({"metric_list": [{"metric": "brier_score", "aggregation": "brier_score", "higher_is_better": False}]}, None),
    ],
)
def test_tasks_dateeval_cannot_run_are_refused_in_one_line(tmp_path, data_dir, change, message):
    path = _choice_yaml(tmp_path, data_dir)
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), **change}))
    if message is None:  # a task whose first metric is not right/wrong: refused when graded, before anything is stored
        store = tmp_path / "store"
        ran = run_cli(
            "run",
            "--dataset",
            str(path),
            "--dates",
            "2024-01-01",
            "--limit",
            "2",
            "--dtype",
            "float32",
            "--store",
            str(store),
        )
        assert (
            ran.returncode != 0 and "Traceback" not in ran.stderr and "is not right/wrong per document" in ran.stderr
        ), ran.stderr
        return
    with pytest.raises(DateEvalError, match=message):
        build_task(resolve(f"lmeval:{path}"))


def test_references_and_the_missing_extra(tmp_path, data_dir, monkeypatch):
    from dateeval.tasks import lmeval_source

    arc = _choice_yaml(tmp_path, data_dir)
    spec = tmp_path / "mine.yaml"
    spec.write_text("kind: mcqa\ndata: arc.jsonl\n")
    assert (
        lmeval_source.is_reference(str(arc))
        and lmeval_source.is_reference("lmeval:arc_easy")
        and not lmeval_source.is_reference(str(spec))
    )
    with pytest.raises(DateEvalError, match="needs a task name or a task YAML"):
        resolve("lmeval:")
    with pytest.raises(DateEvalError, match="does not exist"):
        resolve("lmeval:/nowhere/task.yaml")
    lmeval_source.load_task.cache_clear()
    lmeval_source._manager.cache_clear()
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # as if the extra were not installed
    with pytest.raises(DateEvalError, match="optional extra: ./run.sh setup-lmeval"):
        resolve(f"lmeval:{arc}")
    lmeval_source.load_task.cache_clear()


# ---------------------------------------------------------------- the trust model: which task YAMLs may run code


def _payload(folder: Path, marker: Path, name: str = "helpers") -> Path:
    """A helper module that writes ``marker`` the moment it is imported (what a hostile ``!function`` would run)."""
    folder.mkdir(parents=True, exist_ok=True)
    module = folder / f"{name}.py"
    module.write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n\ndef docs(dataset):\n    return dataset\n"
    )
    return module


def _tiny_yaml(folder: Path, task: str, extra: str = "") -> Path:
    """A two-document multiple-choice task over a local JSONL (no ../shared data needed), with ``extra`` YAML lines."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{task}.jsonl"
    data.write_text(
        "".join(json.dumps({"question": f"q{i}", "choices": ["a", "b"], "gold": i % 2}) + "\n" for i in range(2))
    )
    path = folder / f"{task}.yaml"
    path.write_text(
        f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
        f"output_type: multiple_choice\ndoc_to_text: 'Question: {{{{question}}}}'\ndoc_to_choice: '{{{{choices}}}}'\n"
        f"doc_to_target: gold\n{extra}"
    )
    return path


def test_a_task_yamls_function_runs_only_with_trust_task_code(tmp_path):
    marker = tmp_path / "marker"
    _payload(tmp_path / "tasks", marker)
    path = _tiny_yaml(tmp_path / "tasks", "hostile", "process_docs: !function helpers.docs\n")
    for reference in (f"lmeval:{path}", str(path)):
        with pytest.raises(DateEvalError, match=r"!function helpers.docs.*--trust-task-code"):
            build_task(resolve(reference))
    refused = run_cli("run", "--dataset", str(path), "--dates", "2024-01-01", "--store", str(tmp_path / "store"))
    assert refused.returncode != 0 and "Traceback" not in refused.stderr and "--trust-task-code" in refused.stderr, (
        refused.stderr
    )
    assert len(refused.stderr.strip().splitlines()) == 1 and not marker.exists()
    trusted = run_cli(
        "run",
        "--dataset",
        str(path),
        "--trust-task-code",
        "--dates",
        "2024-01-01",
        "--dtype",
        "float32",
        "--store",
        str(tmp_path / "store"),
    )
    assert trusted.returncode == 0 and marker.exists(), (
        trusted.stderr
    )  # the user vouches for the file: its helper beside it runs
    assert len(Store(tmp_path / "store").read()[0]) == 2


def test_finding_a_task_by_name_runs_no_other_yamls_code(tmp_path):
    marker = tmp_path / "marker"
    folder = tmp_path / "data"
    _payload(folder, marker)
    _tiny_yaml(folder, "another", "process_docs: !function helpers.docs\n")
    _tiny_yaml(folder, "wanted")
    task = build_task(
        resolve("lmeval_wanted", folder), folder
    )  # the explorer's and regrade's way back to a stored dataset
    assert task.dataset == "lmeval_wanted" and not marker.exists()
    with pytest.raises(
        DateEvalError, match="--trust-task-code"
    ):  # the one that matches is refused, never run, from a look-up
        resolve("lmeval_another", folder)
    with pytest.raises(DateEvalError, match="lm-eval registers no task nowhere"):
        build_task(resolve("lmeval_nowhere", folder), folder)
    assert not marker.exists()


@pytest.mark.parametrize("where", ["absolute", "escaping", "installed"])
def test_a_helper_outside_the_yamls_folder_is_refused_even_when_trusted(tmp_path, where):
    marker = tmp_path / "marker"
    payload = _payload(tmp_path / "elsewhere", marker, "payload")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "link.py").symlink_to(payload)  # beside the YAML by name, elsewhere in fact
    reference = {"absolute": str(payload.with_suffix("")) + ".docs", "escaping": "link.docs", "installed": "os.system"}[
        where
    ]
    path = _tiny_yaml(tmp_path / "tasks", "outside", f"process_docs: !function {reference}\n")
    with pytest.raises(DateEvalError, match="only helpers beside the task YAML"):
        build_task(resolve(str(path), trust_task_code=True))
    assert not marker.exists()


def test_a_path_that_is_not_a_yaml_is_no_task_name(tmp_path):
    """``lmeval:NAME`` is a task lm-eval registers: lm-eval would also read any file of that name, ``!function`` and all."""
    marker = tmp_path / "marker"
    _payload(tmp_path, marker)
    path = _tiny_yaml(tmp_path, "noext", "process_docs: !function helpers.docs\n")
    bare = path.rename(tmp_path / "noext")
    with pytest.raises(DateEvalError, match="lm-eval registers no task"):
        build_task(resolve(f"lmeval:{bare}"))
    assert not marker.exists()


def test_lm_evals_own_task_yamls_may_run_their_helpers(tmp_path):
    """A YAML in lm-eval's installed task folder runs its ``!function`` helpers, also when a user's YAML includes it."""
    from dateeval.tasks import lmeval_config

    own = Path(lm_eval.tasks.__file__).parent / "hellaswag" / "hellaswag.yaml"
    assert "!function" in own.read_text()
    lmeval_config.check_code(own, trust=False)
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"include: {own}\ntask: my_hellaswag\n")
    lmeval_config.check_code(mine, trust=False)


def test_a_template_that_reaches_python_runs_nothing(tmp_path):
    """Jinja templates are data too: lm-eval's own environment would let one reach ``os`` (``cycler.__init__.__globals__``)."""
    marker = tmp_path / "marker"
    template = "doc_to_text: \"{{ cycler.__init__.__globals__.os.popen('touch " + str(marker) + "').read() }}\"\n"
    path = _tiny_yaml(tmp_path, "jinja")
    path.write_text(path.read_text().replace("doc_to_text: 'Question: {{question}}'\n", template))
    with pytest.raises(DateEvalError, match="unsafe"):
        build_task(resolve(str(path)))
    assert not marker.exists()


# ---------------------------------------------------------------- bombs: a task file of a few KB that loading would blow up

LAUGHS = (
    "[&l0 lol, " + ", ".join(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, 10)) + "]"
)  # 9**9 lols
LONG = "&t " + "x" * 200_000 + "\n  copies: [" + ", ".join(["*t"] * 10) + "]"  # 2 M characters from 200 KB
# Each bomb's extra YAML lines (or its templates) and what its one line must say.
TASK_BOMBS = {
    "laughs": (
        {"metadata": f"\n  lols: {LAUGHS}"},
        "laughs.yaml: its YAML expands to over 10,000 values, the most it may hold (line 12;",
    ),
    "long": (
        {"metadata": f"\n  text: {LONG}"},
        "long.yaml: its YAML expands to over 1,048,576 characters of text, the most it may hold",
    ),
    "repeated": ({"doc_to_text": "\"{{ 'a' * 10**10 }}\""}, "'*' would make a value of more than 8,388,609 characters"),
    "padded": (
        {"doc_to_text": "'{{ question.ljust(10**10) }}'"},
        "ljust would make a value of more than 8,388,609 characters",
    ),
    "power": ({"doc_to_text": "'{{ 9 ** 99999999 }}'"}, "'**' would make an integer of about"),
    "formatted": ({"doc_to_text": "\"{{ '%0999999999d' % 1 }}\""}, "'%' formatting would make a value of"),
    "choices": ({"doc_to_choice": "'{{ choices * 10**8 }}'"}, "'*' would make a value of more than"),
    "literal": (
        {"doc_to_choice": "\"[{{ '0,' * 4000000 }}0]\""},
        "characters for lm-eval to parse as a Python literal (a list of choices...), over the 65,536",
    ),
    "doubled": (
        {
            "doc_to_text": "'{% set s = namespace(t=question) %}{% for i in range(64) %}{% set s.t = s.t ~ s.t %}{% endfor %}{{ s.t }}'"
        },
        "stopped rendering: ",
    ),
}

TASK_BOMB_CHILD = """
import contextlib, io, json, sys, time
import lm_eval.tasks  # imported before the clock starts: the bombs are timed, not lm-eval's imports
from dateeval import cli
for path in sys.argv[2:]:
    start, err = time.perf_counter(), io.StringIO()
    with contextlib.redirect_stderr(err):
        status = cli.main(["run", "--dataset", f"lmeval:{path}", "--dates", "2024-01-01", "--store", sys.argv[1]])
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so it would count the forking pytest process's memory
    peak = int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])
    print(json.dumps([path, status, err.getvalue(), time.perf_counter() - start, peak]), flush=True)
"""


def _bomb_yaml(folder: Path, name: str, keys: dict[str, str]) -> Path:
    """A tiny task whose ``keys`` (YAML text) replace or add to its own."""
    path = _tiny_yaml(folder, name)
    lines = dict(
        line.split(": ", 1)
        for line in path.read_text()
        .replace("dataset_kwargs:\n  data_files:\n    test: ", "dataset_kwargs: PATH")
        .splitlines()
    )
    lines["dataset_kwargs"] = lines["dataset_kwargs"].replace("PATH", "\n  data_files:\n    test: ")
    path.write_text("".join(f"{key}: {value}\n" for key, value in {**lines, **keys}.items()))
    return path


def test_task_file_bombs_end_in_one_line_in_bounded_memory_and_seconds(tmp_path):
    """A task YAML's alias bomb (which lm-eval's own loader, its config dump and dateeval's content hash would build:
    2.4 GB and 164 s to a MemoryError under a 4 GB cap before) and templates that would make gigabytes, each through
    ``dateeval run --dataset lmeval:FILE`` in one process whose address space is capped at 3 GB (lm-eval's imports
    reserve 1.8 GB): each ends in its line on stderr, exit status 2, within seconds, the process's peak under 600 MB."""
    import resource
    import subprocess

    from conftest import ROOT

    paths = {name: _bomb_yaml(tmp_path, name, keys) for name, (keys, _) in TASK_BOMBS.items()}
    included = tmp_path / "included.yaml"
    included.write_text("include: laughs.yaml\ntask: included\n")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    quiet = {
        **os.environ,
        "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    }  # datasets' bar on stderr as it reads the task's two documents
    done = subprocess.run(
        [sys.executable, "-c", TASK_BOMB_CHILD, str(tmp_path / "store"), *map(str, [*paths.values(), included])],
        cwd=ROOT,
        env=quiet,
        preexec_fn=cap,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = {
        Path(path).stem: (status, err, seconds, peak)
        for path, status, err, seconds, peak in map(json.loads, done.stdout.splitlines())
    }
    assert list(results) == [*TASK_BOMBS, "included"], done.stderr[-2000:]
    expected = {**{name: fragment for name, (_, fragment) in TASK_BOMBS.items()}, "included": TASK_BOMBS["laughs"][1]}
    for name, fragment in expected.items():
        status, err, seconds, _ = results[name]
        assert (
            status == 2
            and err.count("\n") == 1
            and err.startswith("dateeval: error: ")
            and fragment in err
            and seconds < 5
        ), (name, err, seconds)
    assert max(peak for *_, peak in results.values()) < 600 * 2**10
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.parquet"))


def test_a_task_whose_documents_are_past_a_data_files_bounds_is_refused_before_they_are_built(tmp_path, monkeypatch):
    """lm-eval reads a task's documents with datasets, from a file or Hub dataset of any size: its memory-mapped
    table is measured first, as a Hub dataset's is (the bound lowered here: the test stays small)."""
    monkeypatch.setattr("dateeval.data.files.MAX_CELLS", 7)  # 2 documents of a question, two choices and a gold: 8
    path = _tiny_yaml(tmp_path, "cells")
    with pytest.raises(
        DateEvalError, match=r"lm-eval task .*cells.yaml: its evaluation split holds over the 7 cells .* point the task"
    ):
        build_task(resolve(str(path)))


# ---------------------------------------------------------------- names lm-eval turns into code (issue 36 §1)


def _metric_module(folder: Path, marker: Path) -> Path:
    """What ``metric_list: [{metric: PATH}]`` makes lm-eval 0.4.13 import through ``evaluate.load``: a module that writes ``marker``."""
    return _payload(folder, marker, "my_metric")


NAMED_CODE = {
    "metric path": ("metric_list:\n  - metric: {module}\n", "metric '{module}', which lm-eval does not register"),
    "metric folder": ("metric_list:\n  - metric: {folder}\n", "metric '{folder}', which lm-eval does not register"),
    "hf_evaluate": ("metric_list:\n  - metric: acc\n    hf_evaluate: true\n", "metric 'acc' with hf_evaluate: true"),
    "aggregation": (
        "metric_list:\n  - metric: acc\n    aggregation: os.system\n",
        "aggregation 'os.system', which lm-eval does not register",
    ),
    "filter": (
        "filter_list:\n  - name: f\n    filter:\n      - function: {module}\n",
        "filter function '{module}', which lm-eval does not register",
    ),
    "sampler": (
        "fewshot_config:\n  sampler: {module}\n",
        "fewshot sampler '{module}', which lm-eval does not register",
    ),
    "use_prompt": ("use_prompt: '{folder}/prompts.yaml:p'\n", "use_prompt '{folder}/prompts.yaml:p'"),
    "process_results": ("process_results: !function my_metric.docs\n", "!function my_metric.docs"),
    "nested mapping": (
        "group_alias: g\nmetric_list:\n  - metric: acc\ntask_list: []\nextra:\n  - metric_list:\n      - metric: {module}\n",
        "metric '{module}', which lm-eval does not register",
    ),
}


@pytest.mark.parametrize("door", list(NAMED_CODE))
def test_a_task_yaml_naming_code_by_name_runs_nothing_without_trust(tmp_path, door):
    """Issue 36 §1: a metric lm-eval does not register (a path to a .py file or a folder) went to ``evaluate.load``, which
    imported it before "KeyError: None"; each place lm-eval 0.4.13 turns a name into code is now refused in one line,
    from the CLI and from a look-up, nothing imported."""
    marker = tmp_path / "marker"
    module = _metric_module(tmp_path / "tasks", marker)
    folder = tmp_path / "tasks" / "metric_folder"
    folder.mkdir()
    (folder / "metric_folder.py").write_text(module.read_text())
    (tmp_path / "tasks" / "prompts.yaml").write_text("prompts:\n  p: '{{question}}'\n")
    extra, says = (
        text.format(module=module, folder=folder if door != "use_prompt" else tmp_path / "tasks")
        for text in NAMED_CODE[door]
    )
    path = _tiny_yaml(tmp_path / "tasks", "named", extra)
    with pytest.raises(DateEvalError) as refused:
        build_task(resolve(str(path)))
    assert says in str(refused.value) and "--trust-task-code" in str(refused.value), refused.value
    with pytest.raises(DateEvalError, match="--trust-task-code"):  # the explorer's look-up of a stored name
        resolve("lmeval_named", tmp_path / "tasks")
    assert not marker.exists()


def test_a_metric_named_by_path_runs_only_with_trust_task_code(tmp_path):
    """The CLI: one line, nothing imported; with --trust-task-code lm-eval's own behaviour (it imports the metric) resumes."""
    marker = tmp_path / "marker"
    module = _metric_module(tmp_path / "tasks", marker)
    path = _tiny_yaml(tmp_path / "tasks", "pathmetric", f"metric_list:\n  - metric: {module}\n")
    refused = run_cli("run", "--dataset", str(path), "--dates", "2024-01-01", "--store", str(tmp_path / "store"))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--trust-task-code" in refused.stderr, (
        refused.stderr
    )
    assert not marker.exists()
    from dateeval.tasks import lmeval_config

    lmeval_config.check_code(
        path, trust=True
    )  # trusted: the check lets it through (lm-eval then imports it, as it would)
    own = Path(lm_eval.tasks.__file__).parent
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"include: {own / 'arc' / 'arc_easy.yaml'}\ntask: my_arc\n")
    lmeval_config.check_code(mine, trust=False)  # lm-eval's own metric names pass


def test_choices_per_document_are_bounded_before_any_is_scored(tmp_path, monkeypatch):
    """Issue 36 §5: 1,000,000 choices per document loaded (1.17 GB) and would all be scored; now the document is refused
    in one line before it is scored (the bound lowered here, so the test stays small)."""
    from dateeval.tasks import lmeval

    monkeypatch.setattr(lmeval, "LMEVAL_MAX_CHOICES", 3)
    path = _tiny_yaml(tmp_path, "many")
    data = tmp_path / "many.jsonl"
    data.write_text(json.dumps({"question": "q", "choices": ["a", "b", "c", "d"], "gold": 0}) + "\n")
    with pytest.raises(
        DateEvalError, match=r"lm-eval task .*many.yaml, document 0: 4 choices, over the 3 a document may have"
    ):
        build_task(resolve(str(path)))


@pytest.mark.parametrize(
    ("until", "says"),
    [
        ("['" + "x" * 65 + "']", "at most 16 stop strings of 1 to 64 characters"),
        (str([f"s{n}" for n in range(17)]), "at most 16 stop strings"),
        ("[1, 2]", "until must be a string or a list of strings"),
    ],
)
def test_a_tasks_stop_strings_are_bounded(tmp_path, until, says):
    """Issue 36 §5: one 8,000-character ``until`` made transformers allocate 1.47 GiB preparing it; now one line at build time."""
    path = (
        _tiny_yaml(tmp_path, "stops", f"generation_kwargs:\n  until: {until}\n")
        .read_text()
        .replace("output_type: multiple_choice", "output_type: generate_until")
    )
    (tmp_path / "stops.yaml").write_text(path.replace("doc_to_choice: '{{choices}}'\n", ""))
    with pytest.raises(DateEvalError, match=re.escape(says)):
        build_task(resolve(str(tmp_path / "stops.yaml")))


# ---------------------------------------------------------------- runaway regexes of a task file (issue 36 §4)


def _generation_task_yaml(folder: Path, task: str, question: str, extra: str) -> Path:
    """A one-document generate_until task over a local JSONL whose question is ``question``, with ``extra`` YAML lines."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{task}.jsonl"
    data.write_text(json.dumps({"question": question, "answer": "b"}) + "\n")
    path = folder / f"{task}.yaml"
    path.write_text(
        f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\n"
        f"output_type: generate_until\ndoc_to_target: answer\nmetric_list:\n  - metric: exact_match\n{extra}"
    )
    return path


def test_a_filter_regex_that_backtracks_is_bounded_like_a_specs(tmp_path):
    """A ``filter_list`` regex that backtracks for ever on a reply (``(a|aa)+$`` on 36 a's and a '!': 14 s in re, the
    issue's ``(\\s*\\S*\\s*\\S*)*X`` 300 s) stops at dateeval's regex bound and the reply takes the filter's fallback."""
    from dateeval.data.limits import REGEX_SECONDS

    extra = (
        "doc_to_text: '{{question}}'\nfilter_list:\n  - name: strict\n    filter:\n      - function: regex\n"
        "        regex_pattern: '(a|aa)+$'\n      - function: take_first\n"
    )
    task = build_task(resolve(str(_generation_task_yaml(tmp_path, "backtracks", "q", extra))))
    start = time.process_time()
    graded = task.grade(task.items, ["a" * 36 + "!"], [None])
    assert (
        time.process_time() - start < 2.5 * REGEX_SECONDS
        and graded[0]["parsed"] == "[invalid]"
        and not graded[0]["correct"]
    )


def test_a_template_regex_replace_that_backtracks_ends_in_one_line(tmp_path):
    """lm-eval's ``regex_replace`` template filter (``re.sub``, which a render's time bound cannot interrupt: 127 s on 40
    a's) stops at dateeval's regex bound, in one line."""
    extra = "doc_to_text: \"{{ question | regex_replace('(a|aa)+$', '') }}\"\n"
    path = _generation_task_yaml(tmp_path, "replaces", "a" * 40 + "!", extra)
    start = time.perf_counter()
    with pytest.raises(DateEvalError, match=r"regex_replace\('\(a\|aa\)\+\$'\) took more than 1 s"):
        build_task(resolve(str(path)))
    assert (
        time.perf_counter() - start < 15
    )  # loading the task included (seconds on a busy machine); re alone took minutes
