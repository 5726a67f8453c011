"""lm-eval's own code under dateeval's bounds: imported once (:func:`lm_eval_module`) with its templates rendered in the
guarded sandbox, its regexes on replies stopped at :data:`REGEX_SECONDS`, and its literal parsing measured first.
Split from :mod:`dateeval.tasks.lmeval`, which reads task YAMLs and builds the tasks; a task YAML is data, so what
lm-eval runs from it must stay within the same limits as a spec's."""

from __future__ import annotations

import ast
import functools
import re
from types import ModuleType

import regex

from dateeval.prompting import render_limits
from dateeval.errors import DateEvalError
from dateeval.data.limits import LMEVAL_MAX_LITERAL_CHARS, REGEX_SECONDS

INSTALL = "lm-eval tasks need the optional extra: ./run.sh setup-lmeval (or pip install -r requirements-lmeval.txt)"


def lm_eval_module() -> ModuleType:
    """The ``lm_eval`` package, bounded as this module says; one line naming the extra where it is not installed."""
    try:
        import lm_eval
        import lm_eval.api.task
        import lm_eval.tasks
        import lm_eval.utils
    except ImportError:
        raise DateEvalError(INSTALL) from None
    import lm_eval.api.metrics
    import lm_eval.filters.extraction
    import lm_eval.filters.transformation

    _sandbox_templates(lm_eval.utils)
    lm_eval.api.task.ast = _BOUNDED_AST
    for module in (
        lm_eval.filters.extraction,
        lm_eval.filters.transformation,
        lm_eval.api.metrics,
    ):  # a task's regexes on replies
        module.re = _BOUNDED_RE
    return lm_eval


class _BoundedPattern:
    """A compiled pattern whose searches stop at :data:`REGEX_SECONDS`, as a spec's grading regex does
    (``grading._matches``): one past it finds nothing, so the reply is graded as one the pattern cannot read (an lm-eval
    filter's fallback) and a ``sub`` leaves the text as it was. ``(\\s*\\S*\\s*\\S*)*X`` on a 30-character reply ran
    for over 300 s in ``re``; the ``regex`` module (re's syntax) can stop a search."""

    def __init__(self, pattern: object, flags: int = 0) -> None:
        self.compiled = pattern.compiled if isinstance(pattern, _BoundedPattern) else regex.compile(pattern, flags)

    def __getattr__(self, name: str) -> object:
        return getattr(self.compiled, name)

    def _bounded(self, method: str, failed: object, *args: object, **kwargs: object) -> object:
        try:
            return getattr(self.compiled, method)(*args, **kwargs, timeout=REGEX_SECONDS)
        except TimeoutError:
            return failed

    def findall(self, string: str, *args: object) -> list:
        return self._bounded("findall", [], string, *args)

    def search(self, string: str, *args: object) -> object:
        return self._bounded("search", None, string, *args)

    def match(self, string: str, *args: object) -> object:
        return self._bounded("match", None, string, *args)

    def sub(self, repl: object, string: str, count: int = 0) -> str:
        return self._bounded("sub", string, repl, string, count)


class _BoundedRe:
    """The ``re`` module as lm-eval's filters and metrics see it, every search a :class:`_BoundedPattern`'s."""

    def __getattr__(self, name: str) -> object:
        return getattr(re, name)

    compile = _BoundedPattern

    @staticmethod
    def findall(pattern: object, string: str, flags: int = 0) -> list:
        return _BoundedPattern(pattern, flags).findall(string)

    @staticmethod
    def search(pattern: object, string: str, flags: int = 0) -> object:
        return _BoundedPattern(pattern, flags).search(string)

    @staticmethod
    def match(pattern: object, string: str, flags: int = 0) -> object:
        return _BoundedPattern(pattern, flags).match(string)

    @staticmethod
    def sub(pattern: object, repl: object, string: str, count: int = 0, flags: int = 0) -> str:
        return _BoundedPattern(pattern, flags).sub(repl, string, count)


_BOUNDED_RE = _BoundedRe()


class _BoundedLiterals:
    """The ``ast`` module as lm-eval's task module sees it, with ``literal_eval`` bounded: lm-eval parses a rendered
    ``doc_to_choice`` (and ``doc_to_target``...) as a Python literal, which costs ~1 KB an element, so a template that
    fits the render limits (``[{{ '0,' * 4000000 }}0]``, 8 MB) would need ~3.9 GB; its text is measured first."""

    def __getattr__(self, name: str) -> object:
        return getattr(ast, name)

    @staticmethod
    def literal_eval(text: object) -> object:
        if isinstance(text, str) and len(text) > LMEVAL_MAX_LITERAL_CHARS:
            raise DateEvalError(
                f"a template rendered {len(text):,} characters for lm-eval to parse as a Python literal (a list of "
                f"choices...), over the {LMEVAL_MAX_LITERAL_CHARS:,} it may parse"
            )
        return ast.literal_eval(text)


_BOUNDED_AST = _BoundedLiterals()


def _sandbox_templates(utils: ModuleType) -> None:
    """Render lm-eval's templates (``doc_to_text``...) in dateeval's guarded sandbox: lm-eval's own environment lets a
    template reach Python (``{{ cycler.__init__.__globals__.os }}``), Jinja's sandbox alone lets it fill memory
    (``{{ 'a' * 10**10 }}``), and a task YAML is data. The guarded environment is lm-eval's rebuilt (its options and
    filters), so a template that stays with its document's fields renders the same (the parity test); lm-eval's task
    code calls ``utils.apply_template`` by its module's name, so replacing it there is enough."""
    if isinstance(utils.env, render_limits.GuardedSandbox):
        return
    utils.env.filters["regex_replace"] = _regex_replace  # before the rebuild, which guards it as every filter
    utils.env = render_limits.rebuild(utils.env, render_limits.GuardedSandbox)
    utils.apply_template = functools.partial(_apply_template, utils.env)


def _regex_replace(string: str, pattern: str, repl: str, count: int = 0) -> str:
    """lm-eval's ``regex_replace`` template filter with its search bounded at :data:`REGEX_SECONDS` (``re.sub`` cannot be
    stopped: ``(a|aa)+$`` on 40 ``a``s ran 127 s past the render's own time bound); past it, one line."""
    try:
        return regex.sub(pattern, repl, str(string), count=count, timeout=REGEX_SECONDS)
    except TimeoutError:
        raise render_limits.RenderLimitError(f"regex_replace({pattern!r}) took more than {REGEX_SECONDS:g} s") from None


def _apply_template(environment: render_limits.GuardedSandbox, template: str, doc: dict) -> str:
    """lm-eval's ``apply_template`` under dateeval's rendering limits; one past them is one line wherever lm-eval renders."""
    try:
        return render_limits.render(environment, template, doc)
    except render_limits.RenderLimitError as error:
        shown = template if len(template) <= 60 else template[:57] + "..."
        raise DateEvalError(f"lm-eval template {shown!r} stopped rendering: {error} ({render_limits.LIMITS})") from None
