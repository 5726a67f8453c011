"""How a chat template gets its date, read from its Jinja syntax tree (parsed under the render limits).

A template reads a variable it defaults itself (Llama 3.1's ``date_string``),
calls the clock (``strftime_now``), or has no date: each needs its own handle
(:class:`dateeval.prompting.ChatTemplate` renders them).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import jinja2
import jinja2.meta
from jinja2 import nodes

from dateeval.errors import DateEvalError
from dateeval.prompting import render_limits

# Formats tried, in order, to read the format of a template's default date string.
KNOWN_FORMATS = ("%d %b %Y", "%d %B %Y", "%Y-%m-%d", "%B %d, %Y", "%b %d, %Y", "%m/%d/%Y", "%d/%m/%Y")


@dataclass(frozen=True)
class DateSupport:
    """How a template injects a date: ``variable``, ``clock`` or ``none``."""

    kind: str
    variable: str | None = None
    format: str | None = None
    default: str | None = None

    def describe(self) -> str:
        if self.kind == "variable":
            return (
                f"sets the date from the variable `{self.variable}` (format `{self.format}`, "
                f"default {self.default!r} when the caller does not set it)"
            )
        if self.kind == "clock":
            return f"reads the machine's clock with strftime_now(`{self.format}`): the date changes every day"
        return "has no date of its own: dateeval injects one into the messages"


def infer_format(text: str) -> str | None:
    for fmt in KNOWN_FORMATS:
        try:
            if dt.datetime.strptime(text, fmt).strftime(fmt) == text:
                return fmt
        except ValueError:
            continue
    return None


def analyse(source: str, name: str) -> DateSupport:
    """Find the template's date mechanism by reading its Jinja syntax tree.

    Parsed in the guarded environment: ``find_undeclared_variables`` runs
    Jinja's compiler, whose constant folding would otherwise compute
    ``'a' * 10**10`` before anything is rendered.
    """
    try:
        tree = render_limits.parse(source)
    except jinja2.TemplateSyntaxError as error:
        raise DateEvalError(f"chat template {name} does not parse: {error}") from None
    for call in tree.find_all(nodes.Call):
        if isinstance(call.node, nodes.Name) and call.node.name == "strftime_now":
            fmt = call.args[0].value if call.args and isinstance(call.args[0], nodes.Const) else "%Y-%m-%d"
            if not isinstance(fmt, str):
                raise DateEvalError(
                    f"chat template {name} calls strftime_now({fmt!r}): the format must be a string such as '%d %b %Y'"
                )
            return DateSupport("clock", format=fmt)
    free = jinja2.meta.find_undeclared_variables(tree)
    # A variable the caller may set, whose fallback is a literal date ("26 Jul 2024").
    for assign in tree.find_all(nodes.Assign):
        target, value = assign.target, assign.node
        if (
            isinstance(target, nodes.Name)
            and target.name in free
            and isinstance(value, nodes.Const)
            and isinstance(value.value, str)
        ):
            fmt = infer_format(value.value)
            if fmt:
                return DateSupport("variable", variable=target.name, format=fmt, default=value.value)
    return DateSupport("none")
