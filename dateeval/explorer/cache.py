"""Every store read a page makes, cached per store state: one helper (:func:`cached`) keys a read of the store's
:class:`dateeval.results.Results` on the store's root and fingerprint (files, sizes, mtimes), so pages pass the store
and a finished run shows up without restarting the app.

Pages never hold the store's per-item rows: curves and tables come from per-unit sums (``dateeval.results.sources.unit_sums``),
per-item views from DuckDB reads of verified files (``dateeval.results.sources.sql``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import streamlit as st

from dateeval import results
from dateeval.conditions import Condition
from dateeval.explorer import sent
from dateeval.explorer.state import Selection, current_store, results_store
from dateeval.results.bands import bands as result_bands
from dateeval.results import descriptive, inference
from dateeval.results.robust import robust_format
from dateeval.results.sources import sql
from dateeval.results.readers.bands import PER_DATE_COLUMNS
from dateeval.results.chance.headline import Headline
from dateeval.results.robust.robust_record import RobustRecord
from dateeval.schema import GENERATION_COLUMNS, SUMMARY_COLUMNS
from dateeval.store import Store
from dateeval.tasks import build_task, custom
from dateeval.tasks.base import Task

# Per-item option probabilities and outputs are read on demand (item_history), not with everything else.
ITEM_COLUMNS = SUMMARY_COLUMNS + ["n_options"]
T = TypeVar("T")
_CACHES: list[Any] = []  # every cache below, for :func:`clear`


@st.cache_resource(show_spinner="Reading aggregates...", max_entries=2)
def _view(root: str, fingerprint: tuple) -> tuple[results.Results, list[str]]:
    """The store's sums, metrics and per-entry matrices (``results.Results``), shared by every session, with its warnings."""
    del fingerprint  # only part of the cache key: a new or replaced file invalidates it
    view, problems = results.open(Store(root))
    return view, problems.messages()


_CACHES.append(_view)


def opened(store: Store) -> tuple[results.Results, list[str]]:
    """The store as it is now (``results.open``, held per store state), with what could not be read."""
    return _view(str(store.root), store.fingerprint())


def cached(spinner: str | bool = False, max_entries: int = 16) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A read of a store's ``Results`` as pages call it, ``read(store, *args)``, cached by Streamlit per store state
    and arguments (each caller gets its own copy of the result, so a page may add columns)."""

    def wrap(read: Callable[..., T]) -> Callable[..., T]:
        def keyed(root: str, fingerprint: tuple, *args: object) -> T:
            return read(_view(root, fingerprint)[0], *args)

        keyed.__module__, keyed.__qualname__ = read.__module__, read.__qualname__  # Streamlit keys a cache on these
        keyed = st.cache_data(show_spinner=spinner, max_entries=max_entries)(keyed)
        _CACHES.append(keyed)

        @functools.wraps(read)
        def call(store: Store, *args: object) -> T:
            return keyed(str(store.root), store.fingerprint(), *args)

        return call

    return wrap


def clear() -> None:
    """Forget every cached read, as a new explorer process starts."""
    for cache in _CACHES:
        cache.clear()


@cached(max_entries=8)
def metrics(view: results.Results) -> pd.DataFrame:
    """The view's per-condition metrics."""
    return view.metrics


def store_metrics() -> pd.DataFrame:
    """Per-condition metrics of the whole chosen store, for pages that compare datasets."""
    return metrics(current_store())


@cached(spinner="Computing the headline (bootstrap and permutations)...", max_entries=4)
def headline(view: results.Results) -> Headline | None:
    """The store's finding (``Results.chance.headline``; kept with the store, usually since the sweep that wrote it)."""
    return view.chance.headline()


@cached(spinner="Computing the summary...", max_entries=4)
def summary(view: results.Results, period: results.Period | None = None) -> pd.DataFrame:
    """``Results.summary`` over ``period``: the rows `dateeval summary [--dates START..END]` prints and the report writes."""
    return view.summary(period)


@cached()
def paper_beside(view: results.Results, dataset: str) -> pd.DataFrame:
    """``Results.paper_beside``: the paper's figures next to the store's, with chance's band."""
    return view.paper_beside(dataset)


@cached(max_entries=4)
def fewshot_formats(view: results.Results) -> pd.DataFrame:
    """The date effect under each few-shot format (``Results.fewshot_formats``)."""
    return view.fewshot_formats()


@cached(spinner="Computing statistics (bootstrap and permutations)...", max_entries=4)
def statistics(view: results.Results) -> dict[str, pd.DataFrame]:
    """Table 5, the date effect against chance, run-to-run variation and Table 3 (``Results.statistics``; each
    entry's part kept with the store, usually since the sweep that wrote it)."""
    return view.statistics()


@cached(spinner="Finding the questions that flip...")
def flips(view: results.Results, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-question flip counts and Table 7 of the selection (``Results.flips.flips_of``; each entry's kept with the store)."""
    return view.flips.flips_of(selection.entries, selection.dataset, selection.start.date(), selection.end.date())


@cached(spinner="Comparing the two dates...")
def between(view: results.Results, dataset: str, a: dt.date, b: dt.date) -> pd.DataFrame:
    """Every entry's answers on two dates side by side, per question graded on both (``Results.flips.between``)."""
    return view.flips.between(dataset, a, b)


@cached(spinner="Shuffling answers across the dates...")
def chance_bands(view: results.Results, selection: Selection) -> pd.DataFrame:
    """Per entry of the selection, over its selected dates: the band within which chance alone keeps every date's
    accuracy in 95% of shuffles (``chance.envelope``), from the entry's kept significance."""
    rows = []
    for entry in sorted(selection.entries):
        if (entry, selection.dataset) in view.dated_entries(selection.period):
            found = view.chance.significance(entry, selection.dataset, selection.period)
            rows.append(
                {
                    "entry": entry,
                    "low": found.mean_accuracy - found.chance_half_width,
                    "high": found.mean_accuracy + found.chance_half_width,
                }
            )
    return pd.DataFrame(rows, columns=["entry", "low", "high"])


@cached(spinner="Shuffling answers across the dates...")
def reorder_chance(view: results.Results, selection: Selection, observed: float) -> dict[str, float]:
    """The reorder share chance alone gives for the selection's models and dates (``Results.chance.reorder_chance``)."""
    return view.chance.reorder_chance(selection.dataset, sorted(selection.entries), observed, selection.period)


@cached(spinner="Comparing the two models...")
def compare(view: results.Results, selection: Selection, a: str, b: str) -> list[str]:
    """``robust_record.compare_lines`` of two entries over the dates of the selection they share; empty where they share
    fewer than two dates or not their questions."""
    from dateeval.results.robust import robust_record

    found = view.robust.compared(selection.dataset, a, b, selection.period)
    return [] if found is None else robust_record.compare_lines(a, b, found)


@cached(spinner="Computing intervals over questions...")
def bands(view: results.Results, selection: Selection, metric: str) -> pd.DataFrame:
    """95% interval per entry and date of the selection."""
    parts = [view.bands.band(entry, selection.dataset, metric) for entry in sorted(selection.entries)]
    parts = [part for part in parts if len(part)]
    band = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=result_bands.BAND_COLUMNS)
    return band[band["date"].between(selection.start, selection.end)]


@cached(spinner="Estimating the sparse sweeps' dates...")
def estimates(view: results.Results, selection: Selection) -> pd.DataFrame:
    """The selection's sparse entries' estimated dates (``Results.bands.per_date``: entry, date, value, low, high), each row
    with ``share``: the share of its entry's grid that was scored (exact and drawn conditions together)."""
    table = view.bands.per_date(selection.period) if view.sparse_entries() else pd.DataFrame(columns=PER_DATE_COLUMNS)
    table = table[(table["dataset"] == selection.dataset) & table["entry"].isin(selection.entries)]
    share = table.groupby("entry")["n_scored"].sum() / table.groupby("entry")["n_items"].sum()
    found = table[table["estimated"].astype(bool)]
    return found.assign(date=pd.to_datetime(found["date"]), share=found["entry"].map(share))


@cached(spinner="Bootstrapping over questions and dates...")
def robust(view: results.Results, selection: Selection, half_width: float) -> RobustRecord:
    """``Results.robust.robust_record`` of the selection (entries, dataset, dates): what `dateeval robust` prints and the report shows."""
    return view.robust.robust_record(selection.dataset, selection.period, selection.entries, half_width)


@st.cache_data(max_entries=16)
def robust_figure(record: RobustRecord) -> str | None:
    """``robust_format.svg`` of a record (:func:`robust`'s), drawn once: matplotlib took a sixth of a second of every
    visit to What to report. The same record draws the same bytes (the SVG's ids are salted, its date left out)."""
    return robust_format.svg(record)


@st.cache_data(max_entries=16)
def date_budget(scores: tuple[float, ...], tolerance: float) -> pd.DataFrame:
    """``inference.date_budget`` of one entry's per-date scores, computed once per scores and tolerance (its draws of
    date samples took a tenth of Factors' script run on every visit)."""
    return inference.date_budget(np.asarray(scores), tolerance=tolerance)


_CACHES += [robust_figure, date_budget]  # :func:`clear` forgets them too, as a new process would


@cached(max_entries=64)
def item_history(
    view: results.Results, model_key: str, dataset: str, item_id: str, columns: tuple[str, ...]
) -> pd.DataFrame:
    """Chosen columns of one item on every condition (a sparse sweep's drawn dates too), read by DuckDB with the item
    pushed into the scan (option probabilities and outputs are the store's bulk, so they are never loaded with
    everything else)."""
    sources = view.sources_where(lambda sums: sums["model_key"].eq(model_key) & sums["dataset"].eq(dataset))
    return sql.item_rows(*sources, item_id, columns)


def _chosen(view: results.Results, selection: Selection) -> tuple[list[Path], pd.DataFrame, bool]:
    """The verified files, entry keys and de-duplication need of a selection (see ``Results.sources``)."""
    return view.sources((view.sums["dataset"] == selection.dataset) & view.sums["entry"].isin(selection.entries))


@st.cache_resource(show_spinner="Reading the selected results...", max_entries=8)
def _selected(root: str, fingerprint: tuple, selection: Selection) -> pd.DataFrame:
    """The selection's rows, shared (not copied) between callers: at paper scale they are the largest read."""
    dates = (selection.start.date(), selection.end.date())
    return sql.rows(*_chosen(_view(root, fingerprint)[0], selection), [*ITEM_COLUMNS, *GENERATION_COLUMNS], dates)


_CACHES.append(_selected)


@cached(max_entries=64)
def _item_rows(view: results.Results, selection: Selection, item_id: str) -> pd.DataFrame:
    """One question's rows on the selection's entries' conditions, a sparse sweep's drawn dates included."""
    sources = view.sources_where(
        lambda sums: sums["dataset"].eq(selection.dataset) & sums["entry"].isin(selection.entries)
    )
    return sql.item_rows(*sources, item_id, ITEM_COLUMNS)


def item_rows(selection: Selection, item_id: str) -> pd.DataFrame:
    """One question's rows on the selection's dates (``ITEM_COLUMNS``), by date: one scan with the item pushed down."""
    rows = _item_rows(current_store(), selection, item_id)
    return rows[
        (rows["factor"] == "date")
        & pd.to_datetime(rows["date"], errors="coerce").between(selection.start, selection.end)
    ]


def unscored_dates(selection: Selection, entry: str, rows: pd.DataFrame) -> list[str]:
    """The dates in the selection's period where ``entry`` is a sparse sweep's estimate and one question's ``rows``
    (:func:`item_rows`) hold nothing: the sweep did not draw the question there, so those dates' values are estimated
    from other cells. Empty for a dense entry."""
    estimated = estimates(current_store(), dataclasses.replace(selection, entries=(entry,)))
    scored = set(pd.to_datetime(rows["date"], errors="coerce").dropna().dt.date)
    return [str(day) for day in sorted(set(estimated["date"].dt.date) - scored)]


def template_default_dates(selection: Selection) -> dict[str, pd.Timestamp]:
    """The date each chosen entry's template uses when left alone, from the sums (no per-item read)."""
    sums = opened(current_store())[0].sums
    return descriptive.template_default_dates(
        sums[(sums["dataset"] == selection.dataset) & sums["entry"].isin(selection.entries)]
    )


def item_table(selection: Selection) -> Callable[[], pd.DataFrame]:
    """The selection's per-item x per-date results (one row per entry, question and condition), built only when a
    download is clicked: at paper scale it is millions of rows."""
    store = current_store()
    root, fingerprint = str(store.root), store.fingerprint()

    def table() -> pd.DataFrame:
        rows = _selected(root, fingerprint, selection)
        columns = [
            "entry",
            "dataset",
            "item_id",
            "factor",
            "date_mode",
            "date",
            "condition",
            "correct",
            "confidence",
            "pred",
            "answer",
            "parsed",
            "score",
        ]
        return rows[[c for c in columns if c in rows]].sort_values(
            ["entry", "item_id", "date_mode", "date"], ignore_index=True
        )

    return table


@st.cache_resource(show_spinner="Loading the benchmark...", max_entries=8)
def task_for(dataset: str, folder: str) -> Task:
    """A dataset's task (items, exemplars, prompts) from a data folder, or the Hub when the folder is empty; a dataset
    the Run page's store keeps (uploaded, or described by ``run`` flags) from the store."""
    custom.register_kept(results_store(), dataset)
    return build_task(dataset, folder or None)


@st.cache_data(max_entries=64)
def prompt_on(dataset: str, folder: str, item_id: str, system_prompt: str, day: dt.date) -> str | None:
    """What a date sweep sends for one question on ``day`` (``sent.on_date``), built from the benchmark's text in
    ``folder`` as a sweep builds it: the store keeps ids and answers, not the prompts. None where the question is not
    in the folder's copy."""
    task = task_for(dataset, folder)
    item = next((item for item in task.items if item.id == item_id), None)
    if item is None:
        return None
    return sent.on_date(task.prompt(item, Condition(date_mode="none", system_prompt=system_prompt)).messages, day)


@st.cache_data(max_entries=8)
def item_descriptions(dataset: str, folder: str) -> dict[str, str]:
    """Markdown of every item of a dataset, by id (the store keeps ids and results, not the benchmark's text)."""
    task = task_for(dataset, folder)
    return {item.id: task.describe(item) for item in task.items}
