"""The few-shot format (issue 27 §3): exemplars in the one user message (single-turn, the built-in tasks' default) or as
conversation turns (multi-turn, as lm-eval builds them with a chat template), chosen from the CLI, a spec and the Run
page, stored under its own name, and the date effect under each format shown side by side."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from conftest import ROOT, run_cli, sweep_finishes
from streamlit.testing.v1 import AppTest

from dateeval import results
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.errors import DateEvalError
from dateeval.names import MULTI_TURN, SINGLE_TURN
from dateeval.tasks import build_task, parse_name, stored, with_fewshot_format
from dateeval.tasks.mcqa import label_tokens

JAN = expand([dt.date(2024, 1, 1)])[0]
pytestmark = pytest.mark.usefixtures("fresh_registry")


@pytest.mark.parametrize("name", ["mmlu_2shot", "mmlu_cot_2shot", "gsm8k_2shot", "arc_challenge_2shot"])
def test_multi_turn_holds_the_single_turn_text_as_turns(name, data_dir):
    """Each exemplar a user turn (the first led by the instruction) and an assistant turn with its answer; joined back,
    the turns hold the single-turn prompt's text, and the last user turn is the question."""
    single = build_task(name, data_dir, Subset(limit=1))
    multi = build_task(f"{name}_multiturn", data_dir, Subset(limit=1))
    assert (single.dataset, multi.dataset, single.multiturn, multi.multiturn) == (
        name,
        f"{name}_multiturn",
        False,
        True,
    )
    one, turns = single.prompt(single.items[0], JAN).messages, multi.prompt(multi.items[0], JAN).messages
    assert [m["role"] for m in one] == ["system", "user"] and [m["role"] for m in turns] == ["system"] + [
        "user",
        "assistant",
    ] * 2 + ["user"]
    assert (
        turns[0] == one[0]
        and one[1]["content"].startswith(turns[1]["content"])
        and one[1]["content"].endswith(turns[-1]["content"])
    )
    for asked, answer in zip(turns[1:-1:2], turns[2:-1:2]):
        assert (
            asked["content"] in one[1]["content"]
            and answer["content"] in one[1]["content"]
            and answer["content"] == answer["content"].strip()
        )
    for task in (single, multi):
        task.labels = (
            label_tokens(None, 4) if task.kind == "mcqa" else None
        )  # what a loaded model sets (a chat endpoint's: no tokenizer)
    assert single.key() != multi.key()  # a stored row says which format made it


def test_names_say_a_format_only_where_it_is_not_the_default(data_dir):
    def named(name: str, fewshot_format: str) -> str:
        return str(stored(with_fewshot_format(parse_name(name), fewshot_format)))

    assert (
        named("mmlu_5shot", MULTI_TURN) == "mmlu_5shot_multiturn" and named("mmlu_5shot", SINGLE_TURN) == "mmlu_5shot"
    )
    assert named("mmlu", MULTI_TURN) == "mmlu" and named("humaneval", MULTI_TURN) == "humaneval"  # no exemplars
    assert named("mmlu_5shot_multiturn", SINGLE_TURN) == "mmlu_5shot_multiturn"  # the name says its own
    assert named("mmlu_5shot_singleturn", MULTI_TURN) == "mmlu_5shot"  # its own, the default: said once stored
    assert (
        str(stored(parse_name("mmlu_5shot_singleturn"))) == "mmlu_5shot"
        and build_task("mmlu_5shot_singleturn", data_dir, Subset(limit=1)).dataset == "mmlu_5shot"
    )
    for bad, says in (
        ("mmlu_multiturn", "a few-shot format needs exemplars: name them, e.g. mmlu_5shot_multiturn"),
        ("humaneval_2shot_multiturn", "few-shot"),
    ):
        with pytest.raises(DateEvalError, match=says):
            parse_name(bad)


QUIZ = [
    {"id": f"q{k}", "question": f"What is {k} + 1?", "choices": [str(k), str(k + 1), str(k + 2)], "answer": "B"}
    for k in range(4)
]


def _quiz(folder) -> tuple:
    data, dev = folder / "quiz.jsonl", folder / "quiz-dev.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in QUIZ))
    dev.write_text("".join(json.dumps({**row, "id": "d" + row["id"]}) + "\n" for row in QUIZ))
    return data, dev


def test_a_spec_and_its_flag_choose_the_format(tmp_path):
    data, dev = _quiz(tmp_path)
    spec = tmp_path / "quiz.toml"
    spec.write_text(f'data = "{data.name}"\n[fewshot]\ndata = "{dev.name}"\nshots = 2\nformat = "multi-turn"\n')
    task = build_task(str(spec))
    assert (
        task.dataset == "quiz_2shot_multiturn" and task.multiturn and len(task.prompt(task.items[0], JAN).messages) == 6
    )
    spec.write_text(f'data = "{data.name}"\n[fewshot]\ndata = "{dev.name}"\nshots = 2\nformat = "both"\n')
    done = run_cli("run", "--dataset", str(spec), "--store", str(tmp_path / "store"))
    assert (
        done.returncode == 2
        and "fewshot.format" in done.stderr
        and "'both' is not one of single-turn, multi-turn" in done.stderr
    )
    flagged = run_cli(
        "run",
        "--dataset",
        str(data),
        "--spec-fewshot-data",
        str(dev),
        "--spec-fewshot-shots",
        "1",
        "--spec-fewshot-format",
        "multi-turn",
        "--limit",
        "2",
        "--dates",
        "2024-01-01,2024-01-02",
        "--store",
        str(tmp_path / "flagged"),
    )
    assert flagged.returncode == 0, flagged.stderr
    assert {path.parent.name for path in (tmp_path / "flagged").glob("*/*/*.parquet")} == {"quiz_1shot_multiturn"}


def test_both_formats_in_one_sweep_are_compared_on_factors_and_in_the_report(tmp_path, data_dir, monkeypatch):
    store = tmp_path / "store"
    done = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--shots",
        "2",
        "--fewshot-format",
        "single-turn",
        "--fewshot-format",
        "multi-turn",
        "--data-dir",
        str(data_dir),
        "--limit",
        "6",
        "--dates",
        "2024-01-01..2024-01-03",
        "--store",
        str(store),
    )
    assert done.returncode == 0, done.stderr
    layer, _ = results.open(store)
    formats = layer.fewshot_formats()
    assert (
        set(formats["format"]) == {SINGLE_TURN, MULTI_TURN}
        and set(formats["dataset"]) == {"arc_challenge_2shot"}
        and len(formats) == 2
    )
    summary = layer.summary().set_index("dataset")
    for row in formats.itertuples():
        stored = summary.loc["arc_challenge_2shot" if row.format == SINGLE_TURN else "arc_challenge_2shot_multiturn"]
        assert (
            row.accuracy_delta == stored["accuracy_delta"]
            and row.cochran_permutation_p == stored["cochran_permutation_p"]
        )
    assert run_cli("report", "--store", str(store), "--out", str(tmp_path / "report")).returncode == 0
    assert "the date effect under each few-shot format" in (tmp_path / "report" / "index.html").read_text()
    monkeypatch.setenv("DATEEVAL_STORE", str(store))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params.update({"store": "mine", "dataset": "arc_challenge_2shot"})
    at.run()
    at.switch_page("pages/factors.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "The date effect under each few-shot format (paper §5.4)" in [header.value for header in at.subheader]
    shown = next(table.value for table in at.dataframe if "Few-shot format" in table.value.columns)
    assert sorted(shown["Few-shot format"]) == [MULTI_TURN, SINGLE_TURN]


def test_the_run_page_runs_the_chosen_format(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/run.py").run()
    at.text_input[1].set_value(str(data_dir))  # the data folder
    at.date_input[1].set_value(at.date_input[0].value)  # one date
    next(box for box in at.number_input if box.label == "First N items").set_value(2)
    next(box for box in at.number_input if box.label.startswith("Few-shot exemplars")).set_value(1)
    at.selectbox(key="fewshot_format").set_value(MULTI_TURN)
    at.button[0].click().run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    sweep_finishes(at)
    assert {path.parent.name for path in (tmp_path / "results").glob("*/*/*.parquet")} == {
        "arc_challenge_1shot_multiturn"
    }
