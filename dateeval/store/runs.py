"""The store's record of its sweeps: what ran, when, for how long, how it ended, and cancellation from anywhere.

A sweep's state used to live in the browser session that started it, so
another tab (or a reload) saw nothing, and a cancelled sweep looked like a
finished one. Each sweep now keeps one small JSON file in the store,
``STORE/.runs/<run id>.json``, rewritten atomically (temporary file, rename)
by a heartbeat thread while it runs and once more when it ends. Anyone
reading the store (every tab, the CLI, another host on a shared folder)
lists the same sweeps. Cancelling is a request file beside the record
(``<run id>.cancel``) that the heartbeat polls, so any tab, or any process,
can cancel a sweep it did not start.

A sweep whose process died leaves a record that says "running": it is shown
as ``interrupted`` when its process is gone from this host, or when its
heartbeat is older than :data:`STALE_AFTER_S` (another host).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import Protocol

from dateeval import atomic, leftovers
from dateeval.errors import DateEvalError

RUNS_DIR = ".runs"
HEARTBEAT_S = 1.0
# Heartbeats come every second: a record silent for this long belongs to a process that is gone or hung.
STALE_AFTER_S = 30.0
STATUSES = ("running", "succeeded", "cancelled", "failed", "interrupted")


class RecordedSpec(Protocol):
    """What the record needs of a sweep's spec (``plan.SweepSpec``; the store does not import the engine)."""

    def describe(self) -> str: ...
    def key(self) -> str: ...


class RecordedProgress(Protocol):
    """What the record copies from a sweep's progress (``plan.Progress``)."""

    units_total: int
    units_done: int
    current: str


@dataclass
class RunRecord:
    """One sweep as its record file holds it."""

    id: str
    spec: str  # one line a person reads: models, datasets, dates, items
    spec_key: str  # the same sweep run again (a resume) has the same key
    host: str
    pid: int
    started: float  # Unix time
    heartbeat: float
    status: str = "running"
    ended: float | None = None
    units_done: int = 0
    units_total: int = 0
    current: str = ""
    error: str | None = None
    cancel_requested: bool = False

    @property
    def duration_s(self) -> float:
        """Seconds from start to end; to now while it runs, to its last heartbeat when it was interrupted."""
        end = self.ended if self.ended is not None else (time.time() if self.status == "running" else self.heartbeat)
        return max(0.0, end - self.started)

    @property
    def incomplete(self) -> bool:
        """Whether this run left (or is still leaving) planned units out of the store. A sweep cancelled before any of
        its units was stored left nothing partial: every figure is as it was before it started."""
        if self.status == "cancelled" and self.units_done == 0:
            return False
        return self.status != "succeeded" and self.units_total > 0

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in json.loads(text).items() if key in known})


class RunLog:
    """The ``.runs`` folder of one store: list records, write them atomically, ask a sweep to stop."""

    def __init__(self, store_root: str | Path) -> None:
        self.folder = Path(store_root) / RUNS_DIR

    def runs(self) -> list[RunRecord]:
        """Every recorded sweep, newest first, a dead one's "running" shown as ``interrupted``."""
        records = []
        for path in self.folder.glob("*.json") if self.folder.is_dir() else []:
            try:
                record = RunRecord.from_json(path.read_text())
            except (OSError, ValueError, TypeError):
                continue  # removed meanwhile, or not a record: never stops the page that lists them
            if record.status == "running":
                record.cancel_requested = self.cancel_requested(record.id)
                if _gone(record):
                    record.status = "interrupted"
            records.append(record)
        return sorted(records, key=lambda record: -record.started)

    def write(self, record: RunRecord) -> None:
        """Replace a record in one step, so a reader sees the old or the new file, never half of one."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic.replacing(self._path(record.id, "json")) as staging:
            staging.write_text(json.dumps(asdict(record)))

    def request_cancel(self, run_id: str) -> None:
        """Ask a sweep to stop after the unit it is computing (it polls for this file, wherever it runs)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._path(run_id, "cancel").touch()

    def cancel_requested(self, run_id: str) -> bool:
        return self._path(run_id, "cancel").exists()

    def clear_cancel(self, run_id: str) -> None:
        self._path(run_id, "cancel").unlink(missing_ok=True)

    def _path(self, run_id: str, suffix: str) -> Path:
        if not run_id.isalnum():
            raise ValueError(f"not a run id: {run_id!r}")
        return self.folder / f"{run_id}.{suffix}"


def _gone(record: RunRecord) -> bool:
    """Whether a "running" record's process can no longer finish it."""
    if record.host == socket.gethostname() and not leftovers.process_alive(record.pid):
        return True
    return time.time() - record.heartbeat > STALE_AFTER_S


class Recorder:
    """Keeps one running sweep's record: a heartbeat thread writes its progress and turns a cancel request into
    ``cancel.set()``; leaving the ``with`` block writes how it ended.

    The sweep ends as ``cancelled`` only when it was cancelled before every planned unit was in the store (a cancel
    that arrives after the last unit changes nothing), ``failed`` on an error, ``interrupted`` on Ctrl-C.
    """

    def __init__(
        self,
        store_root: str | Path,
        run_id: str,
        spec: RecordedSpec,
        progress: RecordedProgress,
        cancel: threading.Event,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.log, self.progress, self.cancel, self.heartbeat_s = (
            RunLog(store_root),
            progress,
            cancel,
            heartbeat_s,
        )
        now = time.time()
        self.record = RunRecord(
            id=run_id,
            spec=spec.describe(),
            spec_key=spec.key(),
            host=socket.gethostname(),
            pid=os.getpid(),
            started=now,
            heartbeat=now,
            units_total=progress.units_total,
        )
        self.requested = False  # whether the cancel came from a request file (another tab or process)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=f"dateeval-run-{run_id}")

    def __enter__(self) -> Recorder:  # not typing.Self: Python 3.10 has none
        self._poll()  # a request written before the sweep began stops it before any model loads
        try:
            self._write()
        except OSError as error:
            raise DateEvalError(f"cannot record the sweep in {self.log.folder}: {error.strerror or error}") from None
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._poll()
        self.record.status = _ending(kind, self.cancel.is_set(), self.progress)
        self.record.error = _message(error) if self.record.status == "failed" else None
        self.record.ended = time.time()
        self._write()
        self.log.clear_cancel(self.record.id)

    def _beat(self) -> None:
        while not self._stop.is_set():
            self._poll()
            try:
                self._write()
            except OSError:
                pass  # a missed heartbeat (a full disk) must not stop the sweep; the next one tries again
            self._stop.wait(self.heartbeat_s)

    def _poll(self) -> None:
        """Honour a cancel request, and copy the sweep's progress into the record."""
        if not self.cancel.is_set() and self.log.cancel_requested(self.record.id):
            self.requested = True
            self.cancel.set()
        self.record.cancel_requested = self.cancel.is_set()
        self.record.units_done, self.record.units_total = self.progress.units_done, self.progress.units_total
        self.record.current = self.progress.current

    def _write(self) -> None:
        self.record.heartbeat = time.time()
        self.log.write(self.record)


def _ending(kind: type[BaseException] | None, cancelled: bool, progress: RecordedProgress) -> str:
    """An error is a failure; Ctrl-C (or another exit that is not an error) an interruption."""
    if kind is not None:
        return "failed" if issubclass(kind, Exception) else "interrupted"
    return "cancelled" if cancelled and progress.units_done < progress.units_total else "succeeded"


def _message(error: BaseException | None) -> str:
    return str(error) if isinstance(error, DateEvalError) else f"{type(error).__name__}: {error}"


def partial_note(store_root: str | Path) -> str | None:
    """A warning for pages that show this store when a sweep's planned units are missing from it (a sweep that is still
    running, was cancelled, failed or died, and has not been completed by a later run of the same sweep); else None."""
    latest: dict[str, RunRecord] = {}
    for record in RunLog(store_root).runs():  # newest first: the latest run of each sweep decides
        latest.setdefault(record.spec_key, record)
    incomplete = [record for record in latest.values() if record.incomplete]
    if not incomplete:
        return None
    listed = "; ".join(
        f"{record.spec} ({_state(record)}, {record.units_done} of {record.units_total} units)"
        for record in incomplete[:3]
    )
    more = f" and {len(incomplete) - 3} more" if len(incomplete) > 3 else ""
    return (
        f"Partial results: {len(incomplete)} sweep(s) on this store are incomplete: {listed}{more}. The figures leave out their "
        "missing units; running a stopped sweep again (Run page) completes it."
    )


def _state(record: RunRecord) -> str:
    return "still running" if record.status == "running" else record.status
