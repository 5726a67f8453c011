"""Sweeps: plan the missing work against the store, execute it anywhere, commit each unit from one place.

A work unit is one (model, precision, dataset, condition) with the items the
store does not hold yet. The driver (:class:`Sweep`) plans units from what a
loaded model renders (``dateeval.engine.worker``) and the rows already stored, takes
a lease on each unit before it runs (``dateeval.store.leases``: several drivers can
share one store), hands units to an executor, and has each returned unit written
atomically (``dateeval.engine.commits``). Executors run units on workers: :class:`LocalExecutor` in this
process (the CLI default; the app runs it in a background thread), and
``dateeval.engine.ray_executor.RayExecutor`` on a Ray cluster. A sweep killed at any
point resumes where it stopped; a run never reports success while a unit it
planned is missing: it waits for units other drivers hold, or (``wait=False``)
fails naming them.
"""

from __future__ import annotations

import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dateeval.backends import locate
from dateeval.engine import drawn
from dateeval.engine.commits import Commits
from dateeval.engine.missing import missing_units
from dateeval.engine.plan import Description, Progress, SweepSpec, Unit
from dateeval.engine.worker import UnitResult, Worker
from dateeval.errors import DateEvalError
from dateeval.store import Store, StoreProblems, runs, upkeep
from dateeval.store.leases import DEFAULT_TTL_S, Leases, holder

__all__ = ["Executor", "LocalExecutor", "Progress", "Sweep", "SweepCancelled", "SweepSpec"]


class SweepCancelled(DateEvalError):
    """A sweep stopped by a cancel request from elsewhere (another tab, another process) before it finished."""


ProgressCallback = Callable[[Progress], None]
NextUnit = Callable[[], Unit | None]
POOL_BATCHES = 8  # a pool of units generating together holds at least this many batches' prompts (``pool``)
UnitDone = Callable[[Unit, UnitResult], None]


class Executor(ABC):
    """Runs units on workers that hold the model; the driver plans, leases and writes."""

    @abstractmethod
    def start(self, spec: SweepSpec, model: str, dtype: str, run_id: str) -> Description:
        """Start the workers for one model at one precision (each loads it once) and describe the candidate units."""

    @abstractmethod
    def run(self, next_unit: NextUnit, done: UnitDone, cancel: threading.Event, progress: Progress) -> None:
        """Execute units from ``next_unit`` until it returns None (or ``cancel``), calling ``done`` with each result."""

    @abstractmethod
    def stop(self) -> None:
        """Stop this model's workers."""

    def close(self) -> None:
        """Release the executor itself (a cluster connection) at the end of the sweep."""


class LocalExecutor(Executor):
    """One worker in this process: today's loop, and the app's background thread."""

    def __init__(self) -> None:
        self.worker: Worker | None = None

    def start(self, spec: SweepSpec, model: str, dtype: str, run_id: str) -> Description:
        self.worker = Worker(spec, model, dtype, run_id)
        return self.worker.describe()

    def run(self, next_unit: NextUnit, done: UnitDone, cancel: threading.Event, progress: Progress) -> None:
        """Units one at a time, but a generation dataset's units in pools (:func:`pool`) that generate in one call."""
        following: Unit | None = None
        while (unit := following or (None if cancel.is_set() else next_unit())) is not None:
            units, following = pool(unit, next_unit, self.worker.pools, self.worker.spec.batch_size)
            progress.workers = {"local": pool_label(units)}
            results = self.worker.execute_units(units)
            for computed, result in zip(units, results):
                done(computed, result)
        progress.workers = {}

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def pool(
    first: Unit, next_unit: NextUnit, pools: Callable[[Unit], bool], batch_size: int
) -> tuple[list[Unit], Unit | None]:
    """``first`` and the units after it of the same dataset that generate with it, up to ``POOL_BATCHES`` x ``batch_size``
    prompts; and the unit taken that does not join (leased already: computed next).

    A pool's last replies are the only ones that decode with idle slots,
    so its idle share is at most about one batch in ``POOL_BATCHES``; an
    interrupted sweep loses at most one pool's work. The planner queues a
    dataset's units together, so pools fill.
    """
    units = [first]
    while pools(first) and sum(len(unit.item_ids) for unit in units) < POOL_BATCHES * batch_size:
        unit = next_unit()
        if unit is None:
            break
        if unit.dataset != first.dataset or not pools(unit):
            return units, unit
        units.append(unit)
    return units, None


def pool_label(units: list[Unit]) -> str:
    """What a worker computes, for the progress line: a unit's label, or a pool's dataset and size."""
    return units[0].label if len(units) == 1 else f"{units[0].dataset} / {len(units)} conditions together"


# What a sweep's end runs to keep the explorer's statistics with the store (``dateeval.keeping.keep``: the caller
# passes it, so the engine never imports the statistics); its warnings join the sweep's messages.
Keep = Callable[[Store], list[str]]


class Sweep:
    """Runs a :class:`SweepSpec` against a store, computing only what is missing; with ``keep``, keeps the explorer's
    statistics for the store it leaves."""

    def __init__(
        self,
        spec: SweepSpec,
        store: Store,
        *,
        on_progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        executor: Executor | None = None,
        wait: bool = True,
        lease_ttl_s: float = DEFAULT_TTL_S,
        poll_s: float = 2.0,
        writers: int = 4,
        keep: Keep | None = None,
    ) -> None:
        self.spec, self.store, self.keep = spec, store, keep
        self.on_progress = on_progress or (lambda progress: None)
        self._callers_cancel = cancel is not None
        self.cancel = cancel or threading.Event()
        self.executor = executor or LocalExecutor()
        self.wait, self.poll_s = wait, poll_s
        self.leases = Leases(ttl_s=lease_ttl_s, wait=wait)
        self.run_id = uuid.uuid4().hex[:12]
        self._lock = threading.Lock()  # one unit leased at a time, whichever worker thread asks
        self.commits = Commits(store, self.leases, self._report, writers)

    def run(self) -> Progress:
        """Execute every missing unit; returns the final progress (what ran, what was already there).

        The sweep is recorded in the store while it runs and when it ends (``dateeval.store.runs``), so every tab and process
        reading the store lists it, and any of them can cancel it. A caller that passed its own ``cancel`` event learns
        of a cancellation from that event; one that did not (the CLI) gets :class:`SweepCancelled`, so a sweep
        cancelled elsewhere never reports success.
        """
        if self.spec.batch_size < 1:
            raise DateEvalError(f"batch size must be at least 1, not {self.spec.batch_size}")
        if self.spec.budget is not None:
            drawn.check_affordable(self.spec)
        self.store.ensure_writable()
        # each dataset resolved here, once, for every worker (a spec from ``build_spec`` is already)
        self.spec = self.spec.resolved()
        for model in self.spec.models:
            locate(model, self.spec.backend)  # an unknown model or backend fails here, before anything loads
        progress = Progress(
            units_total=len(self.spec.models) * len(self.spec.dtypes) * len(self.spec.tasks) * len(self.spec.conditions)
        )
        with runs.Recorder(self.store.root, self.run_id, self.spec, progress, self.cancel) as recorder:
            self._execute(progress)
        if recorder.requested and not self._callers_cancel and progress.units_done < progress.units_total:
            raise SweepCancelled(
                f"cancelled on request (the Run page) after {progress.units_done} of {progress.units_total} units; "
                "finished units are saved: run the same command again to resume"
            )
        return progress

    def _execute(self, progress: Progress) -> None:
        """Every model at every precision, then the explorer's statistics (skipped when cancelled)."""
        progress.messages += StoreProblems(removed=upkeep.remove_leftovers(self.store.root)).messages()
        # leases left by killed drivers
        progress.messages += [f"lease: {note}" for note in self.leases.remove_expired(self.store.root)]
        self._started = time.perf_counter()
        try:
            for model in self.spec.models:
                for dtype in self.spec.dtypes:
                    if self.cancel.is_set():
                        return
                    description = self.executor.start(self.spec, model, dtype, self.run_id)
                    try:
                        if self.spec.budget is None:
                            self._run_model(description, progress)
                        else:
                            self._run_sparse(description, progress)
                    finally:
                        self.executor.stop()
        finally:
            self.commits.close()
            self.leases.close()
            self.executor.close()
            # malformed leases taken over
            progress.messages += [f"lease: {note}" for note in dict.fromkeys(self.leases.notes)]
        if self.keep is not None and progress.units_done > progress.units_skipped and not self.cancel.is_set():
            self._keep_statistics(progress, self.keep)

    def _keep_statistics(self, progress: Progress, keep: Keep) -> None:
        """Keep the explorer's costly statistics for the store as this sweep left it, so that the explorer's first
        render after a sweep reads them instead of computing them while a reader waits."""
        progress.current = "statistics for the explorer"
        self._report(progress)
        progress.messages += keep(self.store)
        self._report(progress)

    def _run_model(self, description: Description, progress: Progress) -> None:
        """Plan, execute, re-plan until nothing this model needs is missing (or cancelled)."""
        before, first, stalled = progress.units_done, True, False
        while not self.cancel.is_set():
            units, damaged = missing_units(self.store, self.spec, description, self.run_id)
            progress.messages += damaged
            progress.units_done = before + len(description.candidates) - len(units)  # done here, earlier or by others
            if first:
                progress.units_skipped += len(description.candidates) - len(units)
                first = False
            if not units:
                progress.held_elsewhere = []
                self._report(progress)
                return
            if stalled:
                raise DateEvalError(
                    f"{len(units)} unit(s) were computed but their rows are still missing from the store: {units[0].label}"
                )
            queue = sorted(units, key=lambda unit: -unit.cost)
            held: list[Unit] = []
            try:
                self.executor.run(
                    lambda: self._next(queue, held),
                    lambda unit, result: self.commits.submit(unit, result, progress),
                    self.cancel,
                    progress,
                )
            finally:
                self.commits.flush()
            if self.cancel.is_set() or not held:
                stalled = not held and not self.cancel.is_set()
                continue
            progress.held_elsewhere = [f"{unit.label} ({_owner(self.store, unit)})" for unit in held]
            if not self.wait:
                raise DateEvalError(
                    f"{len(held)} unit(s) are being computed by other workers: {'; '.join(progress.held_elsewhere[:5])} "
                    "(run again later, or without --no-wait to wait for them)"
                )
            progress.current = f"waiting for {len(held)} unit(s) held by other workers"
            self._report(progress)
            time.sleep(self.poll_s)

    def _run_sparse(self, description: Description, progress: Progress) -> None:
        """A budgeted sweep (``dateeval.sparse``): the dense conditions (baselines, other factors, the pilot dates) first,
        then, from what the pilot shows of each question, the drawn cells of every other date."""
        dense, dated, pilots = drawn.split(description, self.spec)
        drawn.check_records(self.store, description, self.spec)
        self._run_model(replace(description, candidates=dense), progress)
        if self.cancel.is_set():
            return
        candidates = []
        for dataset in dict.fromkeys(candidate.dataset for candidate in dated):
            of_dataset = [candidate for candidate in dated if candidate.dataset == dataset]
            own = [candidate for candidate in dense if candidate.dataset == dataset]
            pilot = [candidate for candidate in own if candidate in pilots]
            baseline = drawn.baseline_of(self.store, description, self.spec, own)
            w = drawn.pilot_propensity(self.store, description, pilot, list(of_dataset[0].item_ids), baseline)
            chosen, sampled, note, design = drawn.draw(self.spec, w, pilot, of_dataset, len(own), baseline)
            record = drawn.keep_record(self.store, description, self.spec, pilot, of_dataset, len(own), design)
            progress.records.append(str(record))
            candidates += chosen
            self.commits.sampled.update(sampled)
            progress.notes.append(note)
        self._run_model(replace(description, candidates=tuple(candidates)), progress)

    def _next(self, queue: list[Unit], held: list[Unit]) -> Unit | None:
        """The longest unit not yet in the store that this driver could lease; units others hold are set aside."""
        with self._lock:
            while queue and not self.cancel.is_set():
                unit = queue.pop(0)
                path = self.store.root / unit.path
                if path.exists():
                    continue  # finished meanwhile by another driver
                if self._acquire(path):
                    return unit
                held.append(unit)
            return None

    def _acquire(self, path: Path) -> bool:
        """Lease a unit; a lease that cannot be written (a full disk) ends the sweep in one line."""
        try:
            return self.leases.acquire(path)
        except OSError as error:
            raise DateEvalError(f"cannot write to the store {self.store.root}: {error.strerror or error}") from None

    def _report(self, progress: Progress) -> None:
        progress.seconds = time.perf_counter() - self._started
        self.on_progress(progress)


def _owner(store: Store, unit: Unit) -> str:
    current = holder(store.root / unit.path)
    return current.owner.describe() if current is not None else "released"
