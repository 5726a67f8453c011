"""One number, one home: what every page shows equals what the results layer, `summary --json` and `report` give.

The explorer runs on a copy of the demo store (every task kind: MCQA, chain of thought, GSM8K, HumanEval, WMT16; three
precisions), through Streamlit's AppTest, for several selections. Every comparison is exact: the page, the CLI and the
report read one implementation (``dateeval.results.Results``), and the page applies only ``shown_columns.on_screen``.
"""

import datetime as dt
import html
import json
import math
import re

import pandas as pd
import pytest
from conftest import ROOT, run_cli
from streamlit.testing.v1 import AppTest

from dateeval.metrics import columns as shown_columns
from dateeval import metrics, results

JANUARY = results.Period(dt.date(2024, 1, 1), dt.date(2024, 1, 31))


@pytest.fixture
def page(store, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(store))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def open_page(name: str, **query: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.query_params.update({"store": "mine", **query})
        at.run()
        at.switch_page(name).run()
        assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
        return at

    return open_page


def _summary_json(store, *extra: str) -> list[dict]:
    done = run_cli("summary", "--store", str(store), "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _same(a: object, b: object) -> bool:
    """Equal to the last digit, missing equal to missing (JSON writes NaN as null)."""

    def missing(value: object) -> bool:
        return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NaT

    if missing(a) or missing(b):
        return missing(a) and missing(b)
    return a == b or str(a) == str(b)


def _assert_rows_equal(expected: pd.DataFrame, records: list[dict]) -> None:
    """Every column of every (entry, dataset) row of the results layer equals the CLI's JSON record."""
    by_key = {(record["entry"], record["dataset"]): record for record in records}
    assert set(by_key) == set(zip(expected["entry"], expected["dataset"]))
    for row in expected.to_dict("records"):
        record = by_key[(row["entry"], row["dataset"])]
        differing = {
            column: (value, record.get(column)) for column, value in row.items() if not _same(value, record.get(column))
        }
        assert not differing, (row["entry"], row["dataset"], differing)


def _assert_page_table(shown: pd.DataFrame, expected: pd.DataFrame, dataset: str) -> None:
    """A table on a page equals ``shown_columns.on_screen`` of the results layer's rows, column by column."""
    columns: dict[str, str] = {}  # label -> the results layer's column (a table shows a subset; the entry is its Model)
    for name in ["entry", *expected.columns]:
        columns.setdefault(shown_columns.column(name, dataset).label, name)
    reference = shown_columns.on_screen(expected[[columns[label] for label in shown.columns]], dataset).set_index(
        "Model"
    )
    shown = shown.set_index("Model")
    assert set(shown.index) == set(reference.index)
    for label in shown.columns:
        pd.testing.assert_series_equal(
            shown[label], reference.loc[shown.index, label], check_exact=True, check_dtype=False, check_names=False
        )


def _tables_under_headings(at: AppTest) -> dict[str, pd.DataFrame]:
    """The Overview's table per dataset (the one with a Model column under each dataset's heading)."""
    tables = [table.value for table in at.dataframe if "Model" in table.value]
    return dict(zip([heading.value for heading in at.subheader], tables))


def test_summary_json_report_and_results_agree_to_the_last_digit(store, layer, tmp_path):
    expected = layer.summary()
    _assert_rows_equal(expected, _summary_json(store))
    _assert_rows_equal(layer.summary(JANUARY), _summary_json(store, "--dates", str(JANUARY)))
    done = run_cli("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    titles = re.findall(r"<h2>(.*?)</h2>", page)
    table1 = pd.read_csv(tmp_path / "report" / f"table-{titles.index('Table 1: accuracy, worst-to-best date') + 1}.csv")
    for row in table1.to_dict("records"):
        mine = expected[(expected["entry"] == row["entry"]) & (expected["dataset"] == row["dataset"])].iloc[0]
        for column in ("accuracy_delta", "delta_null_upper", "delta_p_value", "cochran_p", "n_items", "n_dates"):
            assert _same(float(row[column]), float(mine[column])), (row["entry"], row["dataset"], column)


def test_overview_shows_the_layer_numbers_for_every_task_kind(page, layer):
    at = page("pages/overview.py")
    summary = layer.summary()
    tables = _tables_under_headings(at)
    assert set(tables) == set(summary["dataset"]) == {"gsm8k", "humaneval", "mmlu", "mmlu_cot", "wmt16_en_de"}
    for dataset, shown in tables.items():
        _assert_page_table(shown, summary[summary["dataset"] == dataset], dataset)
    headline = layer.chance.headline()
    assert f"by up to **{headline.delta_text()}**" in next(m.value for m in at.markdown if m.value.startswith("####"))


def test_the_paper_comparison_reads_table7_and_shows_chance(page, layer):
    """Beside the paper, the confidence of answers that change with the date is the Flips page's Table 7 (was "-"),
    and the largest delta has chance's band and its context next to it."""
    at = page("pages/overview.py")
    beside = [table.value for table in at.dataframe if "Statistic" in table.value]
    mmlu = beside[sorted(layer.summary()["dataset"].unique()).index("mmlu")].set_index("Statistic")
    confidence = mmlu.loc["Confidence of answers that change with the date (accuracy)", "Yours"]
    assert (
        confidence == metrics.percent(layer.flips.table7("mmlu")["inconsistent_confidence"].max()) and confidence != "-"
    )
    largest = mmlu.loc["Largest worst-to-best delta (accuracy)"]
    assert (
        largest["Yours"].endswith(" pp")
        and largest["Chance alone"].startswith("up to ")
        and "questions x" in largest["Yours on"]
    )


def test_curves_table_for_a_date_range_equals_summary_dates(page, layer, store):
    at = page("pages/curves.py", dataset="mmlu", **{"from": "2024-01-01", "to": "2024-01-31"})
    shown = next(table.value for table in at.dataframe if "Model" in table.value)
    expected = layer.summary(JANUARY)
    expected = expected[expected["dataset"] == "mmlu"]
    _assert_page_table(shown, expected, "mmlu")
    by_entry = {
        record["entry"]: record
        for record in _summary_json(store, "--dates", str(JANUARY))
        if record["dataset"] == "mmlu"
    }
    assert all(by_entry[entry]["n_dates"] == 31 for entry in shown["Model"])


def test_flips_table7_equals_the_layer_for_the_selected_dates(page, layer):
    entry = sorted(layer.summary().query("dataset == 'mmlu'")["entry"])[0]
    at = page("pages/flips.py", dataset="mmlu", entry=entry, **{"from": "2024-03-01", "to": "2024-05-31"})
    flips, table7 = layer.flips.flips(entry, "mmlu", dt.date(2024, 3, 1), dt.date(2024, 5, 31))
    shown = next(table.value for table in at.dataframe if "Confidence, inconsistent (%)" in table.value)
    pd.testing.assert_frame_equal(
        shown.reset_index(drop=True),
        shown_columns.on_screen(table7.drop(columns=["dataset"]), "mmlu"),
        check_dtype=False,
    )


def test_leaderboard_statistics_follow_the_date_range_and_top_k(page):
    """January only gives other reordering figures than the whole year, top-k changes the share, and top-k is in the URL."""
    year = page("pages/leaderboard.py", dataset="mmlu")
    january = page("pages/leaderboard.py", dataset="mmlu", **{"from": "2024-01-01", "to": "2024-01-31"})

    def figures(at: AppTest) -> list[str]:
        return [metric.value for metric in at.metric] + [
            caption.value for caption in at.caption if "Kendall" in caption.value
        ]

    assert figures(year) != figures(january)
    assert "2024-01-01 to 2024-01-31" in january.metric[0].label
    january.select_slider(key="top_k").set_value(1).run()
    assert january.query_params["top_k"] in ("1", ["1"])
    reopened = page("pages/leaderboard.py", dataset="mmlu", top_k="1", **{"from": "2024-01-01", "to": "2024-01-31"})
    assert reopened.select_slider(key="top_k").value == 1 and figures(reopened) == figures(january)


def test_the_leaderboard_and_overview_count_reorders_exactly_and_ties_apart(page, layer):
    """Issue 23 §1 on the demo: two dates with one order are 0% reordered (was 100% with "mean tau 1.000"); top 1 over
    2024-01-18..02-11 is tie-aware (79.17%, was 8.33% with ties broken by name); the Overview counts the 48,074 pairs
    with a date that ties every model apart (42.83% of the 18,721 defined pairs, was 28.03% of all)."""
    two = page("pages/leaderboard.py", dataset="mmlu", **{"from": "2024-01-11", "to": "2024-01-12"})
    said = " ".join(caption.value for caption in two.caption)
    assert (
        "0 of 3 models change position" in said
        and "0.00% of date pairs rank the models differently" in said
        and "0 of 1 date pairs" in said
    )
    ties = page("pages/leaderboard.py", dataset="mmlu", top_k="1", **{"from": "2024-01-18", "to": "2024-02-11"})
    assert [metric.value for metric in ties.metric if "top 1" in metric.label] == ["79.17%"]
    overview = page("pages/overview.py")
    reorder = [metric for metric in overview.metric if metric.label.startswith("Date pairs that reorder")]
    assert [metric.value for metric in reorder] == ["42.83%"] and "48,074 pairs undefined" in reorder[0].help
    assert layer.chance.headline().reorder_count == 8019 and layer.chance.headline().reorder_defined == 18721
    # Issue 35 §5: beside its chance value (answers shuffled across dates within each question), on every surface
    chance = layer.chance.headline().reorder_chance
    assert (
        0 < chance < 1
        and reorder[0].delta == f"chance alone {100 * chance:.2f}%"
        and results.reorder_sentence(layer.chance.headline()) in reorder[0].help
    )
    wide = page("pages/leaderboard.py", dataset="mmlu")
    assert any(
        f"Chance alone (answers shuffled across the dates within each question): {100 * chance:.2f}%" in caption.value
        for caption in wide.caption
    )


def test_curves_draw_each_models_chance_band_from_its_significance(page, layer):
    """Issue 23 §2: the yardstick for the date is the permutation band, drawn; the per-date band says so."""
    at = page("pages/curves.py", dataset="mmlu")
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    lines = [trace for trace in figure["data"] if "chance band" in str(trace.get("name"))]
    found = layer.chance.significance("smollm2-135m (float32, cpu)", "mmlu")
    edges = sorted(
        trace["y"][0] for trace in lines if trace["name"] == "smollm2-135m (float32, cpu): chance band (no date effect)"
    )
    expected = [
        100 * (found.mean_accuracy - found.chance_half_width),
        100 * (found.mean_accuracy + found.chance_half_width),
    ]
    assert edges == pytest.approx(expected) and found.chance_half_width > 0
    assert len(lines) == 6 and "Whether the date matters is the permutation test" in " ".join(
        c.value for c in at.caption
    )


def test_factors_on_translation_says_what_does_not_apply(page):
    at = page("pages/factors.py", dataset="wmt16_en_de")
    shown = " ".join(info.value for info in at.info)
    assert "do not apply to wmt16_en_de" in shown and "No factor sweeps in this store yet" not in shown
    assert not any("Delta within tolerance" in table.value and table.value.isna().any().any() for table in at.dataframe)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_export_holds_every_row_and_gives_the_same_accuracies(store, layer, tmp_path, suffix):
    """The export has every stored row (the same count DuckDB reads from the units, no sidecar mixed in), and the
    accuracy per entry and condition recomputed from it equals the results layer's."""
    import duckdb

    out = tmp_path / f"rows{suffix}"
    done = run_cli("export", "--store", str(store), "--out", str(out))
    assert done.returncode == 0, done.stderr
    read = {".parquet": pd.read_parquet, ".csv": pd.read_csv, ".jsonl": lambda path: pd.read_json(path, lines=True)}[
        suffix
    ]
    rows = read(out)
    units = duckdb.sql(f"SELECT count(*) FROM read_parquet('{store}/*/*/*.parquet', union_by_name = true)").fetchall()[
        0
    ][0]
    assert len(rows) == units == sum(len(pd.read_parquet(path)) for path in store.glob("*/*/*.parquet"))
    graded = rows[rows["dataset"] == "mmlu"].assign(correct=lambda frame: frame["correct"].astype(float))
    recomputed = graded.groupby(["entry", "condition"])["correct"].mean()
    stored = layer.metrics[layer.metrics["dataset"] == "mmlu"].set_index(["entry", "condition"])["accuracy"]
    assert recomputed.to_dict() == stored.to_dict()


def test_export_refuses_a_bad_target_in_one_line(store, tmp_path):
    for out, says in (
        (tmp_path / "rows.txt", "give a file ending in"),
        (tmp_path, "is a folder"),
        (tmp_path / "no" / "rows.csv", "does not exist"),
    ):
        done = run_cli("export", "--store", str(store), "--out", str(out))
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_the_headline_is_one_sentence_on_the_page_in_summary_and_in_the_report(page, layer, store, tmp_path):
    sentence, power = results.headline_sentence(layer.chance.headline()), results.verdict_power(layer.chance.headline())
    assert sentence.startswith(
        "Within chance (p = 0.944)"
    )  # Cochran's Q by joint permutation, min-p over the 6 entries
    assert power.startswith(
        "p from Cochran's Q by permutation over the 6 entries (min-p; each question's dates shuffled alike in every entry). "
        "With 20 questions x 366 dates this test finds a 5 pp"
    )
    overview = page("pages/overview.py")
    shown = next(m.value for m in overview.markdown if m.value.startswith("####"))
    assert shown.removeprefix("#### ").replace("**", "") == sentence and power in [
        caption.value for caption in overview.caption
    ]
    printed = run_cli("summary", "--store", str(store))
    reorder = results.reorder_sentence(layer.chance.headline())
    assert reorder.startswith(
        "Date pairs that reorder the 3 models on mmlu: 42.83% (8,019 of 18,721); with the answers shuffled"
    )
    assert printed.returncode == 0 and printed.stdout.splitlines()[:3] == [sentence, power, reorder]
    assert run_cli("report", "--store", str(store), "--out", str(tmp_path / "report")).returncode == 0
    written = (tmp_path / "report" / "index.html").read_text()
    assert html.escape(sentence) in written and html.escape(power) in written and html.escape(reorder) in written


def test_the_leaderboard_compares_two_models_as_dateeval_compare_does(page, store):
    """Issue 35 §6: the Leaderboard's model-against-model section prints the lines `dateeval compare` prints."""
    board = page("pages/leaderboard.py", dataset="mmlu")
    shown = next(markdown.value for markdown in board.markdown if markdown.value.startswith("- A = "))
    a, b = board.selectbox(key="compare_a").value, board.selectbox(key="compare_b").value
    printed = run_cli("compare", "--store", str(store), a, b)
    assert printed.returncode == 0 and shown == "\n".join(
        "- " + line.strip() for line in printed.stdout.splitlines()[1:]
    )


def test_summary_per_date_is_the_curves_band_and_the_stored_rows(store, layer):
    """``summary --json --per-date``: one object per entry x dataset x date (and no-date baseline) with the share right
    counted from the stored rows themselves (the oracle), the interval the Curves page draws for that date, and the
    JSON fields outside checks read. ``--dates`` keeps the range's dates and every baseline."""
    from dateeval.store import Store

    found = json.loads(run_cli("summary", "--store", str(store), "--json", "--per-date").stdout)
    assert found and all(
        list(record)
        == ["entry", "dataset", "date", "metric", "value", "low", "high", "n_scored", "n_items", "estimated"]
        for record in found
    )
    assert all(
        record["estimated"] is False
        and record["n_scored"] == record["n_items"]
        and 0 <= record["low"] <= record["value"] <= record["high"] <= 1
        for record in found
    )
    rows, _ = Store(store).read(columns=["model", "dtype", "device", "dataset", "date_mode", "date", "correct"])
    rows = rows[rows["correct"].notna()]
    by_cell = {
        (entry, dataset, None if mode == "none" else date): group
        for (entry, dataset, mode, date), group in rows.assign(
            entry=rows["model"] + " (" + rows["dtype"] + ", " + rows["device"] + ")"
        ).groupby(["entry", "dataset", "date_mode", "date"], dropna=False)
    }
    for record in found:
        cell = by_cell[(record["entry"], record["dataset"], record["date"])]
        assert record["n_scored"] == len(cell) and record["value"] == cell["correct"].astype(float).sum() / len(cell)
    for entry, dataset in {(record["entry"], record["dataset"]) for record in found}:
        band = layer.bands.band(entry, dataset, "accuracy")
        mine = {
            record["date"]: record
            for record in found
            if record["entry"] == entry and record["dataset"] == dataset and record["date"]
        }
        assert len(band) == len(mine)
        for row in band.itertuples():
            assert (mine[row.date.strftime("%Y-%m-%d")]["low"], mine[row.date.strftime("%Y-%m-%d")]["high"]) == (
                row.low,
                row.high,
            )
    january = json.loads(
        run_cli("summary", "--store", str(store), "--json", "--per-date", "--dates", "2024-01-01..2024-01-31").stdout
    )
    assert {record["date"] for record in january} - {None} == {
        record["date"] for record in found if record["date"] and record["date"].startswith("2024-01")
    }
    assert sum(record["date"] is None for record in january) == sum(record["date"] is None for record in found)
