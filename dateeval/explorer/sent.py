"""What dateeval sends for one prompt under each API mode, and what the server adds around it.

Why it exists: over a chat endpoint only the system line is ours; the server
wraps the messages in its own chat template, which may carry a date of its
own (a fixed variable, or the machine's clock). The Prompt page shows both
halves so that a researcher sees which date the model really reads: ours in
the messages, and the server's where its template is known here (e.g. the
model's own template, as vLLM or ``dateeval serve`` apply it); where it is
not, the page says so rather than guessing.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from dateeval.backends.openai_api import MODES as API_MODES
from dateeval.conditions import Condition, server_clock
from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate, DateInjection, dated_messages


@dataclass(frozen=True)
class Sent:
    """One request: what dateeval sends (text or messages as JSON) and the server's rendering of it, where known."""

    sent: str
    server: (
        str | None
    )  # the text the model reads after the server's template; None: the server's template is not known here


def request(
    mode: str,
    template: ChatTemplate,
    messages: list[dict],
    day: dt.date,
    injection: DateInjection,
    server: ChatTemplate | None,
) -> Sent:
    """The request a sweep sends under ``mode`` on ``day`` (no date of ours in server-clock mode), and ``server``'s rendering of it.

    The messages are dated as the sweep's own condition dates them (the one
    :func:`sweep_condition` gives, through ``dated_messages`` as the worker
    does). The server renders with its template's own defaults
    (``mode="default"``): a template that reads the clock writes today, one
    with a date variable writes its default, exactly as a server applying it would.
    """
    if mode not in API_MODES:
        raise DateEvalError(f"unknown API mode {mode!r}: choose one of {', '.join(API_MODES)}")
    condition = sweep_condition(mode, day, injection)
    if mode == "completions":
        return Sent(
            template.render(messages, mode=condition.date_mode, day=condition.date, injection=condition.injection).text,
            None,
        )
    if condition.server_clock:  # the sweep's system message, whatever the page's: empty unless a sweep sets one
        messages = [{**m, "content": condition.system_message()} if m["role"] == "system" else m for m in messages]
    dated, _ = dated_messages(messages, mode=condition.date_mode, day=condition.date, injection=condition.injection)
    rendered = server.render(dated, mode="default").text if server is not None else None
    return Sent(json.dumps(dated, indent=2, ensure_ascii=False), rendered)


def on_date(messages: list[dict], day: dt.date) -> str:
    """The messages a date sweep sends on ``day`` (its default date line added as the worker adds it), each turn under
    its role: two dates' texts side by side show what the date changed in a question's prompt."""
    dated, _ = dated_messages(messages, mode="date", day=day, injection=DateInjection())
    return "\n\n".join(f"[{message['role']}]\n{message['content']}" for message in dated)


def sweep_condition(mode: str, day: dt.date, injection: DateInjection) -> Condition:
    """The condition a sweep in ``mode`` runs on ``day``: our date (completions, chat), or the provider's (server-clock)."""
    return (
        server_clock(day)[0] if mode == "server-clock" else Condition(date_mode="date", date=day, injection=injection)
    )


def explain(mode: str, server: ChatTemplate | None) -> str:
    """Who renders which template under ``mode``, and whose date the model reads."""
    if mode == "completions":
        return "dateeval renders the chat template itself and sends the text: every date in it is ours."
    ours = (
        "Only the system line is ours: dateeval adds its date line to the messages. "
        if mode == "chat"
        else "Nothing dated is ours: the system message is empty, as in the paper's §5.2. "
    )
    if server is None:
        provider = (
            "the provider may inject a date of its own" if mode == "server-clock" else "it may add a date of its own"
        )
        return (
            f"{ours}The server applies a chat template we cannot see: what surrounds these messages is unknown, and {provider} "
            "(python -m dateeval probe tells whether it does)."
        )
    return f"{ours}The server wraps the messages in its template, rendered here as the server would today: this template {_server_dates(mode, server)}."


def _server_dates(mode: str, server: ChatTemplate) -> str:
    """Which date the server's template writes; one without a date gets ours in chat mode, and none at all in server-clock mode."""
    if server.support.kind == "none" and mode == "server-clock":
        return "has no date of its own, and this mode adds none: the model reads no date unless the provider injects one elsewhere"
    return server.support.describe()
