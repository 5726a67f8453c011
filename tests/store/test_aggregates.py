"""Sums kept beside the store and DuckDB per-item reads give exactly what the per-item analysis gives."""

import datetime as dt
import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import oracles
import pandas as pd
import pytest
from conftest import ROOT

from dateeval import results, schema
from dateeval.errors import DateEvalError
from dateeval.keeping import keep
from dateeval.results import descriptive
from dateeval.results.sources import item_matrices, stored, unit_sums
from dateeval.schema import GENERATION_COLUMNS, SUMMARY_COLUMNS
from dateeval.store import Store, sidecars
from dateeval.store import tables as store_tables

KEY = [*schema.ENTRY, "condition"]


@pytest.fixture
def demo(tmp_path) -> Store:
    """A copy of the demo store (MCQA, chain of thought, GSM8K, HumanEval, WMT16: every metric), without sidecars."""
    shutil.copytree(ROOT / "demo" / "store", tmp_path / "store", ignore=shutil.ignore_patterns(sidecars.FOLDER))
    store_tables._READ.clear()
    store_tables._ITEMS.clear()
    stored._KEPT.clear()
    return Store(tmp_path / "store")


def _from_rows(store: Store) -> pd.DataFrame:
    frame, _ = store.read(columns=SUMMARY_COLUMNS, optional=[*GENERATION_COLUMNS, "label_variant"])
    return oracles.condition_metrics(frame)


def _same(left: pd.DataFrame, right: pd.DataFrame) -> None:
    left, right = (table.sort_values(KEY, ignore_index=True) for table in (left, right))
    pd.testing.assert_frame_equal(left, right, check_dtype=False, check_exact=False, rtol=1e-12)


def test_sums_give_the_metrics_of_the_rows_for_every_task(demo):
    sums, problems = store_tables.unit_sums(demo)
    assert not problems.corrupted and unit_sums.inexact_entries(sums).empty
    metrics, _ = unit_sums.condition_metrics(demo, sums)
    _same(metrics, _from_rows(demo))
    assert metrics[["accuracy", "ece", "bleu", "chrf"]].notna().any().all()  # every kind of metric was compared


def test_readers_sum_missing_sidecars_in_memory_and_keep_writes_them_once(demo):
    """Opening a store writes nothing: units without sidecars are summed in memory, with the same numbers. An explicit
    keep writes them (and replaces those of an older format); later readers read them."""
    sums, problems = store_tables.unit_sums(demo)
    assert not problems.corrupted and not (demo.root / sidecars.FOLDER).exists()
    _same(unit_sums.condition_metrics(demo, sums)[0], _from_rows(demo))
    assert keep(demo) == []
    kept = sorted((demo.root / sidecars.FOLDER).rglob("*.parquet"))
    assert len([path for path in kept if store_tables.KEPT_FOLDER not in path.parts]) == 2 * len(
        demo.files()
    )  # the sums and the per-item sidecar of every unit
    store_tables._READ.clear()
    again, problems = store_tables.unit_sums(demo)  # from the sidecars, verified on read
    assert not problems.corrupted and sorted((demo.root / sidecars.FOLDER).rglob("*.parquet")) == kept
    _same(unit_sums.condition_metrics(demo, again)[0], _from_rows(demo))
    items = next(path for path in kept if path.name.endswith(".items.parquet"))
    items.unlink()  # a per-item sidecar lost (or, below, one of an older format): summed again in memory when needed
    sums = again.assign(entry=descriptive.entry_label(again))
    source = str(items.relative_to(demo.root / sidecars.FOLDER)).split(".parquet.")[0] + ".parquet"
    assert (
        item_matrices.load(demo, sums[sums["source"] == source].loc[lambda s: s["entry"] == s["entry"].iloc[0]])
        is not None
        and not items.exists()
    )
    assert not sidecars.keep_missing(demo).messages() and items.exists()  # what keep writes first
    shutil.rmtree(demo.root / sidecars.FOLDER / store_tables.KEPT_FOLDER)  # below, only the sidecars
    for path in list(
        (demo.root / sidecars.FOLDER).rglob("*.parquet")
    ):  # as the format before per-item sidecars left them
        if path.name.endswith(".items.parquet"):
            path.unlink()
        else:
            path.rename(path.with_name(path.name.replace(f".v{sidecars.FORMAT}.", ".")))
    old = list((demo.root / sidecars.FOLDER).rglob("*.parquet"))
    store_tables._READ.clear()
    sidecars.keep_missing(demo)
    assert not any(path.exists() for path in old) and len(
        list((demo.root / sidecars.FOLDER).rglob("*.parquet"))
    ) == 2 * len(demo.files())


def test_a_replaced_unit_is_summed_again(demo):
    sidecars.keep_missing(demo)
    unit = demo.files()[0]
    frame, _ = demo.read(paths=[unit])
    sidecars.write_unit(demo, unit, frame.assign(correct=~frame["correct"].astype(bool)))
    sums, _ = store_tables.unit_sums(demo)
    _same(unit_sums.condition_metrics(demo, sums)[0], _from_rows(demo))
    assert (
        len(list((demo.root / sidecars.FOLDER).rglob(f"{unit.name}.*"))) == 2
    )  # the stale sidecars are gone: sums and items


def _unit(condition: str, items: range, correct: list[bool]) -> list[dict]:
    return [
        {
            "model": "m",
            "model_key": "k",
            "dtype": "float32",
            "device": "cpu",
            "hardware": "cpu",
            "dataset": "d",
            "task_key": "t",
            "condition": condition,
            "condition_key": condition,
            "factor": "date",
            "date_mode": "date",
            "date": condition,
            "item_id": f"i{i}",
            "prompt_hash": f"h{i}",
            "correct": ok,
            "confidence": 0.3 + 0.1 * i,
            "pred": int(ok),
            "answer": 1,
        }
        for i, ok in zip(items, correct)
    ]


def test_entries_the_sums_cannot_give_exactly_come_from_their_rows(tmp_path):
    """A second file for a condition (duplicates, more items) and conditions with different items: same numbers as the rows."""
    store = Store(tmp_path)
    sidecars.write_unit(
        store, store.unit_path("m", "d", "2024-01-01", "a"), _unit("2024-01-01", range(4), [True, False, True, True])
    )
    sidecars.write_unit(
        store,
        store.unit_path("m", "d", "2024-01-01", "b"),
        _unit("2024-01-01", range(2, 6), [False, False, True, False]),
    )
    sidecars.write_unit(
        store,
        store.unit_path("m", "d", "2024-01-02", "c"),
        _unit("2024-01-02", range(5), [True, True, False, True, False]),
    )
    sums, _ = store_tables.unit_sums(store)
    assert len(unit_sums.inexact_entries(sums)) == 1
    _same(unit_sums.condition_metrics(store, sums)[0], _from_rows(store))
    frame, _ = store.read(columns=SUMMARY_COLUMNS)
    view, _ = results.open(store)
    flips, _ = view.flips.flips(
        view.sums["entry"].iloc[0], "d", dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    )  # the first file's row of a duplicate
    pd.testing.assert_frame_equal(flips, oracles.item_flips(frame), check_dtype=False, check_exact=False)


def test_a_damaged_unit_is_reported_and_left_out(demo):
    unit = demo.files()[0]
    data = bytearray(unit.read_bytes())
    data[len(data) // 3] ^= 0xFF
    unit.write_bytes(bytes(data))
    sums, problems = store_tables.unit_sums(demo)
    assert [path for path, _ in problems.corrupted] == [unit] and str(unit.relative_to(demo.root)) not in set(
        sums["source"]
    )


def test_matrices_from_the_item_sidecars_equal_the_per_item_analysis(demo):
    """Flips, Table 7, the headline, the bands and the Factors tables from ``dateeval.results.sources.item_matrices`` equal the row-based path."""
    from dateeval import explorer
    from dateeval.results.chance import chance, headline
    from dateeval.results import inference

    sums, _ = store_tables.unit_sums(demo)
    sums = sums.assign(entry=descriptive.entry_label(sums))
    frame, _ = demo.read(columns=schema.OUTCOME_COLUMNS, optional=["answer", "score", *GENERATION_COLUMNS])
    frame = frame.assign(entry=descriptive.entry_label(frame))
    for (entry, dataset), group in sums.groupby(["entry", "dataset"]):
        found = item_matrices.load(demo, group)
        for start, end in ((dt.date(2024, 1, 1), dt.date(2024, 12, 31)), (dt.date(2024, 3, 5), dt.date(2024, 6, 30))):
            flips, table7 = item_matrices.flips(found, start, end)
            rows = frame[(frame["entry"] == entry) & (frame["dataset"] == dataset)]
            rows = rows[
                rows["date"].isna()
                | pd.to_datetime(rows["date"], errors="coerce").between(pd.Timestamp(start), pd.Timestamp(end))
            ]
            pd.testing.assert_frame_equal(flips, oracles.item_flips(rows), check_dtype=False, check_exact=False)
            pd.testing.assert_frame_equal(
                table7, oracles.confidence_by_consistency(rows), check_dtype=False, check_exact=False
            )
    tables = explorer.statistics(demo)
    pd.testing.assert_frame_equal(tables["factors"], oracles.factor_table(frame), check_exact=False, rtol=1e-12)
    pd.testing.assert_frame_equal(
        tables["significance"], oracles.date_significance(frame, n_perm=200), check_exact=False, rtol=1e-12
    )
    pd.testing.assert_frame_equal(tables["run_to_run"], inference.run_to_run(frame), check_exact=False, rtol=1e-12)
    assert (
        set(tables["factors"]["factor"]) >= {"date", "precision"} and len(tables["significance"]) == 6
    )  # every graded entry
    metrics, _ = unit_sums.condition_metrics(demo, sums)
    found = explorer.headline(demo)
    expected = headline.headline(oracles.significance_rows(frame), metrics, oracles.verdict(frame))
    kept = {
        "power",
        "power_effect",
        "reorder_chance",
        "reorder_chance_upper",
        "reorder_p_value",
    }  # added by Results.chance.headline
    assert (
        isinstance(found, headline.Headline)
        and found.with_(**{name: getattr(expected, name) for name in kept}) == expected
    )
    top = inference.graded(frame)
    top = top[(top["entry"] == expected.entry) & (top["dataset"] == expected.dataset) & (top["factor"] == "date")]
    assert found.power == chance.power(inference.outcome_matrices(top, "condition_key")[1], found.power_effect)
    chosen = sorted(metrics.loc[metrics["dataset"] == "mmlu", "entry"].unique())
    selection = explorer.Selection(tuple(chosen), "mmlu", pd.Timestamp("2024-01-01"), pd.Timestamp("2024-12-31"))
    for metric in ("accuracy", "ece"):
        expected = oracles.date_bands(frame[(frame["dataset"] == "mmlu") & frame["entry"].isin(chosen)], metric)
        pd.testing.assert_frame_equal(explorer.bands(demo, selection, metric), expected, check_exact=False, rtol=1e-12)


def _new_process() -> None:
    """Forget what this process computed or read, as a new explorer process would start."""
    from dateeval.explorer import cache

    cache.clear()
    store_tables._READ.clear()
    stored._KEPT.clear()


def test_statistics_kept_with_the_store_are_read_by_a_new_process_and_recomputed_when_stale(demo, monkeypatch):
    """What pages compute is held in memory, never written; an explicit keep writes it with what pages open on, and the
    headline and the Factors tables then come back equal from ``dateeval.results.sources.stored`` without computing anything; a
    damaged kept result, or a replaced unit, makes them computed again (and the next keep replaces the stale file)."""
    from dateeval import explorer
    from dateeval.explorer import cache
    from dateeval.results.bands import bands
    from dateeval.results.chance import chance
    from dateeval.results import inference

    _new_process()
    first, tables = explorer.headline(demo), explorer.statistics(demo)
    entries = tuple(sorted(tables["significance"].loc[tables["significance"]["dataset"] == "mmlu", "entry"]))
    selection = explorer.Selection(entries, "mmlu", pd.Timestamp("2024-03-01"), pd.Timestamp("2024-09-30"))
    band = explorer.bands(demo, selection, "accuracy")
    one = explorer.Selection(entries[:1], "mmlu", selection.start, selection.end)
    flips = explorer.flips(demo, one)
    found = item_matrices.load(demo, cache.opened(demo)[0].sums.query("entry == @entries[0] and dataset == 'mmlu'"))
    for kept_table, computed in zip(flips, item_matrices.flips(found, one.start.date(), one.end.date()), strict=True):
        pd.testing.assert_frame_equal(kept_table, computed, check_dtype=False)
    assert not (demo.root / sidecars.FOLDER).exists()  # reading wrote nothing
    assert keep(demo) == []
    kept = sorted((demo.root / sidecars.FOLDER / store_tables.KEPT_FOLDER).rglob("*.parquet"))
    assert {path.parent.name for path in kept} == {
        "headline",
        "significance",
        "factors",
        "band",
        "flips",
        "table7",
        "robust",
    }
    _new_process()
    with monkeypatch.context() as patched:
        for module, name in (
            (chance, "null_tests"),
            (inference, "entry_factors"),
            (bands, "date_band"),
        ):  # (Table 5's precision rows compare entries: computed)
            patched.setattr(module, name, lambda *args, name=name, **kwargs: pytest.fail(f"{name} computed again"))
        patched.setattr(item_matrices, "flips", lambda *args: pytest.fail("flips computed again"))
        for kept_table, first_table in zip(explorer.flips(demo, one), flips, strict=True):
            pd.testing.assert_frame_equal(kept_table, first_table)
        assert explorer.headline(demo) == first
        again = explorer.statistics(demo)
        pd.testing.assert_frame_equal(explorer.bands(demo, selection, "accuracy"), band)
    assert len(band) and band["date"].between(selection.start, selection.end).all()
    for name in ("factors", "significance"):
        pd.testing.assert_frame_equal(again[name], tables[name])
    damaged = next(path for path in kept if path.parent.name == "headline")
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    _new_process()
    assert explorer.headline(demo) == first
    unit = next(path for path in demo.files() if "mmlu" in str(path))
    shutil.copy(unit, unit.with_suffix(".copy"))
    unit.unlink()
    shutil.move(unit.with_suffix(".copy"), unit)  # the same rows under a new mtime: every key holding it changes
    _new_process()
    assert explorer.headline(demo) == first
    assert list(damaged.parent.glob("*.parquet")) == [damaged]  # computed in memory: nothing written
    assert keep(demo) == []
    assert [path.name for path in damaged.parent.glob("*.parquet")] != [damaged.name] and len(
        list(damaged.parent.glob("*.parquet"))
    ) == 1  # replaced


def test_kept_rows_round_trip_even_empty_and_live_in_memory_where_the_store_is_read_only(demo, monkeypatch):
    units = demo.files()
    assert stored.rows(demo, "empty", "label", units, (), list) == []
    assert not (demo.root / sidecars.FOLDER).exists()  # held in memory: a reader writes nothing
    assert keep(demo) == []  # writes what this process holds, with what pages open on
    stored._KEPT.clear()
    assert stored.rows(demo, "empty", "label", units, (), lambda: pytest.fail("computed again")) == []  # read back

    def refuse(self: Store, path: Path, rows: object, row_group_size: int | None = None) -> None:  # as Store.write
        raise DateEvalError(f"cannot write results to {path}: read-only")

    monkeypatch.setattr(Store, "write", refuse)
    computed = []
    for _ in range(2):
        assert stored.rows(demo, "numbers", "label", units, (1,), lambda: computed.append(1) or [{"x": 0.5}]) == [
            {"x": 0.5}
        ]
    assert computed == [1] and not (demo.root / sidecars.FOLDER / store_tables.KEPT_FOLDER / "numbers").exists()
    assert ["not kept" in message for message in keep(demo)] == [True]  # a store that cannot take them: one warning
    assert not (demo.root / sidecars.FOLDER / store_tables.KEPT_FOLDER / "numbers").exists()


def test_a_read_only_store_keeps_its_sidecars_in_memory(demo, monkeypatch):
    def refuse(self: Store, path: Path, rows: object) -> None:  # as Store.write
        raise DateEvalError(f"cannot write results to {path}: read-only")

    monkeypatch.setattr(Store, "write", refuse)
    sums, problems = store_tables.unit_sums(demo)
    assert not problems.corrupted and not (demo.root / sidecars.FOLDER).exists()
    sums = sums.assign(entry=descriptive.entry_label(sums))
    mmlu = sums[sums["dataset"] == "mmlu"]
    chosen = mmlu[mmlu["entry"] == mmlu["entry"].iloc[0]]
    flips, _ = item_matrices.flips(item_matrices.load(demo, chosen), dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    frame, _ = demo.read(columns=[*SUMMARY_COLUMNS, "n_options"], optional=GENERATION_COLUMNS)
    rows = frame[(descriptive.entry_label(frame) == chosen["entry"].iloc[0]) & (frame["dataset"] == "mmlu")]
    pd.testing.assert_frame_equal(flips, oracles.item_flips(rows), check_dtype=False, check_exact=False)


def _deny(monkeypatch, folder: Path) -> None:
    """``chmod 000`` on ``folder`` as a process that is not root meets it (root reads through any mode): listing the
    folder, or reaching anything in it, is refused."""
    for name in ("stat", "scandir", "listdir"):
        real = getattr(os, name)

        def refused(path=".", *args, real=real, name=name, **kwargs):
            text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
            if text.startswith(f"{folder}{os.sep}") or (name != "stat" and text == str(folder)):
                raise PermissionError(errno.EACCES, "Permission denied", text)
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, refused)


UNREAD = (
    "dateeval: warning: store: cannot read {} (permission denied): the units are read instead of the sums and "
    "statistics kept there (the same numbers, more slowly)"
)


def test_a_sidecar_folder_the_reader_may_not_read_reads_as_an_absent_one(demo, monkeypatch, capsys):
    """Issue 62 §6: ``chmod 000`` on ``.aggregates`` was a PermissionError traceback in ``summary`` and ``robust``.
    The units are read as where the folder is absent: the same output, and one warning line naming the folder."""
    from dateeval.cli import main

    def said(command: str) -> tuple[str, str]:
        _new_process()
        assert main([command, "--json", "--store", str(demo.root)]) == 0
        return tuple(capsys.readouterr())

    absent = {command: said(command)[0] for command in ("summary", "robust")}
    assert keep(demo) == [] and (demo.root / sidecars.FOLDER / store_tables.KEPT_FOLDER / "robust").is_dir()
    _deny(monkeypatch, demo.root / sidecars.FOLDER)
    for command, out in absent.items():
        found, err = said(command)
        assert found == out and err.splitlines() == [UNREAD.format(demo.root / sidecars.FOLDER)], err


def _modes_hold() -> list[str]:
    """A command prefix under which file modes are enforced: none for a user; for root, ``setpriv`` without the
    capabilities that read through them (skipped where it is not installed)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root reads through chmod 000, and setpriv (to drop that power) is not installed")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def test_a_sidecar_folder_chmod_000_reads_as_an_absent_one(demo):
    """The same with the folder's mode itself: ``summary`` and ``robust`` as a user runs them, rc 0, the same output."""
    prefix = _modes_hold()

    def run(command: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        args = [*prefix, sys.executable, "-m", "dateeval", command, "--json", "--store", str(demo.root)]
        return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)

    absent = {command: run(command).stdout for command in ("summary", "robust")}
    assert keep(demo) == []
    folder = demo.root / sidecars.FOLDER
    folder.chmod(0)
    try:
        for command, out in absent.items():
            found = run(command)
            assert found.returncode == 0 and found.stdout == out, found.stderr
            assert found.stderr.splitlines() == [UNREAD.format(folder)], found.stderr
    finally:
        folder.chmod(0o755)


def test_kept_rows_held_in_memory_are_bounded(demo, monkeypatch):
    """A long-running explorer sees many store states: only the most recently used results stay in memory, the
    others are read from the store where kept, else computed again."""
    monkeypatch.setattr(stored, "HELD", 3)
    units = demo.files()
    for index in range(5):
        assert stored.rows(
            demo, "bounded", f"label {index}", units, (index,), lambda index=index: [{"index": index}]
        ) == [{"index": index}]
    assert len(stored._KEPT) == 3
    assert stored.rows(demo, "bounded", "label 4", units, (4,), lambda: pytest.fail("held in memory")) == [{"index": 4}]
    assert stored.rows(demo, "bounded", "label 0", units, (0,), lambda: [{"index": 0}]) == [
        {"index": 0}
    ]  # computed again


def test_a_metric_is_added_in_one_place(tmp_path, monkeypatch):
    """A metric is one ``Metric``: how a unit's rows are summed and how the sums are finished, and the task kinds that
    declare it. The sidecars, the per-condition metrics, the summary and its deltas carry a new one with nothing else
    changed, on the datasets whose rows' kind declares it only (the declaration also decides that ``d``, whose rows have
    confidences, has no ECE)."""
    from dateeval.metrics import KIND_METRICS, METRICS, Grouped, Metric

    def sums(rows: Grouped) -> dict:
        correct = rows.values("correct")
        return {"n_wrong": rows.count(correct == 0)}

    def finish(summed: pd.DataFrame) -> dict:  # a sums frame, one row per group
        return {"wrong": summed["n_wrong"].to_numpy() / summed["n_rows"].to_numpy()}

    monkeypatch.setitem(METRICS, "wrong", Metric("wrong", "wrong answers", 100.0, False, sums, finish))
    monkeypatch.setitem(KIND_METRICS, "quiz", ("accuracy", "wrong"))
    store = Store(tmp_path)
    for dataset, kind in (("d", "quiz"), ("mmlu", "mcqa")):
        for day, correct in (("2024-01-01", [True, False, True, True]), ("2024-01-02", [False, False, True, False])):
            rows = [dict(row, dataset=dataset, task=kind) for row in _unit(day, range(4), correct)]
            sidecars.write_unit(store, store.unit_path("m", dataset, day, day), rows)
    view, _ = results.open(store)
    mine = view.metrics[view.metrics["dataset"] == "d"]
    assert mine.set_index("date")["wrong"].to_dict() == {"2024-01-01": 0.25, "2024-01-02": 0.75}
    row, mmlu = view.summary().set_index("dataset").loc[["d", "mmlu"]].to_dict("records")
    assert row["wrong_delta"] == 0.5 and row["wrong_worst_date"] == "2024-01-02" and pd.isna(row["ece_mean"])
    assert pd.isna(mmlu["wrong_delta"]) and mmlu["ece_mean"] > 0


def test_a_users_generation_dataset_is_reported_by_its_task_kind(tmp_path):
    """A dataset named after a user's file is unknown to the report's process: its rows' task kind puts it in Table 2
    (generation), not Table 1, and Flips treats it as generated."""
    from dateeval.results.report import report

    store = Store(tmp_path)
    for day, correct in (("2024-01-01", [True, False, True]), ("2024-01-02", [False, False, True])):
        rows = [dict(row, dataset="arithmetic", task="generation") for row in _unit(day, range(3), correct)]
        sidecars.write_unit(store, store.unit_path("m", "arithmetic", day, day), rows)
    view, _ = results.open(store)
    assert view.kind("arithmetic") == "generation"
    tables, _ = report.paper_tables(view)
    titles = [title for title, table in tables.items() if "arithmetic" in set(table.get("dataset", []))]
    assert any(title.startswith("Table 2") for title in titles) and not any(
        title.startswith("Table 1") for title in titles
    ), titles


def test_entries_scored_from_different_option_labels_are_marked_not_comparable(tmp_path, monkeypatch):
    """An API run in chat mode reads "A" where in-process reads " A": the explorer and summary say the two entries
    are not comparable (issue 18: 0.25 against 0.45 on the same items, for that reason alone)."""
    from conftest import ROOT, run_cli
    from streamlit.testing.v1 import AppTest

    store = Store(tmp_path / "store")
    for variant, key in (("space+label", "t1"), ("label", "t2")):
        for day in ("2024-01-01", "2024-01-02"):
            rows = [
                dict(row, task_key=key, label_variant=variant, task="mcqa")
                for row in _unit(day, range(3), [True, False, day == "2024-01-01"])
            ]
            sidecars.write_unit(store, store.unit_path("m", "d", day, f"{key}{day}"), rows)
    notes = unit_sums.label_notes(results.open(store)[0].sums)
    assert len(notes) == 1 and "not comparable" in notes[0] and "'label'" in notes[0] and "'space+label'" in notes[0]
    summary = run_cli("summary", "--store", str(store.root))
    assert (
        summary.returncode == 0
        and "entries scored reading different option labels are not comparable" in summary.stderr
    )
    monkeypatch.setenv("DATEEVAL_STORE", str(store.root))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["store"] = "mine"
    at.run()
    assert not at.exception and any("not comparable" in warning.value for warning in at.warning)
