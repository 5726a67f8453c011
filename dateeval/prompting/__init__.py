"""Chat templates with full control over the date they put in the prompt.

This is the heart of the tool (paper §1, App. B). Real chat templates get a
date in one of three ways, and each needs its own handle:

* **variable** -- the template reads a variable it defaults itself
  (Llama 3.1/3.3: ``date_string``, default ``"26 Jul 2024"``). We set it, in the
  template's own format (inferred from the default).
* **clock** -- the template calls ``strftime_now(fmt)`` (GPT-OSS, Llama 3.2),
  i.e. the machine's wall clock. We pin the clock to the condition's date.
* **none** -- the template has no date of its own (Gemma 3, Qwen3, Phi-4,
  SmolLM2). We inject a date line into the system message (or user turn),
  the way API providers do server-side.

Every condition also has two baselines: **no-date** (the same template with
the date line removed, the paper's mitigation, Table 9) and
**template-default** (what an unsuspecting user gets today: Llama's fixed
date, GPT-OSS's real clock, nothing for the others).

Rendering goes through transformers' own ``render_jinja_template`` (what
``apply_chat_template`` calls), so the prompt is byte-for-byte what the model
sees in practice.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from dateeval.data.files import read_bytes
from dateeval.errors import DateEvalError
from dateeval.prompting import render_limits
from dateeval.prompting.files import TEMPLATE_FILES, check_template_name, template_file, tokenizer_config
from dateeval.prompting.support import DateSupport, analyse

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

DATE_MODES = ("date", "none", "default")
POSITIONS = ("system_start", "system_end", "user_start")
_SENTINEL = "DATEEVALSENTINEL"
# The longest text kept on a line beside the date that we still treat as the date's label
# ("Today Date: ", "Current date: "); longer lines only lose the date itself.
_MAX_LABEL = 40
_render_lock = threading.Lock()


@dataclass(frozen=True)
class DateInjection:
    """How dateeval writes a date into templates that have none of their own.

    The default mirrors the line Llama 3.1 uses and the paper injects
    (``Today Date: 26 Jul 2024``) at the start of the system message.
    """

    line: str = "Today Date: {date}"
    format: str = "%d %b %Y"
    position: str = "system_start"

    def __post_init__(self) -> None:
        if self.position not in POSITIONS:
            raise DateEvalError(f"unknown date position {self.position!r}: choose one of {', '.join(POSITIONS)}")
        if "{date}" not in self.line:
            raise DateEvalError(f"date line {self.line!r} must contain the placeholder {{date}}")
        try:
            dt.date(2024, 1, 2).strftime(self.format)
        except ValueError as error:
            raise DateEvalError(f"malformed date format {self.format!r}: {error}") from None

    def text(self, day: dt.date) -> str:
        return self.line.replace("{date}", day.strftime(self.format))


@dataclass(frozen=True)
class RenderedPrompt:
    """A rendered prompt and the date text it carries (None when it carries none)."""

    text: str
    date_text: str | None


@contextlib.contextmanager
def _rendering(pinned: dt.date | str | None, source: str, compiled: jinja2.Template, given: object) -> Iterator[None]:
    """Pin transformers' ``strftime_now`` clock, have it render ``source`` as ``compiled`` (guarded), and apply the limits.

    ``pinned`` is a date, the sentinel string (every ``strftime_now`` call then
    returns the sentinel, so the date's position can be found), or None (the
    real clock). transformers reads ``datetime`` and ``_compile_jinja_template``
    from its module at call time, so swapping those names is enough (any other
    template still compiles as before); the lock keeps concurrent renders (the
    app renders while a sweep runs) from seeing each other's clock. ``given``
    (what the template is given) sizes the render's allocation budget.
    """
    from transformers.utils import chat_template_utils

    with _render_lock:
        original_clock, original_compile = chat_template_utils.datetime, chat_template_utils._compile_jinja_template
        if isinstance(pinned, dt.date):
            moment = dt.datetime(pinned.year, pinned.month, pinned.day, 12)
            chat_template_utils.datetime = type("PinnedClock", (), {"now": staticmethod(lambda tz=None: moment)})
        elif isinstance(pinned, str):
            chat_template_utils.datetime = type(
                "SentinelClock", (), {"now": staticmethod(lambda tz=None: _SentinelTime())}
            )
        chat_template_utils._compile_jinja_template = lambda template: (
            compiled if template == source else original_compile(template)
        )
        try:
            with render_limits.limits(given):
                yield
        finally:
            chat_template_utils.datetime, chat_template_utils._compile_jinja_template = original_clock, original_compile


def _remove_date(text: str, date_text: str) -> str:
    """Remove the date from a rendered prompt, with its label line when it has one."""
    start = text.index(date_text)
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start + len(date_text))
    line_end = len(text) if line_end == -1 else line_end
    rest_of_line = text[line_start:start] + text[start + len(date_text) : line_end]
    if len(rest_of_line.strip()) <= _MAX_LABEL and not text[start + len(date_text) : line_end].strip():
        return text[:line_start] + text[min(line_end + 1, len(text)) :]
    return text[:start] + text[start + len(date_text) :]


def _inject(messages: list[dict], date_line: str, position: str) -> list[dict]:
    """Return a copy of ``messages`` with the date line put where ``position`` says."""
    out = [dict(message) for message in messages]
    if position == "user_start":
        user = next(message for message in out if message["role"] == "user")
        user["content"] = f"{date_line}\n\n{user['content']}"
        return out
    if not out or out[0]["role"] != "system":
        out.insert(0, {"role": "system", "content": ""})
    system = out[0]["content"]
    if not system:
        out[0]["content"] = date_line
    elif position == "system_start":
        out[0]["content"] = f"{date_line}\n\n{system}"
    else:
        out[0]["content"] = f"{system}\n\n{date_line}"
    return out


class ChatTemplate:
    """A chat template (from a tokenizer or a file) rendered with a controlled date."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "", name: str = "") -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name

    @classmethod
    def from_file(cls, path: str | Path, *, bos_token: str = "", eos_token: str = "") -> ChatTemplate:
        """Load a template: a ``.jinja`` file, a ``tokenizer_config.json``, or a model folder holding either."""
        path = template_file(Path(path))
        try:
            data = read_bytes(path, "chat template")  # a tokenizer_config.json is KB: a sparse one is refused, not read
        except OSError as error:
            raise DateEvalError(f"cannot read chat template {path}: {error.strerror}") from None
        name = path.parent.name if path.name in TEMPLATE_FILES else path.stem
        return cls.from_bytes(data, str(path), name=name, bos_token=bos_token, eos_token=eos_token)

    @classmethod
    def from_bytes(
        cls, data: bytes, filename: str, *, name: str = "", bos_token: str = "", eos_token: str = ""
    ) -> ChatTemplate:
        """A template from a file's content (read or uploaded): a ``.jinja`` as is, or a ``tokenizer_config.json``'s ``chat_template``.

        A tokenizer config brings its own BOS/EOS tokens; the arguments are the
        fallback for a bare ``.jinja``, which names none.
        """
        check_template_name(filename)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise DateEvalError(f"chat template {filename} is not UTF-8 text") from None
        if Path(filename).suffix == ".jinja":
            return cls(text, bos_token=bos_token, eos_token=eos_token, name=name)
        source, bos, eos = tokenizer_config(text, filename)
        return cls(source, bos_token=bos or bos_token, eos_token=eos or eos_token, name=name)

    @classmethod
    def from_tokenizer(cls, tokenizer: PreTrainedTokenizerBase, name: str = "") -> ChatTemplate:
        source = tokenizer.chat_template
        if not isinstance(source, str) or not source:
            raise DateEvalError(
                f"model {name or tokenizer.name_or_path} has no chat template; dateeval needs one to render prompts"
            )
        return cls(source, bos_token=tokenizer.bos_token or "", eos_token=tokenizer.eos_token or "", name=name)

    @cached_property
    def support(self) -> DateSupport:
        """How this template dates its prompts, verified by rendering a sentinel."""
        support = analyse(self.source, self.name)
        if support.kind != "none":
            probe = [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]
            text = self._render(
                probe, variables={support.variable: _SENTINEL} if support.variable else {}, clock=_SENTINEL
            )
            if _SENTINEL not in text:
                return DateSupport("none")
        return support

    def _render(self, messages: list[dict], *, variables: dict[str, str], clock: dt.date | str | None) -> str:
        """The prompt, rendered by transformers under the limits of :mod:`dateeval.prompting.render_limits` (time, steps, memory)."""
        from transformers.utils.chat_template_utils import render_jinja_template

        try:
            compiled = render_limits.compile_template(self.source)
            with _rendering(clock, self.source, compiled, (messages, variables, self.bos_token, self.eos_token)):
                return render_jinja_template(
                    [messages],
                    chat_template=self.source,
                    add_generation_prompt=True,
                    bos_token=self.bos_token,
                    eos_token=self.eos_token,
                    **variables,
                )[0][0]
        except render_limits.RenderLimitError as error:
            raise DateEvalError(
                f"chat template {self.name} stopped rendering: {error} ({render_limits.LIMITS})"
            ) from None
        except Exception as error:  # the template is the user's code: any error in it is theirs
            detail = error if isinstance(error, jinja2.TemplateError) else f"{type(error).__name__}: {error}"
            raise DateEvalError(f"chat template {self.name} failed to render: {detail}") from None

    def render(
        self,
        messages: list[dict],
        *,
        mode: str = "date",
        day: dt.date | None = None,
        injection: DateInjection = DateInjection(),
    ) -> RenderedPrompt:
        """Render ``messages`` under one date condition.

        ``mode`` is ``date`` (use ``day``), ``none`` (no date anywhere) or
        ``default`` (whatever the template does by itself today).
        """
        if mode not in DATE_MODES:
            raise DateEvalError(f"unknown date mode {mode!r}: choose one of {', '.join(DATE_MODES)}")
        if mode == "date" and day is None:
            raise DateEvalError("date mode needs a date")
        support = self.support
        if mode == "default":
            text = self._render(messages, variables={}, clock=None)
            return RenderedPrompt(text, self._default_date_text(support))
        if support.kind == "none":
            if mode == "none":
                return RenderedPrompt(self._render(messages, variables={}, clock=None), None)
            line = injection.text(day)
            text = self._render(_inject(messages, line, injection.position), variables={}, clock=None)
            return RenderedPrompt(text, day.strftime(injection.format))
        if mode == "none":
            variables = {support.variable: _SENTINEL} if support.variable else {}
            text = self._render(messages, variables=variables, clock=_SENTINEL)
            while _SENTINEL in text:
                text = _remove_date(text, _SENTINEL)
            return RenderedPrompt(text, None)
        date_text = day.strftime(support.format or "%Y-%m-%d")
        variables = {support.variable: date_text} if support.variable else {}
        return RenderedPrompt(self._render(messages, variables=variables, clock=day), date_text)

    @staticmethod
    def _default_date_text(support: DateSupport) -> str | None:
        if support.kind == "variable":
            return support.default
        if support.kind == "clock":
            return dt.datetime.now().strftime(support.format or "%Y-%m-%d")
        return None


class _SentinelTime:
    """What the sentinel clock's ``now()`` returns: formats to the sentinel whatever the format."""

    def strftime(self, fmt: str) -> str:  # `fmt` unused: the same signature as datetime.strftime
        return _SENTINEL


def dated_messages(
    messages: list[dict], *, mode: str, day: dt.date | None, injection: DateInjection
) -> tuple[list[dict], str | None]:
    """The messages a server that applies its own chat template gets under one date condition.

    Only the system line is ours there: ``date`` adds the injection's date
    line, ``none`` sends the messages as they are, and ``default`` too (the
    server, like an API provider, may add its own date: see the probe).
    Returns the messages and the date text they carry.
    """
    if mode not in DATE_MODES:
        raise DateEvalError(f"unknown date mode {mode!r}: choose one of {', '.join(DATE_MODES)}")
    if mode != "date":
        return messages, None
    if day is None:
        raise DateEvalError("date mode needs a date")
    return _inject(messages, injection.text(day), injection.position), day.strftime(injection.format)
