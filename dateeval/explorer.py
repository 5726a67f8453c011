"""What every explorer page shares: the store choice, cached loading, and the sidebar filters.

Pages stay thin: they call :func:`load` and :func:`filters`, then draw with
``dateeval.plots``. Aggregates are cached with ``st.cache_data`` keyed on the
store's fingerprint (files, sizes, mtimes), so a finished run shows up
without restarting the app.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from dateeval import analysis
from dateeval.errors import DateEvalError
from dateeval.models import cache_dir
from dateeval.store import GENERATION_COLUMNS, SUMMARY_COLUMNS, Store
from dateeval.tasks import build_task
from dateeval.tasks.base import Task

ROOT = Path(__file__).resolve().parent.parent
DEMO_STORE = ROOT / "demo" / "store"
# Per-item option probabilities and outputs are read on demand (item_history), not with everything else.
ITEM_COLUMNS = SUMMARY_COLUMNS + ["n_options"]


def results_store() -> Path:
    """Where the Run page writes (``DATEEVAL_STORE`` overrides ``cache/results``)."""
    return Path(os.environ.get("DATEEVAL_STORE", cache_dir() / "results"))


def store_choices() -> dict[str, Path]:
    return {"Built-in demo": DEMO_STORE, "My results": results_store()}


def current_store() -> Store:
    choices = store_choices()
    return Store(choices.get(st.session_state.get("store_choice", ""), next(iter(choices.values()))))


def store_picker() -> None:
    """Sidebar store choice, mirrored in a plain session key so it survives page switches."""
    names = list(store_choices())
    if st.session_state.get("store_widget") not in names:
        st.session_state["store_widget"] = st.session_state.get("store_choice", names[0])
    st.session_state["store_choice"] = st.sidebar.selectbox(
        "Results store", names, key="store_widget", help="Where results are read from; the Run page writes to 'My results'."
    )


# The per-item frame can be tens of millions of rows: cache_resource hands out the cached object
# itself (callers treat it as read-only), where cache_data would copy it on every rerun.
@st.cache_resource(show_spinner="Reading results...", max_entries=2)
def _rows(root: str, fingerprint: tuple) -> tuple[pd.DataFrame, list[str]]:
    del fingerprint  # only part of the cache key: a new or replaced file invalidates it
    frame, problems = Store(root).read(columns=ITEM_COLUMNS, optional=GENERATION_COLUMNS)
    if len(frame):
        frame = analysis.with_factor(frame).assign(entry=analysis.entry_label(frame))
    return frame, problems.messages()


@st.cache_data(show_spinner="Computing metrics...", max_entries=8)
def _metrics(root: str, fingerprint: tuple) -> pd.DataFrame:
    return analysis.condition_metrics(_rows(root, fingerprint)[0])


def load() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw the store picker, then return the chosen store's per-item rows and per-condition metrics (cached).

    A store without results stops the page with the empty state.
    """
    store_picker()
    store = current_store()
    fingerprint = store.fingerprint()
    frame, problems = _rows(str(store.root), fingerprint)
    for message in problems:
        st.warning(message)
    metrics = _metrics(str(store.root), fingerprint)
    if metrics.empty:
        empty_state()
        st.stop()
    return frame, metrics


@st.cache_data(max_entries=64)
def item_history(root: str, fingerprint: tuple, model_key: str, dataset: str, item_id: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """Chosen columns of one item on every condition, read with a filter (option probabilities and outputs are the
    store's bulk, so they are never loaded with everything else)."""
    del fingerprint
    filters = [("model_key", "=", model_key), ("dataset", "=", dataset), ("item_id", "=", item_id)]
    frame, _ = Store(root).read(columns=["date_mode", "date", "condition_key", "task_key", *columns], filters=filters)
    return frame


def default_data_dir() -> str:
    """Where benchmark text is read from for display: ``DATEEVAL_DATA_DIR``, else ``../shared/data`` beside the checkout."""
    return os.environ.get("DATEEVAL_DATA_DIR", str(ROOT.parent / "shared" / "data"))


@st.cache_resource(show_spinner="Loading the benchmark...", max_entries=8)
def task_for(dataset: str, folder: str) -> Task:
    """A dataset's task (items, exemplars, prompts) from a data folder, or the Hub when the folder is empty."""
    return build_task(dataset, folder or None)


@st.cache_data(max_entries=8)
def item_descriptions(dataset: str, folder: str) -> dict[str, str]:
    """Markdown of every item of a dataset, by id (the store keeps ids and results, not the benchmark's text)."""
    task = task_for(dataset, folder)
    return {item.id: task.describe(item) for item in task.items}


def describe_item(dataset: str, item_id: str) -> None:
    """Show an item's text, with a data-folder box; one error box when the text cannot be loaded."""
    folder = st.text_input("Data folder for the item's text (the store keeps ids and numbers only)", value=default_data_dir())
    try:
        text = item_descriptions(dataset, folder).get(item_id)
    except DateEvalError as error:
        st.error(f"Item text unavailable: {error}")
        return
    if text is None:
        st.warning("This item id is not in that data folder.")
    else:
        st.markdown(text)


@dataclass(frozen=True)
class Selection:
    entries: tuple[str, ...]
    dataset: str
    start: pd.Timestamp
    end: pd.Timestamp


def dataset_picker(metrics: pd.DataFrame, key: str) -> str:
    """Sidebar dataset choice, opening on the dataset with the most entries x conditions (the richest view)."""
    datasets = sorted(metrics["dataset"].unique())
    richest = metrics["dataset"].value_counts().idxmax()
    return st.sidebar.selectbox("Dataset", datasets, index=datasets.index(richest), key=key)


def filters(metrics: pd.DataFrame, multi_entry: bool = True) -> Selection:
    """Sidebar: dataset, entries (model x precision x device) and date range."""
    dataset = dataset_picker(metrics, key="dataset")
    available = sorted(metrics[metrics["dataset"] == dataset]["entry"].unique())
    if multi_entry:
        entries = st.sidebar.multiselect("Models", available, default=available, key=f"entries-{dataset}")
    else:
        entries = [st.sidebar.selectbox("Model", available, key=f"entry-{dataset}")]
    dated = analysis.dated(metrics[metrics["dataset"] == dataset])
    if dated.empty:
        return Selection(tuple(entries), dataset, pd.Timestamp("2024-01-01"), pd.Timestamp("2024-12-31"))
    first, last = dated["date"].min().date(), dated["date"].max().date()
    picked = st.sidebar.date_input("Date range", value=(first, last), min_value=first, max_value=last, key=f"range-{dataset}")
    start, end = (picked if isinstance(picked, tuple) and len(picked) == 2 else (first, last))
    return Selection(tuple(entries), dataset, pd.Timestamp(start), pd.Timestamp(end))


def store_metrics() -> pd.DataFrame:
    """Per-condition metrics of the whole chosen store (cached), for pages that compare datasets."""
    store = current_store()
    return _metrics(str(store.root), store.fingerprint())


def page_data(multi_entry: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, Selection]:
    """Load the store and draw the filters; stops the page with the empty state when there is nothing.

    Returns per-item rows, the per-condition metrics of the selected entries
    and dataset, and the selection itself.
    """
    frame, metrics = load()
    selection = filters(metrics, multi_entry=multi_entry)
    chosen = metrics[(metrics["dataset"] == selection.dataset) & metrics["entry"].isin(selection.entries)]
    return frame, chosen, selection


@st.cache_resource(max_entries=8)
def _selected(root: str, fingerprint: tuple, selection: Selection) -> pd.DataFrame:
    frame = _rows(root, fingerprint)[0]
    rows = frame[(frame["dataset"] == selection.dataset) & frame["entry"].isin(selection.entries)]
    dates = pd.to_datetime(rows["date"], errors="coerce")
    return rows[dates.between(selection.start, selection.end) | (rows["date_mode"] != "date")]


def select(selection: Selection) -> pd.DataFrame:
    """Rows of the chosen entries and dataset; date rows inside the range, baselines kept (cached, read-only)."""
    store = current_store()
    return _selected(str(store.root), store.fingerprint(), selection)


@st.cache_data(show_spinner="Finding the questions that flip...", max_entries=16)
def flips(root: str, fingerprint: tuple, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-question flip counts and Table 7 for a selection (cached on the store's contents)."""
    rows = _selected(root, fingerprint, selection)
    return analysis.item_flips(rows), analysis.confidence_by_consistency(rows)


def empty_state() -> None:
    st.info("No results yet: run a sweep on the **Run** page, or pick the built-in demo store in the sidebar.")


def intro(text: str) -> None:
    st.caption(text)


@st.cache_data(show_spinner="Computing statistics (bootstrap and permutations)...", max_entries=4)
def statistics(root: str, fingerprint: tuple) -> dict[str, pd.DataFrame]:
    """Table 5, the date effect against chance, run-to-run variation and Table 3, for the whole store."""
    from dateeval import stats

    frame = _rows(root, fingerprint)[0]
    metrics = _metrics(root, fingerprint)
    return {
        "factors": stats.factor_table(frame, n_boot=100),
        "significance": stats.date_significance(frame, n_perm=200),
        "run_to_run": stats.run_to_run(frame),
        "trend": stats.date_trend(metrics),
        "correlations": stats.cross_correlations(metrics),
    }
