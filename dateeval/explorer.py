"""What every explorer page shares: the store choice, cached loading, and the sidebar filters.

Pages stay thin: they call :func:`load` and :func:`filters`, then draw with
``dateeval.plots``. Aggregates are cached with ``st.cache_data`` keyed on the
store's fingerprint (files, sizes, mtimes), so a finished run shows up
without restarting the app.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from dateeval import metrics, results, runs, viewstate
from dateeval.errors import DateEvalError
from dateeval.models import cache_dir
from dateeval.results import descriptive, sql, unit_sums
from dateeval.results.export import to_csv
from dateeval.schema import GENERATION_COLUMNS, SUMMARY_COLUMNS
from dateeval.store import Store
from dateeval.tasks import BENCHMARKS, base_of, build_task, custom
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


def app_settings() -> None:
    """The app-wide sidebar, drawn first by every page: results store, data folder, templates folder.

    Drawn on every page, the choices never lose their widget state on a page
    switch; the store choice is also kept under a plain key and in the URL
    (``?store=mine``), so a shared link opens the same store.
    """
    names = list(store_choices())
    viewstate.seed("store", list(STORE_PARAMS), next(iter(STORE_PARAMS)))
    st.sidebar.selectbox("Results store", list(STORE_PARAMS), key="store", format_func=STORE_PARAMS.get,
                         help="Where results are read from; the Run page writes to 'My results'.")  # fmt: skip
    st.session_state["store_choice"] = names[list(STORE_PARAMS).index(st.session_state["store"])]
    viewstate.publish("store", st.session_state["store"])
    with st.sidebar.expander("Data and templates folders"):
        for key, label, default in (("data_dir", "Benchmark data folder", default_data_dir()), ("templates_dir", "Chat templates folder", default_templates_dir())):
            st.session_state.setdefault(f"_{key}", default)
            st.session_state[key] = st.session_state[f"_{key}"]
            st.text_input(label, key=key, on_change=_remember, args=(key,))
            _folder_note(st.session_state[key])


# URL values of the stores (short and stable, unlike the labels).
STORE_PARAMS = {"demo": "Built-in demo", "mine": "My results"}


def _remember(key: str) -> None:
    """Keep a folder setting under a plain key: widget state is dropped by Streamlit whenever a run does not draw it."""
    st.session_state[f"_{key}"] = st.session_state[key].strip()


def _folder_note(folder: str) -> None:
    if not folder:
        st.caption("Empty: datasets come from the Hugging Face Hub, and no templates are listed.")
    elif not Path(folder).is_dir():
        st.warning(f"{folder} does not exist: set the folder above (or DATEEVAL_DATA_DIR / DATEEVAL_TEMPLATES_DIR).")


def data_dir() -> str:
    """The app-wide benchmark data folder (sidebar), for item text and sweeps."""
    return st.session_state.get("_data_dir", default_data_dir())


def templates_dir() -> str:
    """The app-wide chat-templates folder (sidebar), for the Prompt page."""
    return st.session_state.get("_templates_dir", default_templates_dir())


def default_templates_dir() -> str:
    """``DATEEVAL_TEMPLATES_DIR``, else ``../shared/templates`` beside the checkout."""
    return os.environ.get("DATEEVAL_TEMPLATES_DIR", str(ROOT.parent / "shared" / "templates"))


# Pages never hold the store's per-item rows: curves and tables come from per-unit sums
# (``dateeval.results.unit_sums``), per-item views from DuckDB reads of verified files (``dateeval.results.sql``).
@st.cache_resource(show_spinner="Reading aggregates...", max_entries=2)
def _view(root: str, fingerprint: tuple) -> tuple[results.Results, list[str]]:
    """The store's sums, metrics and per-entry matrices (``results.Results``), shared by every session, with its warnings."""
    del fingerprint  # only part of the cache key: a new or replaced file invalidates it
    view, problems = results.open(Store(root))
    return view, problems.messages()


def _sums(root: str, fingerprint: tuple) -> pd.DataFrame:
    return _view(root, fingerprint)[0].sums


@st.cache_data(max_entries=8)
def _metrics(root: str, fingerprint: tuple) -> pd.DataFrame:
    """The view's per-condition metrics, a copy per caller (pages may add columns)."""
    return _view(root, fingerprint)[0].metrics


def load() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The chosen store's per-unit sums (``dateeval.results.unit_sums``, with ``entry``) and per-condition metrics (cached).

    A store without results stops the page with the empty state.
    """
    store = current_store()
    fingerprint = store.fingerprint()
    view, problems = _view(str(store.root), fingerprint)
    sums, metrics = view.sums, _metrics(str(store.root), fingerprint)
    for message in dict.fromkeys(problems):
        st.warning(message)
    if note := runs.partial_note(store.root):
        st.warning(note)
    for note in unit_sums.confidence_notes(sums):
        st.info(note)
    for note in unit_sums.label_notes(sums):
        st.warning(note)
    if metrics.empty:
        empty_state()
        st.stop()
    return sums, metrics


@st.cache_data(max_entries=64)
def item_history(root: str, fingerprint: tuple, model_key: str, dataset: str, item_id: str, columns: tuple[str, ...]) -> pd.DataFrame:
    """Chosen columns of one item on every condition, read by DuckDB with the item pushed into the scan (option
    probabilities and outputs are the store's bulk, so they are never loaded with everything else)."""
    view = _view(root, fingerprint)[0]
    return sql.item_rows(*view.sources((view.sums["model_key"] == model_key) & (view.sums["dataset"] == dataset)), item_id, columns)


def default_data_dir() -> str:
    """Where benchmark text is read from for display: ``DATEEVAL_DATA_DIR``, else ``../shared/data`` beside the checkout."""
    return os.environ.get("DATEEVAL_DATA_DIR", str(ROOT.parent / "shared" / "data"))


@st.cache_resource(show_spinner="Loading the benchmark...", max_entries=8)
def task_for(dataset: str, folder: str) -> Task:
    """A dataset's task (items, exemplars, prompts) from a data folder, or the Hub when the folder is empty; a dataset
    the Run page's store keeps (uploaded, or described by ``run`` flags) from the store."""
    custom.register_kept(results_store(), dataset)
    return build_task(dataset, folder or None)


def check_offered(dataset: str) -> None:
    """Refuse a dataset name the app does not offer, before anything is read: a page's dataset may come from a link, and
    a link must not make the app read a file on this machine (``/path/file.csv``, ``lmeval:task.yaml``). Offered are
    the built-in benchmarks, the datasets of the stores the sidebar offers, and those the Run page's store keeps
    (uploads, ``run``'s specs)."""
    base = base_of(dataset)
    stored = {base_of(name) for root in store_choices().values() for name in Store(root).dataset_names()}
    kept = any(custom.find(results_store() / folder, base) for folder in (custom.SPECS_DIR, custom.UPLOADS_DIR)) if base else False
    if base is not None and (base in BENCHMARKS or base in stored or kept):
        return
    raise DateEvalError(f"dataset {dataset!r} is not one this app offers: give a built-in one ({', '.join(BENCHMARKS)}, e.g. mmlu_5shot), "
                        "one a results store holds, or upload your own on the Run page")


@st.cache_data(max_entries=8)
def item_descriptions(dataset: str, folder: str) -> dict[str, str]:
    """Markdown of every item of a dataset, by id (the store keeps ids and results, not the benchmark's text)."""
    task = task_for(dataset, folder)
    return {item.id: task.describe(item) for item in task.items}


def describe_item(dataset: str, item_id: str) -> None:
    """Show an item's text (from the sidebar's data folder); one error box when the text cannot be loaded."""
    folder = data_dir()
    try:
        text = item_descriptions(dataset, folder).get(item_id)
    except DateEvalError as error:
        st.error(f"Item text unavailable: {error}. Set the benchmark data folder in the sidebar (the store keeps ids and numbers only).")
        return
    if text is None:
        st.warning(f"Question {item_id} is not in {folder or 'the Hub copy'}: set the data folder the sweep used in the sidebar.")
    else:
        st.markdown(currency_safe(text))


def currency_safe(markdown: str) -> str:
    """Escape dollar amounts ("$20") outside code so Markdown renders real LaTeX ($x^2$) and leaves prices alone."""
    parts = markdown.split("```")
    parts[::2] = [re.sub(r"(?<!\\)\$(?=\d)", r"\\$", part) for part in parts[::2]]
    return "```".join(parts)


@dataclass(frozen=True)
class Selection:
    entries: tuple[str, ...]
    dataset: str
    start: pd.Timestamp
    end: pd.Timestamp

    @property
    def period(self) -> results.Period:
        """The selected dates, as the results layer (and ``summary --dates``) takes them."""
        return results.Period(self.start.date(), self.end.date())


def dataset_picker(metrics: pd.DataFrame, key: str = "dataset") -> str:
    """Sidebar dataset choice (in the URL), opening on the dataset with the most entries x conditions (the richest view)."""
    datasets = sorted(metrics["dataset"].unique())
    viewstate.seed(key, datasets, metrics["dataset"].value_counts().idxmax())
    dataset = st.sidebar.selectbox("Dataset", datasets, key=key)
    viewstate.publish(key, dataset)
    return dataset


def picker(label: str, options: list, key: str, default: object = None, where=st, **kwargs) -> object:  # noqa: ANN001 - a Streamlit container
    """A selectbox whose choice lives in the URL (``?key=value``); the default is the first option unless given."""
    viewstate.seed(key, options, options[0] if default is None and options else default)
    value = where.selectbox(label, options, key=key, **kwargs)
    viewstate.publish(key, value)
    return value


def filters(metrics: pd.DataFrame, multi_entry: bool = True) -> Selection:
    """Sidebar: dataset, entries (model x precision x device) and date range, all in the URL."""
    dataset = dataset_picker(metrics)
    _switch_to(dataset)
    available = sorted(metrics[metrics["dataset"] == dataset]["entry"].unique())
    if multi_entry:
        viewstate.seed("entries", available, available, multi=True)
        shared, chip = chip_labels(available)
        entries = st.sidebar.multiselect(f"Models ({shared})" if shared else "Models", available, key="entries", format_func=chip)
        viewstate.publish("entries", entries)
    else:
        entries = [picker("Model", available, "entry", where=st.sidebar)]
    stored = descriptive.date_range(metrics, dataset)
    if stored is None:
        return Selection(tuple(entries), dataset, pd.Timestamp("2024-01-01"), pd.Timestamp("2024-12-31"))
    first, last = stored
    viewstate.seed_dates("dates", first, last)
    picked = st.sidebar.date_input("Date range", min_value=first, max_value=last, key="dates")
    start, end = (picked if isinstance(picked, tuple) and len(picked) == 2 else (first, last))
    viewstate.publish_dates("dates", start, end)
    st.session_state[PER_DATASET][dataset] = {"entries": list(entries), "entry": entries[0] if entries else None, "dates": (start, end)}
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


PER_DATASET = "_selection_per_dataset"


def _switch_to(dataset: str) -> None:
    """On a change of dataset, bring back what was chosen on that dataset before (else all its entries and its whole
    date range): a range or entries chosen on one dataset never silently narrow another's view."""
    state = st.session_state
    kept = state.setdefault(PER_DATASET, {})
    previous, state["_selection_dataset"] = state.get("_selection_dataset"), dataset
    if previous is None or previous == dataset:
        return
    for key in ("entries", "entry", "dates"):
        state.pop(key, None)
        state.pop(viewstate.kept(key), None)
        if kept.get(dataset, {}).get(key) is not None:
            state[key] = kept[dataset][key]


def date_picker(label: str, days: list, key: str, default: object, where=st) -> object:  # noqa: ANN001 - a Streamlit container
    """A calendar limited to the stored dates' range (not a 366-entry list); a day without results snaps to the nearest one."""
    days = sorted(days)
    viewstate.seed(key, days, default)
    picked = where.date_input(label, min_value=days[0], max_value=days[-1], key=key)
    nearest = min(days, key=lambda day: abs((pd.Timestamp(day) - pd.Timestamp(picked)).days))
    if nearest != picked:
        where.caption(f"No results on {picked}: showing the nearest stored date, {nearest}.")
    viewstate.publish(key, nearest)
    return nearest


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


def _chosen(root: str, fingerprint: tuple, selection: Selection) -> tuple[list[Path], pd.DataFrame, bool]:
    """The verified files, entry keys and de-duplication need of a selection (see ``Results.sources``)."""
    view = _view(root, fingerprint)[0]
    return view.sources((view.sums["dataset"] == selection.dataset) & view.sums["entry"].isin(selection.entries))


@st.cache_resource(show_spinner="Reading the selected results...", max_entries=8)
def _selected(root: str, fingerprint: tuple, selection: Selection) -> pd.DataFrame:
    dates = (selection.start.date(), selection.end.date())
    return sql.rows(*_chosen(root, fingerprint, selection), [*ITEM_COLUMNS, *GENERATION_COLUMNS], dates)


def select(selection: Selection) -> pd.DataFrame:
    """Rows of the chosen entries and dataset; date rows inside the range, baselines kept (cached, read-only).

    Per-item rows of every chosen entry: the costliest read a page can ask
    for (text columns come back as categoricals). Prefer the narrower reads
    (``flips``, ``item_rows``, ``template_default_dates``) where they suffice.
    """
    store = current_store()
    return _selected(str(store.root), store.fingerprint(), selection)


@st.cache_data(show_spinner="Finding the questions that flip...", max_entries=16)
def flips(root: str, fingerprint: tuple, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-question flip counts and Table 7 of the selection (``Results.flips_of``; each entry's kept with the store)."""
    return _view(root, fingerprint)[0].flips_of(selection.entries, selection.dataset, selection.start.date(), selection.end.date())


def item_rows(selection: Selection, item_id: str) -> pd.DataFrame:
    """One question's rows on the selection's dates (``ITEM_COLUMNS``), by date: one scan with the item pushed down."""
    store = current_store()
    rows = _item_rows(str(store.root), store.fingerprint(), selection, item_id)
    return rows[(rows["factor"] == "date") & pd.to_datetime(rows["date"], errors="coerce").between(selection.start, selection.end)]


@st.cache_data(max_entries=64)
def _item_rows(root: str, fingerprint: tuple, selection: Selection, item_id: str) -> pd.DataFrame:
    return sql.item_rows(*_chosen(root, fingerprint, selection), item_id, ITEM_COLUMNS)


def template_default_dates(selection: Selection) -> dict[str, pd.Timestamp]:
    """The date each chosen entry's template uses when left alone, from the sums (no per-item read)."""
    store = current_store()
    sums = _sums(str(store.root), store.fingerprint())
    return descriptive.template_default_dates(sums[(sums["dataset"] == selection.dataset) & sums["entry"].isin(selection.entries)])


def empty_state() -> None:
    st.info("No results yet: run a sweep on the **Run** page, or pick the built-in demo store in the sidebar.")


@st.cache_data(show_spinner="Computing the headline (bootstrap and permutations)...", max_entries=4)
def headline(root: str, fingerprint: tuple) -> dict | None:
    """The store's finding (``Results.headline``; kept with the store, usually since the sweep that wrote it)."""
    return _view(root, fingerprint)[0].headline()


@st.cache_data(show_spinner="Computing the summary...", max_entries=4)
def summary(root: str, fingerprint: tuple, period: results.Period | None = None) -> pd.DataFrame:
    """``Results.summary`` over ``period``: the rows `dateeval summary [--dates START..END]` prints and the report writes."""
    return _view(root, fingerprint)[0].summary(period)


@st.cache_data(max_entries=16)
def paper_beside(root: str, fingerprint: tuple, dataset: str) -> pd.DataFrame:
    """``Results.paper_beside``: the paper's figures next to the store's, with chance's band."""
    return _view(root, fingerprint)[0].paper_beside(dataset)


def about_demo(metrics: pd.DataFrame) -> None:
    """On the built-in demo: what it holds and what to click next, so a first-time user (or a class) knows what they see."""
    if current_store().root.resolve() != DEMO_STORE.resolve():
        return
    dated = metrics[metrics["factor"] == "date"]
    datasets = ", ".join(f"{name} ({int(part['n_items'].max())} questions x {part['date'].nunique()} dates)" for name, part in dated.groupby("dataset"))
    with st.expander("About this demo", expanded=True):
        st.markdown(
            f"A real sweep of **{', '.join(sorted(metrics['model'].unique()))}** (SmolLM2-135M-Instruct) at "
            f"{metrics['dtype'].nunique()} precisions ({', '.join(sorted(metrics['dtype'].unique()))}) on {datasets}, each with a "
            "no-date baseline, built by `demo/build.sh` on a CPU. The samples are small, so most deltas are within chance: that "
            "is the lesson. Next: **Curves** for the score on each date with its interval, **Flips** for the questions that change "
            "answer, **Factors** for the date next to other sources of variation, **Prompt** for what the model really saw."
        )


@st.cache_data(max_entries=4)
def fewshot_formats(root: str, fingerprint: tuple) -> pd.DataFrame:
    """The date effect under each few-shot format (``Results.fewshot_formats``, cached)."""
    return _view(root, fingerprint)[0].fewshot_formats()


@st.cache_data(show_spinner="Shuffling answers across the dates...", max_entries=16)
def chance_bands(root: str, fingerprint: tuple, selection: Selection) -> pd.DataFrame:
    """Per entry of the selection, over its selected dates: the band within which chance alone keeps every date's
    accuracy in 95% of shuffles (``inference.envelope``), from the entry's kept significance (cached)."""
    view = _view(root, fingerprint)[0]
    rows = []
    for entry in sorted(selection.entries):
        if (entry, selection.dataset) in view.dated_entries(selection.period):
            found = view.significance(entry, selection.dataset, selection.period)
            rows.append({"entry": entry, "low": found["mean_accuracy"] - found["chance_half_width"],
                         "high": found["mean_accuracy"] + found["chance_half_width"]})  # fmt: skip
    return pd.DataFrame(rows, columns=["entry", "low", "high"])


@st.cache_data(show_spinner="Shuffling answers across the dates...", max_entries=16)
def reorder_chance(root: str, fingerprint: tuple, selection: Selection, observed: float) -> dict[str, float]:
    """The reorder share chance alone gives for the selection's models and dates (``Results.reorder_chance``, cached)."""
    return _view(root, fingerprint)[0].reorder_chance(selection.dataset, sorted(selection.entries), observed, selection.period)


@st.cache_data(show_spinner="Comparing the two models...", max_entries=16)
def compare(root: str, fingerprint: tuple, selection: Selection, a: str, b: str) -> list[str]:
    """``robust.compare_lines`` of two entries over the dates of the selection they share; empty where they share
    fewer than two dates or not their questions (cached)."""
    from dateeval.results import robust

    _, group = _view(root, fingerprint)[0].aligned(selection.dataset, [a, b], selection.period)
    return [] if group is None else robust.compare_lines(a, b, robust.compare(group[0], group[1]))


@st.cache_data(show_spinner="Computing intervals over questions...", max_entries=16)
def bands(root: str, fingerprint: tuple, selection: Selection, metric: str) -> pd.DataFrame:
    """95% interval per entry and date of the selection (cached)."""
    from dateeval.results import inference

    view = _view(root, fingerprint)[0]
    parts = [view.band(entry, selection.dataset, metric) for entry in sorted(selection.entries)]
    parts = [part for part in parts if len(part)]
    band = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=inference.BAND_COLUMNS)
    return band[band["date"].between(selection.start, selection.end)]


def item_table(selection: Selection) -> Callable[[], pd.DataFrame]:
    """The selection's per-item x per-date results (one row per entry, question and condition), built only when a
    download is clicked: at paper scale it is millions of rows."""
    store = current_store()
    root, fingerprint = str(store.root), store.fingerprint()

    def table() -> pd.DataFrame:
        rows = _selected(root, fingerprint, selection)
        columns = ["entry", "dataset", "item_id", "factor", "date_mode", "date", "condition", "correct", "confidence", "pred", "answer",
                   "parsed", "score"]  # fmt: skip
        return rows[[c for c in columns if c in rows]].sort_values(["entry", "item_id", "date_mode", "date"], ignore_index=True)

    return table


def downloads(table: pd.DataFrame | Callable[[], pd.DataFrame], name: str) -> None:
    """CSV and Parquet download buttons for a table, side by side; a callable table is built on click, not on every render."""
    make = table if callable(table) else lambda: table
    left, right = st.columns(2)
    left.download_button(f"Download {name} (CSV)", lambda: to_csv(make()), f"{name}.csv", "text/csv")
    right.download_button(f"Download {name} (Parquet)", lambda: make().to_parquet(index=False), f"{name}.parquet", "application/vnd.apache.parquet")


def show_table(table: pd.DataFrame, dataset: str = "", **kwargs) -> None:  # noqa: ANN003 - passed on to st.dataframe
    """A table as people read it: human column names, rates in %, two decimals (p-values three), ``-`` for a missing value.

    Numbers stay numbers (sortable) where every row has one; a column with gaps is shown as text so a gap reads ``-``,
    not "None".
    """
    shown = metrics.on_screen(table, dataset)
    config = {}
    for name in table.columns:
        spec = metrics.column(name, dataset)
        if shown[spec.label].dtype.kind == "f":
            config[spec.label] = st.column_config.NumberColumn(format="%.3f" if spec.kind == "p" else "%.2f")
    st.dataframe(shown, hide_index=True, width="stretch", column_config=config, **kwargs)


def intro(text: str) -> None:
    st.caption(text)


@st.cache_data(show_spinner="Computing statistics (bootstrap and permutations)...", max_entries=4)
def statistics(root: str, fingerprint: tuple) -> dict[str, pd.DataFrame]:
    """Table 5, the date effect against chance, run-to-run variation and Table 3 (``Results.statistics``; each
    entry's part kept with the store, usually since the sweep that wrote it)."""
    return _view(root, fingerprint)[0].statistics()


@st.cache_data(show_spinner="Bootstrapping over questions and dates...", max_entries=16)
def robust(root: str, fingerprint: tuple, selection: Selection, half_width: float) -> dict:
    """``Results.robust_record`` of the selection (entries, dataset, dates): what `dateeval robust` prints and the report shows."""
    return _view(root, fingerprint)[0].robust_record(selection.dataset, selection.period, selection.entries, half_width)
