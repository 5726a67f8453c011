"""A user's dataset without a spec file of theirs: described by ``run`` flags (``dateeval.tasks.described``), or uploaded
on the Run page (``dateeval.explorer.uploads``). Both become a spec kept in the store and rebuilt from there by name."""

import json

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import pytest
from conftest import ROOT, sweep_finishes
from streamlit.testing.v1 import AppTest

from dateeval import cli
from dateeval.explorer import uploads
from dateeval.errors import DateEvalError
from dateeval.tasks import build_task, custom, described, resolve, spec_keys, specs
from dateeval.tasks.mcqa import label_tokens
from dateeval.tasks.registry import REGISTRY

EXAMPLES = ROOT / "docs" / "examples"
ROWS = [
    {"qid": "q1", "prompt": "2 + 2 = ?", "options": ["3", "4", "5", "6"], "correct": "B", "topic": "sums"},
    {
        "qid": "q2",
        "prompt": "Capital of Italy?",
        "options": ["Rome", "Milan", "Turin"],
        "correct": "A",
        "topic": "capitals",
    },
]


pytestmark = pytest.mark.usefixtures("fresh_registry")  # each test registers its own files (conftest)


def _jsonl(path: Path, rows: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _flags(*argv: str) -> dict:
    """The spec keys ``run`` flags set, parsed by the real command line."""
    return described.values_from(vars(cli.parser().parse_args(["run", *argv])))


# ------------------------------------------------------------------ flags


def test_every_spec_key_but_data_is_one_flag_and_the_reader_knows_no_other_key(tmp_path):
    run_flags = {
        flag
        for action in cli.parser()._subparsers._group_actions[0].choices["run"]._actions
        for flag in action.option_strings
    }
    assert {key.flag for key in spec_keys.KEYS if key.name != "data"} <= run_flags
    spec = tmp_path / "x.toml"
    spec.write_text('data = "x.jsonl"\nshots = 2\n')
    with pytest.raises(
        DateEvalError,
        match="key 'shots': unknown .known here: kind, data, split, config, system_prompt, instruction, "
        "max_new_tokens, fields, grading, fewshot",
    ):
        specs.read_spec(spec)


def test_flags_and_the_equivalent_hand_written_spec_are_one_dataset(tmp_path):
    """The stored identity (task_key, with the content key in it) does not depend on how the dataset was described."""
    data, dev = (
        _jsonl(tmp_path / "data" / "quiz.jsonl", ROWS),
        _jsonl(tmp_path / "data" / "quiz-dev.jsonl", [{**row, "qid": "d" + row["qid"]} for row in ROWS]),
    )
    store = tmp_path / "store"
    values = _flags(
        "--dataset",
        str(data),
        "--spec-system-prompt",
        'A "quiz" master.\n',
        "--spec-fields-question",
        "prompt",
        "--spec-fields-choices",
        "options",
        "--spec-fields-answer",
        "correct",
        "--spec-fields-answer-format",
        "letter",
        "--spec-fields-id",
        "qid",
        "--spec-fields-subject",
        "topic",
        "--spec-fewshot-data",
        str(dev),
        "--spec-fewshot-shots",
        "1",
    )
    written = described.describe_all([str(data)], values, store)
    assert written == {str(data): store.resolve() / ".specs" / "quiz.toml"}
    kept = tomllib.loads(written[str(data)].read_text())
    assert (
        kept == {"data": str(data), **values} and kept["system_prompt"] == 'A "quiz" master.\n'
    )  # round trip, escapes included
    flagged = build_task(resolve(str(written[str(data)])))
    REGISTRY.pop("quiz")  # another process: the hand-written spec takes the name
    hand = tmp_path / "hand" / "quiz.toml"
    hand.parent.mkdir()
    hand.write_text(
        'data = "../data/quiz.jsonl"\nsystem_prompt = "A \\"quiz\\" master.\\n"\n[fields]\nquestion = "prompt"\nchoices = "options"\n'
        'answer = "correct"\nanswer_format = "letter"\nid = "qid"\nsubject = "topic"\n[fewshot]\ndata = "../data/quiz-dev.jsonl"\nshots = 1\n'
    )
    written_by_hand = build_task(resolve(str(hand)))
    assert flagged.dataset == written_by_hand.dataset == "quiz_1shot"
    for task in (flagged, written_by_hand):
        task.labels = label_tokens(None, 4)  # what a loaded model sets (here as a chat endpoint's: no tokenizer needed)
    assert flagged.content_key == written_by_hand.content_key and flagged.key() == written_by_hand.key()
    assert flagged.exemplars == written_by_hand.exemplars and flagged.items[0].options == ("3", "4", "5", "6")


def test_option_columns_generation_and_the_store_finds_the_spec_by_name(tmp_path):
    csv = tmp_path / "sums.csv"
    csv.write_text("q,w,x,y,ans\n1+1?,1,2,3,B\n2+1?,3,1,2,0\n")
    store = tmp_path / "store"
    path = described.describe_all(
        [str(csv)],
        _flags("--spec-fields-question", "q", "--spec-fields-choices", "w, x,y", "--spec-fields-answer", "ans"),
        store,
    )[str(csv)]
    assert build_task(resolve(str(path))).items[1].options == ("3", "1", "2")
    problems = _jsonl(tmp_path / "problems.jsonl", [{"question": "1+1?", "answer": "2"}])
    described.describe_all(
        [str(problems)],
        _flags(
            "--spec-kind",
            "generation",
            "--spec-grading-method",
            "numeric",
            "--spec-grading-tolerance",
            "0.5",
            "--spec-max-new-tokens",
            "16",
        ),
        store,
    )
    REGISTRY.pop("problems")
    custom.register_kept(store, "problems")  # regrade and the explorer: a stored name, its spec in the store
    task = build_task("problems")
    assert task.grading.method == "numeric" and task.grading.tolerance == 0.5 and task.settings.max_new_tokens == 16
    assert REGISTRY["problems"].source == str(store.resolve() / ".specs" / "problems.toml")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--spec-kind", "essay"], "--spec-kind: 'essay' is not one of mcqa, cot, generation"),
        (
            ["--spec-kind", "generation", "--spec-grading-method", "bleu"],
            "--spec-grading-method: 'bleu' is not one of exact, regex, numeric, gsm8k",
        ),
        (
            ["--spec-grading-method", "numeric"],
            "--spec-grading-method: applies to --spec-kind generation only, and this spec has --spec-kind mcqa",
        ),
        (
            ["--spec-kind", "generation", "--spec-grading-tolerance", "-1"],
            "--spec-grading-tolerance: must be 0 or more, not -1.0",
        ),
        (
            ["--spec-kind", "generation", "--spec-grading-tolerance", "nan"],
            "argument --spec-grading-tolerance: must be a finite number, not nan",
        ),
        (
            ["--spec-kind", "generation", "--spec-grading-extract", "(x"],
            "--spec-grading-extract: not a regular expression",
        ),
        (["--spec-fields-question", "nope"], "--spec-fields-question: no field 'nope' in"),
        (["--spec-fields-choices", "A,B"], "--spec-fields-choices: no field 'A' in"),
        (
            ["--spec-fields-answer-format", "roman"],
            "--spec-fields-answer-format: 'roman' is not one of auto, index, letter, text",
        ),
        (
            ["--spec-fewshot-shots", "2"],
            "--spec-fewshot-shots: needs exemplars: --spec-fewshot-data (a file) or --spec-fewshot-split (a Hub split)",
        ),
        (["--spec-fewshot-data", "absent.jsonl"], "--spec-fewshot-data: no file"),
        (["--spec-split", "train"], "--spec-split: applies to Hub datasets (--dataset hf:org/name) only"),
        (["--spec-max-new-tokens", "9"], "--spec-max-new-tokens: applies to --spec-kind generation only"),
    ],
)
def test_a_mistake_in_the_flags_is_one_line_naming_the_flag_before_anything_is_kept(flags, message, tmp_path, capsys):
    data = _jsonl(tmp_path / "quiz.jsonl", [{"question": "Q?", "choices": ["a", "b"], "answer": 0}])
    status = cli.main(
        ["run", "--dataset", str(data), *flags, "--dates", "2024-01-01", "--store", str(tmp_path / "store")]
    )
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err and message in err, err
    assert not (tmp_path / "store" / ".specs").exists()


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        (
            str(EXAMPLES / "geography.toml"),
            f"and --dataset {EXAMPLES / 'geography.toml'} is a spec: put these settings in the spec instead",
        ),
        ("arc_challenge", "and --dataset arc_challenge is a dataset name: the flags describe your own data files"),
        ("notes.txt", "and --dataset notes.txt is not a .jsonl, .jsonl.gz, .csv or .parquet file"),
    ],
)
def test_flags_beside_a_spec_or_a_benchmark_name_are_refused(dataset, message, tmp_path, capsys):
    status = cli.main(
        ["run", "--dataset", dataset, "--spec-kind", "cot", "--dates", "2024-01-01", "--store", str(tmp_path / "store")]
    )
    err = capsys.readouterr().err
    assert (
        status == 2
        and err.startswith("dateeval: error: --spec-* flags (--spec-kind) describe")
        and err.endswith(f"{message}\n")
    ), err


def test_two_files_of_one_name_are_refused_before_either_spec_is_written(tmp_path, capsys):
    first, second = _jsonl(tmp_path / "a" / "quiz.jsonl", ROWS), _jsonl(tmp_path / "b" / "quiz.jsonl", ROWS)
    status = cli.main(
        [
            "run",
            "--dataset",
            str(first),
            "--dataset",
            str(second),
            "--spec-kind",
            "cot",
            "--store",
            str(tmp_path / "store"),
        ]
    )
    assert status == 2 and "would both be stored as quiz: rename one of the files" in capsys.readouterr().err
    assert not (tmp_path / "store" / ".specs").exists()


# ------------------------------------------------------------------ uploads


def _upload(name: str, text: str) -> uploads.Upload:
    return uploads.Upload(name, text.encode())


QUIZ = "".join(
    json.dumps({"question": q, "choices": ["a", "b", "c"], "answer": i}) + "\n" for i, q in enumerate(("One?", "Two?"))
)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            [_upload("evil.toml", 'data = "/etc/passwd"\n')],
            "spec evil.toml, key 'data': '/etc/passwd' is not a file uploaded beside the spec",
        ),
        (
            [_upload("evil.toml", 'data = "../results.jsonl"\n')],
            "key 'data': '../results.jsonl' is not a file uploaded beside the spec",
        ),
        (
            [
                _upload("evil.toml", 'data = "quiz.jsonl"\n[fewshot]\ndata = "/root/dev.jsonl"\n'),
                _upload("quiz.jsonl", QUIZ),
            ],
            "key 'fewshot.data': '/root/dev.jsonl' is not a file",
        ),
        ([_upload("../quiz.jsonl", QUIZ)], "upload '../quiz.jsonl': give a file named like bench.jsonl"),
        ([_upload("quiz.txt", QUIZ)], "upload 'quiz.txt': give a file named like bench.jsonl"),
        (
            [_upload("quiz.jsonl", QUIZ), _upload("more.jsonl", QUIZ)],
            "upload one data file, or one spec with the files it names (2 data files",
        ),
        (
            [_upload("quiz.jsonl", QUIZ + '{"question": "Three?", "choices": ["a"], "answer": 0}\n')],
            "dataset quiz.jsonl, line 3, field 'choices': needs 2 to 26 options",
        ),
        (
            [uploads.Upload("quiz.jsonl", b'{"question": "caf\xe9"}\n')],
            "dataset file quiz.jsonl is not UTF-8 text (byte 17) on line 1",
        ),
        (
            [_upload("mmlu.jsonl", QUIZ)],
            "dataset name 'mmlu' of",
        ),  # loads, then its name is refused: it stayed in .datasets
        (
            [_upload("quiz.yaml", "data: quiz.jsonl\nsystem_prompt: &a [*a]\n"), _upload("quiz.jsonl", QUIZ)],
            "its YAML has an alias inside its own anchor",
        ),
    ],
)
def test_a_bad_upload_is_one_error_and_nothing_is_kept(files, message, tmp_path):
    with pytest.raises(DateEvalError) as caught:
        uploads.keep(files, tmp_path)
    assert message in str(caught.value), caught.value
    kept = tmp_path / ".datasets"
    assert not kept.exists() or not any(path.is_file() for path in kept.rglob("*"))


def test_a_second_upload_of_a_name_never_replaces_the_kept_file(tmp_path):
    """The store's results were made from the kept quiz.jsonl: another quiz.jsonl is refused, the same one is taken again."""
    assert uploads.keep([_upload("quiz.jsonl", QUIZ)], tmp_path) == "quiz"
    edited = QUIZ.replace("One?", "Uno?")
    with pytest.raises(DateEvalError, match="upload quiz.jsonl: a different quiz.jsonl is already kept in this store"):
        uploads.keep([_upload("quiz.jsonl", edited)], tmp_path)
    spec = _upload("quiz.yaml", "kind: cot\ndata: quiz.jsonl\n")
    with pytest.raises(DateEvalError, match="a different quiz.jsonl is already kept"):
        uploads.keep([spec, _upload("quiz.jsonl", edited)], tmp_path)
    assert (tmp_path / ".datasets" / "quiz.jsonl").read_text() == QUIZ and not (
        tmp_path / ".datasets" / "quiz.yaml"
    ).exists()
    assert uploads.keep([_upload("quiz.jsonl", QUIZ)], tmp_path) == "quiz"


def test_an_upload_over_the_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(uploads, "MAX_BYTES", 2**20)
    with pytest.raises(DateEvalError, match="upload quiz.jsonl is 2.0 MiB, over the 1 MiB limit"):
        uploads.keep([uploads.Upload("quiz.jsonl", b"x" * 2**21)], tmp_path)


def test_an_uploaded_spec_with_its_files_is_kept_and_found_by_name(tmp_path):
    spec = _upload("quiz.yaml", "kind: cot\ndata: quiz-rows.jsonl\nsystem_prompt: Be brief.\n")
    assert uploads.keep([spec, _upload("quiz-rows.jsonl", QUIZ)], tmp_path) == "quiz_cot"
    assert sorted(path.name for path in (tmp_path / ".datasets").iterdir()) == ["quiz-rows.jsonl", "quiz.yaml"]
    REGISTRY.pop("quiz")
    custom.register_kept(tmp_path, "quiz_cot")
    assert build_task("quiz_cot").system_prompt == "Be brief."


def test_an_uploaded_multiturn_fewshot_spec_is_rebuilt_from_its_stored_name(tmp_path):
    """The stored name says the few-shot format (``NAME_2shot_multiturn``): the store's upload is found by the base name
    all the same (issue 37: the turns suffix was left on, so the explorer and regrade could not rebuild it)."""
    spec = _upload(
        "quiz.toml", 'data = "quiz-rows.jsonl"\n[fewshot]\ndata = "quiz-rows.jsonl"\nshots = 1\nformat = "multi-turn"\n'
    )
    assert uploads.keep([spec, _upload("quiz-rows.jsonl", QUIZ)], tmp_path) == "quiz_1shot_multiturn"
    REGISTRY.pop("quiz")  # another process: only the store knows the dataset
    custom.register_kept(tmp_path, "quiz_1shot_multiturn")
    task = build_task("quiz_1shot_multiturn")
    assert (task.dataset, task.shots, task.multiturn) == ("quiz_1shot_multiturn", 1, True)


# ------------------------------------------------------------------ the Run page


@pytest.fixture
def run_page(tmp_path, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _submit(at: AppTest, files: list[tuple[str, bytes]]) -> AppTest:
    at.radio(key="source").set_value("upload")
    at.file_uploader[0].set_value([(name, data, "application/octet-stream") for name, data in files])
    at.date_input[1].set_value(at.date_input[0].value)  # one date
    next(box for box in at.number_input if box.label == "First N items").set_value(2)
    at.button[0].click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_the_run_page_refuses_a_spec_that_points_outside_its_upload(run_page, tmp_path):
    at = _submit(run_page, [("evil.toml", b'data = "/etc/passwd"\n')])
    assert len(at.error) == 1 and "'/etc/passwd' is not a file uploaded beside the spec" in at.error[0].value
    assert "No sweep started in this tab." in [caption.value for caption in at.caption]


def test_start_before_the_upload_has_arrived_is_an_error_not_the_dataset_box(run_page, tmp_path):
    """Issue 23 §3: Start pressed while the chosen file still uploads ran arc_challenge; it now says to wait."""
    at = _submit(run_page, [])
    assert len(at.error) == 1 and "no file uploaded yet" in at.error[0].value
    assert not list((tmp_path / "results").glob("*/*/*.parquet")) and "No sweep started in this tab." in [
        caption.value for caption in at.caption
    ]


def test_the_run_page_shows_a_malformed_upload_in_one_error_box(run_page):
    at = _submit(run_page, [("quiz.csv", b"question,A,B,answer\nQ,a,b,A,extra\n")])
    assert len(at.error) == 1 and "line 2: 5 values for 4 header columns" in at.error[0].value


def test_the_run_page_runs_an_uploaded_dataset_like_a_cli_sweep(run_page, tmp_path):
    """The real default model on a 2-question upload, one date and the baseline: rows stored under the file's name."""
    at = _submit(run_page, [("quiz.jsonl", QUIZ.encode())])
    assert not at.error, [e.value for e in at.error]
    assert [
        toast.value for toast in at.toast if toast.value.startswith("Sweep started: quiz.")
    ]  # Start says so where the eye is
    sweep_finishes(at)
    assert {path.parent.name for path in (tmp_path / "results").glob("*/*/*.parquet")} == {"quiz"}
    assert (tmp_path / "results" / ".datasets" / "quiz.jsonl").read_text() == QUIZ
