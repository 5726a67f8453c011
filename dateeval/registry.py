"""A named registry (as lm-eval's ``Registry``): what a name means, filled by explicit calls, never by importing a module.

The task layer keeps one for benchmarks (:data:`dateeval.tasks.registry.REGISTRY`): the built-in ones are registered
by :mod:`dateeval.tasks` from each task module's declared list, and a user's file or lm-eval task when it is first
named. Results are stored by name, so a second, different entry under a taken name is refused rather than replacing
the first; the same entry again (another process's registration of one file) is allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Generic, TypeVar

from dateeval.errors import DateEvalError

T = TypeVar("T")


class Registry(MutableMapping[str, T], Generic[T]):
    """Entries by name, in registration order. ``same`` says whether a second entry under a name is the first one again
    (allowed) or another (refused with ``taken``'s message); a mapping, so tests may snapshot and restore it."""

    def __init__(
        self,
        what: str,
        same: Callable[[T, T], bool] = lambda known, new: known == new,
        taken: Callable[[str, T, T], str] | None = None,
    ) -> None:
        self.what, self._same, self._taken = what, same, taken
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name``; one clear error for a different entry under a taken name."""
        known = self._entries.get(name)
        if known is not None and not self._same(known, entry):
            raise DateEvalError(
                self._taken(name, known, entry) if self._taken else f"{self.what} {name!r} is already registered"
            )
        self._entries[name] = entry
        return entry

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __setitem__(self, name: str, entry: T) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self._entries)})"
