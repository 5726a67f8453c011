"""Does a provider inject today's date? ``python -m dateeval probe --model openai:URL#MODEL`` (paper App. B, Figure 5).

The paper asked Qwen3 through OpenRouter, with an empty system prompt, what
today's date is: it answered correctly, so the provider had put the date in
the prompt. The probe does the same with several phrasings and reads every
date out of the replies. Any reply naming today (by UTC or by the server's
``Date`` header, give or take a day for the provider's time zone) means the
date is injected; nothing else could tell the model.

A reply without today's date proves little on its own: small models ignore
what they are told. So the probe also sends a *control*, the same question
with a date of our own in the system message. A model that reads the control
date back, but names no current date without it, is reported as not
injected; one that cannot even read the control back leaves the question
**inconclusive**, and the probe says so. Raw replies are always reported.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field, replace

from dateeval.backends.base import BackendOptions, GenerationRequest, GenerationSettings, split_model
from dateeval.backends.openai_api import OpenAIBackend, parse_endpoint
from dateeval.errors import DateEvalError

QUESTIONS = (
    "What is today's date?",
    "What is the current date? Reply with the date only.",
    "Which day, month and year is it today?",
)
CONTROL_DATE = dt.date(2031, 3, 14)  # far from any training data and from today: read back only if read from the prompt
CONTROL_LINE = f"Today Date: {CONTROL_DATE:%d %b %Y}"
REPLY_TOKENS = 48
CLOCK_SKEW_S = 300  # a server's clock this far from ours is worth a warning even on the same day

_MONTH = r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_ORDINAL = r"(?:st|nd|rd|th)?"
# (pattern, how to read its groups into year, month, day); month names are matched case-insensitively.
_PATTERNS = (
    (re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"), ("y", "m", "d")),
    (re.compile(rf"\b(\d{{1,2}}){_ORDINAL}(?:\s+of)?\s+{_MONTH}\.?,?\s+(\d{{4}})\b", re.I), ("d", "b", "y")),
    (re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}}){_ORDINAL},?\s+(\d{{4}})\b", re.I), ("b", "d", "y")),
    (re.compile(r"\b(\d{1,2})[/.](\d{1,2})[/.](\d{4})\b"), ("d", "m", "y")),  # and month first, when that is a date too
)
# Formats a found date is described by, when one writes the found text exactly.
_FORMATS = (
    "%Y-%m-%d",
    "%Y/%m/%d",
    "%d %b %Y",
    "%d %B %Y",
    "%B %d, %Y",
    "%b %d, %Y",
    "%B %d %Y",
    "%A, %B %d, %Y",
    "%d/%m/%Y",
    "%m/%d/%Y",
    "%d.%m.%Y",
)


@dataclass(frozen=True)
class Found:
    """A date read out of a reply: the text as written, the day it names, and its strftime format where one fits."""

    text: str
    day: str
    format: str


@dataclass(frozen=True)
class Reply:
    question: str
    system: str | None
    reply: str
    dates: list[Found] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeReport:
    """The verdict and everything it rests on."""

    model: str
    asked_utc: str
    server_date: str | None
    injects: str  # yes | no | inconclusive
    format: str | None
    matches_today: bool | None
    reason: str
    replies: list[Reply]
    control: Reply

    def describe(self) -> str:
        lines = [
            f"probe of {self.model}, asked {self.asked_utc} (UTC); server Date header: {self.server_date or 'none'}",
            "",
        ]
        for reply in [*self.replies, self.control]:
            label = f"control (system: {reply.system!r})" if reply.system else "empty system prompt"
            dates = ", ".join(f"{found.text!r} = {found.day}" for found in reply.dates) or "no date"
            lines += [f"Q [{label}]: {reply.question}", f"A: {_one_line(reply.reply)}", f"   dates found: {dates}", ""]
        verdict = {
            "yes": "the provider INJECTS the date",
            "no": "the provider does NOT inject the date",
            "inconclusive": "INCONCLUSIVE",
        }
        lines.append(f"verdict: {verdict[self.injects]}: {self.reason}")
        if self.injects == "yes":
            lines.append(
                f"format as the model reports it: {self.format or 'unknown'}; matches today: {'yes' if self.matches_today else 'no'}"
            )
        return "\n".join(lines)


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _month(name: str) -> int:
    return ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec").index(
        name[:3].lower()
    ) + 1


def _describe_format(text: str, day: dt.date) -> str:
    unpadded = tuple(fmt.replace("%d", "%-d").replace("%m", "%-m") for fmt in _FORMATS)  # "3 December 2025"
    exact = [fmt for fmt in (*_FORMATS, *unpadded) if day.strftime(fmt) == text]
    return exact[0] if exact else "free text"


def find_dates(text: str) -> list[Found]:
    """Every calendar date written in ``text`` (ISO, day-month-year, month-day-year, numeric with either order)."""
    found: dict[tuple[str, str], Found] = {}
    for pattern, order in _PATTERNS:
        for match in pattern.finditer(text):
            parts = dict(zip(order, match.groups()))
            month = _month(parts["b"]) if "b" in parts else int(parts["m"])
            readings = [(int(parts["y"]), month, int(parts["d"]))]
            if order == ("d", "m", "y"):
                readings.append((int(parts["y"]), int(parts["d"]), month))  # 11/30/2026 reads month first
            for year, month_, day_ in readings:
                try:
                    day = dt.date(year, month_, day_)
                except ValueError:
                    continue
                found.setdefault(
                    (match.group(0), day.isoformat()),
                    Found(match.group(0), day.isoformat(), _describe_format(match.group(0), day)),
                )
    return list(found.values())


def verdict(replies: list[Reply], control: Reply, today: set[dt.date]) -> tuple[str, str | None, bool | None, str]:
    """(injects, format, matches today, reason) from the replies, the control and the days that count as today."""
    near = {day + dt.timedelta(days=shift) for day in today for shift in (-1, 0, 1)}
    hits = [found for reply in replies for found in reply.dates if dt.date.fromisoformat(found.day) in near]
    if hits:
        exact = [found for found in hits if dt.date.fromisoformat(found.day) in today]
        best = (exact or hits)[0]
        asked = sum(1 for reply in replies if any(found in hits for found in reply.dates))
        reason = f"{asked} of {len(replies)} replies name {best.day} ({best.text!r}) with no date of ours in the prompt"
        return (
            "yes",
            best.format,
            bool(exact),
            reason + ("" if exact else "; one day off today: the provider's time zone"),
        )
    named = sorted({found.day for reply in replies for found in reply.dates})
    others = f"; the dates it does name ({', '.join(named)}) are not today's" if named else ""
    if any(found.day == CONTROL_DATE.isoformat() for found in control.dates):
        return (
            "no",
            None,
            None,
            f"the model reads back a date given in the system prompt ({CONTROL_DATE}) but names no current date without one{others}",
        )
    return (
        "inconclusive",
        None,
        None,
        (
            f"no reply names today, and the model does not read back even a date given in the system prompt ({CONTROL_DATE}), "
            f"so its silence says nothing about injection{others}; read the replies above"
        ),
    )


def probe(model: str, options: BackendOptions) -> ProbeReport:
    """Ask ``model`` (``openai:URL#MODEL``) the questions with an empty system prompt and the control, greedy; judge."""
    name, spec = split_model(model)
    if name != "openai":
        raise DateEvalError(f"the probe asks an API endpoint: give --model openai:URL#MODEL, not {model}")
    backend = OpenAIBackend(parse_endpoint(spec), replace(options, mode="chat"))
    try:
        settings = GenerationSettings(max_new_tokens=REPLY_TOKENS)
        conversations = [((), question) for question in QUESTIONS] + [
            (({"role": "system", "content": CONTROL_LINE},), QUESTIONS[0])
        ]
        requests = [
            GenerationRequest((*system, {"role": "user", "content": question}), settings)
            for system, question in conversations
        ]
        answers = backend.generate(requests, batch_size=len(requests))
    finally:
        backend.close()
    replies = [
        Reply(question, system[0]["content"] if system else None, answer.text, find_dates(answer.text))
        for (system, question), answer in zip(conversations, answers)
    ]
    first = answers[0].usage
    asked_utc = str(first.request_utc)  # every answer of a server carries it
    asked = dt.datetime.fromisoformat(asked_utc)
    today = {asked.date()} | ({dt.datetime.fromisoformat(first.server_date).date()} if first.server_date else set())
    injects, fmt, matches, reason = verdict(replies[:-1], replies[-1], today)
    return ProbeReport(
        backend.identity.source,
        asked_utc,
        first.server_date,
        injects,
        fmt,
        matches,
        reason,
        replies[:-1],
        replies[-1],
    )


@dataclass(frozen=True)
class ServerDay:
    """The UTC day a server-clock run is dated by, and why it may surprise (None when the clocks agree)."""

    day: dt.date
    warning: str | None


def server_day(models: list[str], options: BackendOptions, local: dt.datetime | None = None) -> ServerDay:
    """The day by the servers' own clocks (their HTTP ``Date`` headers), which is the date a server-clock run's rows carry.

    In server-clock mode the model reads the provider's date, not ours: a
    machine whose clock is wrong (or a provider's) would otherwise file the
    rows under a day the model never saw. Servers that disagree on the day
    are refused; a server without a ``Date`` header leaves this machine's day, with a warning.
    """
    local = local or dt.datetime.now(dt.timezone.utc)
    clocks = {model: _server_now(model, options) for model in models}
    days = {now.date() for now in clocks.values() if now is not None}
    if len(days) > 1:
        said = ", ".join(f"{model}: {now:%Y-%m-%d %H:%M} UTC" for model, now in clocks.items() if now is not None)
        raise DateEvalError(
            f"the servers' clocks name different days ({said}): run server-clock mode for one provider at a time"
        )
    if not days:
        return ServerDay(
            local.date(),
            f"the server sends no Date header: server-clock rows are dated by this machine's clock, {local.date()} (UTC)",
        )
    now = next(now for now in clocks.values() if now is not None)
    if abs((now - local).total_seconds()) <= CLOCK_SKEW_S:
        return ServerDay(now.date(), None)
    return ServerDay(
        now.date(),
        f"the server's clock reads {now:%Y-%m-%d %H:%M} UTC and this machine's {local:%Y-%m-%d %H:%M} UTC: "
        f"server-clock rows are dated by the server's day, {now.date()}",
    )


def _server_now(model: str, options: BackendOptions) -> dt.datetime | None:
    name, spec = split_model(model)
    if name != "openai":
        raise DateEvalError(f"server-clock mode asks an API endpoint: give --model openai:URL#MODEL, not {model}")
    backend = OpenAIBackend(parse_endpoint(spec), replace(options, mode="server-clock"))
    try:
        return backend.server_now()
    finally:
        backend.close()
