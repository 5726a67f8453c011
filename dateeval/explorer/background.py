"""Run a sweep in a background thread so the explorer stays responsive.

The thread only reports through a :class:`Progress` snapshot and an error
message; cancelling sets an event the sweep checks between units, so what
finished is stored and a later run resumes from there.
"""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field, replace

from dateeval.engine.sweep import Executor, Keep, LocalExecutor, Progress, Sweep, SweepSpec
from dateeval.errors import DateEvalError
from dateeval.store import Store
from dateeval.widths import to_width


@dataclass
class BackgroundSweep:
    spec: SweepSpec
    store: Store
    progress: Progress | None = None
    error: str | None = None
    finished: bool = False
    cancel: threading.Event = field(default_factory=threading.Event)
    executor: Executor = field(default_factory=LocalExecutor)  # or a RayExecutor: the thread then drives a cluster
    keep: Keep | None = None  # the statistics kept at the sweep's end (the Run page passes ``dateeval.keeping.keep``)
    target_width: float | None = None  # sweep in looks until every date is within +- this (``dateeval.widths``)

    def start(self) -> BackgroundSweep:
        threading.Thread(target=self._run, daemon=True, name="dateeval-sweep").start()
        return self

    def _update(self, progress: Progress) -> None:
        self.progress = replace(progress, messages=list(progress.messages), workers=dict(progress.workers))

    def _sweep(self, spec: SweepSpec, keep: Keep | None = None) -> Progress:
        return Sweep(
            spec, self.store, on_progress=self._update, cancel=self.cancel, executor=self.executor, keep=keep
        ).run()

    def _run(self) -> None:
        try:
            if self.target_width is None:
                self._update(self._sweep(self.spec, self.keep))
            else:
                self._update(to_width(self.spec, self.store, self.target_width, self._sweep))
        except DateEvalError as error:
            self.error = str(error)
        except MemoryError:
            self.error = "out of memory: try a smaller --batch-size, fewer items or a smaller model"
        except Exception as error:  # shown in the page instead of killing the thread silently
            self.error = f"unexpected error: {type(error).__name__}: {error}"
            traceback.print_exc()
        finally:
            self.finished = True

    @property
    def running(self) -> bool:
        return not self.finished
