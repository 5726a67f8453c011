"""What the explorer remembers between reruns and pages: which store, which folders, and what the sidebar selected.

The store choice and the folders live in the session (and the store in the URL, so a shared link opens the same
store); the sidebar's selection is a :class:`Selection`, kept per dataset so a change of dataset never silently
narrows another's view.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from dateeval import bundle, results
from dateeval.explorer import viewstate
from dateeval.errors import DateEvalError
from dateeval.models import cache_dir
from dateeval.store import Store
from dateeval.tasks import BENCHMARKS, base_of, custom

DEMO_STORE = bundle.demo_store()
# ../shared beside a clone (the paper's data and templates); an install has none: datasets then come from the Hub.
SHARED = None if bundle.installed() else bundle.CLONE.parent / "shared"
# URL values of the stores (short and stable, unlike the labels).
STORE_PARAMS = {"demo": "Built-in demo", "mine": "My results"}
PER_DATASET = "_selection_per_dataset"


def results_store() -> Path:
    """Where the Run page writes, shown as "My results": the store ``dateeval app --store`` opened, else
    ``DATEEVAL_STORE``, else ``cache/results``."""
    return Path(os.environ.get(bundle.OPENED_STORE) or os.environ.get("DATEEVAL_STORE", cache_dir() / "results"))


def default_store() -> str:
    """The store a new session opens on (a URL value of :data:`STORE_PARAMS`): the one ``dateeval app --store`` was
    given, which its user came to read, else the demo."""
    return "mine" if os.environ.get(bundle.OPENED_STORE) else "demo"


def store_choices() -> dict[str, Path]:
    return {"Built-in demo": DEMO_STORE, "My results": results_store()}


def current_store() -> Store:
    choices = store_choices()
    return Store(choices.get(st.session_state.get("store_choice", ""), choices[STORE_PARAMS[default_store()]]))


def app_settings() -> None:
    """The app-wide sidebar, drawn first by every page: results store, data folder, templates folder.

    Drawn on every page, the choices never lose their widget state on a page
    switch; the store choice is also kept under a plain key and in the URL
    (``?store=mine``), so a shared link opens the same store.
    """
    names = list(store_choices())
    viewstate.seed("store", list(STORE_PARAMS), default_store())
    st.sidebar.selectbox(
        "Results store",
        list(STORE_PARAMS),
        key="store",
        format_func=STORE_PARAMS.get,
        help=f"Where results are read from; the Run page writes to 'My results' (`{results_store()}`).",
    )
    st.session_state["store_choice"] = names[list(STORE_PARAMS).index(st.session_state["store"])]
    viewstate.publish("store", st.session_state["store"])
    with st.sidebar.expander("Data and templates folders"):
        for key, label, default in (
            ("data_dir", "Benchmark data folder", default_data_dir()),
            ("templates_dir", "Chat templates folder", default_templates_dir()),
        ):
            st.session_state.setdefault(f"_{key}", default)
            st.session_state[key] = st.session_state[f"_{key}"]
            st.text_input(label, key=key, on_change=_remember, args=(key,))
            _folder_note(st.session_state[key])


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
    """``DATEEVAL_TEMPLATES_DIR``, else ``../shared/templates`` beside the checkout (none in an install)."""
    return os.environ.get("DATEEVAL_TEMPLATES_DIR", str(SHARED / "templates") if SHARED else "")


def default_data_dir() -> str:
    """Where benchmark text is read from for display: ``DATEEVAL_DATA_DIR``, else ``../shared/data`` beside the checkout
    (none in an install: the Hub)."""
    return os.environ.get("DATEEVAL_DATA_DIR", str(SHARED / "data") if SHARED else "")


def check_offered(dataset: str) -> None:
    """Refuse a dataset name the app does not offer, before anything is read: a page's dataset may come from a link, and
    a link must not make the app read a file on this machine (``/path/file.csv``, ``lmeval:task.yaml``). Offered are
    the built-in benchmarks, the datasets of the stores the sidebar offers, and those the Run page's store keeps
    (uploads, ``run``'s specs)."""
    base = base_of(dataset)
    stored = {base_of(name) for root in store_choices().values() for name in Store(root).dataset_names()}
    kept = (
        any(custom.find(results_store() / folder, base) for folder in (custom.SPECS_DIR, custom.UPLOADS_DIR))
        if base
        else False
    )
    if base is not None and (base in BENCHMARKS or base in stored or kept):
        return
    raise DateEvalError(
        f"dataset {dataset!r} is not one this app offers: give a built-in one ({', '.join(BENCHMARKS)}, e.g. mmlu_5shot), "
        "one a results store holds, or upload your own on the Run page"
    )


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


def switch_to(dataset: str) -> None:
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


def remember_selection(dataset: str, entries: list[str], start: object, end: object) -> None:
    """Keep what was chosen on ``dataset``, for :func:`switch_to` to bring back."""
    st.session_state[PER_DATASET][dataset] = {
        "entries": list(entries),
        "entry": entries[0] if entries else None,
        "dates": (start, end),
    }
