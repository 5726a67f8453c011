"""Bad input: one line on stderr, exit status 2, no traceback, nothing stored lost.

Each kind of refusal runs in a process of its own where the process is the subject (argparse's usage errors, a run's
refusals, a template that may hang, two compactions and a lease at once, the app's port); the rest call the CLI in
this process (``run_cli``: the same ``cli.main``, its exit status and captured stderr), without an interpreter's
start per case."""

import fcntl
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute
import pytest
from conftest import ROOT, demo_copy, run_cli, run_cli_process

from dateeval.store import Store


def _assert_one_line_error(result, fragment):
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dateeval: error:"), result.stderr
    assert "Traceback" not in result.stderr
    assert fragment in lines[0]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--model", "no-such-model", "--dataset", "arc_challenge"], "unknown model 'no-such-model'"),
        (["--dataset", "hellaswag"], "unknown dataset 'hellaswag'"),
        (["--dataset", "arc_challenge", "--dates", "2024-02-30"], "malformed date '2024-02-30'"),
        (["--dataset", "arc_challenge", "--dates", "2024-05-01..2024-01-01"], "reversed date range"),
        (["--dataset", "arc_challenge", "--dates", ","], "empty date specification"),
        (["--dataset", "arc_challenge", "--data-dir", "/nonexistent"], "does not exist"),
        (
            ["--dataset", "arc_challenge", "--data-dir", "/tmp"],
            "expected /tmp/arc/ARC-Challenge/ARC-Challenge-Test.jsonl",
        ),
        (
            ["--dataset", "arc_challenge"],
            "Offline: pass --data-dir DIR with DIR/arc/ARC-Challenge/ARC-Challenge-Test.jsonl",
        ),
        (["--dataset", "gpqa_diamond"], "GPQA is gated"),
        (["--dataset", "arc_challenge", "--batch-size", "x"], "invalid int value"),
        (["--dataset", "arc_challenge", "--dtype", "int3"], "invalid choice"),
        (["--model", "missing.gguf", "--dataset", "arc_challenge"], "GGUF file missing.gguf does not exist"),
    ],
)
def test_run_rejects_bad_input(args, fragment, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no cached token
    _assert_one_line_error(run_cli_process("run", *args, "--store", str(tmp_path / "store")), fragment)


def test_limit_beyond_the_dataset(data_dir, tmp_path):
    result = run_cli(
        "run", "--dataset", "arc_challenge", "--data-dir", str(data_dir), "--limit", "5000", "--store", str(tmp_path)
    )
    _assert_one_line_error(result, "--limit 5000 is outside 1..1172")


def test_store_that_cannot_be_written(data_dir, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01",
        "--store",
        str(blocker / "store"),
    )
    _assert_one_line_error(result, "is not writable")


def test_summary_of_missing_store(tmp_path):
    _assert_one_line_error(run_cli("summary", "--store", str(tmp_path / "none")), "does not exist")


@pytest.mark.parametrize(
    "command",
    [
        ["summary", "--json"],
        ["summary"],
        ["compare", "A", "B"],
        ["report", "--out", "{out}"],
        ["robust", "--dataset", "mmlu"],
        ["export", "--out", "{tmp}/rows.csv"],
    ],
)
def test_an_empty_store_is_one_line_for_every_reader(tmp_path, command):
    """A store folder with nothing in it yet (``mkdir``): each reader says so in one line (it raised KeyError)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [arg.replace("{out}", str(tmp_path / "out")).replace("{tmp}", str(tmp_path)) for arg in command]
    _assert_one_line_error(run_cli(*args[:1], "--store", str(empty), *args[1:]), "holds no readable results")
    assert not any(empty.iterdir())


def test_unknown_command_is_one_line():
    _assert_one_line_error(run_cli_process("frobnicate"), "invalid choice")


@pytest.mark.parametrize(
    ("args", "helped"), [(["frobnicate"], "`dateeval --help`"), (["run", "--batch-size", "x"], "`dateeval run --help`")]
)
def test_a_usage_error_names_the_help_to_read(args, helped):
    """The command's own help, named as the console script spells it (it once said `python -m dateeval dateeval --help`)."""
    _assert_one_line_error(run_cli_process(*args), f"(see {helped})")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--dataset", "gsm8k_cot"], "chain-of-thought (_cot) applies to the multiple-choice datasets"),
        (["--dataset", "humaneval_5shot"], "few-shot prompting is available for"),
        (["--dataset", "gsm8k", "--shots", "-1"], "argument --shots: must be 0 or more, not -1"),
        (["--dataset", "gsm8k", "--max-new-tokens", "0"], "argument --max-new-tokens: must be 1 or more, not 0"),
        (["--dataset", "gsm8k", "--shots", "9"], "GSM8K has 8 fixed exemplars"),
        (["--dataset", "humaneval", "--option-orders", "2"], "option orders apply to multiple-choice datasets only"),
        (["--dataset", "arc_easy", "--shots", "5"], "no ARC-Easy train file"),
        (["--dataset", "wmt16_en_cs", "--data-dir", "/tmp"], "no WMT16 en-cs files"),
    ],
)
def test_run_rejects_bad_open_ended_input(args, fragment, data_dir, tmp_path):
    if "--data-dir" not in args:
        args = [*args, "--data-dir", str(data_dir)]
    _assert_one_line_error(
        run_cli("run", *args, "--limit", "2", "--dates", "2024-01-01", "--store", str(tmp_path / "store")),
        fragment,
    )


def test_regrade_rejects_bad_input(data_dir, tmp_path):
    _assert_one_line_error(run_cli("regrade", "--store", str(tmp_path / "none")), "does not exist")
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(
        run_cli("regrade", "--store", str(tmp_path / "empty"), "--data-dir", str(data_dir)),
        "no stored outputs to regrade",
    )


# --- Issue 9, part 3: every class of bad input, answered in one line before any model is loaded, or run correctly. ---

FAST = 180  # seconds: a refusal that takes longer than this counts as a hang


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--dates", "0001-01-01..9999-12-31"], "--dates asks for 3,652,059 dates; at most 10,000"),
        (["--dates", "2024-01-01..2024-12-31,1990-01-01..2020-12-31"], "--dates asks for 11,689 dates"),
        (["--dates", "9999-12-31..10000-01-01"], "malformed date '10000-01-01'"),
        (["--option-orders", "-1"], "argument --option-orders: must be between 1 and 10000, not -1"),
        (["--option-orders", "99999999999"], "argument --option-orders: must be between 1 and 10000, not 99999999999"),
        (["--system-prompt", "Bad\udcff\udcfe"], "argument --system-prompt: not UTF-8 text (byte 0xff at character 3)"),
        (["--system-prompts", "ok|\udcc3("], "argument --system-prompts: not UTF-8 text (byte 0xc3 at character 3)"),
        (["--locations", "Berlin|K\udcf6ln"], "argument --locations: not UTF-8 text (byte 0xf6 at character 8)"),
        (["--date-line", "Heute: {date} \udce4"], "argument --date-line: not UTF-8 text (byte 0xe4 at character 14)"),
        (["--repeat", "-2"], "argument --repeat: must be 0 or more, not -2"),
        (["--batch-size", "0"], "argument --batch-size: must be 1 or more, not 0"),
        (["--generation-seed", "-1"], "argument --generation-seed: must be between 0 and"),
        (["--subjects", "anatomy"], "--subjects selects MMLU subjects, and this sweep has no mmlu dataset"),
    ],
)
def test_run_options_refused_before_any_work(args, fragment, data_dir, tmp_path):
    result = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--store",
        str(tmp_path / "store"),
        *args,
    )
    _assert_one_line_error(result, fragment)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    ("dataset", "fragment"),
    [("mmlu", "1000-shot prompting needs 1000 exemplars; only 5 available"), ("gsm8k", "GSM8K has 8 fixed exemplars")],
)
def test_more_shots_than_exemplars(dataset, fragment, data_dir, tmp_path):
    result = run_cli(
        "run",
        "--dataset",
        dataset,
        "--shots",
        "1000",
        "--data-dir",
        str(data_dir),
        "--limit",
        "1",
        "--store",
        str(tmp_path),
    )
    _assert_one_line_error(result, fragment)


GSM8K = "gsm8k/test.jsonl"
HUMANEVAL = "humaneval/HumanEval.jsonl.gz"
ARC = "arc/ARC-Challenge/ARC-Challenge-Test.jsonl"
_ARC_ROW = {
    "id": "q1",
    "question": {"stem": "Why?", "choices": [{"label": "A", "text": "yes"}, {"label": "B", "text": "no"}]},
    "answerKey": "A",
}
_PROBLEM = {
    "task_id": "HumanEval/0",
    "prompt": "def f():\n",
    "canonical_solution": "    return 1\n",
    "test": "def check(c):\n    pass\n",
    "entry_point": "f",
}


def _lines(*rows: object) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@pytest.mark.parametrize(
    ("dataset", "relative", "content", "fragment"),
    [
        (
            "arc_challenge",
            ARC,
            "é".encode("latin-1") + _lines(_ARC_ROW),
            "ARC-Challenge-Test.jsonl is not UTF-8 text (byte 0)",
        ),
        (
            "arc_challenge",
            ARC,
            _lines(_ARC_ROW, {**_ARC_ROW, "question": {**_ARC_ROW["question"], "stem": "How?"}}),
            "duplicate item id 'q1' in",
        ),
        ("arc_challenge", ARC, b"[1, 2]\n", "line 1: expected a JSON object, found list"),
        (
            "arc_challenge",
            ARC,
            _lines(_ARC_ROW, {**_ARC_ROW, "id": "q2", "question": {**_ARC_ROW["question"], "stem": "Why\ud800?"}}),
            "line 2: text with a lone surrogate escape \\ud800",
        ),
        (
            "gsm8k",
            GSM8K,
            _lines({"question": "1+1?", "answer": "#### 2\udfff"}),
            "line 1: text with a lone surrogate escape \\udfff",
        ),
        ("arc_challenge", ARC, b"[" * 100_000 + b"]" * 100_000 + b"\n", "line 1: JSON nested too deeply"),
        ("gsm8k", GSM8K, _lines({"question": "1+1?"}), "test.jsonl, line 1: no field 'answer'"),
        ("gsm8k", GSM8K, _lines({"question": "1+1?", "answer": "It is 2"}), "line 1: GSM8K answer without '####'"),
        (
            "gsm8k",
            GSM8K,
            _lines({"question": "1+1?", "answer": "#### 2"}) + b"{not json\n",
            "test.jsonl, line 2: not JSON",
        ),
        ("gsm8k", GSM8K, _lines({"question": "1+1?", "answer": "#### 2"}) * 2, "duplicate item id 'gsm8k/"),
        ("gsm8k", GSM8K, b"\xff\xfe" + _lines({"question": "1+1?", "answer": "#### 2"}), "is not UTF-8 text"),
        ("humaneval", HUMANEVAL, _lines(_PROBLEM), "HumanEval.jsonl.gz: Not a gzipped file"),
        ("humaneval", HUMANEVAL, gzip.compress(b"not json\n"), "HumanEval.jsonl.gz, line 1: not JSON"),
        (
            "humaneval",
            HUMANEVAL,
            gzip.compress(_lines({k: v for k, v in _PROBLEM.items() if k != "test"})),
            "line 1: no field 'test'",
        ),
        ("humaneval", HUMANEVAL, gzip.compress(_lines(_PROBLEM, _PROBLEM)), "duplicate item id 'HumanEval/0'"),
        (
            "humaneval",
            HUMANEVAL,
            gzip.compress(_lines(_PROBLEM) * 50)[:60],
            "Compressed file ended before the end-of-stream marker",
        ),
        ("humaneval", HUMANEVAL, gzip.compress(b"\xff\xfe\n"), "HumanEval.jsonl.gz is not UTF-8 text"),
        ("wmt16_en_de", "wmt16/en-de/newstest2016-ende.en", b"caf\xe9\n", "newstest2016-ende.en is not UTF-8 text"),
        ("mmlu", "mmlu/data/test/anatomy_test.csv", b"Qu\xe9?,a,b,c,d,A\n", "cannot read MMLU file"),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 60 else "",
)
def test_bad_data_files_are_named(dataset, relative, content, fragment, tmp_path):
    data = tmp_path / "data"
    (data / relative).parent.mkdir(parents=True)
    (data / relative).write_bytes(content)
    if dataset == "wmt16_en_de":
        (data / "wmt16/en-de/newstest2016-ende.de").write_bytes(b"Kaffee\n")
    result = run_cli(
        "run",
        "--dataset",
        dataset,
        "--data-dir",
        str(data),
        "--dates",
        "2024-01-01",
        "--store",
        str(tmp_path / "store"),
    )
    _assert_one_line_error(result, fragment)


def _truncated_safetensors(folder):
    header = json.dumps({"w": {"dtype": "F32", "shape": [256], "data_offsets": [0, 1024]}}).encode()
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(100))


def _missing_shard(folder):
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "model-00001-of-00002.safetensors"}})
    )


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda path: path.with_suffix(".gguf").write_text("not a model"), "is not a GGUF file"),
        (lambda path: path.with_suffix(".gguf").write_bytes(b""), "is not a GGUF file"),
        (
            lambda path: path.with_suffix(".gguf").write_bytes(_named_gguf().read_bytes()[:2_000_000]),
            "is damaged or truncated",
        ),
        (
            lambda path: path.with_suffix(".gguf").write_bytes(_named_gguf().read_bytes()[:-1000]),
            "is damaged or truncated",
        ),
        (lambda path: _model_folder(path, _truncated_safetensors), "model.safetensors is truncated:"),
        (
            lambda path: _model_folder(path, lambda folder: (folder / "model.safetensors").write_bytes(b"\xff" * 8)),
            "safetensors header cannot be read",
        ),
        (
            lambda path: _model_folder(path, _missing_shard),
            "lacks the weight shard(s) model-00001-of-00002.safetensors",
        ),
    ],
)
def test_damaged_model_files_refused_before_loading(make, fragment, data_dir, tmp_path):
    model = tmp_path / "model"
    make(model)
    target = model.with_suffix(".gguf") if model.with_suffix(".gguf").exists() else model
    result = run_cli(
        "run",
        "--model",
        str(target),
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--store",
        str(tmp_path / "store"),
    )
    _assert_one_line_error(result, fragment)
    assert str(target) in result.stderr


def _named_gguf():
    from dateeval.models import _named_gguf as packaged

    return packaged("smollm2-135m")


def _model_folder(folder, damage):
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    damage(folder)


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ('{{ messages[0]["content"] + 1 }}', "failed to render: TypeError: can only concatenate str"),
        ("{{ 1 / 0 }}", "failed to render: ZeroDivisionError: division by zero"),
        (
            "{% macro r(n) %}{{ r(n) }}{% endmacro %}{{ r(1) }}",
            "failed to render: RecursionError: maximum recursion depth exceeded",
        ),
        ("{{ strftime_now(5) }}{{ messages[0].content }}", "calls strftime_now(5): the format must be a string"),
        (
            "{{ strftime_now(fmt) }}{{ messages[0].content }}",
            "failed to render: TypeError: strftime() argument 1 must be str",
        ),
        ("{{ raise_exception('no system messages') }}", "failed to render: no system messages"),
        ("{{ nothing.here }}", "failed to render: 'nothing' is undefined"),
        ("{% for m in messages %}", "does not parse"),
        (
            "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
            "stopped rendering: it took more than 200,000 steps",
        ),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(99) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
            "stopped rendering: '~' would make a value",
        ),
        ("{{ 'a' * 10**10 }}", "stopped rendering: '*' would make a value of more than 8,388,609 characters"),
    ],
)
def test_templates_that_raise_are_named(source, fragment, tmp_path):
    path = tmp_path / "bad.jinja"
    path.write_text(source)
    result = run_cli_process("template", str(path), "--date", "2024-01-01", timeout=FAST)
    assert result.stderr.count("dateeval: error: chat template") == 1, result.stderr
    assert fragment in result.stderr and "Traceback" not in result.stderr and result.returncode == 2


def test_template_that_is_not_utf8(tmp_path):
    (tmp_path / "latin.jinja").write_bytes(b"\xe9t\xe9 {{ messages }}")
    _assert_one_line_error(
        run_cli_process("template", str(tmp_path / "latin.jinja"), timeout=FAST), "latin.jinja is not UTF-8 text"
    )


@pytest.fixture
def mount(tmp_path):
    """A fresh tmpfs (a small or read-only disk, for real), unmounted afterwards; skipped where mounting is not allowed."""
    mounted = []

    def make(name: str, options: str):
        point = tmp_path / name
        point.mkdir()
        if (
            shutil.which("mount") is None
            or subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True
            ).returncode
        ):
            pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN)")
        mounted.append(point)
        return point

    yield make
    for point in mounted:
        subprocess.run(["umount", str(point)], check=True)


def _fill(point):
    """Fill a tmpfs to the last byte."""
    descriptor = os.open(point / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(descriptor, bytes(4096)):
            pass
    except OSError:
        pass
    finally:
        os.close(descriptor)


@pytest.fixture
def small_store(tmp_path):
    """One unit of real results (the demo's compacted MMLU file) in a store of its own."""
    source = next((ROOT / "demo" / "store").glob("smollm2-135m-float32-*/mmlu/*.parquet"))
    folder = tmp_path / "small" / source.parent.parent.name / "mmlu"
    folder.mkdir(parents=True)
    shutil.copy(source, folder)
    return tmp_path / "small"


def test_report_out_that_is_a_file(small_store, tmp_path):
    (tmp_path / "report.html").write_text("mine")
    _assert_one_line_error(
        run_cli("report", "--store", str(small_store), "--out", str(tmp_path / "report.html")),
        "is a file, not a folder",
    )
    assert (tmp_path / "report.html").read_text() == "mine"


def test_report_out_in_an_unwritable_place(small_store, tmp_path, mount):
    (tmp_path / "file").write_text("")
    _assert_one_line_error(
        run_cli("report", "--store", str(small_store), "--out", str(tmp_path / "file" / "out")),
        "Not a directory",
    )
    readonly = mount("readonly", "size=64k,ro")
    _assert_one_line_error(
        run_cli("report", "--store", str(small_store), "--out", str(readonly / "out")),
        "Read-only file system",
    )


def test_report_on_a_full_disk(small_store, mount):
    full = mount("full", "size=64k")
    _fill(full)
    result = run_cli("report", "--store", str(small_store), "--out", str(full / "out"))
    _assert_one_line_error(result, "No space left on device")


def test_two_compactions_at_once(small_store):
    shutil.copy(next(small_store.glob("*/mmlu/*.parquet")), next(small_store.glob("*/mmlu")) / "copy.parquet")
    with (small_store / ".compact.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # what a running compaction holds
        _assert_one_line_error(
            run_cli_process("compact", "--store", str(small_store), timeout=FAST),
            "is being compacted by another process",
        )
    held_until = time.time()
    assert len(list(small_store.glob("*/mmlu/*.parquet"))) == 2  # nothing merged under the other compaction
    done = run_cli_process("compact", "--store", str(small_store), timeout=FAST)
    assert done.returncode == 0 and len(list(small_store.glob("*/mmlu/*.parquet"))) == 1, done.stderr
    kept = sorted(
        (small_store / ".aggregates" / "derived").rglob("*.parquet")
    )  # computed for the merged file, not left to the explorer
    assert {path.parent.name for path in kept} >= {"headline", "factors"} and all(
        path.stat().st_mtime > held_until for path in kept
    )


# The few that need the model (loaded once per command): what is only known once the tokenizer is there.


def test_run_on_a_full_disk_leaves_no_lease(data_dir, mount):
    full = mount("full", "size=64k")
    _fill(full)
    result = run_cli_process(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01",
        "--store",
        str(full / "store"),
    )
    _assert_one_line_error(result, "No space left on device")
    assert not list(full.rglob("*.lease")) and not list(full.rglob("*.tmp"))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ["--system-prompt", "word " * 9000],
            "needs 9,131 prompt tokens under 2024-01-01,system_prompt='word word word",
        ),
        (["--shots", "1000"], "arc_challenge_1000shot item"),
    ],
)
def test_prompts_beyond_the_context_are_refused(args, fragment, data_dir, tmp_path):
    result = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01",
        "--store",
        str(tmp_path),
        *args,
    )
    _assert_one_line_error(result, fragment)
    assert "beyond smollm2-135m's context of 8,192" in result.stderr and not list(tmp_path.rglob("*.parquet"))


def test_more_option_orders_than_permutations_are_refused(data_dir, tmp_path):
    """4 options have 24 orders: --option-orders 30 would run 31 units, 7 of them repeats counted as new orders."""
    result = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01",
        "--option-orders",
        "30",
        "--store",
        str(tmp_path),
    )
    _assert_one_line_error(result, "option order 30 asked of item Mercury_7175875, whose 4 options have only 24 orders")
    assert "use --option-orders 23 or fewer" in result.stderr and not list(tmp_path.rglob("*.parquet"))


def test_dates_next_to_9999_12_31_run(data_dir, tmp_path):
    """Steps that would pass 9999-12-31 end the range; the dates before it run and are stored."""
    dates = "9999-12-25..9999-12-31/7d,9999-11-30..9999-12-31/1m"
    result = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "1",
        "--dates",
        dates,
        "--store",
        str(tmp_path),
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    summary = json.loads(run_cli("summary", "--store", str(tmp_path), "--json").stdout)
    stored, _ = Store(tmp_path).read(columns=["date"])
    assert summary[0]["n_dates"] == 3 and sorted(set(stored["date"].astype(str))) == [
        "9999-11-30",
        "9999-12-25",
        "9999-12-30",
    ]


def test_regrade_csv_is_written_whole_or_refused_in_one_line(data_dir, tmp_path):
    """``regrade --csv`` writes through dateeval.cli.outputs: the comparison appears whole, and a folder that does not exist
    is one line (it was a traceback from pandas)."""
    store = demo_copy(tmp_path)
    args = ("regrade", "--store", str(store), "--data-dir", str(data_dir), "--dataset", "gsm8k")
    _assert_one_line_error(run_cli(*args, "--csv", str(tmp_path / "missing" / "out.csv")), "cannot write")
    done = run_cli(*args, "--csv", str(tmp_path / "out.csv"))
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0].startswith("model_key,") and len(lines) == 1 + int(done.stdout.split("gsm8k: ")[1].split()[0])
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_robust_figure_replaces_a_link_and_never_writes_through_it(tmp_path):
    """``robust --figure link.svg`` where the name is a link to another file: that file is left as it was and the
    figure takes the link's place (written beside it and renamed, so a full disk leaves no half figure)."""
    store = demo_copy(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "link.svg"
    link.symlink_to(victim)
    result = run_cli("robust", "--store", str(store), "--dataset", "mmlu", "--figure", str(link))
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep me" and not link.is_symlink() and link.read_text().lstrip().startswith("<?xml")
    assert not list(tmp_path.glob(".link.svg.*"))


@pytest.mark.parametrize(
    "command",
    [
        ["export", "--out", "{unit}"],
        ["export", "--out", "{store}/all.csv"],
        ["report", "--out", "{store}/report"],
        ["robust", "--dataset", "mmlu", "--figure", "{store}/f.svg"],
    ],
)
def test_no_output_lands_inside_the_store_it_reads(tmp_path, command):
    """An export over a unit's name would be read next time as that unit (its ``shots`` turned '0.0'): every output
    inside the store is one line, and the store is as it was."""
    store = demo_copy(tmp_path)
    unit = next(store.glob("*/mmlu/*.parquet"))
    before = {path: path.read_bytes() for path in store.rglob("*") if path.is_file()}
    args = [arg.replace("{store}", str(store)).replace("{unit}", str(unit)) for arg in command]
    _assert_one_line_error(run_cli(args[0], "--store", str(store), *args[1:]), "is inside the store")
    assert {path: path.read_bytes() for path in store.rglob("*") if path.is_file()} == before


@pytest.mark.parametrize("kind", ["empty", "file", "under a file"])
def test_a_cache_folder_that_cannot_hold_converted_models_is_one_line(data_dir, tmp_path, monkeypatch, kind):
    """``DATEEVAL_CACHE`` empty (it meant the working folder: a run converted the model into ./models), naming a file,
    or a folder that cannot be made (the OSError a read-only or full disk also gives): one line, and nothing written in
    the working folder."""
    cache = {"empty": "", "file": str(tmp_path / "cache.txt"), "under a file": str(tmp_path / "cache.txt" / "inner")}[
        kind
    ]
    (tmp_path / "cache.txt").write_text("not a folder")
    monkeypatch.setenv("DATEEVAL_CACHE", cache)
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "dateeval",
            "run",
            "--dataset",
            "arc_challenge",
            "--data-dir",
            str(data_dir),
            "--limit",
            "1",
            "--dates",
            "2024-01-01",
            "--store",
            str(tmp_path / "store"),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    _assert_one_line_error(result, "DATEEVAL_CACHE")
    assert not any(work.iterdir())


def _rewrite_first_unit(store, change, sealed: bool) -> None:
    """Rewrite one mmlu unit of the demo's float32 entry as ``change(table)``, with fresh checksums (``sealed``: they
    then match the bad values) or none (a unit from before checksums)."""
    import pyarrow.parquet as pq

    from dateeval.store import checksums

    unit = next(store.glob("smollm2-135m-float32-*/mmlu/*.parquet"))
    changed = change(pq.read_table(unit).replace_schema_metadata(None))
    pq.write_table(checksums.with_checksums(changed) if sealed else changed, unit)


@pytest.mark.parametrize(
    ("change", "sealed", "says"),
    [
        (
            lambda t: t.set_column(
                t.schema.get_field_index("correct"), "correct", pa.array(np.where(np.asarray(t["correct"]), 2.0, 0.0))
            ),
            False,
            "column correct holds 2",
        ),
        (
            lambda t: t.set_column(
                t.schema.get_field_index("confidence"), "confidence", pa.compute.add(t["confidence"], 1.0)
            ),
            True,
            "column confidence holds",
        ),
        (
            lambda t: t.set_column(t.schema.get_field_index("correct"), "correct", t["correct"].cast(pa.string())),
            True,
            "column correct holds string",
        ),
        (lambda t: t.select(["model_key", "condition_key", "item_id"]), False, "it has no"),
    ],
)
def test_a_unit_holding_what_its_columns_cannot_hold_is_named_and_left_out(tmp_path, change, sealed, says):
    """A unit without checksums whose grades read 2.0 made ``summary --json`` print 70.1% for 35.1%; grades as text or
    a unit of only identity columns raised tracebacks in ``summary`` and ``robust``. Each reader now names the unit in
    a warning, leaves it out, and answers from the rest, with checksums that match the bad values or without any."""
    store = demo_copy(tmp_path)
    _rewrite_first_unit(store, change, sealed)
    for args in (["summary", "--json"], ["robust", "--dataset", "mmlu"]):
        result = run_cli(*args, "--store", str(store))
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert says in result.stderr and "warning" in result.stderr, result.stderr
    rows = json.loads(run_cli("summary", "--json", "--store", str(store)).stdout)
    assert (
        rows
        and all(0 <= row["accuracy_max"] <= 1 for row in rows if row["accuracy_max"] is not None)
        and not any("float32" in row["entry"] and row["dataset"] == "mmlu" for row in rows)
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(["--port", "0"], "must be between 1 and 65535, not 0"), (["--port", "http"], "invalid int value: 'http'")],
)
def test_app_rejects_a_bad_port_before_starting_anything(args, fragment):
    _assert_one_line_error(run_cli_process("app", *args), fragment)
