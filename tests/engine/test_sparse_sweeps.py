"""``dateeval run --budget``: a sparse sweep with the real model on real data, for next-token MCQA, chain of thought
and a generation task; it resumes with the same cells, a larger budget adds cells only, and every reader of the store
answers (``summary --per-date`` with estimates; the rest on the dates scored in full)."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, run_cli

from dateeval import sparse
from dateeval.results import Results
from dateeval.results.sparse.estimated import design_of, sample_of, sparse_statistics
from dateeval.store import Store

DATES = "2024-01-01..2024-01-10"  # 10 dates, all but the pilot (the first) drawn
SWEEP = (
    "--dataset",
    "mmlu",
    "--dataset",
    "mmlu_cot",
    "--dataset",
    "gsm8k",
    "--limit",
    "6",
    "--max-new-tokens",
    "8",
    "--dates",
    DATES,
    "--no-date",
    "--dtype",
    "float32",
)


def _run(data_dir, store, budget: str) -> str:
    result = run_cli("run", *SWEEP, "--data-dir", str(data_dir), "--budget", budget, "--store", str(store))
    assert result.returncode == 0, result.stderr
    return result.stdout


def _rows(store) -> pd.DataFrame:
    frame, problems = Store(store).read(
        columns=[
            "dataset",
            "condition_key",
            "factor",
            "item_id",
            "correct",
            "probs",
            "design",
            "propensity",
            "inclusion",
        ]
    )
    assert not problems.corrupted
    return frame


def _expected(rows: pd.DataFrame, dataset: str) -> set:
    """The cells the largest stored design draws, recomputed from the pilot as a reader would."""
    mine = rows[rows["dataset"] == dataset]
    design = design_of(mine["design"])
    items = sorted(mine.loc[mine["condition_key"].isin(design.pilot), "item_id"].unique())
    pi = design.inclusion(sparse.pilot_propensity(mine, list(design.pilot), items, design.baseline))
    drawn = sorted(
        set(mine.loc[mine["factor"].eq("date") & ~mine["condition_key"].isin(design.pilot), "condition_key"])
    )
    chosen = sparse.uniforms(design.seed, items, drawn) < pi
    return {(key, items[i]) for row, key in enumerate(drawn) for i in np.flatnonzero(chosen[row])}


def _drawn(rows: pd.DataFrame, dataset: str) -> set:
    mine = rows[(rows["dataset"] == dataset) & rows["design"].notna()]
    return set(zip(mine["condition_key"], mine["item_id"]))


def test_a_budgeted_sweep_draws_resumes_and_grows_on_every_task_kind(data_dir, tmp_path, monkeypatch):
    store = tmp_path / "store"
    said = _run(data_dir, store, "0.6")
    assert "sparse sweep at budget 0.6" in said
    rows = _rows(store)
    for dataset in ("mmlu", "mmlu_cot", "gsm8k"):
        drawn = _drawn(rows, dataset)
        assert drawn == _expected(rows, dataset) and 0 < len(drawn) < 6 * 7, dataset  # every drawn cell, and only those
        mine = rows[(rows["dataset"] == dataset) & rows["design"].notna()]
        assert ((mine["inclusion"] > 0) & (mine["inclusion"] <= 1)).all() and mine["propensity"].notna().all()
        assert len(rows[rows["dataset"] == dataset]) <= 0.6 * 6 * 11 + 6  # the budget, give or take the draw's luck

    # A sweep killed between two commits leaves whole units: lose one drawn unit, and the rerun scores exactly its cells
    # (so it drew the same cells: any other draw would score cells that are stored or were never drawn).
    lost = next(
        path
        for path in Store(store).files()
        if "mmlu_cot" not in str(path) and "mmlu" in str(path) and "design" in pd.read_parquet(path).columns
    )
    lost_cells = set(zip(*(pd.read_parquet(lost)[column] for column in ("condition_key", "item_id"))))
    lost.unlink()
    assert f"{len(lost_cells)} item-dates scored" in _run(data_dir, store, "0.6")
    assert _drawn(_rows(store), "mmlu") == _drawn(rows, "mmlu")

    before = {path: path.read_bytes() for path in Store(store).files()}
    _run(data_dir, store, "0.9")
    grown = _rows(store)
    for dataset in ("mmlu", "mmlu_cot", "gsm8k"):
        assert _drawn(grown, dataset) >= _drawn(rows, dataset) and _drawn(grown, dataset) == _expected(grown, dataset)
        design = design_of(grown.loc[grown["dataset"] == dataset, "design"])
        assert (
            design.budget == 0.9
            and design.baseline == design_of(rows.loc[rows["dataset"] == dataset, "design"]).baseline
        )
        no_date = set(grown.loc[(grown["dataset"] == dataset) & grown["factor"].eq("no-date"), "condition_key"])
        assert {design.baseline} == no_date  # the propensity read the baseline's grades, and the grown draw kept it
    assert all(path.read_bytes() == content for path, content in before.items())  # cells added, none replaced

    per_date = json.loads(run_cli("summary", "--store", str(store), "--json", "--per-date").stdout)
    estimated = [record for record in per_date if record["estimated"]]
    assert {record["dataset"] for record in estimated} >= {"mmlu", "mmlu_cot", "gsm8k"}
    for record in per_date:
        assert 0 <= record["low"] <= record["value"] <= record["high"] <= 1 and record["n_items"] == 6, record
        assert record["estimated"] == (record["n_scored"] < 6), record
    results, _ = Results.open(Store(store))
    table = results.chance.significance_table()
    assert set(zip(table["entry"], table["dataset"])) == set(results.sparse_entries())
    assert results.chance.verdict() == min(
        1.0, len(table) * table["cochran_permutation_p"].min()
    )  # Bonferroni over them
    exact = results.bands.per_date()
    assert (
        len(exact[~exact["estimated"]]) >= 3 * 4
    )  # per dataset: the no-date baseline, the 3 pilot dates, any date drawn whole
    for command in (
        ["summary", "--json"],
        ["robust", "--dataset", "mmlu"],
        ["report", "--out", str(tmp_path / "report")],
        ["export", "--out", str(tmp_path / "all.csv")],
    ):
        result = run_cli(*command, "--store", str(store))
        assert result.returncode == 0 and "Traceback" not in result.stderr, (command, result.stderr)
        assert "note: swept sparsely (--budget): smollm2-135m (float32, cpu) on" in result.stderr, (
            result.stderr
        )  # said where it is read
    flips, table7 = results.flips.flips(
        "smollm2-135m (float32, cpu)", "mmlu", dt.date(2024, 1, 1), dt.date(2024, 1, 10)
    )
    assert (flips["share_observed"] == flips["n_dates"] / 10).all() and flips["share_observed"].lt(1).any()
    assert flips["n_dates"].sum() == len(grown[grown["dataset"].eq("mmlu") & grown["factor"].eq("date")])  # every cell
    assert table7["n_items"].iloc[0] == 6
    _flips_names_the_unscored_dates(store, flips, monkeypatch)
    record = json.loads(run_cli("robust", "--store", str(store), "--dataset", "mmlu", "--json").stdout)[0]
    (entry,) = record["entries"]
    assert entry["n_dates"] == 10 and 0.2 < entry["share_scored"] < 1, entry  # every date, estimated from its sample
    assert entry["dates"] == sorted(entry["dates"]) and (entry["first_date"], entry["last_date"]) == (
        "2024-01-01",
        "2024-01-10",
    )  # in date order: the advice's range is the swept one
    sparse_rows = results._sparse_rows("smollm2-135m (float32, cpu)", "mmlu")
    shuffled = sparse_rows.assign(
        **{
            column: sparse_rows[column].cat.reorder_categories(sparse_rows[column].cat.categories[::-1])
            for column in ("condition_key", "date")
        }
    )  # the rows' categories in another read order: the same sample, the same figures to the last digit
    read = sample_of(sparse_rows)
    for sample in (read, sample_of(shuffled)):
        assert sample.dates == sorted(sample.dates) and len(sample.dates) == 10
        assert repr(sparse_statistics(sample)) == repr(sparse_statistics(read))  # bit for bit (NaN where not run)
    assert entry["low"] <= entry["score"] <= entry["high"] and "sparse sweep" in entry["sentence"], entry
    assert entry["sd_date_low"] <= entry["sd_date"] <= entry["sd_date_high"], entry  # the date effect's SD
    assert entry["score"] == pytest.approx(
        np.mean([row["value"] for row in per_date if row["dataset"] == "mmlu" and row["date"]]), abs=1e-12
    )  # the mean of the per-date estimates and exact values
    exported = pd.read_csv(tmp_path / "all.csv")
    assert (
        len(exported) == len(_rows(store)) and exported["inclusion"].notna().sum() == grown["inclusion"].notna().sum()
    )  # with the weights


def _flips_names_the_unscored_dates(store, flips: pd.DataFrame, monkeypatch) -> None:
    """Issue 63 §5: the Flips page says, for a question a sparse sweep drew on some dates, on how many it was scored
    and which dates' values are estimated instead."""
    from streamlit.testing.v1 import AppTest

    item = flips.loc[flips["share_observed"].lt(1), "item_id"].iloc[0]
    monkeypatch.setenv("DATEEVAL_STORE", str(store))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    query = {"store": "mine", "dataset": "mmlu", "from": "2024-01-01", "to": "2024-01-10", "show": "all"}
    at.query_params.update({**query, "question": item})
    at.run()
    at.switch_page("pages/flips.py").run()
    said = [caption.value for caption in at.caption if "scored this question on" in caption.value]
    n_dates = int(flips.set_index("item_id").loc[item, "n_dates"])
    assert not at.exception and len(said) == 1 and f"on {n_dates} of 10 dates" in said[0], said


def _mmlu(data_dir, store, limit: int, dates: str, *extra: str):
    """``dateeval run`` of the first ``limit`` MMLU questions on ``dates`` into ``store``, with ``extra`` flags."""
    flags = ("--dataset", "mmlu", "--data-dir", str(data_dir), "--limit", str(limit), "--dates", dates)
    return run_cli("run", *flags, *extra, "--store", str(store))


def _refused(data_dir, tmp_path, dates: str, budget: str, *extra: str):
    """A 2-question sparse sweep of ``dates`` at ``budget`` (refused before any work in both tests below)."""
    return _mmlu(data_dir, tmp_path / "store", 2, dates, *extra, "--budget", budget)


def test_a_budget_the_dense_conditions_spend_is_refused_before_any_work(data_dir, tmp_path):
    result = _refused(data_dir, tmp_path, DATES, "0.09", "--no-date")
    assert (
        result.returncode != 0
        and result.stderr.count("\n") == 1
        and "baselines, factors and 1 pilot date(s)" in result.stderr
        and "ask for at least 0.19" in result.stderr  # the baseline and the pilot date, 2 of 11 conditions: 0.19
    ), result.stderr
    result = _refused(data_dir, tmp_path, DATES, "0.1")  # no baseline: the first date is the pilot, 1 of 10
    assert result.returncode != 0 and "1 pilot date(s)" in result.stderr and "at least 0.11" in result.stderr, (
        result.stderr
    )
    assert not (tmp_path / "store").exists() or not Store(tmp_path / "store").files()
    for bad in ("0", "1.5", "nan", "x"):
        result = run_cli("run", "--dataset", "mmlu", "--budget", bad, "--store", str(tmp_path / "store"))
        assert result.returncode == 2 and "--budget" in result.stderr and "Traceback" not in result.stderr, (
            result.stderr
        )


def test_a_sweep_of_no_more_dates_than_pilots_is_told_to_sweep_densely(data_dir, tmp_path):
    """Issue 62 §6: a sweep whose dates are all pilots (one date, no baseline) was told to "ask for more than 1.00",
    a value ``--budget`` refuses; no budget can be sparse there, and the line says what can be done instead."""
    result = _refused(data_dir, tmp_path, "2024-01-01..2024-01-01", "1")
    said = result.stderr.strip()
    assert result.returncode != 0 and len(said.splitlines()) == 1 and "1.00" not in said, said
    assert "with 1 date(s) every condition is scored in full" in said and "sweep densely (drop --budget)" in said, said
    assert not (tmp_path / "store").exists() or not Store(tmp_path / "store").files()


def test_a_target_width_sweep_stops_within_it_and_resumes_after_a_kill(data_dir, tmp_path):
    """Issue 63 §4: ``--target-width`` on the real model draws look after look until every estimated date is within
    the width (said so), its design recording the looks; a sweep killed between two commits (a drawn unit lost) reruns
    to the same store, as an uninterrupted one."""
    sweep = ("2024-01-01..2024-01-08", "--no-date", "--dtype", "float32", "--target-width", "0.3")
    first = _mmlu(data_dir, tmp_path / "a", 6, *sweep)
    assert first.returncode == 0 and "target width 0.3: stopped at budget" in first.stdout, first.stderr
    per_date = json.loads(run_cli("summary", "--store", str(tmp_path / "a"), "--json", "--per-date").stdout)
    for record in per_date:
        if record["estimated"]:
            assert max(record["value"] - record["low"], record["high"] - record["value"]) <= 0.3 + 1e-9, record
    rows = _rows(tmp_path / "a")
    design = design_of(rows["design"])
    assert design.looks == len(sparse.looks(1.0, 2 / 9)) == 3  # 2 of 9 conditions in full: 0.06 and 0.12 are spent
    assert design.budget == float(first.stdout.split("stopped at budget ")[1].split(",")[0])
    # Each drawn row carries the design of the look that first drew it (its phase, as `export` writes it).
    drawn_rows = rows[rows["design"].notna()]
    phases = drawn_rows["design"].map(sparse.Design.from_json)
    assert len({phase.budget for phase in phases}) >= 2
    looks = sorted({phase.budget: phase for phase in phases}.values(), key=lambda phase: phase.budget)
    for (_, row), phase in zip(drawn_rows.iterrows(), phases):
        u = sparse.uniforms(design.seed, [row["item_id"]], [row["condition_key"]])[0, 0]
        first_look = next(look for look in looks if u < look.inclusion([row["propensity"]])[0])
        assert first_look.budget == phase.budget, (row["condition_key"], row["item_id"])

    second = _mmlu(data_dir, tmp_path / "b", 6, *sweep)
    assert second.returncode == 0, second.stderr
    lost = next(path for path in Store(tmp_path / "b").files() if "design" in pd.read_parquet(path).columns)
    lost.unlink()  # killed before this drawn unit was committed
    again = _mmlu(data_dir, tmp_path / "b", 6, *sweep)
    assert again.returncode == 0 and again.stdout.splitlines()[-2] == first.stdout.splitlines()[-2], again.stdout
    assert _drawn(_rows(tmp_path / "b"), "mmlu") == _drawn(rows, "mmlu")
