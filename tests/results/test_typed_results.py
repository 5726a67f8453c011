"""Typed results and the explorer's one cached read (issue 37 §4): the headline is a :class:`Headline` that survives
its kept row; a summary row is a :class:`SummaryRow` whose lines are what ``dateeval summary`` prints; every cached
read is keyed on its own function and on the store's state."""

import math
from dataclasses import astuple, replace

import pandas as pd
import pyarrow as pa
from conftest import demo_copy, run_cli

from dateeval.results import Headline, headline_sentence, reorder_sentence
from dateeval.results.report.summary_row import SummaryRow
from dateeval.store import Store


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (a kept row reads NaN back as another float object)."""
    return all(
        x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(astuple(a), astuple(b), strict=True)
    )


def test_the_headline_is_typed_and_round_trips_through_its_kept_row(layer):
    """The headline survives the row it is kept as (a Parquet table, as ``results.stored`` writes and reads it), with
    and without a reorder share; without one, its sentence has no reorder line."""
    top = layer.chance.headline()
    assert isinstance(top, Headline) and top.reorder_dataset == "mmlu" and top.k_entries == 6
    bare = replace(
        top,
        reorder=float("nan"),
        reorder_dataset=None,
        reorder_entries=None,
        reorder_pairs=None,
        reorder_defined=None,
        reorder_undefined=None,
        reorder_count=None,
        reorder_chance=float("nan"),
        reorder_chance_upper=float("nan"),
        reorder_p_value=float("nan"),
    )
    for headline in (top, bare):
        kept = pa.Table.from_pylist([headline.record()]).to_pylist()[0]
        assert _same(Headline.from_record(kept), headline)
    assert (
        reorder_sentence(top).startswith("Date pairs that reorder the 3 models on mmlu")
        and reorder_sentence(bare) == ""
    )
    assert headline_sentence(bare) == headline_sentence(top) and f"by up to {top.delta_text()}" in headline_sentence(
        top
    )


def test_summary_prints_the_typed_rows(store, layer):
    """Each summary row's lines (:meth:`SummaryRow.lines`) are in ``dateeval summary``'s output, in the table's order,
    with every metric the row has and the chance line where it has two or more dates."""
    out = run_cli("summary", "--store", str(store))
    assert out.returncode == 0, out.stderr
    rows = [SummaryRow.from_record(record) for record in layer.summary().to_dict(orient="records")]
    at = 0
    for row in rows:
        block = "\n".join(row.lines())
        assert block in out.stdout[at:], block
        at = out.stdout.index(block, at) + len(block)
    humaneval = next(row for row in rows if row.dataset == "humaneval")
    assert humaneval.lines()[1].startswith("  pass@1   min ") and humaneval.chance is not None
    assert {spread.metric for spread in next(row for row in rows if row.dataset == "wmt16_en_de").spreads} >= {
        "bleu",
        "chrf",
    }


def test_every_cached_read_keys_on_its_own_function_and_the_stores_state(tmp_path):
    """The explorer's reads share one cached helper: reads with the same arguments (the store alone) still come from
    their own caches, and a store whose files change is read again."""
    from dateeval.explorer import cache

    store = Store(demo_copy(tmp_path))
    cache.clear()
    metrics, formats, statistics = cache.metrics(store), cache.fewshot_formats(store), cache.statistics(store)
    assert (
        isinstance(metrics, pd.DataFrame)
        and "accuracy" in metrics
        and "format" in formats
        and set(statistics) >= {"factors", "significance"}
    )
    assert isinstance(cache.headline(store), Headline)
    gone = next(path for path in store.files() if "gsm8k" in str(path))
    gone.unlink()
    assert "gsm8k" in set(metrics["dataset"]) and "gsm8k" not in set(cache.metrics(store)["dataset"])
