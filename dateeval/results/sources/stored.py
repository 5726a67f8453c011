"""Results of the explorer's costly statistics, kept with the store so that a new process does not compute them again.

At paper scale one entry's permutation null band or bootstrap intervals take
seconds, and the Overview's first render and the Factors page need them for
every entry. They depend only on the units they are computed from (whose
size and modification time fix their content, as for the sidecars of
``dateeval.results.sources.unit_sums``), on their arguments and on this code, so they are
kept, as rows, in::

    STORE/.aggregates/derived/<name>/<label digest>.<key>.parquet

where ``key`` digests the units' paths, sizes and mtimes, the arguments and
:data:`VERSION` (the store names the file: ``dateeval.store.tables.kept_path``). A new or replaced unit changes the key, so stale results
are never read. They are verified when read: a damaged one is computed
again. This module only reads: what is not kept is computed and held in
this process, and an explicit keep (``dateeval.keeping.keep``: a sweep's or
``compact``'s end, ``./run.sh app`` for the demo) collects what it computes
(:func:`collected`) and writes it through ``Store.write`` (atomic,
checksummed), replacing the older file of the same label. A read-only store
opens with the same numbers and nothing in its folder changes.

Bump :data:`VERSION` whenever a change to the statistics changes their numbers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from dateeval.store import Store, tables

VERSION = 17  # 17: sparse entries: a date pilot, the baseline as the prior, the ratio-scaled pooled variance
# Results read or computed in this process, by path (a path's name fixes its content), the most recent HELD.
_KEPT: OrderedDict[Path, list[dict]] = OrderedDict()
_LOCK = threading.Lock()
HELD = 1024  # a few per entry and dataset: a paper-scale store's all, without growing with every store state a long-running app sees
# The open collections of :func:`collected`: each gets every (path, rows) computed, not read, while it is open.
_COLLECTING: list[list[tuple[Path, list[dict]]]] = []


def rows(
    store: Store, name: str, label: str, units: Sequence[Path], arguments: tuple, compute: Callable[[], list[dict]]
) -> list[dict]:
    """``compute()``'s rows for ``units`` and ``arguments``: kept from an earlier call or process where possible, else
    computed and held in this process (and collected for an open keep, :func:`collected`; nothing is written here).

    ``label`` names what the rows are about (an entry and dataset) so that a newer result replaces the older one's file.
    """
    try:
        path = tables.kept_path(store, name, label, units, VERSION, arguments)
    except FileNotFoundError:  # a unit compacted away since the caller listed it: nothing to key the rows on
        return compute()
    with _LOCK:  # the explorer's sessions are threads
        if path in _KEPT:
            _KEPT.move_to_end(path)
            return _KEPT[path]
    kept = tables.kept_rows(store, path)
    found = kept if kept is not None else compute()
    with _LOCK:
        for collection in _COLLECTING if kept is None else []:
            collection.append((path, found))
        _KEPT[path] = found
        while len(_KEPT) > HELD:
            _KEPT.popitem(last=False)
    return found


def held(store: Store) -> list[tuple[Path, list[dict]]]:
    """The rows this process computed for ``store`` and holds, that are not kept on disk (a page computed them): an
    explicit keep writes them too, before what it computes itself (a newer state's rows then replace these)."""
    with _LOCK:
        found = [(path, found) for path, found in _KEPT.items() if path.is_relative_to(store.root)]
    return [(path, found) for path, found in found if not path.exists()]


@contextmanager
def collected() -> Iterator[list[tuple[Path, list[dict]]]]:
    """The rows :func:`rows` computes (rather than reads) while the block runs, each with the path it is kept under:
    what an explicit keep writes. Rows of other stores computed meanwhile (another thread) are collected too; the
    keeper writes only its own store's."""
    collection: list[tuple[Path, list[dict]]] = []
    with _LOCK:
        _COLLECTING.append(collection)
    try:
        yield collection
    finally:
        with _LOCK:
            _COLLECTING.remove(collection)
