"""Bad input: one line on stderr, exit status 2, no traceback, nothing stored lost."""

import pytest

from conftest import run_cli


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
        (["--dataset", "arc_challenge", "--data-dir", "/tmp"], "expected /tmp/arc/ARC-Challenge/ARC-Challenge-Test.jsonl"),
        (["--dataset", "arc_challenge"], "Offline: pass --data-dir DIR with DIR/arc/ARC-Challenge/ARC-Challenge-Test.jsonl"),
        (["--dataset", "gpqa_diamond"], "GPQA is gated"),
        (["--dataset", "arc_challenge", "--batch-size", "x"], "invalid int value"),
        (["--dataset", "arc_challenge", "--dtype", "int3"], "invalid choice"),
        (["--model", "missing.gguf", "--dataset", "arc_challenge"], "GGUF file missing.gguf does not exist"),
    ],
)
def test_run_rejects_bad_input(args, fragment, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no cached token
    _assert_one_line_error(run_cli("run", *args, "--store", str(tmp_path / "store")), fragment)


def test_limit_beyond_the_dataset(data_dir, tmp_path):
    result = run_cli("run", "--dataset", "arc_challenge", "--data-dir", str(data_dir), "--limit", "5000", "--store", str(tmp_path))
    _assert_one_line_error(result, "--limit 5000 is outside 1..1172")


def test_store_that_cannot_be_written(data_dir, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_cli("run", "--dataset", "arc_challenge", "--data-dir", str(data_dir), "--limit", "2", "--dates", "2024-01-01", "--store", str(blocker / "store"))
    _assert_one_line_error(result, "is not writable")


def test_summary_of_missing_store(tmp_path):
    _assert_one_line_error(run_cli("summary", "--store", str(tmp_path / "none")), "does not exist")


def test_unknown_command_is_one_line():
    _assert_one_line_error(run_cli("frobnicate"), "invalid choice")


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
    _assert_one_line_error(run_cli("run", *args, "--limit", "2", "--dates", "2024-01-01", "--store", str(tmp_path / "store")), fragment)


def test_regrade_rejects_bad_input(data_dir, tmp_path):
    _assert_one_line_error(run_cli("regrade", "--store", str(tmp_path / "none")), "does not exist")
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(run_cli("regrade", "--store", str(tmp_path / "empty"), "--data-dir", str(data_dir)), "no stored outputs to regrade")
