"""Run a sweep's units on a Ray cluster: one actor per worker loads the model once and computes many units.

The driver keeps planning, leases and every write (``dateeval.engine.sweep``);
actors only compute and send rows back as Arrow tables, so workers need no
shared filesystem. Units go out longest first, at most ``inflight`` per actor
(one computing, the next already queued), a generation dataset's units in
pools an actor generates in one call (``dateeval.engine.sweep.pool``, as the local
executor pools them). An actor that dies mid-unit (its
process killed, its node lost) is dropped and its unit is handed to another:
the driver still holds the unit's lease, so nothing is lost or written twice.

    python -m dateeval run ... --executor ray [--address auto|ray://HOST:10001] [--workers N] [--gpus-per-worker G]

Without ``--address`` a local Ray instance is started with one CPU per
worker. On a real cluster every node needs dateeval and its requirements
installed (``pip install -r requirements.txt`` from this folder).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from types import ModuleType

from dateeval.engine.plan import Description, SweepSpec, Unit
from dateeval.engine.sweep import Executor, NextUnit, Progress, UnitDone, pool, pool_label
from dateeval.engine.worker import UnitResult, Worker, pools
from dateeval.errors import DateEvalError

ROOT = Path(__file__).resolve().parent.parent.parent  # the folder that holds the dateeval package


class _Actor:
    """The worker inside a Ray actor process (wrapped by ``ray.remote`` when the executor starts)."""

    def __init__(self, spec: SweepSpec, model: str, dtype: str, run_id: str) -> None:
        self.worker = Worker(spec, model, dtype, run_id)

    def describe(self, condition_indices: list[int] | None = None) -> Description:
        return self.worker.describe(condition_indices)

    def where(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    def generating(self) -> set[str]:
        return self.worker.generating()

    def execute_units(self, units: list[Unit]) -> list[UnitResult]:
        return self.worker.execute_units(units)


@dataclass
class _Slot:
    actor: object
    name: str
    busy: int = 0


class RayExecutor(Executor):
    """Units on Ray actors; the cluster is joined (or started) once per sweep."""

    def __init__(
        self, address: str | None = None, workers: int | None = None, gpus_per_worker: float = 0.0, inflight: int = 2
    ) -> None:
        self.address, self.workers, self.gpus, self.inflight = address, workers, gpus_per_worker, inflight
        self.slots: list[_Slot] = []
        self._pools: Callable[[Unit], bool] = lambda unit: False
        self._batch_size = 1
        self._started_ray = False

    def _connect(self) -> ModuleType:  # the ray module
        try:
            import ray
        except ImportError:
            raise DateEvalError("--executor ray needs Ray: pip install 'ray>=2.40'") from None
        if not ray.is_initialized():
            env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}}
            # Without --address, a new local instance ("local"): left alone, ray.init joins any cluster it finds on this
            # machine, e.g. the one a killed driver left running, and then refuses num_cpus.
            local = {"address": "local", "num_cpus": self.workers or os.cpu_count() or 1, "include_dashboard": False}
            kwargs = {"address": self.address} if self.address else local
            try:
                ray.init(runtime_env=env, log_to_driver=False, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as error:
                raise DateEvalError(
                    f"cannot reach the Ray cluster {self.address or '(local)'}: {str(error).splitlines()[0]}"
                ) from None
            self._started_ray = True
        return ray

    def start(self, spec: SweepSpec, model: str, dtype: str, run_id: str) -> Description:
        ray = self._connect()
        count = self.workers or max(
            1, int(ray.cluster_resources().get("GPU" if self.gpus else "CPU", 1) // max(self.gpus, 1))
        )
        remote = ray.remote(num_cpus=1, num_gpus=self.gpus, max_restarts=0, max_task_retries=0)(_Actor)
        actors = [remote.remote(spec, model, dtype, run_id) for _ in range(count)]
        # Planning renders every prompt once: the actors share it, each describing a slice of the conditions
        # plus the first one, on which all must agree (same model, template and data everywhere).
        slices = [sorted({0, *range(i, len(spec.conditions), count)}) for i in range(count)]
        try:
            names = ray.get([actor.where.remote() for actor in actors])
            descriptions = ray.get([actor.describe.remote(part) for actor, part in zip(actors, slices)])
        except ray.exceptions.RayTaskError as error:
            raise _cause(error) from None
        except ray.exceptions.RayActorError as error:
            raise DateEvalError(f"a Ray worker failed while loading {model}: {str(error).splitlines()[0]}") from None
        first = descriptions[0]
        reference = [c for c in first.candidates if c.condition_index == 0]
        for name, description in zip(names, descriptions):
            same = (description.identity_key, description.hardware) == (first.identity_key, first.hardware)
            if not same or [c for c in description.candidates if c.condition_index == 0] != reference:
                raise DateEvalError(
                    f"Ray worker {name} loads {model} differently ({description.hardware}) from {names[0]} "
                    f"({first.hardware}): results would not be comparable; use one kind of node"
                )
        self.slots = [_Slot(actor, name) for actor, name in zip(actors, names)]
        self._pools, self._batch_size = partial(pools, spec, ray.get(actors[0].generating.remote())), spec.batch_size
        merged = {(c.dataset, c.condition_index): c for d in descriptions for c in d.candidates}
        return replace(first, candidates=tuple(merged[key] for key in sorted(merged, key=lambda k: (k[1], k[0]))))

    def run(self, next_unit: NextUnit, done: UnitDone, cancel: threading.Event, progress: Progress) -> None:
        """Keep every live actor fed, collect results as they finish, hand a dead actor's units to another.

        A generation dataset's units go out in pools (``dateeval.engine.sweep.pool``)
        that an actor generates in one call, as the local executor does.
        """
        ray = self._connect()
        pending: dict[object, tuple[_Slot, list[Unit]]] = {}
        retry: list[list[Unit]] = []
        following: Unit | None = None  # taken by the last pool but not in it: sent next
        exhausted = False
        while not cancel.is_set():  # cancelled: the driver stops the actors and releases the leases
            for slot in self.slots:
                while slot.busy < self.inflight:
                    units = retry.pop(0) if retry else None
                    if units is None:
                        first, following = following or (None if exhausted else next_unit()), None
                        if first is None:
                            exhausted = True
                            break
                        units, following = pool(first, next_unit, self._pools, self._batch_size)
                    pending[slot.actor.execute_units.remote(units)] = (slot, units)
                    slot.busy += 1
            progress.workers = {slot.name: pool_label(units) for slot, units in pending.values()}
            if not pending:
                if retry:
                    raise DateEvalError(
                        f"every Ray worker died; {sum(map(len, retry))} unit(s) not computed (their leases are released)"
                    )
                return
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for reference in ready:
                slot, units = pending.pop(reference)
                slot.busy -= 1
                try:
                    results = ray.get(reference)
                except ray.exceptions.RayActorError:
                    if slot in self.slots:
                        self.slots.remove(slot)  # its process or node is gone: its units go to another actor
                    retry.append(units)
                    labels = ", ".join(unit.label for unit in units)
                    progress.messages.append(
                        f"ray: worker {slot.name} died while computing {labels}; the unit runs again elsewhere"
                    )
                    continue
                except ray.exceptions.RayTaskError as error:
                    raise _cause(error) from None
                for unit, result in zip(units, results):
                    done(unit, result)

    def stop(self) -> None:
        if self.slots:
            ray = self._connect()
            for slot in self.slots:
                ray.kill(slot.actor)
        self.slots = []

    def close(self) -> None:
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False


def _cause(error: Exception) -> Exception:
    """A worker's own error (a DateEvalError says what is wrong in one line) rather than Ray's wrapper."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, DateEvalError):
        return cause
    return DateEvalError(f"a Ray worker failed: {str(error).strip().splitlines()[-1]}")
