"""The explicit keep: what a store keeps beside its units so that readers find it instead of computing it.

The results layer only reads (``dateeval.results``): where a store lacks a unit's sidecars or a costly statistic,
readers compute it in memory and write nothing, so a read-only store opens with the same numbers. Writing is
here and in the store's commit (``dateeval.store.sidecars.write_unit``): :func:`keep` writes every missing sidecar,
then the statistics the explorer's pages open on (``Results.compute_kept``), collected as they are computed
(``stored.collected``), and those a page of this process computed (``stored.held``). A sweep's end, ``compact`` and ``./run.sh app`` (for the demo) call it, where the cost is
expected rather than where a reader waits.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from dateeval.errors import DateEvalError
from dateeval.results import Results
from dateeval.results.sources import stored
from dateeval.store import Store, sidecars


def keep(store: Store) -> list[str]:
    """Write the store's missing sidecars and its statistics for the store as it is now (after a sweep or a compaction
    changed it); returns warnings, never raises for what a reader would also meet (a damaged unit is reported; a
    read-only store keeps nothing, and says so)."""
    try:
        problems = sidecars.keep_missing(store)
        with stored.collected() as fresh:
            view, more = Results.open(store)
            if not view.metrics.empty:
                view.compute_kept()
        computed = [
            (path, rows) for path, rows in fresh if path.is_relative_to(store.root)
        ]  # not another store's (a page's thread)
        for path, rows in dict(stored.held(store) + computed).items():
            _write(store, path, rows)
    except (DateEvalError, OSError) as error:
        return [f"the store's statistics were not kept ({error}); the explorer computes them when first shown"]
    return list(dict.fromkeys(problems.messages() + more.messages()))


def _write(store: Store, path: Path, rows: list[dict]) -> None:
    """Keep computed rows under ``path``, replacing the same label's older ones (a result of an earlier store state)."""
    label = path.name.split(".")[0]
    for older in path.parent.glob(f"{label}.*.parquet") if path.parent.is_dir() else []:
        if older != path:
            older.unlink(missing_ok=True)
    store.write(path, pa.Table.from_pylist(rows))
