"""The date-robust number (issue 20 §2): each statistic against a reference, and every reader (CLI, report, explorer
page) against the results layer's ``Results.robust.robust*``, exactly."""

import dataclasses
import json
import math

import numpy as np
import oracles
import pandas as pd
import pytest
from conftest import ROOT, run_cli
from scipy import stats
from streamlit.testing.v1 import AppTest

from dateeval import stats as dateeval_stats
from dateeval.results.robust import ranks, robust, robust_format, robust_record
from dateeval.results.robust.robust_row import RobustRow


def _binary(dates: int, items: int, seed: int) -> np.ndarray:
    """Right/wrong outcomes with an item effect, a date effect and noise: every component present."""
    rng = np.random.default_rng(seed)
    logit = rng.normal(0, 1.5, items)[None, :] + rng.normal(0, 0.4, dates)[:, None] + rng.normal(0, 0.5, (dates, items))
    return (rng.random((dates, items)) < 1 / (1 + np.exp(-logit))).astype(float)


def test_two_way_bootstrap_equals_a_plain_loop_on_the_same_draws():
    correct = _binary(7, 13, seed=1)
    n_boot, seed = 60, 3
    vectorised = robust.two_way_bootstrap(correct, n_boot, seed)
    # the draws the weights count: resample_weights draws indices with default_rng(seed), dates with seed + 1
    item_draws = np.random.default_rng(seed).integers(0, 13, (n_boot, 13))
    date_draws = np.random.default_rng(seed + 1).integers(0, 7, (n_boot, 7))
    np.testing.assert_allclose(vectorised, oracles.pigeonhole_means(correct, date_draws, item_draws), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "matrix", [_binary(6, 9, seed=2), np.random.default_rng(4).normal(size=(5, 8)), _binary(12, 4, seed=5)]
)
def test_variance_components_equal_a_hand_computed_two_way_anova(matrix):
    expected = oracles.two_way_anova(matrix.tolist())
    found = robust.variance_components(matrix)
    assert robust.mean_squares(matrix) == pytest.approx(
        (expected["ms_item"], expected["ms_date"], expected["ms_residual"]), rel=1e-12
    )
    assert (found.item, found.date, found.residual) == pytest.approx(
        (expected["item"], expected["date"], expected["residual"]), rel=1e-12, abs=1e-15
    )
    if found.item > 0 and found.date > 0:  # untruncated: Var(mean) = (MS_item + MS_date - MS_res) / (I D)
        assert found.mean_variance() == pytest.approx(
            (expected["ms_item"] + expected["ms_date"] - expected["ms_residual"]) / matrix.size, rel=1e-12
        )


def test_variance_components_find_a_pure_date_effect():
    """Every item right on some dates and wrong on the others: all the variance is the date's."""
    correct = np.repeat(np.array([1, 0, 1, 1, 0, 0], dtype=float)[:, None], 10, axis=1)
    found = robust.variance_components(correct)
    assert found.item == 0 and found.residual == 0 and found.date == pytest.approx(np.var(correct[:, 0], ddof=1))
    assert found.shares()["date"] == 1


def test_dates_needed_is_the_fewest_that_reach_the_width():
    components = robust.variance_components(_binary(30, 400, seed=6))
    floor = robust.Z95 * math.sqrt(components.item / components.n_items)  # what infinitely many dates would give
    assert components.date > 0 and components.residual > 0
    for half_width in (floor * 1.01, floor * 1.2, floor * 3):
        needed = robust.dates_needed(components, half_width)
        assert needed is not None and components.half_width(needed) <= half_width
        assert needed == 2 or components.half_width(needed - 1) > half_width
    assert robust.dates_needed(components, floor * 0.99) is None


def test_rank_intervals_equal_a_brute_force_recount():
    rng = np.random.default_rng(7)
    scores = pd.DataFrame(
        rng.integers(0, 5, (41, 5)) / 10,
        columns=[f"model {k}" for k in range(5)],
        index=[f"2024-01-{d:02d}" for d in range(1, 42)],
    )
    pd.testing.assert_frame_equal(ranks.rank_intervals(scores), oracles.rank_intervals(scores), check_dtype=False)


def test_flipping_pairs_recount_who_is_ahead():
    scores = pd.DataFrame({"a": [0.5, 0.6, 0.4], "b": [0.45, 0.5, 0.5], "c": [0.1, 0.1, 0.1]}, index=["d1", "d2", "d3"])
    intervals = pd.DataFrame(
        {"entry": ["a", "b", "c"], "score": [0.5, 0.48, 0.1], "low": [0.4, 0.4, 0.0], "high": [0.6, 0.55, 0.2]}
    )
    pairs = ranks.flipping_pairs(scores, intervals).set_index(["entry_a", "entry_b"])
    assert pairs.loc[("a", "b")].to_dict() == {
        "a_ahead": 2,
        "b_ahead": 1,
        "tied": 0,
        "flips": True,
        "intervals_overlap": True,
        "unresolved": True,
    }
    assert not pairs.loc[("a", "c"), "flips"] and not pairs.loc[("b", "c"), "intervals_overlap"]


def _row(score: float, low: float, high: float, n_items: int, dates: list[str]) -> RobustRow:
    """A robust row with these figures (the rest a real entry's, which the sentence does not read)."""
    figures = dataclasses.replace(
        robust.entry_statistics(np.eye(2), n_boot=2), score=score, low=low, high=high, n_items=n_items
    )
    return RobustRow("model", "mmlu", figures, dates, [score] * len(dates))


def test_sentence_names_the_dates_and_the_interval():
    row = _row(0.6123, 0.6042, 0.6204, 1000, [f"2024-01-{d:02d}" for d in range(1, 32)])
    assert robust_record.sentence("accuracy", row) == (
        "accuracy 61.2 ± 0.8 pp, mean over all 31 days of 2024-01-01..2024-01-31, 95% CI over items and "
        "dates (1000 items)"
    )
    monthly = dataclasses.replace(row, dates=[f"2024-{month:02d}-01" for month in range(1, 13)])
    assert "mean over 12 dates in 2024-01-01..2024-12-01," in robust_record.sentence("accuracy", monthly)


def test_an_asymmetric_interval_is_stated_as_it_is():
    """The issue's GSM8K case: 1.0 with [0.0, 4.7] is not "1.0 ± 2.3" (below zero)."""
    row = _row(0.010, 0.0, 0.047, 16, ["2024-01-01", "2024-01-02"])
    assert robust_record.sentence("accuracy", row).startswith("accuracy 1.0 [0.0, 4.7], mean over")


def _advice(correct: np.ndarray) -> str:
    row = robust.entry_statistics(correct, n_boot=20)
    return robust_record.advice("accuracy", row, 0.01, "2024-01-01", "2024-01-02")


def test_two_dates_say_why_their_interval_is_wide_when_the_dates_make_it_so():
    """Issue 35 §2: two dates that differ (50 questions, 10% right on one date, 90% on the other) rest on one
    difference: the advice names it and t at Satterthwaite's df; two alike dates, or questions that differ more than
    the dates, get no such sentence (the questions, not the dates, set the width there)."""
    rng = np.random.default_rng(0)
    apart = np.vstack([rng.random(50) < 0.1, rng.random(50) < 0.9]).astype(float)
    said = _advice(apart)
    df = robust.satterthwaite_df(apart)
    assert df < robust_record.FEW_DF
    assert said.startswith("Wide because the dates' spread rests on 1 difference between dates ")
    assert f"Student's t {stats.t.ppf(0.975, df):.1f} in place of 1.96" in said
    alike = np.vstack([rng.random(50) < 0.5] * 2).astype(float)
    assert not _advice(alike).startswith("Wide because")
    assert not _advice(np.ones((2, 2))).startswith("Wide because")  # nothing varies: no date spread to blame


def test_the_interval_is_korn_graubard_from_the_variance_components_with_two_questions_added():
    """Against its definition: Clopper-Pearson (checked against binomial tails in test_edges) of p n* of n*,
    n* = p(1-p)/Var x (z/t_df)^2 with the unbiased Var from the mean squares, for the matrix and for the matrix with a
    question right on every date and one wrong on every date added (issue 35); the interval is the union of the two."""
    from scipy import stats

    def korn_graubard(correct):
        ms_item, ms_date, ms_residual = robust.mean_squares(correct)
        variance = (ms_date + ms_item - ms_residual) / correct.size
        p = correct.mean()
        t = stats.t.ppf(0.975, robust.satterthwaite_df(correct))
        n = (min(p * (1 - p) / variance, correct.size) if 0 < p < 1 and variance > 0 else correct.shape[1]) * (
            robust.Z95 / t
        ) ** 2
        x = p * n
        return (stats.beta.ppf(0.025, x, n - x + 1) if x > 0 else 0.0), (
            stats.beta.ppf(0.975, x + 1, n - x) if x < n else 1.0
        )

    rng = np.random.default_rng(4)
    for n_dates, n_items, rate in ((2, 20, 0.3), (12, 16, 0.02), (366, 20, 0.35), (12, 50, 0.9)):
        correct = (rng.random((n_dates, n_items)) < rate * rng.random(n_items) * 2).astype(float)
        row = robust.entry_statistics(correct, n_boot=50)
        (low, high), (padded_low, padded_high) = (
            korn_graubard(correct),
            korn_graubard(np.hstack([correct, np.ones((n_dates, 1)), np.zeros((n_dates, 1))])),
        )
        assert row.low <= correct.mean() <= row.high and row.high > row.low
        assert (row.low, row.high) == pytest.approx((min(low, padded_low), max(high, padded_high)))
    zero = robust.entry_statistics(np.zeros((12, 16)), n_boot=50)
    alone = 1 - 0.025 ** (1 / (16 * (robust.Z95 / stats.t.ppf(0.975, 15)) ** 2))  # Clopper-Pearson of 0 of the items
    padded = korn_graubard(np.hstack([np.zeros((12, 16)), np.ones((12, 1)), np.zeros((12, 1))]))[1]
    assert zero.low == 0 and zero.high == pytest.approx(max(alone, padded))


def test_the_seed_error_of_the_ends_is_what_other_seeds_give():
    """end_errors from one bootstrap predicts the spread of the ends over 40 seeds (within a factor of 2), on 3 dates."""
    rng = np.random.default_rng(5)
    correct = (rng.random((3, 40)) < 0.3).astype(float)
    ends = np.array([robust.interval(robust.two_way_bootstrap(correct, seed=seed)) for seed in range(40)])
    predicted = np.mean([robust.end_errors(robust.two_way_bootstrap(correct, seed=seed)) for seed in range(40)], axis=0)
    assert np.all(predicted / ends.std(0, ddof=1) > 0.5) and np.all(predicted / ends.std(0, ddof=1) < 2)


def test_adding_a_source_of_variation_never_narrows_a_planned_interval():
    """Every width a reader compares with another (the planning table, 'the questions alone', the measured dates) comes
    from the variance components: with the dates' variance added, never narrower than the questions' alone."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        n_dates, n_items = int(rng.integers(2, 12)), int(rng.integers(2, 30))
        correct = (rng.random((n_dates, n_items)) < rng.random((1, n_items)) * rng.random((n_dates, 1)) * 2).astype(
            float
        )
        row = robust.entry_statistics(correct, n_boot=50)
        assert row.anova_half_width >= row.item_only_half_width
        widths = robust.plan(row.components)["half_width"].to_numpy()
        assert np.all(widths >= row.item_only_half_width) and np.all(np.diff(widths) <= 1e-15)


# --- every reader equals the results layer ------------------------------------------------------------------------


def _same(a: object, b: object) -> bool:
    """Equal to the last digit (JSON writes NaN as null; tuples come back as lists)."""
    if isinstance(a, dict):
        return set(a) == set(b) and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return a == b


def test_the_layer_gives_every_graded_dataset_and_its_record(layer):
    board = layer.robust.robust("mmlu")
    assert list(board["rank"]) == sorted(board["rank"]) and len(board) == 3 and (board["n_dates"] == 366).all()
    assert (board["low"] <= board["score"]).all() and (board["score"] <= board["high"]).all()
    record = layer.robust.robust_record("mmlu", half_width=0.25)
    entry = record.entries[0]
    assert entry.identity.model_revision and len(entry.identity.prompts_digest) == 32 and record.dateeval_version
    assert (
        entry.sentence.startswith(f"accuracy {100 * entry.score:.1f} ")
        and "all 366 days of 2024-01-01..2024-12-31" in entry.sentence
    )
    # a typed line: its fields are the leaderboard's columns in order, then what produced it and its words
    assert [field.name for field in dataclasses.fields(entry)][: len(ranks.BOARD_COLUMNS)] == ranks.BOARD_COLUMNS
    assert list(entry.as_json()) == [field.name for field in dataclasses.fields(entry)]
    pairs = layer.robust.robust_pairs("mmlu")  # the leaderboard's own pairs table, not the record's
    assert record.unresolved() == [
        f"{a} and {b}" for a, b in pairs.loc[pairs["unresolved"], ["entry_a", "entry_b"]].to_numpy()
    ]
    for row in board.to_dict("records"):  # the date effect's SD: dateeval_stats.date_spread of the entry's own grid
        _, correct, _ = layer.matrices(row["entry"], "mmlu", None, "condition")
        assert (row["sd_date"], row["sd_date_low"], row["sd_date_high"]) == pytest.approx(
            tuple(dateeval_stats.date_spread(correct)), nan_ok=True
        )
        assert row["sd_date"] ** 2 == pytest.approx(row["var_date"])
    assert layer.robust.robust("wmt16_en_de").empty  # BLEU and chrF are corpus scores: no per-item grade to resample
    assert len(layer.robust.robust_pairs("mmlu")) == 3


def test_cli_json_equals_the_layer_to_the_last_digit(store, layer):
    done = run_cli("robust", "--store", str(store), "--json", "--half-width", "0.25")
    assert done.returncode == 0, done.stderr
    records = {record["dataset"]: record for record in json.loads(done.stdout)}
    assert set(records) == {"gsm8k", "humaneval", "mmlu", "mmlu_cot"}
    for dataset, record in records.items():
        assert _same(layer.robust.robust_record(dataset, half_width=0.25).as_json(), record), dataset


def test_summary_json_carries_each_entrys_robust_record(store, layer):
    done = run_cli("summary", "--store", str(store), "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    for row in rows:
        expected = next(
            (
                entry.as_json()
                for entry in layer.robust.robust_record(row["dataset"]).entries
                if entry.entry == row["entry"]
            ),
            None,
        )
        assert _same(expected, row["robust"]), (row["entry"], row["dataset"])
    assert {row["dataset"] for row in rows if row["robust"] is None} == {
        "wmt16_en_de"
    }  # corpus scores: no per-item grade


def test_cli_tables_and_figure(store, layer, tmp_path):
    shown = robust_format.display(layer.robust.robust("mmlu"), "mmlu", 0.01)
    markdown = run_cli(
        "robust", "--store", str(store), "--dataset", "mmlu", "--markdown", "--figure", str(tmp_path / "robust.svg")
    )
    assert markdown.returncode == 0, markdown.stderr
    assert robust_format.markdown(shown) in markdown.stdout
    assert all(entry.sentence in markdown.stdout for entry in layer.robust.robust_record("mmlu").entries)
    assert (tmp_path / "robust.svg").read_text().lstrip().startswith("<?xml") and "<svg" in (
        tmp_path / "robust.svg"
    ).read_text()
    latex = run_cli(
        "robust", "--store", str(store), "--dataset", "gsm8k", "--latex", "--figure", str(tmp_path / "robust.pdf")
    )
    assert latex.returncode == 0, latex.stderr
    assert (
        r"\begin{tabular}" in latex.stdout
        and r"$\pm$" in latex.stdout
        and (tmp_path / "robust.pdf").read_bytes().startswith(b"%PDF")
    )


def test_report_section_equals_the_layer(store, layer, tmp_path):
    done = run_cli("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<h2>What to report: mmlu</h2>" in page and "<svg" in page
    written = pd.read_csv(tmp_path / "report" / "robust-mmlu.csv")
    expected = layer.robust.robust("mmlu")
    for column in ranks.BOARD_COLUMNS:
        assert written[column].tolist() == expected[column].tolist(), column
    for entry in layer.robust.robust_record("mmlu").entries:
        assert entry.sentence.replace("×", "x") in page.replace("×", "x")


def test_page_shows_the_layer_numbers(store, layer, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(store))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params.update({"store": "mine", "dataset": "mmlu"})
    at.run()
    at.switch_page("pages/robust.py").run()
    assert not at.exception and not at.error, [e.message for e in at.exception] + [e.value for e in at.error]
    shown = next(table.value for table in at.dataframe if "Model" in table.value)
    expected = robust_format.display(layer.robust.robust("mmlu"), "mmlu", 0.01)
    pd.testing.assert_frame_equal(shown.reset_index(drop=True).astype(str), expected, check_dtype=False)
    sentences = [code.value for code in at.code]
    assert sentences == [entry.sentence + "." for entry in layer.robust.robust_record("mmlu").entries]


@pytest.mark.parametrize(
    "arguments, says",
    [
        (["--half-width", "0"], "between 0 and 1"),
        (["--half-width", "one"], "invalid number"),
        (["--dataset", "nope"], "no dataset 'nope'"),
        (["--figure", "robust.txt"], "give a file ending in"),
        (["--figure", "robust.svg"], "--figure draws one dataset"),
        (["--json", "--latex"], "not allowed with"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(store, tmp_path, arguments, says):
    arguments = [str(tmp_path / argument) if argument.startswith("robust.") else argument for argument in arguments]
    done = run_cli("robust", "--store", str(store), *arguments)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_a_store_that_does_not_exist_is_one_line(tmp_path):
    done = run_cli("robust", "--store", str(tmp_path / "missing"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "does not exist" in done.stderr
