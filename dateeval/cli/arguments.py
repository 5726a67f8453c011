"""What the command line accepts: its parser class and the argument types that check a value where it enters.

Each type turns a bad value into argparse's one-line error (``Parser.error``), so a negative count, a share
outside (0, 1] or text that is not UTF-8 fails before anything loads.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from dateeval.errors import DateEvalError
from dateeval.sparse import check_budget

# One condition per order: as many as a sweep may have dates, so a typo cannot ask for a billion conditions.
MAX_OPTION_ORDERS = 10_000


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise DateEvalError(f"{message} (see `{self.prog} --help`)")  # prog: `dateeval` or `dateeval run`


def share(text: str) -> float:
    """An argparse type for ``--budget`` and ``--target-width``: a share in (0, 1]."""
    try:
        return check_budget(float(text))
    except (ValueError, DateEvalError):
        raise argparse.ArgumentTypeError(f"must be a share in (0, 1] such as 0.2, not {text!r}") from None


def integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type for a whole number in a range: a negative count fails here instead of being silently ignored."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"{minimum} or more" if maximum is None else f"between {minimum} and {maximum}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {value}")
        return value

    return parse


def text(text: str) -> str:
    """An argparse type for words that go into a prompt: bytes that are not UTF-8 (kept by Python as lone surrogates) are refused.

    Such text cannot be tokenized, hashed or sent, and would fail only once the model is loaded.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = ord(text[error.start])
        byte = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"code point U+{bad:04X}"
        raise argparse.ArgumentTypeError(f"not UTF-8 text ({byte} at character {error.start})") from None
    return text


def finite(text: str) -> float:
    """An argparse type for a number that is not NaN or infinite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def api_options(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Options every command that talks to an ``openai:URL#MODEL`` endpoint shares."""
    api = parser.add_argument_group("OpenAI-compatible endpoints (--model openai:URL#MODEL)")
    api.add_argument(
        "--api-key-env", metavar="NAME", help="the environment variable holding the API key (its name, never the key)"
    )
    api.add_argument("--concurrency", type=integer(1, 1024), default=8, help="requests in flight at once (default 8)")
    return api


def fraction(text: str) -> float:
    """An argparse type for a half-width: a number strictly between 0 and 1 (0.01 is one percentage point)."""
    value = finite(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1 (0.01 = 1 pp), not {text}")
    return value
