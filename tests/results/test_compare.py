"""Model against model across dates (issue 35 §6): ``robust.compare`` against loop oracles, ``dateeval compare`` on the
demo store, and its errors in one line."""

import math
import subprocess
import sys

import numpy as np
import oracles
import pytest

from dateeval import stats
from dateeval.results.bands import bands
from dateeval.results.sparse import estimated
from dateeval.results.robust import robust, robust_record


def test_date_variances_under_resampling_equal_the_loop_anova_of_the_resampled_matrix():
    """Each resample's date variance component is the loop ANOVA's (MS_date - MS_res) / items of the matrix with every
    question repeated as often as the resample draws it."""
    rng = np.random.default_rng(0)
    correct = (rng.random((7, 15)) < 0.4).astype(float)
    weights = bands.resample_weights(15, 20, seed=1)
    found = robust.date_variances(correct, weights)
    for drawn, value in zip(weights, found):
        expanded = np.repeat(correct, drawn.astype(int), axis=1)
        anova = oracles.two_way_anova(expanded.tolist())
        assert value == pytest.approx((anova["ms_date"] - anova["ms_residual"]) / expanded.shape[1], abs=1e-12)


def test_the_sensitivity_test_finds_a_date_sensitive_model_and_holds_its_size():
    """A model whose rate swings 30 points over the dates against a steady one: found (p < 0.05, A's date SD larger).
    Two steady models: rejected in at most 0.05 + 3 SE of 150 stores."""
    rng = np.random.default_rng(1)
    skill = rng.uniform(0.2, 0.8, 200)
    swing = np.linspace(-0.15, 0.15, 12)[:, None]
    moving = (rng.random((12, 200)) < np.clip(skill + swing, 0, 1)).astype(float)
    steady = (rng.random((12, 200)) < skill).astype(float)
    found = robust.sensitivity_difference(moving, steady, n_boot=400)
    assert found.p_value < 0.05 and found.a_date_sd > found.b_date_sd and found.low > 0, found
    rejections = 0
    for _ in range(150):
        skill = rng.uniform(0.2, 0.8, 30)
        a, b = ((rng.random((8, 30)) < skill).astype(float) for _ in range(2))
        rejections += robust.sensitivity_difference(a, b, n_boot=200, seed=int(rng.integers(1 << 31))).p_value < 0.05
    assert rejections / 150 <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 150), rejections


def test_compare_prints_what_stats_gives():
    rng = np.random.default_rng(2)
    skill = rng.uniform(0.2, 0.8, 40)
    a, b = ((rng.random((6, 40)) < np.clip(skill + lift, 0, 1)).astype(float) for lift in (0.2, 0.0))
    found = robust.compare(a, b)
    assert found.difference == tuple(stats.paired_difference(a, b)) and found.a == tuple(stats.robust_score(a))
    lines = robust_record.compare_lines("A", "B", found)
    assert lines[1].startswith(f"A - B: {100 * found.difference[0]:+.1f} pp") and (
        "A scores higher whatever the date" in lines[1]
    ) == (found.difference[1] > 0)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dateeval", *args], capture_output=True, text=True, timeout=300)


def test_dateeval_compare_on_the_demo(store):
    done = _cli("compare", "--store", str(store), "smollm2-135m (bfloat16, cpu)", "smollm2-135m (float32, cpu)")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        lines[0] == "mmlu:" and "(20 questions x 366 dates both have)" in lines[1] and lines[2].startswith("  A - B: ")
    )
    assert "date sensitivity (date SD without counting noise)" in lines[3]
    for args, says in (
        (("nobody", "smollm2-135m (float32, cpu)"), "no entry 'nobody'"),
        (("smollm2-135m (float32, cpu)", "smollm2-135m (float32, cpu)"), "two different entries"),
        (
            ("smollm2-135m (bfloat16, cpu)", "smollm2-135m (float32, cpu)", "--dataset", "gsm8k"),
            "do not both have dataset",
        ),
    ):
        done = _cli("compare", "--store", str(store), *args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_the_reports_model_against_model_table_is_dateeval_compare_on_every_pair(store):
    """The report's table on the demo's mmlu (3 entries, 3 pairs): each row's A - B and date-SD cells are the ones
    ``dateeval compare`` prints for that pair, and its CSV is among the report's files."""
    import io

    import pandas as pd

    from dateeval import results
    from dateeval.results.report import report

    view, _ = results.open(store)
    files: dict[str, str] = {}
    section = report._compare_section(view, "mmlu", files)
    assert len(section) == 1 and "Model against model: mmlu" in section[0]
    table = pd.read_csv(io.StringIO(files["compare-mmlu.csv"]))
    assert len(table) == 3 and table["questions x dates"].eq("20 questions x 366 dates").all()
    for row in table.itertuples(
        index=False
    ):  # to_csv writes a cell that starts with + or - behind a "'" (no spreadsheet formula)
        row = [cell.removeprefix("'") if isinstance(cell, str) else cell for cell in row]
        printed = _cli("compare", "--store", str(store), row[0], row[1]).stdout
        assert f"A - B: {row[4].replace(' [', ' pp [', 1)} (95%" in printed, (row, printed)
        assert f"A - B {row[7].replace(' [', ' pp [', 1)}, p = {row[8]:.3f}" in printed, (row, printed)
    assert report._compare_section(view, "gsm8k", files) == [] and list(files) == [
        "compare-mmlu.csv"
    ]  # one entry: no pair to compare


def test_entries_on_different_questions_are_not_paired(tmp_path):
    """The demo's float32 entry moved onto 20 other questions (its ids renamed), the bfloat16 entry left on the demo's:
    as many questions, none shared. ``compare`` refuses in one line (it printed a difference over "20 questions x 366
    dates both have"), and the results layer pairs nothing (the Leaderboard section, the report, the reorder chance)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from conftest import demo_copy

    from dateeval import results
    from dateeval.store import checksums

    store = demo_copy(tmp_path)
    for unit in store.glob("smollm2-135m-float32-*/mmlu/*.parquet"):
        table = pq.read_table(unit).replace_schema_metadata(None)
        renamed = pc.binary_join_element_wise("other-", table["item_id"].cast("string"), "")
        moved = table.set_column(
            table.schema.get_field_index("item_id"), "item_id", renamed.cast(table.schema.field("item_id").type)
        )
        pq.write_table(checksums.with_checksums(moved), unit)
    done = _cli("compare", "--store", str(store), "smollm2-135m (bfloat16, cpu)", "smollm2-135m (float32, cpu)")
    assert done.returncode == 2 and "do not share two dates and the same questions" in done.stderr, (
        done.stdout,
        done.stderr,
    )
    view, _ = results.open(store)
    assert view.aligned("mmlu", ["smollm2-135m (bfloat16, cpu)", "smollm2-135m (float32, cpu)"])[1] is None
    assert view.aligned("mmlu", ["smollm2-135m (bfloat16, cpu)", "smollm2-135m (float16, cpu)"])[1] is not None


def test_a_sample_drawn_with_certainty_compares_as_the_dense_grid_does():
    """``estimated.compare`` of two samples with every inclusion probability 1 gives ``robust.compare``'s scores and
    difference; its date sensitivity is not estimated, and the lines say so."""
    rng = np.random.default_rng(3)
    skill = rng.uniform(0.2, 0.8, 30)
    a, b = ((rng.random((5, 30)) < np.clip(skill + lift, 0, 1)).astype(float) for lift in (0.15, 0.0))
    days, items = [f"2024-01-0{day}" for day in range(1, 6)], [str(item) for item in range(30)]
    found = estimated.compare(estimated.dense_sample(days, items, a), estimated.dense_sample(days, items, b))
    dense = robust.compare(a, b)
    assert found.a == pytest.approx(dense.a) and found.b == pytest.approx(dense.b)
    assert found.difference == pytest.approx(dense.difference) and (found.n_dates, found.n_items) == (5, 30)
    assert all(math.isnan(value) for value in vars(found.sensitivity).values())
    lines = robust_record.compare_lines("A", "B", found)
    assert "sparse samples" in lines[1] and lines[2] == f"date sensitivity: {robust_record.NOT_SAMPLED}"
