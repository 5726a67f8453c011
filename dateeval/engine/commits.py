"""Where computed units reach the store: :class:`Commits` writes each unit a worker returns, from a few threads, while
the workers go on computing, and gives its lease back. The driver (``dateeval.engine.sweep.Sweep``) plans and leases;
this is the only place a sweep's rows are written."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from dateeval.engine import drawn
from dateeval.engine.plan import Progress, Unit
from dateeval.engine.worker import UnitResult
from dateeval.store import Store, sidecars
from dateeval.store.leases import Leases


class Commits:
    """A sweep's pending unit writes. Each file is independent, so a few threads write them: one driver's writes keep up
    with more workers. The first write that fails ends the sweep at the next :meth:`submit` or :meth:`flush`."""

    def __init__(self, store: Store, leases: Leases, report: Callable[[Progress], None], writers: int = 4) -> None:
        self.store, self.leases, self.report = store, leases, report
        self.sampled: drawn.Sampled = {}  # each drawn cell's design (``drawn.with_design``), added as cells are drawn
        self._pool = ThreadPoolExecutor(max_workers=writers, thread_name_prefix="dateeval-write")
        self._pending: list[Future] = []
        self._lock = threading.Lock()

    def submit(self, unit: Unit, result: UnitResult, progress: Progress) -> None:
        """Hand a computed unit to the writers: workers go on computing while it is stored (a failed write stops them)."""
        failed = next((write.exception() for write in self._pending if write.done() and write.exception()), None)
        if failed is not None:
            raise failed
        self._pending.append(self._pool.submit(self._commit, unit, result, progress))

    def flush(self) -> None:
        """Wait for every pending write; the first that failed ends the sweep (its lease is already released)."""
        pending, self._pending = self._pending, []
        for write in pending:
            write.result()

    def close(self) -> None:
        """Wait for the writers and stop them."""
        self._pool.shutdown(wait=True)

    def _commit(self, unit: Unit, result: UnitResult, progress: Progress) -> None:
        """Write one unit, then give its lease back."""
        path = self.store.root / unit.path
        try:
            sidecars.write_unit(self.store, path, drawn.with_design(result.rows, self.sampled))
        finally:
            self.leases.release(path)
        with self._lock:
            progress.units_done += 1
            progress.items_scored += result.items
            progress.tokens_scored += result.tokens_scored
            progress.tokens_generated += result.tokens_generated
            progress.current = unit.label
            self.report(progress)
