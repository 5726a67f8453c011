"""The one exception type that reaches users as a single clear line.

Anything raised as :class:`DateEvalError` is a problem with the user's input or
environment (bad dates, missing data, unreachable Hub...). The CLI prints its
message on stderr and exits non-zero; the app shows it in an error box. Any
other exception is a bug and is allowed to surface as one.
"""

from __future__ import annotations


class DateEvalError(Exception):
    """A user-facing error whose message says what went wrong and what to do."""
