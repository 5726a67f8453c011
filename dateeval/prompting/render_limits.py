"""Limits on rendering a Jinja template (a chat template, an lm-eval task's): time, steps and memory, checked as it runs.

A template is code from whoever wrote it, and Jinja's sandbox stops it
from reaching the machine but not from running forever (two nested loops of
99,999) or filling memory (a string doubled in a loop grew to 14 GB before
the kernel's OOM killer ended the whole process). Every prompt of a sweep is
rendered, so the limits must cost next to nothing on a normal template: they
are checked inside the template's own steps, in this process, instead of in
a child process per prompt.

:class:`GuardedEnvironment` is transformers' sandboxed chat-template
environment (same options, filters, globals and extensions, so the text is
the same), and :func:`rebuild` makes lm-eval's template environment a
:class:`GuardedSandbox` the same way, with every step that can take time or
make a value counted (the bounds are in :mod:`dateeval.data.limits`):

* every loop iteration, call, filter and arithmetic operation is a **step**;
  a render takes at most ``RENDER_MAX_STEPS`` and ``RENDER_MAX_SECONDS``;
* an operation that can make a value larger than its inputs (``*``, ``+``,
  ``%``, ``~``, ``replace``, ``join``, ``indent``, ``center``, writing a
  list out...) is refused **before** it runs when its result would exceed
  ``RENDER_MAX_CHARS`` characters (or elements);
* everything a render creates is charged against an allocation budget (the
  output included), so many values below the limit cannot add up either.

Loops and ``~`` are rewritten in the template's syntax tree (a loop's
iterable, and a concatenation, go through a counting filter), before it is
compiled; ``lipsum`` (random text of any size) is not offered.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer

from dateeval.data.limits import (
    RENDER_ALLOCATION_PER_INPUT_CHAR,
    RENDER_BASE_ALLOCATION,
    RENDER_MAX_CHARS,
    RENDER_MAX_DEPTH,
    RENDER_MAX_INT_BITS,
    RENDER_MAX_SECONDS,
    RENDER_MAX_STEPS,
)

_LOOP_FILTER = "dateeval_counted_loop"
_CONCAT_FILTER = "dateeval_counted_concat"
# Calls whose result is about as long as their width argument, and calls whose result grows with subject x argument.
_WIDTH_CALLS = frozenset({"center", "ljust", "rjust", "zfill"})
_TIMES_CALLS = frozenset({"replace", "translate", "join", "expandtabs", "indent", "batch", "slice", "tojson"})
_FORMAT_CALLS = frozenset({"format", "format_map"})


class RenderLimitError(jinja2.TemplateRuntimeError):
    """A template went past a rendering limit; the message says which."""


@dataclass
class _Budget:
    """What one render may still spend."""

    steps: int
    allocation: int
    deadline: float

    def refuse(self) -> None:
        """Raise the error for the limit that was passed."""
        if self.steps < 0:
            raise RenderLimitError(
                f"it took more than {RENDER_MAX_STEPS:,} steps (loop iterations, calls and operations)"
            )
        if self.allocation < 0:
            raise RenderLimitError("the values it made add up to more than its allocation budget")
        raise RenderLimitError(f"it took more than {RENDER_MAX_SECONDS:g} s")


LIMITS = f"a prompt may take {RENDER_MAX_STEPS:,} steps and {RENDER_MAX_SECONDS:g} s to render, with values of up to {RENDER_MAX_CHARS:,} characters"

_active: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("dateeval_render_budget", default=None)


@contextlib.contextmanager
def limits(given: object) -> Iterator[None]:
    """Apply the limits to what renders inside; the allocation budget grows with the size of what the template is ``given``.

    Its size is read from its ``repr`` (C speed: this runs for every prompt),
    close enough for a budget that is many times larger.
    """
    allocation = RENDER_BASE_ALLOCATION + RENDER_ALLOCATION_PER_INPUT_CHAR * len(repr(given))
    token = _active.set(_Budget(RENDER_MAX_STEPS, allocation, time.monotonic() + RENDER_MAX_SECONDS))
    try:
        yield
    finally:
        _active.reset(token)


def _spend(steps: int, allocation: int = 0) -> None:
    """Count steps and allocation against this render's budget (one function: it runs at every step of every prompt)."""
    budget = _active.get()
    if budget is None:  # while Jinja folds constants at compile time
        return
    budget.steps -= steps
    budget.allocation -= allocation
    if budget.steps < 0 or budget.allocation < 0 or time.monotonic() > budget.deadline:
        budget.refuse()


def weight(value: Any, limit: int = RENDER_MAX_CHARS) -> int:
    """How many characters or elements ``value`` becomes when written out, each shared reference counted again.

    Stops counting past ``limit`` (returning ``limit + 1``): the point is to
    refuse before a value too large is written, not to measure it.
    """
    if type(value) is str:  # nearly every call
        return len(value)
    total, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > RENDER_MAX_DEPTH:
            return limit + 1
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 1
        elif isinstance(item, range):
            total += len(item)
        elif isinstance(item, (list, tuple, set, frozenset, dict, Namespace)):
            children = _children(item)
            total += len(children) + _flat_weight(children)
            if total <= limit and not _is_flat(children):
                stack.extend((child, depth + 1) for child in children)
        else:
            total += 1
        if total > limit:
            return limit + 1
    return total


_FLAT = frozenset({str, int, float, bool, type(None)})


def _is_flat(children: list) -> bool:
    """Whether every child is a plain string or number (sized at C speed, the common case, instead of one by one)."""
    return set(map(type, children)) <= _FLAT


def _flat_weight(children: list) -> int:
    """The characters of a flat list's strings (numbers count as one element each); 0 for any other list."""
    return sum(map(len, filter(lambda child: type(child) is str, children))) if _is_flat(children) else 0


def _children(container: Any) -> list:
    if isinstance(container, Namespace):
        container = object.__getattribute__(container, "_Namespace__attrs")
    if isinstance(container, dict):
        return [*container.keys(), *container.values()]
    return list(container)


def _size(value: Any) -> int:
    """The memory a new value takes, in characters or elements (its own, not what it refers to)."""
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    if isinstance(value, int):
        return value.bit_length() // 8
    return 0


def _refuse_beyond(estimate: int, what: str) -> None:
    """Raise when ``what`` would make a value beyond ``RENDER_MAX_CHARS``."""
    if estimate > RENDER_MAX_CHARS:
        raise RenderLimitError(
            f"{what} would make a value of {'more than ' if estimate > RENDER_MAX_CHARS + 1 else ''}"
            f"{min(estimate, RENDER_MAX_CHARS + 1):,} characters (at most {RENDER_MAX_CHARS:,})"
        )


def _format_estimate(template: str, arguments: list, dynamic: bool) -> int:
    """An upper bound on a formatted string's length: its text, every number in it as a width, and its arguments.

    ``dynamic``: widths may come from the arguments (``%*d``, ``{:{}}``), so
    integer arguments count by their value.
    """
    digits = re.findall(r"\d+", template)
    if any(len(number) > 9 for number in digits):
        return RENDER_MAX_CHARS + 1
    widths = sum(int(number) for number in digits)
    sized = sum(abs(a) if dynamic and isinstance(a, int) else weight(a) for a in arguments)
    return len(template) + widths + sized


def _format_arguments(right: Any) -> list:
    if isinstance(right, tuple):
        return list(right)
    if isinstance(right, dict):
        return list(right.values())
    return [right]


def _check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse an arithmetic operation whose result would be too large, before it is computed."""
    if operator == "%" and isinstance(left, str):
        _refuse_beyond(_format_estimate(left, _format_arguments(right), "*" in left), "'%' formatting")
    elif isinstance(left, int) and isinstance(right, int):
        bits = {"*": left.bit_length() + right.bit_length(), "**": left.bit_length() * max(right, 0)}.get(operator, 0)
        if bits > RENDER_MAX_INT_BITS:
            raise RenderLimitError(
                f"'{operator}' would make an integer of about {bits:,} bits (at most {RENDER_MAX_INT_BITS:,})"
            )
    elif (
        operator == "*"
    ):  # what is new is the sequence's own size (a list repeats references: writing it out is sized then)
        count, sequence = (left, right) if isinstance(left, int) else (right, left)
        if isinstance(count, int):
            _refuse_beyond(_size(sequence) * max(count, 0), "'*'")
    elif operator == "+":
        _refuse_beyond(_size(left) + _size(right), "'+'")


def _check_call(name: str, subject: Any, arguments: list) -> None:
    """Refuse a call (method or filter) whose result would be too large, before it runs.

    Most calls make nothing larger than their inputs; a few multiply them
    (``replace``, ``join``, ``indent``...) or pad to a width (``center``), and
    formatting adds its widths.
    """
    if name in _FORMAT_CALLS and isinstance(subject, str):
        _refuse_beyond(_format_estimate(subject, arguments, dynamic=True), name)
    elif name in _WIDTH_CALLS:
        _refuse_beyond(weight(subject) + sum(abs(a) if isinstance(a, int) else weight(a) for a in arguments), name)
    elif name in _TIMES_CALLS:
        factor = max(1, sum(abs(a) if isinstance(a, int) else weight(a) for a in arguments))
        _refuse_beyond(max(1, weight(subject)) * factor, name)
    else:
        _refuse_beyond(weight(subject) + (sum(map(weight, arguments)) if arguments else 0), name or "a call")


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` written out: one step, its text charged; a container is sized before it is written."""
    if isinstance(value, str):
        _spend(1, len(value))
        return value
    size = weight(value)
    _refuse_beyond(size, "writing out a value")
    _spend(1, size)
    return value


def _counted_loop(iterable: Iterable, body_chars: int) -> Iterator:
    """A loop's iterable, one step per iteration, charged with the text the loop's body writes each time."""
    for item in iterable:
        _spend(1, body_chars)
        yield item


def _counted_concat(parts: list) -> str:
    """``a ~ b ~ ...``, sized before it is built."""
    _refuse_beyond(sum(weight(part) for part in parts), "'~'")
    text = "".join(map(str, parts))
    _spend(1, len(text))
    return text


def _guard_filter(name: str, function: Callable) -> Callable:
    """A filter that counts as a step, is sized before it runs and charged for what it returns."""
    passes = 1 if hasattr(function, "jinja_pass_arg") else 0  # context, eval context or environment comes first

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _check_call(name, args[passes] if len(args) > passes else None, [*args[passes + 1 :], *kwargs.values()])
        result = function(*args, **kwargs)
        size = _size(result)
        _refuse_beyond(size, name)
        _spend(1, size)
        return result

    return guarded


class _Instrument(NodeTransformer):
    """Route every loop's iterable and every ``~`` through the counting filters."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        body_chars = sum(len(data.data) for child in node.body for data in child.find_all(nodes.TemplateData))
        node.iter = nodes.Filter(node.iter, _LOOP_FILTER, [nodes.Const(body_chars)], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Filter(
            nodes.List(node.nodes, lineno=node.lineno), _CONCAT_FILTER, [], [], None, None, lineno=node.lineno
        )


class GuardedSandbox(SandboxedEnvironment):
    """Jinja's sandbox with every step counted and every large value sized first (lm-eval's task templates render here:
    they may change what they are given, as in lm-eval's own environment)."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = _Instrument().visit(super()._parse(source, name, filename))
        tree.set_environment(self)
        return tree

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "+" and type(left) is str and type(right) is str:  # most templates' one operation: joining text
            size = len(left) + len(right)
            _refuse_beyond(size, "'+'")
            _spend(1, size)
            return left + right
        _check_binop(operator, left, right)
        result = self.binop_table[operator](left, right)
        _spend(1, _size(result))
        return result

    def call(self, context: jinja2.runtime.Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _spend(1)  # before the call: a macro calling itself counts on the way down
        if (
            isinstance(obj, LoopContext) and args
        ):  # a recursive loop's next level: its items count as the first level's do
            args = (_counted_loop(args[0], 0), *args[1:])
        # A method's object is what it works on (the sandbox hands out str.format wrapped, the method in __wrapped__).
        subject = getattr(getattr(obj, "__wrapped__", obj), "__self__", None)
        _check_call(getattr(obj, "__name__", ""), subject, [*args, *kwargs.values()])
        result = super().call(context, obj, *args, **kwargs)
        size = _size(result)
        _refuse_beyond(size, getattr(obj, "__name__", "a call"))
        _spend(0, size)
        return result

    def concat(self, pieces: Iterable[str]) -> str:  # type: ignore[override] - the rendered output, joined under the size limit
        collected, total = [], 0
        for piece in pieces:
            total += len(piece)
            if total > RENDER_MAX_CHARS:
                _refuse_beyond(total, "the rendered prompt")
            collected.append(piece)
        return "".join(collected)


class GuardedEnvironment(GuardedSandbox, ImmutableSandboxedEnvironment):
    """transformers' chat-template sandbox (immutable: a template may not change what it is given), guarded."""


def rebuild(base: jinja2.Environment, kind: type[GuardedSandbox]) -> GuardedSandbox:
    """``base`` rebuilt as a guarded environment of ``kind``: its options, filters (each guarded), globals and tests, so
    a template renders the same text. The sandbox's own ``range`` (at most 100,000 items) stays; ``lipsum`` (random
    text of any length) is not offered."""
    environment = kind(
        trim_blocks=base.trim_blocks,
        lstrip_blocks=base.lstrip_blocks,
        keep_trailing_newline=base.keep_trailing_newline,
        undefined=base.undefined,
        extensions=[type(extension) for extension in base.extensions.values()],
        finalize=_finalize,
    )
    environment.globals.update({name: value for name, value in base.globals.items() if name not in ("range", "lipsum")})
    environment.globals.pop("lipsum", None)
    environment.filters = {name: _guard_filter(name, function) for name, function in base.filters.items()}
    environment.filters[_LOOP_FILTER] = _counted_loop
    environment.filters[_CONCAT_FILTER] = _counted_concat
    environment.tests = dict(base.tests)
    return environment


@lru_cache(maxsize=1)
def _environment() -> GuardedEnvironment:
    """transformers' own chat-template environment, rebuilt guarded."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return rebuild(_compile_jinja_template("").environment, GuardedEnvironment)


def parse(source: str) -> nodes.Template:
    """``source``'s syntax tree in the guarded environment: reading it (``jinja2.meta``) folds constants, which here are sized first."""
    return _environment().parse(source)


@lru_cache(maxsize=256)
def _compiled(environment: GuardedSandbox, source: str) -> jinja2.Template:
    return environment.from_string(source)


def compile_template(source: str) -> jinja2.Template:
    """``source`` compiled (once) in the guarded chat-template environment; render it inside :func:`limits`."""
    return _compiled(_environment(), source)


def render(environment: GuardedSandbox, source: str, given: dict) -> str:
    """``source`` rendered with ``given`` in ``environment``, under the limits (compiled once per source: a task's
    templates render once per document)."""
    with limits(given):
        return _compiled(environment, source).render(**given)
