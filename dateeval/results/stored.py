"""Results of the explorer's costly statistics, kept with the store so that a new process does not compute them again.

At paper scale one entry's permutation null band or bootstrap intervals take
seconds, and the Overview's first render and the Factors page need them for
every entry. They depend only on the units they are computed from (whose
size and modification time fix their content, as for the sidecars of
``dateeval.results.unit_sums``), on their arguments and on this code, so they are
kept, as rows, in::

    STORE/.aggregates/derived/<name>/<label digest>.<key>.parquet

where ``key`` digests the units' paths, sizes and mtimes, the arguments and
:data:`VERSION`. A new or replaced unit changes the key, so stale results
are never read, only replaced (the older file of the same label is removed
when the new one is written). They are written through ``Store.write``
(atomic, checksummed) and verified when read: a damaged one is computed
again. A read-only store keeps them in this process only.

Bump :data:`VERSION` whenever a change to the statistics changes their numbers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import xxhash

from dateeval.results import unit_sums
from dateeval.errors import DateEvalError
from dateeval.store import Store

VERSION = 10
FOLDER = "derived"
# Results read or computed in this process, by path (a path's name fixes its content), the most recent HELD.
_KEPT: OrderedDict[Path, list[dict]] = OrderedDict()
_LOCK = threading.Lock()
HELD = 1024  # a few per entry and dataset: a paper-scale store's all, without growing with every store state a long-running app sees


def rows(store: Store, name: str, label: str, units: Sequence[Path], arguments: tuple, compute: Callable[[], list[dict]]) -> list[dict]:
    """``compute()``'s rows for ``units`` and ``arguments``: kept from an earlier call or process where possible, else computed and kept.

    ``label`` names what the rows are about (an entry and dataset) so that a newer result replaces the older one's file.
    """
    try:
        path = _path(store, name, label, units, arguments)
    except FileNotFoundError:  # a unit compacted away since the caller listed it: nothing to key the rows on
        return compute()
    with _LOCK:  # the explorer's sessions are threads
        if path in _KEPT:
            _KEPT.move_to_end(path)
            return _KEPT[path]
    table = store.read_table(path) if path.exists() else None
    found = table.to_pylist() if table is not None else _computed(store, path, compute())
    with _LOCK:
        _KEPT[path] = found
        while len(_KEPT) > HELD:
            _KEPT.popitem(last=False)
    return found


def _path(store: Store, name: str, label: str, units: Sequence[Path], arguments: tuple) -> Path:
    """Where the rows of ``name`` for these units (as they are now) and arguments are kept."""
    stats = [(str(unit.relative_to(store.root)), unit.stat()) for unit in sorted(set(units))]
    material = repr((VERSION, unit_sums.FORMAT, name, arguments, [(path, s.st_size, s.st_mtime_ns) for path, s in stats]))
    return store.root / unit_sums.FOLDER / FOLDER / name / f"{xxhash.xxh64_hexdigest(label.encode())}.{xxhash.xxh3_128_hexdigest(material.encode())}.parquet"


def _computed(store: Store, path: Path, found: list[dict]) -> list[dict]:
    """Keep freshly computed rows on disk (where the store can be written), replacing the same label's older ones."""
    label = path.name.split(".")[0]
    try:
        for older in path.parent.glob(f"{label}.*.parquet") if path.parent.is_dir() else []:
            older.unlink(missing_ok=True)
            with _LOCK:
                _KEPT.pop(older, None)
        store.write(path, pa.Table.from_pylist(found))
    except (OSError, DateEvalError):
        pass  # a read-only store: the rows live in this process only (``_KEPT``)
    return found
