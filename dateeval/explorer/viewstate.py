"""Selections that live in the URL: a link to a view opens that view.

Every page widget that defines a view (store, dataset, entries, metric,
dates, question) is keyed, seeded before it is drawn and published after:

* seeded from the URL's query parameter the first time the session sees the
  key (opening a shared link) and whenever the URL holds a value the session
  did not publish (a link followed inside the app, e.g. from a point on
  Curves to its questions on Flips), else from what the session already chose,
  else from the page's default, and always to one of the current options
  (a value that is no longer offered falls back to the default);
* published back to the URL after the widget is drawn, so the address bar
  always holds the view, and kept under a plain key as well: Streamlit drops
  a widget's state on pages that do not draw it, and the choice should
  survive a visit to another page.

Widgets are then created without ``index``/``default``/``value``: their
value comes from the session state alone, so Streamlit never warns about a
value set twice.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

import streamlit as st

from dateeval.errors import DateEvalError


def _text(value: object) -> str:
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def _from_url(key: str, options: Sequence, multi: bool) -> object | None:
    """The URL's value for ``key`` as option(s), None when absent or not offered."""
    if key not in st.query_params:
        return None
    by_text = {_text(option): option for option in options}
    if multi:
        picked = [by_text[text] for text in st.query_params.get_all(key) if text in by_text]
        return picked or None
    return by_text.get(st.query_params[key])


def linked(key: str) -> bool:
    """Whether the URL holds a value for ``key`` that this session did not publish: a link was followed to this view."""
    return key in st.query_params and st.query_params.get_all(key) != st.session_state.get(PUBLISHED, {}).get(key)


def seed(key: str, options: Sequence, default: object, multi: bool = False) -> None:
    """Put a valid value for widget ``key`` into the session state before the widget is drawn."""
    state = st.session_state
    seen = state.setdefault("_viewstate_seen", set())
    if key not in seen or linked(key):
        seen.add(key)
        from_url = _from_url(key, options, multi)
        if from_url is not None:
            state[key] = from_url
    current = state[key] if key in state else state.get(kept(key))
    if multi:
        valid = [value for value in current or [] if value in options]
        state[key] = valid if current is not None and (valid or not current) else list(default)
    else:
        state[key] = current if current in options else default


def seed_value(key: str, default: object, parse: Callable[[str], object]) -> None:
    """Seed a free-form widget (a date, a text, a number) from the URL the first time, else keep the session's value.

    ``parse`` raises ValueError for text that is no value (silently the default) and DateEvalError for a value the
    widget would refuse (an error box, then the default): Streamlit raises on a value outside a widget's bounds.
    """
    state = st.session_state
    seen = state.setdefault("_viewstate_seen", set())
    if key not in seen or linked(key):
        seen.add(key)
        try:
            if key in st.query_params:
                state[key] = parse(st.query_params[key])
                return
        except ValueError:  # a hand-edited link with a value that is not one: the default
            pass
        except (
            DateEvalError
        ) as error:  # a value the widget cannot show (e.g. a date out of its range): say so, then the default
            st.error(str(error))
    if key not in state:
        state[key] = state.get(kept(key), default)


def seed_dates(key: str, first: dt.date, last: dt.date) -> None:
    """Seed a date-range widget (``key``) from ``from``/``to`` in the URL, clipped to the stored dates."""
    state = st.session_state
    seen = state.setdefault("_viewstate_seen", set())
    if key not in seen or linked("from") or linked("to"):
        seen.add(key)
        try:
            start = dt.date.fromisoformat(st.query_params.get("from", first.isoformat()))
            end = dt.date.fromisoformat(st.query_params.get("to", last.isoformat()))
            state[key] = (max(first, min(start, last)), max(first, min(end, last)))
        except ValueError:  # a hand-edited link with a date that is not one: the whole range
            state[key] = (first, last)
    value = state[key] if key in state else state.get(kept(key))
    if not (isinstance(value, tuple) and value and all(first <= day <= last for day in value)):
        state[key] = (first, last)
    else:
        state[key] = value


def publish(key: str, value: object) -> None:
    """Write a selection to the URL (lists as repeated parameters)."""
    st.session_state[kept(key)] = value
    text = [_text(item) for item in value] if isinstance(value, (list, tuple)) else _text(value)
    st.session_state.setdefault(PUBLISHED, {})[key] = text if isinstance(text, list) else [text]
    if st.query_params.get_all(key) != (text if isinstance(text, list) else [text]):
        st.query_params[key] = text


def publish_dates(key: str, start: dt.date, end: dt.date) -> None:
    st.session_state[kept(key)] = (start, end)
    publish("from", start)
    publish("to", end)


PUBLISHED = "_viewstate_published"  # what this session last wrote to the URL, per key


def kept(key: str) -> str:
    """Where a selection is kept under a plain key (Streamlit drops a widget's own state on pages that do not draw it)."""
    return f"_viewstate_kept_{key}"
