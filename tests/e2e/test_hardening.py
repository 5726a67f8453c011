"""Hardening, round 4 (issue 36): each hostile input refused with one line or an error box, bounded, nothing read or run."""

from __future__ import annotations

import datetime as dt
import io
import json
import re

import pandas as pd
import pytest
from conftest import ROOT, demo_copy, run_cli
from streamlit.testing.v1 import AppTest

from dateeval import explorer
from dateeval.explorer import uploads
from dateeval.errors import DateEvalError
from dateeval.store import Store


@pytest.fixture
def linked_page(monkeypatch, tmp_path):
    """Open an explorer page from a link (its query parameters), the way a browser following a shared link does."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))

    def open_page(name: str, **query: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.query_params.update({"store": "demo", **query})
        at.run()
        at.switch_page(name).run()
        assert not at.exception, [e.message for e in at.exception]
        return at

    return open_page


@pytest.mark.parametrize("query", [{"first": "0001-01-01"}, {"second": "9999-12-31"}])
def test_a_prompt_link_with_a_date_the_pickers_cannot_show_gets_an_error_box(linked_page, query):
    """Issue 36 §9: a date before 1900 or after 2100 raised StreamlitValueBelowMinError; now one error box and the default."""
    at = linked_page("pages/prompt.py", **query)
    assert any("outside the dates this page shows" in box.value for box in at.error), [box.value for box in at.error]
    assert at.date_input(key="first").value == dt.date(2024, 1, 1) and at.date_input(key="second").value == dt.date(
        2024, 7, 26
    )


HOSTILE_CELLS = ['=HYPERLINK("http://x.invalid","click")', "-2+3+cmd|' /C calc'!A0", "@cmd", "+1+1", "\t=1+1", "\r=1+1"]


def _formula_cells(frame: pd.DataFrame) -> list[str]:
    """Text cells a spreadsheet would run: those that start like a formula (a quoted one starts with ``'``)."""
    cells = frame.astype(str).to_numpy().ravel().tolist() + [str(name) for name in frame.columns]
    return [
        cell
        for cell in cells
        if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not re.fullmatch(r"[+-]?[\d.]+(e[+-]?\d+)?", cell)
    ]


def test_the_csv_export_writes_no_cell_a_spreadsheet_runs(tmp_path):
    """Issue 36 §6: item ids, references and replies that start with = + - @ tab or CR were written as they are; now
    they are quoted with ' (text to a spreadsheet), while numbers, negative ones included, stay numbers."""
    store = demo_copy(tmp_path)
    unit = min(store.glob("*/gsm8k/*.parquet"))
    rows = pd.read_parquet(unit).drop(
        columns=[c for c in pd.read_parquet(unit).columns if c.startswith("_")], errors="ignore"
    )
    hostile = (HOSTILE_CELLS * (len(rows) // len(HOSTILE_CELLS) + 1))[: len(rows)]
    rows = rows.assign(reference=hostile, parsed=hostile, output=hostile)
    Store(store).write(unit, rows)
    out = tmp_path / "rows.csv"
    done = run_cli("export", "--store", str(store), "--out", str(out))
    assert done.returncode == 0, done.stderr
    written = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert _formula_cells(written) == []
    assert {"'" + cell for cell in HOSTILE_CELLS} <= set(written["reference"])  # kept, readable, quoted
    numbers = pd.read_csv(out, low_memory=False)
    assert pd.api.types.is_numeric_dtype(numbers["confidence"]) and pd.api.types.is_numeric_dtype(
        numbers["prompt_tokens"]
    )


def test_the_explorers_csv_downloads_write_no_cell_a_spreadsheet_runs(monkeypatch):
    """Issue 36 §6, the explorer's side: every CSV download button goes through the same escaping, negatives stay numbers."""
    pressed = {}

    class Column:
        def download_button(self, label, data, name, mime):
            pressed[mime] = data() if callable(data) else data

    monkeypatch.setattr(explorer.widgets.st, "columns", lambda count: [Column() for _ in range(count)])
    explorer.downloads(pd.DataFrame({"item_id": HOSTILE_CELLS, "delta": [-0.5, 1, -2, 3, 4, 5]}), "flips")
    written = pd.read_csv(io.StringIO(pressed["text/csv"]), dtype=str, keep_default_na=False)
    assert _formula_cells(written) == [] and list(written["delta"]) == ["-0.5", "1.0", "-2.0", "3.0", "4.0", "5.0"]
    assert pd.read_csv(io.StringIO(pressed["text/csv"]))["delta"].tolist() == [-0.5, 1, -2, 3, 4, 5]


@pytest.mark.parametrize("reference", ["{secret}", "lmeval:{task}", "../{secret}", "hf:someone/private"])
def test_a_prompt_link_cannot_make_the_app_read_a_file_it_does_not_offer(linked_page, tmp_path, reference):
    """Issue 36 §2: ``?real_item=True&dataset=/path/secret.csv`` showed the file's rows; now one error box, nothing read."""
    secret = tmp_path / "secret.csv"
    secret.write_text("question,A,B,answer\nTOPSECRET-ROW?,a,b,A\n")
    task = tmp_path / "task.yaml"
    task.write_text(
        "task: leak\ndataset_path: csv\ndataset_kwargs: {data_files: {test: " + str(secret) + "}}\ntest_split: test\n"
        "doc_to_text: '{{question}}'\ndoc_to_target: 0\ndoc_to_choice: ['a', 'b']\n"
    )
    at = linked_page("pages/prompt.py", real_item="True", dataset=reference.format(secret=secret, task=task))
    assert any("is not one this app offers" in box.value for box in at.error), [box.value for box in at.error]
    shown = " ".join(
        str(element.value)
        for kind in ("caption", "code", "markdown")
        for element in at.get(kind)
        if hasattr(element, "value")
    )
    assert "TOPSECRET" not in shown


def test_a_prompt_link_may_name_a_dataset_the_run_pages_store_keeps(linked_page, tmp_path):
    """The offered datasets still open from a link: a built-in one, and an upload the Run page's store keeps."""
    kept = tmp_path / "results" / ".datasets"
    kept.mkdir(parents=True)
    (kept / "sky_quiz.csv").write_text("question,A,B,answer\nWhat colour is the sky?,blue,green,A\n")
    for name, first in (("sky_quiz", "sky_quiz/"), ("mmlu_5shot", "mmlu")):
        at = linked_page("pages/prompt.py", real_item="True", dataset=name)
        assert not at.error, [box.value for box in at.error]
        assert any(caption.value.startswith(first) for caption in at.caption), [c.value for c in at.caption]


def test_an_upload_keeps_only_the_files_its_spec_names(tmp_path, fresh_registry):
    """Issue 36 §7: junk files uploaded beside a valid spec were all kept; now the upload is refused and nothing is kept."""
    rows = "".join(json.dumps({"question": q, "choices": ["a", "b"], "answer": 0}) + "\n" for q in ("One?", "Two?"))
    files = [
        uploads.Upload("quiz.yaml", b"data: quiz.jsonl\n"),
        uploads.Upload("quiz.jsonl", rows.encode()),
        uploads.Upload("junk.csv", b"question,A,B,answer\nQ,a,b,A\n"),
    ]
    with pytest.raises(
        DateEvalError, match="quiz.yaml does not name junk.csv: upload the spec and the files it names only"
    ):
        uploads.keep(files, tmp_path)
    assert not any(path.is_file() for path in (tmp_path / ".datasets").rglob("*"))
    assert uploads.keep(files[:2], tmp_path) == "quiz"
    assert sorted(path.name for path in (tmp_path / ".datasets").iterdir()) == ["quiz.jsonl", "quiz.yaml"]


def test_an_uploads_files_together_are_capped_before_any_is_written(tmp_path, monkeypatch):
    """Issue 36 §7: three files each under the per-file cap made 151 MB; the total is now capped, and checked first."""
    monkeypatch.setattr(uploads, "MAX_BYTES", 2**20)
    monkeypatch.setattr(uploads, "MAX_TOTAL_BYTES", 2**21, raising=False)
    junk = [uploads.Upload(f"junk{n}.csv", b"x" * (2**20 - 10)) for n in range(3)]
    with pytest.raises(DateEvalError, match="the uploaded files are 3.0 MiB together, over the 2 MiB limit"):
        uploads.keep([uploads.Upload("quiz.yaml", b"data: quiz.jsonl\n"), *junk], tmp_path)
    assert not (tmp_path / ".datasets").exists()
