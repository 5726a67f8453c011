"""A user's own benchmark: files and specs, the registry they join, every mistake in one line, and a real sweep."""

import csv
import gzip
import json
import resource
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, run_cli

from dateeval import cli
from dateeval.data import Subset
from dateeval.errors import DateEvalError
from dateeval.data.limits import REGEX_SECONDS
from dateeval.store import Store
from dateeval.tasks import BENCHMARKS, GENERATION_BENCHMARKS, build_task, parse_name, resolve
from dateeval.tasks.grading import GRADERS, Grading, extract_answer
from dateeval.tasks.registry import REGISTRY

EXAMPLES = ROOT / "docs" / "examples"
ROWS = [
    {"question": "2 + 2 = ?", "choices": ["3", "4", "5", "6"], "answer": 1},
    {"question": "Capital of Italy?", "choices": ["Rome", "Milan", "Turin"], "answer": "A"},
]


pytestmark = pytest.mark.usefixtures("fresh_registry")  # each test registers its own files (conftest)


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _build(path: Path, **subset):
    return build_task(resolve(str(path)), None, Subset(**subset))


def _error(path_or_name: str | Path, data_dir: Path | None = None) -> str:
    with pytest.raises(DateEvalError) as caught:
        build_task(resolve(str(path_or_name), data_dir), data_dir)
    return str(caught.value)


# ------------------------------------------------------------------ registry


def test_builtin_names_help_and_grammar_come_from_the_registry(capsys):
    assert BENCHMARKS == (
        "mmlu",
        "arc_challenge",
        "arc_easy",
        "gpqa_main",
        "gpqa_diamond",
        "gpqa_extended",
        "gsm8k",
        "humaneval",
        "wmt16_en_de",
        "wmt16_en_fi",
        "wmt16_en_cs",
    )
    assert GENERATION_BENCHMARKS == tuple(name for name in BENCHMARKS if REGISTRY[name].family == "generation")
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the help: compare with spacing undone
    for name in BENCHMARKS:
        assert name in shown
    assert ".toml/.yaml spec" in shown and "few-shot (mmlu, arc_challenge, arc_easy, gsm8k)" in shown


# ------------------------------------------------------------------ the common case: no spec


def test_jsonl_with_choices_list_and_index_or_letter_answers(tmp_path):
    task = _build(_jsonl(tmp_path / "quiz.jsonl", ROWS))
    assert task.dataset == "quiz" and type(task).__name__ == "OwnMCQATask"
    assert [(item.options, item.answer) for item in task.items] == [
        (("3", "4", "5", "6"), 1),
        (("Rome", "Milan", "Turin"), 0),
    ]
    assert all(
        item.id.startswith("quiz/") for item in task.items
    )  # no id field: ids from the content, stable across runs


def test_csv_with_option_columns_and_a_list_cell(tmp_path):
    path = tmp_path / "Sky Quiz.csv"
    path.write_text(
        "\ufeffquestion,A,B,C,D,answer\nWhich is a star?,Sun,Moon,Mars,,A\nWhich is a planet?,Sun,Moon,Mars,Vega,2\n",
        encoding="utf-8",
    )
    task = _build(path)
    assert task.dataset == "sky_quiz"
    assert task.items[0].options == ("Sun", "Moon", "Mars") and task.items[1].answer == 2
    listed = tmp_path / "listed.csv"
    with listed.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(
            [["id", "question", "choices", "answer"], ["q1", "Pick two", '["one", "two"]', "b"]]
        )
    assert _build(listed).items[0].answer == 1  # a JSON list in a cell; a lower-case letter


def test_the_readme_example_file_runs_without_a_spec():
    task = _build(EXAMPLES / "planets.csv")
    assert task.dataset == "planets" and [item.answer for item in task.items] == [1, 2, 0, 3]


def test_parquet_and_answer_as_option_text(tmp_path):
    path = tmp_path / "texts.parquet"
    pq.write_table(
        pa.table(
            {
                "question": ["Largest?", "Smallest?"],
                "choices": [["ant", "whale"], ["ant", "whale"]],
                "answer": ["whale", "ant"],
            }
        ),
        path,
    )
    assert [item.answer for item in _build(path).items] == [1, 0]


def test_the_example_spec_maps_fields_and_prompts_with_its_system_prompt_and_exemplars():
    import datetime as dt

    from dateeval.conditions import Condition

    name = resolve(str(EXAMPLES / "geography.toml"))
    assert name == "geography" and str(parse_name(name).with_shots(2)) == "geography_2shot"
    task = build_task("geography_2shot", EXAMPLES)  # found by name in the data folder, as the explorer and regrade do
    item = task.items[0]
    assert (item.id, item.answer, item.subject) == ("geo-1", 1, "rivers")
    messages = task.prompt(item, Condition(date=dt.date(2024, 1, 1))).messages
    assert messages[0]["content"] == "You are a geography teacher."
    assert "Which river flows through Cairo?" in messages[1]["content"]  # same-topic exemplars from the dev file
    paper = task.prompt(
        item, Condition(date=dt.date(2024, 1, 1), system_prompt="You are an expert multiple-choice question answerer.")
    )
    assert (
        paper.messages[0]["content"] == "You are an expert multiple-choice question answerer."
    )  # a wording factor still varies it


def test_yaml_spec_with_option_columns_cot_and_stored_names(tmp_path):
    _jsonl(tmp_path / "rows.jsonl", [{"n": "7", "q": "Odd one?", "w": "2", "x": "4", "y": "7", "key": "y"}])
    spec = tmp_path / "odd.yaml"
    spec.write_text(
        "kind: cot\ndata: rows.jsonl\nfields:\n  question: q\n  choices: [w, x, y]\n  answer: key\n  answer_format: text\n  id: n\n"
    )
    with pytest.raises(DateEvalError, match="'y' is not the text of one of its options"):
        build_task(resolve(str(spec)))
    spec.write_text(spec.read_text().replace("key: y", "").replace("answer: key", "answer: y"))
    name = resolve(str(spec))
    task = build_task(name)
    assert name == "odd_cot" and parse_name(name).cot and type(task).__name__ == "OwnChainOfThoughtTask"
    assert task.items[0].options == ("2", "4", "7") and task.items[0].answer == 2


def test_task_key_follows_the_content_not_the_path(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _jsonl(tmp_path / "a" / "same.jsonl", ROWS)
    second = Path(shutil.copy(first, tmp_path / "b" / "same.jsonl"))
    key = _build(first).content_key
    REGISTRY.pop("same")  # another process: the second copy registers under the same name
    assert _build(second).content_key == key
    _jsonl(second, [*ROWS[:1], {**ROWS[1], "answer": "B"}])
    assert _build(second).content_key != key  # an edited file is a new entry, not mixed with the old results


# ------------------------------------------------------------------ graders


@pytest.mark.parametrize(
    ("grading", "output", "reference", "parsed", "correct"),
    [
        (Grading("exact"), "Thinking...\nAnswer: **Paris.**", "paris", "**Paris.**", True),
        (Grading("exact"), "The capital is Paris.", "Paris", "The capital is Paris.", False),
        (Grading("regex"), "The capital is Paris.", "Paris", "The capital is Paris.", True),
        (Grading("regex"), "Parisian food", "Paris", "Parisian food", False),
        (Grading("numeric", tolerance=0.01), "so about 3.141 in all", "3.14", "3.141", True),
        (Grading("numeric"), "Answer: 1,200 dollars", "1200", "1200", True),
        (Grading("gsm8k"), "no number here", "42", None, False),
        (Grading("exact", extract=r"<ans>(.*?)</ans>"), "<ans>no</ans> then <ans> Yes </ans>", "yes", "Yes", True),
    ],
)
def test_graders(grading, output, reference, parsed, correct):
    grader = GRADERS[grading.method]
    answer = extract_answer(output, grading)
    assert answer == parsed
    assert (answer is not None and grader.correct(answer, grader.reference(reference), grading)) is correct


@pytest.mark.parametrize(
    ("grading", "output"),
    [
        (Grading("exact", extract=r"(a+)+$"), "a" * 26 + "!"),  # 8.7 s in re; the regex module sees it cannot match
        (Grading("exact", extract=r"(a|aa)+$"), "a" * 36 + "!"),  # 14 s in re; stopped at the time bound
        (Grading("regex", pattern=r"(a|aa)+$|{answer}"), "a" * 36 + "!"),
    ],
)
def test_a_grading_regex_is_bounded_in_time(grading, output):
    start = time.process_time()
    answer = extract_answer(output, grading)
    correct = answer is not None and GRADERS[grading.method].correct(answer, "b", grading)
    assert time.process_time() - start < 2.5 * REGEX_SECONDS and not correct


# ------------------------------------------------------------------ every mistake: one line naming file, row and field

BAD_ROWS = [
    ([ROWS[0], {"question": "No answer", "choices": ["a", "b"]}], "line 2, field 'answer': missing"),
    (
        [{**ROWS[1], "answer": 3}],
        "line 1, field 'answer': 3 is out of range: the row has 3 options (index 0-2 or letter A-C)",
    ),
    (
        [{**ROWS[0], "answer": 4}],
        "line 1, field 'answer': 4 is ambiguous (as index out of range, as text option B): set answer_format",
    ),
    ([{**ROWS[1], "answer": "D"}], "line 1, field 'answer': 'D' is out of range: the row has 3 options"),
    ([{**ROWS[0], "answer": 1.5}], "line 1, field 'answer': 1.5 is not a whole number"),
    (
        [{**ROWS[0], "answer": "3"}],
        "line 1, field 'answer': '3' is ambiguous (as index option D, as text option A): set answer_format",
    ),
    ([{**ROWS[0], "id": "x"}, {**ROWS[1], "id": "x"}], "line 2, field 'id': duplicate id 'x' (first on line 1)"),
    ([ROWS[0], ROWS[1], ROWS[0]], "line 3, field 'question': the same question as on line 1"),
    ([{**ROWS[0], "question": ["a", "list"]}], "line 1, field 'question': expected text, found a list"),
    ([{**ROWS[0], "choices": "3, 4, 5"}], "line 1, field 'choices': expected a list of options, found str"),
    ([{**ROWS[0], "choices": ["3", {"text": "4"}]}], "line 1, field 'choices[1]': expected text, found an object"),
    ([{**ROWS[0], "choices": ["only one"], "answer": 0}], "line 1, field 'choices': needs 2 to 26 options, found 1"),
    (
        [{**ROWS[0], "answer": True}],
        "line 1, field 'answer': expected an index, a letter or an option's text, found true/false",
    ),
    ([{**ROWS[0], "question": "   "}], "line 1, field 'question': is empty"),
    ([ROWS[0], [1, 2]], "line 2: expected a JSON object, found list"),
]


@pytest.mark.parametrize(("rows", "fragment"), BAD_ROWS)
def test_bad_rows_are_named(rows, fragment, tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", rows)
    message = _error(path)
    assert str(path) in message and fragment in message, message


@pytest.mark.parametrize(
    ("name", "content", "fragment"),
    [
        ("empty.jsonl", b"\n\n", "has no rows"),
        ("header.csv", b"question,choices,answer\n", "has no rows"),
        (
            "latin.jsonl",
            json.dumps(ROWS[0]).encode() + b'\n{"question": "caf\xe9"}\n',
            "is not UTF-8 text (byte 89) on line 2",
        ),
        ("broken.jsonl", b'{"question": "x",\n', "line 1: not JSON"),
        ("long.csv", b"question,A,B,answer\nQ,a,b,A,extra\n", "line 2: 5 values for 4 header columns"),
        (
            "short.csv",
            b"question,A,B,answer\nQ,a,b\n",
            "line 2, field 'answer': missing (the row has fewer values than the header has columns)",
        ),
        ("fake.parquet", b"not parquet at all", "not a readable Parquet file"),
        ("noopts.csv", b"question,answer\nQ,A\n", "line 2, field 'choices': missing"),
    ],
)
def test_bad_files_are_named(name, content, fragment, tmp_path):
    path = tmp_path / name
    path.write_bytes(content)
    message = _error(path)
    assert str(path) in message and fragment in message, message


def _spec(tmp_path: Path, text: str, suffix: str = ".toml") -> Path:
    _jsonl(tmp_path / "rows.jsonl", ROWS)
    path = tmp_path / f"spec{suffix}"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('data = "rows.jsonl"\nknd = "mcqa"\n', "key 'knd': unknown (known here: kind, data,"),
        ('data = "rows.jsonl"\nkind = "essay"\n', "key 'kind': 'essay' is not one of mcqa, cot, generation"),
        ('kind = "mcqa"\n', "key 'data': missing"),
        ('data = "nothere.jsonl"\n', "key 'data': no file"),
        (
            'data = "rows.txt"\n',
            "key 'data': 'rows.txt' is not a .jsonl, .jsonl.gz, .csv, .parquet file nor hf:org/name",
        ),
        ('data = "rows.jsonl"\n[fields]\nquestion = 3\n', "key 'fields.question': expected text, found int 3"),
        (
            'data = "rows.jsonl"\n[fields]\nchoices = ["A"]\n',
            "key 'fields.choices': a list of option columns needs at least two",
        ),
        (
            'data = "rows.jsonl"\n[fields]\nanswer_format = "roman"\n',
            "key 'fields.answer_format': 'roman' is not one of auto, index, letter, text",
        ),
        ('data = "rows.jsonl"\n[grading]\nmethod = "exact"\n', "key 'grading': applies to kind = \"generation\" only"),
        (
            'kind = "generation"\ndata = "rows.jsonl"\n[grading]\nmethod = "bleu"\n',
            "key 'grading.method': 'bleu' is not one of exact, regex, numeric, gsm8k",
        ),
        (
            'kind = "generation"\ndata = "rows.jsonl"\n[grading]\nextract = "(unclosed"\n',
            "key 'grading.extract': not a regular expression",
        ),
        (
            'kind = "generation"\ndata = "rows.jsonl"\n[grading]\ntolerance = -1\n',
            "key 'grading.tolerance': must be 0 or more",
        ),
        ('data = "rows.jsonl"\n[fewshot]\nshots = 3\n', "key 'fewshot.shots': needs exemplars"),
        ('data = "rows.jsonl"\nsplit = "train"\n', "key 'split': applies to Hub datasets"),
        ('data = "rows.jsonl"\nkind = mcqa\n', "is not valid TOML: Invalid value (at line 2, column 8)"),
    ],
)
def test_bad_specs_are_named(text, fragment, tmp_path):
    message = _error(_spec(tmp_path, text))
    assert f"spec {tmp_path / 'spec.toml'}" in message and fragment in message, message


def test_a_reference_the_grader_cannot_compare_is_named(tmp_path):
    spec = _spec(tmp_path, 'kind = "generation"\ndata = "rows.jsonl"\n[grading]\nmethod = "numeric"\n')
    _jsonl(tmp_path / "rows.jsonl", [{"question": "Q", "answer": "12"}, {"question": "R", "answer": "twelve"}])
    assert (
        f"dataset {tmp_path / 'rows.jsonl'}, line 2, field 'answer': 'twelve' is not a number (grading method numeric)"
        in _error(spec)
    )


def test_bad_yaml_and_names(tmp_path):
    assert "is not valid YAML (line 2): mapping values are not allowed here" in _error(
        _spec(tmp_path, "data: rows.jsonl\nkind: mcqa: cot\n", ".yaml")
    )
    assert "expected a mapping of keys" in _error(_spec(tmp_path, "- a list\n", ".yml"))
    assert "ends like a variant (_cot, _<k>shot, _multiturn, _singleturn): rename the file" in _error(
        _jsonl(tmp_path / "quiz_cot.jsonl", ROWS)
    )
    assert "ends like a variant" in _error(_jsonl(tmp_path / "quiz_multiturn.jsonl", ROWS))
    assert "dataset name 'mmlu' of" in _error(
        _jsonl(tmp_path / "mmlu.jsonl", ROWS)
    ) and "is already taken by a built-in benchmark" in _error(tmp_path / "mmlu.jsonl")
    assert "dataset file" in _error(tmp_path / "absent.csv") and "does not exist" in _error(tmp_path / "absent.csv")


def test_a_hub_dataset_spec_is_read_through_datasets(tmp_path, monkeypatch):
    """The Hub is unreachable here: the spec is parsed, and loading ends in one line naming the dataset."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = tmp_path / "hubbed.toml"
    spec.write_text('data = "hf:someone/some-mcqa"\nsplit = "validation"\n[fewshot]\nsplit = "train"\n')
    message = _error(spec)
    assert "cannot load someone/some-mcqa (None) from the Hugging Face Hub: HF_HUB_OFFLINE=1 is set" in message
    assert "save it as a JSONL, CSV or Parquet file" in message


HUB_ROWS = [*ROWS, {"question": "Colour of the sky?", "choices": ["blue", "green"], "answer": 0}]


def _hub_spec(tmp_path: Path, monkeypatch, card: str = "") -> Path:
    """A spec naming ``hf:FOLDER``: the Hub is unreachable here, and datasets loads a local folder (its ``test.jsonl``,
    its card ``README.md``) through the very calls a Hub dataset goes through, into a cache of the test's own."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "quiz"
    folder.mkdir()
    _jsonl(folder / "test.jsonl", HUB_ROWS)
    (folder / "README.md").write_text(card)
    spec = tmp_path / "hubbed.toml"
    spec.write_text(f'data = "hf:{folder}"\n')
    return spec


@pytest.mark.parametrize(
    ("bound", "value", "fragment"),
    [
        (None, None, None),
        ("MAX_ROWS", 2, "has 3 rows, over the 2 a file may hold"),  # 2: the spec's one line stays within it
        ("MAX_FIELDS", 2, "has 3 fields, over the 2 a row may have"),
        (
            "MAX_CELLS",
            14,
            "holds over the 14 cells (rows × fields, a list's elements each counted) a file may hold",
        ),  # 3 + 9 + 3
        ("MAX_TEXT_BYTES", 64, "is over the 6.10352e-05 MiB a file may hold decoded"),
    ],
)
def test_a_hub_dataset_is_bounded_as_a_local_file_is(bound, value, fragment, tmp_path, monkeypatch):
    """A Hub split reads as its file would, and past a bound of a data file (lowered here: the test stays small) it
    ends in one line, measured on the prepared Arrow table before any row is built."""
    spec = _hub_spec(tmp_path, monkeypatch)
    if bound is None:
        expected = [(row["question"], tuple(row["choices"]), answer) for row, answer in zip(HUB_ROWS, (1, 0, 0))]
        assert [(item.question, item.options, item.answer) for item in _build(spec).items] == expected
        return
    monkeypatch.setattr(f"dateeval.data.files.{bound}", value)
    message = _error(spec)
    assert message.startswith(f"dataset {tmp_path / 'quiz'} (None, test) from the Hugging Face Hub {fragment}"), message
    assert message.endswith(
        "load a smaller split or config, or save a part of it as a JSONL, CSV or Parquet file and give that file instead"
    )


@pytest.mark.parametrize(
    ("declared", "fragment"),
    [
        ("num_examples: 10000000", "declares 10,000,000 rows, over the 250,000 a file may hold"),
        ("num_bytes: 100000000000", "declares 95367.4 MiB, over the 64 MiB a file may hold decoded"),
    ],
)
def test_a_hub_dataset_its_card_declares_too_large_is_refused_before_it_is_downloaded(
    declared, fragment, tmp_path, monkeypatch
):
    card = f"---\ndataset_info:\n  splits:\n  - name: test\n    {declared}\n---\n"
    message = _error(_hub_spec(tmp_path, monkeypatch, card))
    assert f"from the Hugging Face Hub {fragment}" in message, message
    assert not list((tmp_path / "cache").rglob("*.arrow"))  # nothing prepared


def test_a_hub_dataset_that_fails_to_prepare_offline_is_named_as_such(tmp_path, monkeypatch):
    """Offline, a split that cannot be reached is "HF_HUB_OFFLINE=1 is set"; one in datasets' reach that fails to
    prepare (here a Parquet file that is not one, read before datasets prepares it) says what failed."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = _hub_spec(tmp_path, monkeypatch)
    (tmp_path / "quiz" / "test.jsonl").unlink()
    (tmp_path / "quiz" / "test.parquet").write_bytes(b"not parquet at all")
    message = _error(spec)
    assert (
        f"cannot read dataset file {tmp_path / 'quiz' / 'test.parquet'}: not a readable Parquet file (Parquet magic bytes not found"
        in message
    ), message
    assert "HF_HUB_OFFLINE" not in message


def test_cli_errors_are_one_line_exit_2_before_the_model_loads(tmp_path, capsys):
    path = _jsonl(tmp_path / "oops.jsonl", [ROWS[0], {**ROWS[1], "answer": 9}])
    status = cli.main(["run", "--dataset", str(path), "--dates", "2024-01-01", "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert (
        err
        == f"dateeval: error: dataset {path}, line 2, field 'answer': 9 is out of range: the row has 3 options (index 0-2 or letter A-C)\n"
    )
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").rglob("*.parquet"))


# ------------------------------------------------------------------ bombs: a few KB that parsing would blow up

NUMERIC_ROWS = [
    {"question": "2 + 2 = ?", "choices": ["3", "4"], "answer": "4"}
]  # rows any kind of spec accepts, so the spec is what fails
LAUGHS = (
    "[&l0 lol, " + ", ".join(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, 10)) + "]"
)  # 9**9 lols in 300 bytes


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (f"system_prompt: {LAUGHS}\n", "its YAML expands to over 10,000 values, the most it may hold (line 2;"),
        (
            "system_prompt: &t "
            + "x" * 200_000
            + "\nkind: ["
            + ", ".join(["*t"] * 10)
            + "]\n",  # 2 M characters from 200 KB
            "its YAML expands to over 1,048,576 characters of text, the most it may hold (line 3;",
        ),
        ("system_prompt: &a [x, {b: *a}]\n", "its YAML has an alias inside its own anchor (line 2)"),
        ("system_prompt: " + "[" * 40 + "]" * 40 + "\n", "its YAML is nested over 32 levels deep (line 2)"),
        (
            "kind: generation\ngrading: {method: numeric, tolerance: .nan}\n",
            "key 'grading.tolerance': must be a finite number, not nan",
        ),
        (
            "kind: generation\ngrading: {method: numeric, tolerance: .inf}\n",
            "key 'grading.tolerance': must be a finite number, not inf",
        ),
    ],
)
def test_yaml_spec_bombs_are_refused_before_they_are_built(text, fragment, tmp_path):
    spec = _spec(tmp_path, "data: rows.jsonl\n" + text, ".yaml")
    _jsonl(tmp_path / "rows.jsonl", NUMERIC_ROWS)
    tracemalloc.start()
    message = _error(spec)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert f"spec {tmp_path / 'spec.yaml'}" in message and fragment in message, message
    assert peak < 10 * 2**20, peak  # the billion laughs built 9.2 GB before its error


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            'kind = "generation"\n[grading]\nmethod = "numeric"\ntolerance = nan\n',
            "key 'grading.tolerance': must be a finite number, not nan",
        ),
        (
            'kind = "generation"\n[grading]\nmethod = "gsm8k"\ntolerance = -inf\n',
            "key 'grading.tolerance': must be a finite number, not -inf",
        ),
        ("system_prompt = " + "[" * 100_000 + "]" * 100_000 + "\n", "is not valid TOML: nested too deeply"),
    ],
)
def test_toml_spec_bombs_are_one_line(text, fragment, tmp_path):
    spec = _spec(tmp_path, 'data = "rows.jsonl"\n' + text)
    _jsonl(tmp_path / "rows.jsonl", NUMERIC_ROWS)
    message = _error(spec)
    assert f"spec {tmp_path / 'spec.toml'}" in message and fragment in message, message


def _data_bombs(folder: Path) -> dict[str, str]:
    """Each data bomb's file (a few KB on disk, or sparse) and the line it must end in."""
    with gzip.open(folder / "blank.jsonl.gz", "wb", compresslevel=1) as handle:
        handle.write(b" " * (65 * 2**20))
    for sparse in ("sparse.jsonl", "sparse.yaml"):
        with open(folder / sparse, "wb") as handle:
            handle.truncate(2 * 2**30)
    (folder / "lines.jsonl").write_bytes(b"{}\n" * 250_000)
    (folder / "wide.jsonl").write_text(json.dumps({f"f{n}": 0 for n in range(1001)}) + "\n")
    (folder / "long.jsonl").write_text(json.dumps({"question": "x" * (4 * 2**20)}) + "\n")
    (folder / "columns.csv").write_text(",".join(f"f{n}" for n in range(1001)) + "\n" + ",".join("0" * 1001) + "\n")
    one_value = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(3000, np.int32)), pa.array(["x" * 2**20])
    )  # 3 GB decoded
    pq.write_table(
        pa.table({"question": one_value, "choices": [["a", "b"]] * 3000, "answer": [0] * 3000}), folder / "rle.parquet"
    )
    pq.write_table(pa.table({f"f{n}": np.zeros(200_000, np.int8) for n in range(11)}), folder / "cells.parquet")
    return {
        "blank.jsonl.gz": "is over the 64 MiB a file may hold decompressed",
        "sparse.jsonl": "is over the 64 MiB a file may hold: cut it into smaller files",
        "sparse.yaml": "is over the 1 MiB a file may hold: cut it into smaller files",
        "lines.jsonl": "has over the 250,000 lines a file may hold",
        "wide.jsonl": "line 1: 1,001 fields, over the 1,000 a row may have",
        "long.jsonl": "line 1: 4,194,320 characters, over the 4,194,304 a line may have",
        "columns.csv": "line 2: 1,001 fields, over the 1,000 a row may have",
        "rle.parquet": "is over the 64 MiB a file may hold decoded",
        "cells.parquet": "its footer: over the 2,000,000 cells (rows × fields) a file may hold",
    }


BOMB_CHILD = """
import json, sys, time
from dateeval.errors import DateEvalError
from dateeval.tasks import build_task, resolve
for path in sys.argv[1:]:
    start = time.perf_counter()
    try:
        build_task(resolve(path))
        ended = "built"
    except DateEvalError as error:
        ended = str(error)
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so it would count the forking pytest process's memory
    peak = int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])
    print(json.dumps([path, ended, time.perf_counter() - start, peak]), flush=True)
"""


def test_data_file_bombs_end_in_one_line_in_bounded_memory_and_seconds(tmp_path):
    """Every bomb in one process whose address space is capped at 1.5 GB (the bombs took 2-3.5 GB and 2-12 s before):
    each must end in its line within seconds (0.3 s at most on a quiet machine; 5 s allows a loaded one), and the
    process's peak stays under 600 MB."""
    expected = _data_bombs(tmp_path)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1500 * 2**20, 1500 * 2**20))

    done = subprocess.run(
        [sys.executable, "-c", BOMB_CHILD, *(str(tmp_path / name) for name in expected)],
        cwd=ROOT,
        preexec_fn=cap,
        capture_output=True,
        text=True,
        timeout=120,
    )
    results = {
        Path(path).name: (ended, seconds, peak)
        for path, ended, seconds, peak in map(json.loads, done.stdout.splitlines())
    }
    assert list(results) == list(expected), done.stderr[-2000:]
    for name, fragment in expected.items():
        ended, seconds, _ = results[name]
        assert str(tmp_path / name) in ended and fragment in ended and seconds < 5, (
            name,
            ended,
            seconds,
        )  # 0.0-0.3 s quiet
    assert max(peak for _, _, peak in results.values()) < 600 * 2**10


# ------------------------------------------------------------------ end to end with the real default model


@pytest.mark.model
def test_spec_datasets_sweep_end_to_end(tmp_path):
    """A spec'd JSONL MCQA dataset and a spec'd generation dataset through a CLI sweep, resume, summary, regrade and the
    explorer's lookup by name. Kept small (2 items, 2 dates, 8 generated tokens): CPU generation is the slow part."""
    store = tmp_path / "store"
    args = [
        "run",
        "--dataset",
        str(EXAMPLES / "geography.toml"),
        "--dataset",
        str(EXAMPLES / "arithmetic.toml"),
        "--limit",
        "2",
        "--dates",
        "2024-01-01,2024-07-01",
        "--dtype",
        "float32",
        "--max-new-tokens",
        "8",
        "--store",
        str(store),
    ]
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    assert "4 units (0 already in the store), 8 item-dates scored" in first.stdout
    frame, problems = Store(store).read()
    assert not problems.corrupted and len(frame) == 8
    assert (
        set(frame["dataset"]) == {"geography", "arithmetic"}
        and frame.groupby("dataset")["task_key"].nunique().eq(1).all()
    )
    mcqa, generated = frame[frame["dataset"] == "geography"], frame[frame["dataset"] == "arithmetic"]
    assert (
        set(mcqa["task"]) == {"mcqa"}
        and mcqa["probs"].map(len).eq(4).all()
        and set(mcqa["subject"]) == {"rivers", "capitals"}
    )
    assert (
        set(generated["task"]) == {"generation"}
        and generated["output"].str.len().gt(0).all()
        and set(generated["reference"]) == {"21", "180"}
    )
    assert set(frame["item_id"]) == {"geo-1", "geo-2", "ar-1", "ar-2"}
    rerun = run_cli(*args)
    assert rerun.returncode == 0 and "4 units (4 already in the store), 0 item-dates scored" in rerun.stdout, (
        rerun.stderr
    )
    summary = run_cli("summary", "--store", str(store), "--json")
    assert summary.returncode == 0, summary.stderr
    assert {row["dataset"] for row in json.loads(summary.stdout)} == {"geography", "arithmetic"}
    regraded = run_cli("regrade", "--store", str(store), "--data-dir", str(EXAMPLES))
    assert regraded.returncode == 0 and "arithmetic: 4 stored outputs regraded, 0 grades differ" in regraded.stdout, (
        regraded.stderr
    )
    task = build_task(
        "geography", str(EXAMPLES)
    )  # how the explorer reads an item's text: by stored name, from a data folder
    assert "Danube" in task.describe(task.items[0])


def test_a_run_length_encoded_parquet_hub_split_is_refused_before_datasets_decodes_it(tmp_path, monkeypatch):
    """A Hub split of a few KB of Parquet that decodes to 3 GB ends in one line, read as a local Parquet file is,
    before ``datasets`` prepares it (preparing decodes every row group: 2.2 GB and 23 s before, bench/bombs.py)."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    bombs = tmp_path / "bombs"
    bombs.mkdir()
    _data_bombs(bombs)
    folder = tmp_path / "rle"
    folder.mkdir()
    (folder / "test.parquet").write_bytes((bombs / "rle.parquet").read_bytes())
    spec = tmp_path / "hubbed.toml"
    spec.write_text(f'data = "hf:{folder}"\n')
    message = _error(spec)
    assert f"dataset file {folder / 'test.parquet'} is over the 64 MiB a file may hold decoded" in message, message
    assert not list((tmp_path / "cache").rglob("*.arrow"))  # nothing prepared
