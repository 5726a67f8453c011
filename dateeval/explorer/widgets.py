"""What pages draw with: the sidebar's filters and pickers (their choices in the URL), the store's notes and empty
state, tables as people read them, downloads, and an item's text."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from dateeval.explorer import viewstate
from dateeval.metrics.columns import column, on_screen
from dateeval.errors import DateEvalError
from dateeval.explorer import cache
from dateeval.explorer.state import DEMO_STORE, Selection, current_store, data_dir, remember_selection, switch_to
from dateeval.results import descriptive
from dateeval.results.sources import unit_sums
from dateeval.results.report.export import to_csv
from dateeval.results.view import SPARSE_READS
from dateeval.store import runs

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator


def load() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The chosen store's per-unit sums (``dateeval.results.sources.unit_sums``, with ``entry``) and per-condition metrics (cached).

    A store without results stops the page with the empty state.
    """
    store = current_store()
    view, problems = cache.opened(store)
    sums, per_condition = view.sums, cache.metrics(store)
    for message in dict.fromkeys(problems):
        st.warning(message)
    if note := runs.partial_note(store.root):
        st.warning(note)
    for note in unit_sums.confidence_notes(sums):
        st.info(note)
    for note in unit_sums.label_notes(sums):
        st.warning(note)
    if named := view.sparse_named():  # one line; what is estimated, and what is not, one click away
        with st.expander(f"Swept sparsely (--budget): {named}. What is estimated?", icon=":material/grain:"):
            st.markdown(SPARSE_READS)
    if per_condition.empty:
        empty_state()
        st.stop()
    return sums, per_condition


def page_data(multi_entry: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, Selection]:
    """Load the store and draw the filters; stops the page with the empty state when there is nothing.

    Returns per-unit sums, the per-condition metrics of the selected entries
    and dataset, and the selection itself.
    """
    frame, per_condition = load()
    selection = filters(per_condition, multi_entry=multi_entry)
    chosen = per_condition[
        (per_condition["dataset"] == selection.dataset) & per_condition["entry"].isin(selection.entries)
    ]
    return frame, chosen, selection


def empty_state() -> None:
    st.info("No results yet: run a sweep on the **Run** page, or pick the built-in demo store in the sidebar.")


def about_demo(per_condition: pd.DataFrame) -> None:
    """On the built-in demo: what it holds and what to click next, so a first-time user (or a class) knows what they see."""
    if current_store().root.resolve() != DEMO_STORE.resolve():
        return
    dated = per_condition[per_condition["factor"] == "date"]
    datasets = ", ".join(
        f"{name} ({int(part['n_items'].max())} questions x {part['date'].nunique()} dates)"
        for name, part in dated.groupby("dataset")
    )
    with st.expander("About this demo", expanded=True):
        st.markdown(
            f"A real sweep of **{', '.join(sorted(per_condition['model'].unique()))}** (SmolLM2-135M-Instruct) at "
            f"{per_condition['dtype'].nunique()} precisions ({', '.join(sorted(per_condition['dtype'].unique()))}) on {datasets}, each with a "
            "no-date baseline, built by `demo/build.sh` on a CPU. The samples are small, so most deltas are within chance: that "
            "is the lesson. Next: **Curves** for the score on each date with its interval, **Flips** for the questions that change "
            "answer, **Factors** for the date next to other sources of variation, **Prompt** for what the model really saw."
        )


def dataset_picker(per_condition: pd.DataFrame, key: str = "dataset") -> str:
    """Sidebar dataset choice (in the URL), opening on the dataset with the most entries x conditions (the richest view)."""
    datasets = sorted(per_condition["dataset"].unique())
    viewstate.seed(key, datasets, per_condition["dataset"].value_counts().idxmax())
    dataset = st.sidebar.selectbox("Dataset", datasets, key=key)
    viewstate.publish(key, dataset)
    return dataset


def picker(
    label: str,
    options: list,
    key: str,
    default: object = None,
    where: DeltaGenerator | ModuleType = st,
    **kwargs: object,
) -> object:
    """A selectbox whose choice lives in the URL (``?key=value``); the default is the first option unless given."""
    viewstate.seed(key, options, options[0] if default is None and options else default)
    value = where.selectbox(label, options, key=key, **kwargs)
    viewstate.publish(key, value)
    return value


def filters(per_condition: pd.DataFrame, multi_entry: bool = True) -> Selection:
    """Sidebar: dataset, entries (model x precision x device) and date range, all in the URL."""
    dataset = dataset_picker(per_condition)
    switch_to(dataset)
    available = sorted(per_condition[per_condition["dataset"] == dataset]["entry"].unique())
    if multi_entry:
        viewstate.seed("entries", available, available, multi=True)
        shared, chip = chip_labels(available)
        entries = st.sidebar.multiselect(
            f"Models ({shared})" if shared else "Models", available, key="entries", format_func=chip
        )
        viewstate.publish("entries", entries)
    else:
        entries = [picker("Model", available, "entry", where=st.sidebar)]
    stored = descriptive.date_range(per_condition, dataset)
    if stored is None:
        return Selection(tuple(entries), dataset, pd.Timestamp("2024-01-01"), pd.Timestamp("2024-12-31"))
    first, last = stored
    viewstate.seed_dates("dates", first, last)
    picked = st.sidebar.date_input("Date range", min_value=first, max_value=last, key="dates")
    start, end = picked if isinstance(picked, tuple) and len(picked) == 2 else (first, last)
    viewstate.publish_dates("dates", start, end)
    remember_selection(dataset, entries, start, end)
    return Selection(tuple(entries), dataset, pd.Timestamp(start), pd.Timestamp(end))


def chip_labels(entries: list[str]) -> tuple[str, Callable[[str], str]]:
    """What the entries share and a chip label for each: the sidebar's chips are cut after about 18 characters, so
    entries of one model ("smollm2-135m (bfloat16, cpu)", "... (float32, cpu)") are shown by what tells them apart
    ("bfloat16, cpu") under a heading that names the model; entries of different models keep their names."""
    models = {entry.split(" (", 1)[0] for entry in entries}
    if len(entries) < 2 or len(models) != 1 or not all(" (" in entry for entry in entries):
        return "", str
    model = next(iter(models))

    def chip(entry: str) -> str:
        label = entry.removeprefix(f"{model} (")
        return label[:-1] if label.endswith(")") and label.count(")") == 1 else label

    return model, chip


def date_picker(label: str, days: list, key: str, default: object, where: DeltaGenerator | ModuleType = st) -> object:
    """A calendar limited to the stored dates' range (not a 366-entry list); a day without results snaps to the nearest one."""
    days = sorted(days)
    viewstate.seed(key, days, default)
    picked = where.date_input(label, min_value=days[0], max_value=days[-1], key=key)
    nearest = min(days, key=lambda day: abs((pd.Timestamp(day) - pd.Timestamp(picked)).days))
    if nearest != picked:
        where.caption(f"No results on {picked}: showing the nearest stored date, {nearest}.")
    viewstate.publish(key, nearest)
    return nearest


def describe_item(dataset: str, item_id: str) -> None:
    """Show an item's text (from the sidebar's data folder); one error box when the text cannot be loaded."""
    folder = data_dir()
    try:
        text = cache.item_descriptions(dataset, folder).get(item_id)
    except DateEvalError as error:
        st.error(
            f"Item text unavailable: {error}. Set the benchmark data folder in the sidebar (the store keeps ids and numbers only)."
        )
        return
    if text is None:
        st.warning(
            f"Question {item_id} is not in {folder or 'the Hub copy'}: set the data folder the sweep used in the sidebar."
        )
    else:
        st.markdown(currency_safe(text))


def currency_safe(markdown: str) -> str:
    """Escape dollar amounts ("$20") outside code so Markdown renders real LaTeX ($x^2$) and leaves prices alone."""
    parts = markdown.split("```")
    parts[::2] = [re.sub(r"(?<!\\)\$(?=\d)", r"\\$", part) for part in parts[::2]]
    return "```".join(parts)


def downloads(table: pd.DataFrame | Callable[[], pd.DataFrame], name: str) -> None:
    """CSV and Parquet download buttons for a table, side by side; a callable table is built on click, not on every render."""
    make = table if callable(table) else lambda: table
    left, right = st.columns(2)
    left.download_button(f"Download {name} (CSV)", lambda: to_csv(make()), f"{name}.csv", "text/csv")
    right.download_button(
        f"Download {name} (Parquet)",
        lambda: make().to_parquet(index=False),
        f"{name}.parquet",
        "application/vnd.apache.parquet",
    )


def show_table(table: pd.DataFrame, dataset: str = "", **kwargs: object) -> None:  # kwargs: passed on to st.dataframe
    """A table as people read it: human column names, rates in %, two decimals (p-values three), ``-`` for a missing value.

    Numbers stay numbers (sortable) where every row has one; a column with gaps is shown as text so a gap reads ``-``,
    not "None".
    """
    shown = on_screen(table, dataset)
    config = {}
    for name in table.columns:
        spec = column(name, dataset)
        if shown[spec.label].dtype.kind == "f":
            config[spec.label] = st.column_config.NumberColumn(format="%.3f" if spec.kind == "p" else "%.2f")
    st.dataframe(shown, hide_index=True, width="stretch", column_config=config, **kwargs)


def intro(text: str) -> None:
    st.caption(text)
