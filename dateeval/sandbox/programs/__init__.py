"""The two programs each HumanEval check runs, one per sandbox (``dateeval.sandbox`` starts them): the **solution**,
which runs the model's code and answers calls to its function over a pipe, and the **checker**, which runs the
benchmark's own tests against a proxy of that function and writes the verdict on a pipe only it holds.

They are Python source, not functions: each runs in a fresh interpreter inside its own container, with nothing of
dateeval importable, so everything it needs (the limits it sets on itself, the pickle protocol that rebuilds values
only into the standard library's types) is written out here.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent


def program(name: str) -> str:
    """The source of ``name`` (``solution`` or ``checker``) as its sandbox runs it: the file's text with
    ``common.py``'s in place of its ``from common import`` line, so it needs nothing importable."""
    text = (_HERE / f"{name}.py").read_text(encoding="utf-8")
    head, found, tail = text.partition("\nfrom common import ")
    if not found:
        raise RuntimeError(f"{name}.py does not import the shared code")
    common = (_HERE / "common.py").read_text(encoding="utf-8")
    _, _, rest = tail.partition("\n")  # the import line's end
    return f"{head}\n{common}{rest}"


SOLUTION = program("solution")
CHECKER = program("checker")
