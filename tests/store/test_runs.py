"""The store's record of its sweeps (``dateeval.store.runs``): every tab lists them, any tab cancels one, partial results say so."""

import contextlib
import datetime as dt
import re
import subprocess
import sys
import threading
import time

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from dateeval.conditions import Condition
from dateeval.data import Subset
from dateeval.engine.plan import SweepSpec
from dateeval.engine.sweep import Progress, Sweep, SweepCancelled
from dateeval.errors import DateEvalError
from dateeval.store import Store, runs

SPEC = SweepSpec(
    models=("smollm2-135m",),
    datasets=("arc_challenge",),
    conditions=(Condition(date=dt.date(2024, 1, 1)), Condition(date_mode="none")),
    subset=Subset(limit=2),
)


def _record(
    root, run_id: str, units_done: int, fail: Exception | None = None, cancel_after: bool = False
) -> runs.RunRecord:
    """Run a recorder around a pretend sweep that gets ``units_done`` of 2 units done, then fails or is cancelled."""
    progress, cancel = Progress(units_total=2), threading.Event()
    with (
        pytest.raises(type(fail)) if fail else contextlib.nullcontext(),
        runs.Recorder(root, run_id, SPEC, progress, cancel, heartbeat_s=0.05),
    ):
        progress.units_done = units_done
        if cancel_after:
            runs.RunLog(root).request_cancel(run_id)
            while not cancel.is_set():
                time.sleep(0.01)
        if fail:
            raise fail
    return next(record for record in runs.RunLog(root).runs() if record.id == run_id)


def test_a_cancel_request_from_anywhere_stops_the_sweep_and_reads_as_cancelled(tmp_path):
    record = _record(tmp_path, "a1", units_done=1, cancel_after=True)
    assert (
        record.status == "cancelled" and record.ended is not None and (record.units_done, record.units_total) == (1, 2)
    )
    assert not runs.RunLog(tmp_path).cancel_requested("a1")  # the request is consumed
    note = runs.partial_note(tmp_path)
    assert note and "cancelled, 1 of 2 units" in note and "arc_challenge" in note


def test_a_sweep_cancelled_before_any_unit_leaves_nothing_partial(tmp_path):
    """Issue 23 §3: cancelled with 0 units stored, no figure is partial, so no page warns."""
    record = _record(tmp_path, "a0", units_done=0, cancel_after=True)
    assert record.status == "cancelled" and runs.partial_note(tmp_path) is None


def test_a_later_complete_run_of_the_same_sweep_clears_the_partial_note(tmp_path):
    _record(tmp_path, "a1", units_done=1, cancel_after=True)
    time.sleep(0.01)
    assert _record(tmp_path, "a2", units_done=2).status == "succeeded"
    assert runs.partial_note(tmp_path) is None
    assert [record.id for record in runs.RunLog(tmp_path).runs()] == ["a2", "a1"]  # newest first


def test_a_cancel_after_the_last_unit_is_a_success_and_an_error_a_failure(tmp_path):
    assert _record(tmp_path, "a1", units_done=2, cancel_after=True).status == "succeeded"
    failed = _record(tmp_path, "a2", units_done=1, fail=DateEvalError("out of memory"))
    assert failed.status == "failed" and failed.error == "out of memory"
    assert "failed, 1 of 2 units" in runs.partial_note(tmp_path)


def test_a_running_sweep_is_partial_and_a_dead_one_interrupted(tmp_path):
    progress = Progress(units_total=2)
    with runs.Recorder(tmp_path, "live", SPEC, progress, threading.Event(), heartbeat_s=0.05):
        assert [record.status for record in runs.RunLog(tmp_path).runs()] == ["running"]
        assert "still running, 0 of 2 units" in runs.partial_note(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    record = runs.RunRecord(
        id="dead",
        spec="x",
        spec_key="k",
        host=runs.socket.gethostname(),
        pid=int(dead.stdout),
        started=time.time(),
        heartbeat=time.time(),
        units_total=3,
    )
    runs.RunLog(tmp_path).write(record)
    assert runs.RunLog(tmp_path).runs()[0].status == "interrupted" and "interrupted, 0 of 3 units" in runs.partial_note(
        tmp_path
    )


def test_a_sweep_without_its_own_cancel_event_raises_when_cancelled_elsewhere(tmp_path, data_dir):
    """The CLI passes no event: a sweep cancelled from the Run page must not print "done" and exit 0."""
    spec = SweepSpec(**{**SPEC.__dict__, "data_dir": str(data_dir)})
    sweep = Sweep(spec, Store(tmp_path))
    runs.RunLog(tmp_path).request_cancel(sweep.run_id)
    with pytest.raises(SweepCancelled, match="cancelled on request .* after 0 of 2 units"):
        sweep.run()
    event = threading.Event()
    sweep = Sweep(spec, Store(tmp_path), cancel=event)
    runs.RunLog(tmp_path).request_cancel(sweep.run_id)
    assert sweep.run().units_done == 0 and event.is_set()  # the app's thread reads its event instead
    assert [record.status for record in runs.RunLog(tmp_path).runs()] == ["cancelled", "cancelled"]


# The Run page, through Streamlit's AppTest: each AppTest is one browser tab with its own session.


@pytest.fixture
def tab(tmp_path, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def open_tab() -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.run()
        at.switch_page("pages/run.py").run()
        assert not at.exception, [e.message for e in at.exception]
        return at

    return open_tab


def by_label(elements, label: str):
    """A widget by its label (columns list the left column's widgets first, so indexes do not follow the form)."""
    return next(element for element in elements if element.label == label)


def _start(at: AppTest, data_dir, last: dt.date) -> None:
    """Start the default model on the first 2 ARC questions, from 2024-01-01 to ``last`` plus the no-date baseline."""
    by_label(at.text_input, "Data folder (empty: the Hugging Face Hub)").set_value(str(data_dir))
    by_label(at.number_input, "First N items").set_value(2)
    by_label(at.date_input, "From").set_value(dt.date(2024, 1, 1))
    by_label(at.date_input, "To").set_value(last)
    at.button[0].click().run()
    assert not at.error, [e.value for e in at.error]


def _rows(at: AppTest):
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at.dataframe[0].value if at.dataframe else None


def _until(at: AppTest, done, seconds: float = 90):
    for _ in range(int(seconds / 0.5)):
        rows = _rows(at)
        if rows is not None and done(rows):
            return rows
        time.sleep(0.5)
    raise AssertionError(f"timed out; the tab shows {rows}")


def test_two_tabs_see_the_same_sweep_and_either_cancels_it(tab, data_dir):
    first, second = tab(), tab()
    _start(first, data_dir, dt.date(2024, 3, 31))  # 92 conditions: minutes of work, cancelled within seconds
    rows = _until(
        second, lambda rows: rows["Status"][0].endswith("running") and not rows["Units"][0].startswith("0 ")
    )  # some units stored
    assert len(rows) == 1 and "smollm2-135m" in rows["Sweep"][0] and "92 conditions" in rows["Sweep"][0]
    assert re.fullmatch(r"\d+ / 92", rows["Units"][0])
    second.button(key=next(b.key for b in second.button if b.key and b.key.startswith("cancel_"))).click().run()
    assert (
        "cancelling" in second.dataframe[0].value["Status"][0] or "cancelled" in second.dataframe[0].value["Status"][0]
    )
    rows = _until(first, lambda rows: rows["Status"][0].endswith("cancelled"))
    assert int(rows["Units"][0].split(" / ")[0]) < 92 and re.fullmatch(r"\d+ s|\d+ min \d\d s", rows["Duration"][0])
    _until(
        first, lambda rows: any(w.value.startswith("Cancelled") for w in first.warning), seconds=10
    )  # this tab's own panel too
    assert not first.success  # not shown as a success
    assert _rows(second)["Status"][0].endswith("cancelled") and not [
        b for b in second.button if b.key and b.key.startswith("cancel_")
    ]
    second.sidebar.selectbox(key="store").set_value("mine").run()
    for page in ("pages/overview.py", "pages/curves.py"):  # every results page warns through explorer.load()
        second.switch_page(page).run()
        assert any(
            w.value.startswith("Partial results: 1 sweep(s)") and "cancelled" in w.value for w in second.warning
        ), page
    second.switch_page("pages/overview.py").run()
    assert not second.exception and not any(
        "No results yet" in info.value for info in second.info
    )  # what it stored is shown


def test_a_finished_sweep_shows_succeeded_with_its_duration_and_no_partial_note(tab, data_dir):
    first, second = tab(), tab()
    _start(first, data_dir, dt.date(2024, 1, 1))
    rows = _until(second, lambda rows: rows["Status"][0].endswith("succeeded"), seconds=120)
    assert (
        rows["Units"][0] == "2 / 2"
        and re.fullmatch(r"\d+ s|\d+ min \d\d s", rows["Duration"][0])
        and rows["Detail"][0] == ""
    )
    _until(first, lambda rows: first.success, seconds=10)
    assert not first.warning
    second.sidebar.selectbox(key="store").set_value("mine").run()
    second.switch_page("pages/overview.py").run()
    assert not any("Partial results" in w.value for w in second.warning) and second.subheader


def test_the_run_page_sweeps_to_a_target_width(tab, data_dir, tmp_path):
    """Issue 63 §4: the Run page's target width runs ``dateeval.widths`` as ``run --target-width`` does: the sweep
    draws in looks and says where it stopped; its entry is sparse, its design recording the looks."""
    from dateeval import sparse
    from dateeval.results.sparse.estimated import design_of
    from dateeval.store import Store

    first = tab()
    by_label(first.number_input, "Target width: every date within ± this many points (0: off)").set_value(30.0)
    _start(first, data_dir, dt.date(2024, 1, 8))
    rows = _until(first, lambda rows: bool(first.success), seconds=300)  # each look is a run of its own in the list
    assert rows["Status"].str.endswith("succeeded").all() and len(rows) >= 2, rows
    assert any("target width 0.3: stopped at budget" in caption.value for caption in first.caption)
    rows, _ = Store(tmp_path / "results").read(columns=["design"])
    assert design_of(rows["design"]).looks == len(sparse.looks(1.0, 2 / 9)) == 3  # the baseline and the pilot of 9
