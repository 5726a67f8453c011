"""Regressions between two dates (issue 64 §5): the questions right on date A and wrong on date B, and the reverse,
every model's answers side by side. ``Results.flips.between`` against a brute-force read of the store's rows, and the Flips
page's section through AppTest."""

from __future__ import annotations

import datetime as dt
import math
import re

import pandas as pd
import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from dateeval.results.readers import flips as flip_reads
from dateeval.results.descriptive import entry_label
from dateeval.schema import with_factor
from dateeval.store import Store

PAIRS = [
    ("mmlu", dt.date(2024, 1, 1), dt.date(2024, 12, 31)),
    ("mmlu", dt.date(2024, 3, 14), dt.date(2024, 3, 15)),
    ("mmlu", dt.date(2024, 7, 26), dt.date(2024, 7, 26)),
    ("gsm8k", dt.date(2024, 1, 1), dt.date(2024, 6, 1)),
    ("humaneval", dt.date(2024, 2, 1), dt.date(2024, 11, 1)),
    ("mmlu_cot", dt.date(2024, 12, 1), dt.date(2024, 4, 1)),
    ("wmt16_en_de", dt.date(2024, 1, 1), dt.date(2024, 2, 1)),  # scored, never right or wrong: nothing to compare
    ("mmlu", dt.date(2023, 1, 1), dt.date(2024, 1, 1)),  # a date with no results
]


def _same(one: object, two: object) -> bool:
    """Equal, or both missing."""
    missing = [value is None or (isinstance(value, float) and math.isnan(value)) for value in (one, two)]
    return all(missing) or (not any(missing) and one == two)


def brute_force(store: Store, dataset: str, a: dt.date, b: dt.date) -> dict[tuple[str, str], dict]:
    """Every stored row, looked at one by one: per entry and question, the graded answer on each date's condition."""
    rows = with_factor(store.read()[0])  # files from before the factor column: derived from the date mode
    rows = rows.assign(entry=entry_label(rows))
    found: dict[tuple[str, str], dict] = {}
    for row in rows.to_dict("records"):
        if row["dataset"] != dataset or row["factor"] != "date" or row["correct"] is None or pd.isna(row["correct"]):
            continue
        for side, day in (("a", a), ("b", b)):
            if str(row["date"]) == str(day):
                found.setdefault((row["entry"], row["item_id"]), {}).setdefault(side, row)
    return {key: cell for key, cell in found.items() if "a" in cell and "b" in cell}


@pytest.mark.parametrize(("dataset", "a", "b"), PAIRS)
def test_between_two_dates_is_what_the_rows_say(layer, store, dataset, a, b):
    expected = brute_force(Store(store), dataset, a, b)
    found = layer.flips.between(dataset, a, b)
    assert list(found.columns) == flip_reads.BETWEEN_COLUMNS
    assert len(found) == len(expected) and not found.duplicated(["entry", "item_id"]).any()
    for row in found.to_dict("records"):
        cell = expected[(row["entry"], row["item_id"])]
        right_a, right_b = bool(cell["a"]["correct"]), bool(cell["b"]["correct"])
        change = (
            flip_reads.RIGHT_TO_WRONG
            if right_a and not right_b
            else flip_reads.WRONG_TO_RIGHT
            if right_b and not right_a
            else ""
        )
        assert row["change"] == change, row
        assert _same(row["answer"], cell["a"]["answer"]), row
        for side in "ab":
            for column in ("pred", "parsed", "confidence", "system_prompt", "date_text"):
                assert _same(row[f"{column}_{side}"], cell[side][column]), (column, side, row)
            assert bool(row[f"correct_{side}"]) == bool(cell[side]["correct"])


def test_the_demo_has_a_regression_to_show(layer):
    """The demo's MMLU moves between its first and last dates: the section has something to draw."""
    found = layer.flips.between("mmlu", dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    assert (found["change"] != "").any() and found["entry"].nunique() == 3


def flips_page(**query: str) -> AppTest:
    """The Flips page on the built-in demo, opened from a link with ``query``."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"store": "demo", **query})
    at.run()
    at.switch_page("pages/flips.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.fixture
def flips(tmp_path, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return flips_page()


def test_the_two_dates_start_at_the_best_and_worst_of_the_selected_range(flips, layer):
    """A narrower range (here from a link) moves both dates inside it: its own best and worst (the year's best date lay
    outside March to May, and Streamlit refused it as below the picker's first date)."""
    at = flips_page(dataset="mmlu", **{"from": "2024-03-01", "to": "2024-05-31"})
    entry = at.sidebar.selectbox(key="entry").value
    metrics = layer.metrics
    spring = metrics[
        (metrics["entry"] == entry)
        & (metrics["dataset"] == "mmlu")
        & (metrics["factor"] == "date")
        & metrics["date"].between("2024-03-01", "2024-05-31")
    ].set_index("date")["accuracy"]
    days = [str(at.date_input(key=key).value) for key in ("between_a", "between_b")]
    assert days == [spring.idxmax(), spring.idxmin()], (days, spring.max(), spring.min())


def _listed(at: AppTest, lost: pd.DataFrame) -> pd.DataFrame:
    """The section's table of the questions that moved (one row per question, a column per model)."""
    tables = [*at.table, *at.dataframe]
    return next(t.value for t in tables if "Question" in t.value and set(t.value["Question"]) == set(lost["item_id"]))


def test_the_flips_page_shows_the_regressions_between_two_dates(flips, layer, data_dir):
    """On the demo's MMLU (the page opens on it), A and B start at the model's best and worst dates; each direction
    says how many questions it holds, lists them with every model's answers on both dates, and shows the question
    picked with its two prompts (the date's characters highlighted) and the models' answers."""
    at = flips  # its questions' text from ../shared/data (``data_dir`` skips the test without it)
    assert "Regressions between two dates" in [h.value for h in at.subheader]
    a, b = at.date_input(key="between_a").value, at.date_input(key="between_b").value
    entry = at.sidebar.selectbox(key="entry").value
    found = layer.flips.between("mmlu", a, b)
    mine = found[found["entry"] == entry]
    lost = mine[mine["change"] == flip_reads.RIGHT_TO_WRONG]
    options = at.radio(key="between").options
    assert options[0] == f"Right on {a}, wrong on {b} ({len(lost)})" and len(lost) >= 1, options
    listed = _listed(at, lost)
    assert list(listed.columns) == ["Question", *sorted(found["entry"].unique())]  # each model's A → B
    first = listed.iloc[0]
    for model in found["entry"].unique():
        both = found[(found["entry"] == model) & (found["item_id"] == first["Question"])].iloc[0]
        assert first[model].split(" → ")[0].endswith("✓" if both["correct_a"] else "✗"), (model, first[model])
    assert at.selectbox(key="between_question").value == lost["item_id"].iloc[0]
    prompts = [block.proto.body for block in at.get("html") if block.proto.body.count("<mark") >= 1]
    shown = [re.sub("<[^>]+>", "", body) for body in prompts]  # the text, the highlights' tags left out
    for day in (a, b):  # the prompt of each date: its date line, the question below it
        assert any(f"Today Date: {day:%d %b %Y}" in text and "[user]" in text for text in shown), shown[:2]
    answers = next(t.value for t in at.table if "Model" in t.value)
    assert list(answers.columns) == ["Model", str(a), str(b)] and len(answers) == found["entry"].nunique()
    # Another pair of dates, and the other direction: the counts the results layer gives.
    at.date_input(key="between_a").set_value(dt.date(2024, 1, 1)).run()
    at.date_input(key="between_b").set_value(dt.date(2024, 12, 31)).run()
    at.radio(key="between").set_value(flip_reads.WRONG_TO_RIGHT).run()
    assert not at.exception, [e.message for e in at.exception]
    found = layer.flips.between("mmlu", dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    counts = found[found["entry"] == entry]["change"].value_counts()
    assert at.radio(key="between").options == [
        f"Right on 2024-01-01, wrong on 2024-12-31 ({counts.get(flip_reads.RIGHT_TO_WRONG, 0)})",
        f"Wrong on 2024-01-01, right on 2024-12-31 ({counts.get(flip_reads.WRONG_TO_RIGHT, 0)})",
    ]
