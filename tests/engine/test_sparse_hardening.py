"""A sparse store as a careless or hostile user leaves it (issue 62 §1-4), on a real sweep of the real model: a swept
date whose draw chose no cell is still read (estimated from the other dates), a deleted drawn unit is named, a rerun with
another seed or other dates is refused before any work, and a design altered in the store (checksums stripped) is
refused rather than read as other numbers."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
from conftest import run_cli

from dateeval import cli
from dateeval.store import Store, designs

DATES = "2024-01-01..2024-01-21"  # 21 dates, all but the pilot (the first) drawn from 10 questions at 0.3
SWEEP = ("run", "--dataset", "mmlu", "--sample", "10", "--no-date", "--dtype", "float32", "--budget", "0.3")

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def swept(data_dir, tmp_path_factory):
    """A 10-question, 21-date sparse sweep at budget 0.3: several of its drawn dates get no cell."""
    store = tmp_path_factory.mktemp("sparse") / "store"
    result = run_cli(*SWEEP, "--dates", DATES, "--data-dir", str(data_dir), "--store", str(store))
    assert result.returncode == 0, result.stderr
    return store


def _copy(swept, tmp_path):
    target = tmp_path / "store"
    shutil.copytree(swept, target, ignore=shutil.ignore_patterns(".aggregates"))
    return target


def _read(capsys, *argv) -> tuple[int, str, str]:
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def _drawn_units(store) -> dict:
    """The drawn units of the store, by their date."""
    found = {}
    for path in Store(store).files():
        if "design" in pq.read_schema(path).names:
            found[pq.read_table(path, columns=["date"]).column("date")[0].as_py()] = path
    return found


def test_every_swept_date_is_read_even_where_the_draw_chose_no_cell(swept, capsys):
    status, out, err = _read(capsys, "summary", "--store", str(swept), "--json", "--per-date")
    assert status == 0, err
    dated = [row for row in json.loads(out) if row.get("date")]
    assert len({row["date"] for row in dated}) == 21
    empty = [row for row in dated if row.get("estimated") and row["n_scored"] == 0]
    assert 0 < len(empty) < 20 and len(_drawn_units(swept)) == 20 - len(empty)  # the draw left some dates with no cell
    assert not any(row["estimated"] for row in dated if row["date"] == "2024-01-01")  # the pilot, scored in full
    for row in empty:  # estimated from the other dates alone, with the pooled variance of every question's residuals
        assert row["low"] < row["value"] < row["high"], row
    status, out, err = _read(capsys, "robust", "--store", str(swept), "--json")
    assert status == 0, err
    ((entry,),) = [found["entries"] for found in json.loads(out)]
    assert entry["n_dates"] == 21 and entry["first_date"] == "2024-01-01" and entry["last_date"] == "2024-01-21"
    assert entry["sd_date_high"] > 0 and entry["sd_date_high"] <= 0.5**0.5 + 1e-12, entry


def test_a_deleted_drawn_unit_is_named_not_skipped(swept, tmp_path, capsys):
    store = _copy(swept, tmp_path)
    date, path = sorted(_drawn_units(store).items())[0]
    path.unlink()
    status, _, err = _read(capsys, "summary", "--store", str(store))
    (line,) = [line for line in err.splitlines() if "error" in line]
    assert status != 0 and str(date) in line and "missing" in line and "Traceback" not in err, err


def test_a_rerun_with_another_seed_or_dates_is_refused_before_any_work(swept, data_dir, tmp_path):
    store = _copy(swept, tmp_path)
    before = {path: path.stat().st_mtime_ns for path in store.rglob("*")}
    for change in (("--dates", DATES, "--budget-seed", "1"), ("--dates", "2024-01-01..2024-01-22")):
        result = run_cli(*SWEEP, *change, "--data-dir", str(data_dir), "--store", str(store))
        assert result.returncode != 0 and result.stderr.count("\n") == 1, result.stderr
        assert (
            "--budget-seed 0 over 21 date(s), 2024-01-01..2024-01-21" in result.stderr and "new store" in result.stderr
        )
        assert "mmlu" in result.stderr and "smollm2-135m" in result.stderr
    after = {path: path.stat().st_mtime_ns for path in store.rglob("*") if ".runs" not in path.parts}
    assert after == {path: stamp for path, stamp in before.items() if ".runs" not in path.parts}


def _strip_and_alter(path, alter) -> None:
    """Rewrite a unit without dateeval's checksums (so it reads unverified) with each row's design altered."""
    table = pq.read_table(path)
    column = table.schema.get_field_index("design")
    texts = [None if text is None else alter(json.loads(text)) for text in table.column("design").to_pylist()]
    table = table.set_column(column, "design", [[None if t is None else json.dumps(t) for t in texts]])
    pq.write_table(table.replace_schema_metadata(None), path)


def _record(store):
    (path,) = designs.records(store)
    return path, json.loads(path.read_text())


@pytest.mark.parametrize(
    "alter, record_too",
    [
        (lambda design: {**design, "scale": design["scale"] * 0.01}, False),
        (lambda design: {**design, "scale": design["scale"] * 0.01}, True),
        (lambda design: {**design, "floor": 1e-9}, True),
        (lambda design: {**design, "pilot": [design["pilot"][0]] * 3}, False),
    ],
    ids=["scale in the rows", "scale in the rows and the record", "floor 1e-9", "a pilot of one date thrice"],
)
def test_a_design_altered_in_the_store_is_refused(swept, tmp_path, capsys, alter, record_too):
    store = _copy(swept, tmp_path)
    for path in _drawn_units(store).values():
        _strip_and_alter(path, alter)
    if record_too:
        path, record = _record(store)
        record["designs"] = [json.dumps(alter(json.loads(text)), sort_keys=True) for text in record["designs"]]
        path.write_text(json.dumps(record))
    for command in ("summary", "robust"):
        status, _, err = _read(capsys, command, "--store", str(store))
        (line,) = [line for line in err.splitlines() if "error" in line]
        assert status != 0 and "sparse" in line and "Traceback" not in err, err


def test_a_record_that_does_not_match_its_pilot_or_is_not_json_is_refused(swept, tmp_path, capsys):
    store = _copy(swept, tmp_path)
    path, record = _record(store)
    record["n_dense"] += 1  # the design no longer solves to what the record says the grid was
    path.write_text(json.dumps(record))
    status, _, err = _read(capsys, "summary", "--store", str(store))
    assert status != 0 and "not the one its pilot gives" in err, err
    path.write_text("{" * 10_000)
    status, _, err = _read(capsys, "summary", "--store", str(store))
    assert status != 0 and str(path) in err and "Traceback" not in err, err


def test_the_replay_draws_the_cells_the_sweep_drew(swept):
    """Issue 63 §2: ``results.replay`` runs what ``dateeval run --budget`` draws: given the sweep's condition keys and
    question ids and its pilot date's margins (the no-date baseline's grades as the prior), it picks exactly the cells
    the real sweep stored."""
    import numpy as np

    from dateeval import sparse
    from dateeval.results.sparse.replay import replay

    rows, _ = Store(swept).read(columns=["condition_key", "date", "factor", "item_id", "correct", "probs"])
    dated = rows[rows["factor"].eq("date")]
    keys = [key for key, _ in designs.read(designs.records(swept)[0]).dates]  # a date with no drawn cell included
    items = sorted(dated["item_id"].unique())
    grid = dated.pivot(index="condition_key", columns="item_id", values="correct").reindex(keys, columns=items)
    none = rows[rows["factor"].eq("no-date")].set_index("item_id").reindex(items)
    baseline = none["correct"].astype(float).to_numpy()
    margin = dated.assign(margin=[sparse.margins(np.asarray(probs, dtype=float)) for probs in dated["probs"]])
    margins = margin.pivot(index="condition_key", columns="item_id", values="margin").reindex(keys, columns=items)
    grades, margins = (frame.astype(float).fillna(0).to_numpy() for frame in (grid, margins))
    found = replay(grades, 0.3, 0, margins, baseline, keys, items)
    assert np.array_equal(np.isfinite(found.sample.values), grid.notna().to_numpy())
    assert found.cells == int(grid.notna().to_numpy().sum()) + len(items) and found.grid == 22 * len(items)
    assert len(keys) == 21 and grid.notna().sum(1).eq(0).any()
