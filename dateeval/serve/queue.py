"""Requests that arrive one at a time (``dateeval serve``), batched by the model's scheduler.

One thread runs the model: requests that queue while a batch computes
share the next batch's forward passes. A batch is the oldest queued job and
every queued job that can join it (same kind and key, at most
:data:`MAX_BATCH` rows, rows x longest within the kind's token budget, which
bounds its memory); the scheduler computes it, so a batch of one is one
request at a time. A batch also waits, at most :data:`REJOIN_S`, for the
callers it answered last to send their next requests: callers that each keep
one request in flight otherwise split into groups that never meet again,
since the ones answered first come back while the rest compute (figures:
``docs/serving.md``).

Cancellation: a job whose caller left (``gone()``) is never started, a
batch whose callers all left stops at the next of the model's checkpoints,
and a generated row stops at the next decoding step (its batch-mates'
replies go on exactly as they would have). The queue knows nothing of HTTP:
the server maps :class:`Busy` and :class:`Cancelled` to its answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from dateeval.backends.base import Generation, GenerationSettings
    from dateeval.backends.transformers.top import PromptScores, TopTokens

MAX_BATCH = 32  # requests one batch may hold
BATCH_TOKENS = 8192  # rows x longest prompt (and reply) one batch may hold: the memory of one full SmolLM2 context
# the most prompt tokens an echo scores: each holds a full-vocabulary row of logits (2,000 tokens: 1.4 GB)
MAX_ECHO_POSITIONS = 2048
POLL_S = 0.2  # how often a waiting request looks whether its caller is still there
# a batch starts once no request arrived for this long (or it is full), and none is expected back (REJOIN_S)
GATHER_S = 0.01
REJOIN_S = 0.25  # how long after its answer a caller counts as sending its next request: a batch waits that long at most for it


class Cancelled(Exception):
    """The caller left: its request is abandoned (nothing is computed further, nothing is answered)."""


class Busy(Exception):
    """A request waited its whole ``wait_s`` for the model without starting."""


@dataclass(eq=False)
class Job:
    """One request's share of a batch: which computation it joins, for whom, and once computed its answer."""

    kind: str  # "top" (next-token scoring), "echo" (every prompt token scored) or "generate"
    key: object  # jobs of one kind share a batch only with an equal key (generation: its settings)
    tokens: int  # its length: a batch holds at most its budget in rows x the longest
    work: object  # token ids to score, or the text to generate from
    gone: Callable[[], bool]  # whether its caller left
    source: object = None  # who sent it (a connection): the batch after its answer waits for that caller's next request
    k: int = 0  # scoring: the most likely tokens kept of each position (the batch keeps no full-vocabulary row)
    shares: bool = True  # False: computed alone
    state: str = "queued"  # queued, then running, then done
    result: object = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class ServingBackend(Protocol):
    """What the queue computes with (``TransformersBackend``): the serving primitives, answered in plain values."""

    def interruptible(self, stop: Callable[[], bool], error: type[BaseException]) -> AbstractContextManager[None]: ...
    def top_next_tokens(self, encoded: list[list[int]], ks: list[int]) -> list[TopTokens]: ...
    def score_prompts(self, prompts: list[list[int]], ks: list[int]) -> list[PromptScores]: ...
    def generate_texts(
        self,
        prompts: list[str],
        settings: GenerationSettings = ...,
        batch_size: int = ...,
        should_stop: Callable[[int], bool] | None = None,
    ) -> list[Generation]: ...


class RequestQueue:
    """Jobs waiting for the model, and the one thread that batches and computes them while holding ``lock``."""

    def __init__(self, backend: ServingBackend, lock: threading.Lock) -> None:
        self.backend, self.lock = backend, lock
        self.queue: list[Job] = []
        self.ready = threading.Condition()
        self.thread: threading.Thread | None = None
        self.answered: dict[object, float] = {}  # callers answered within REJOIN_S, not yet back: when
        self.sizes: dict[str, dict[int, int]] = {}  # per kind of job, how many batches of each size were computed

    def run(self, job: Job, wait_s: float) -> object:
        """Queue ``job`` and wait for its answer: at most ``wait_s`` to start (then :class:`Busy`), never after its caller left."""
        deadline = time.monotonic() + wait_s
        with self.ready:
            self.queue.append(job)
            self.answered.pop(job.source, None)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="dateeval-scheduler", daemon=True)
                self.thread.start()
            self.ready.notify()
        while not job.done.wait(POLL_S):
            if (job.gone() or time.monotonic() >= deadline) and self._withdraw(job):
                raise Cancelled if job.gone() else Busy
        if job.error is not None:
            raise job.error
        return job.result

    def _withdraw(self, job: Job) -> bool:
        """Take a job that has not started off the queue (True); one that started is answered (False)."""
        with self.ready:
            if job.state != "queued":
                return False
            self.queue.remove(job)
            return True

    def _loop(self) -> None:
        while True:
            with self.ready:
                self.ready.wait_for(lambda: self.queue)
                deadline = time.monotonic() + REJOIN_S
                while len(self.queue) < MAX_BATCH and (
                    self.ready.wait(GATHER_S) or (self._returning() and time.monotonic() < deadline)
                ):
                    pass  # requests still arriving, or callers just answered about to send their next ones
            with self.lock:
                batch = self._take()
                if batch:
                    self._compute(batch)

    def _returning(self) -> bool:
        """Whether a caller answered within :data:`REJOIN_S` has not sent its next request yet."""
        now = time.monotonic()
        self.answered = {source: at for source, at in self.answered.items() if now - at < REJOIN_S}
        return bool(self.answered)

    def _take(self) -> list[Job]:
        """The next batch, marked running; jobs whose callers left are answered as cancelled instead."""
        with self.ready:
            for job in [job for job in self.queue if job.gone()]:
                self.queue.remove(job)
                self._finish([job], error=Cancelled())
            if not self.queue:
                return []
            first, budget = self.queue[0], MAX_ECHO_POSITIONS if self.queue[0].kind == "echo" else BATCH_TOKENS
            batch, longest = [first], first.tokens
            for job in self.queue[1:]:
                joins = first.shares and job.shares and (job.kind, job.key) == (first.kind, first.key)
                if joins and len(batch) < MAX_BATCH and (len(batch) + 1) * max(longest, job.tokens) <= budget:
                    batch.append(job)
                    longest = max(longest, job.tokens)
            for job in batch:
                self.queue.remove(job)
                job.state = "running"
            sizes = self.sizes.setdefault(first.kind, {})
            sizes[len(batch)] = sizes.get(len(batch), 0) + 1
            return batch

    def _compute(self, batch: list[Job]) -> None:
        """One computation for the batch: it stops between two layers once all its callers left, a generated row once its own did."""
        try:
            with self.backend.interruptible(lambda: all(job.gone() for job in batch), Cancelled):
                results = COMPUTE[batch[0].kind](self.backend, batch)
        except Exception as error:
            # whatever it is, each request's caller answers it (the server: a 500 with its traceback, or one log line)
            return self._finish(batch, error=error)
        for job, result in zip(batch, results):
            job.result = result  # a row stopped when its caller left holds a cut-short reply: never answered
            self._finish([job], error=Cancelled() if job.gone() else None)

    def _finish(self, jobs: list[Job], error: BaseException | None = None) -> None:
        with self.ready:
            for job in jobs:
                job.error, job.state = error, "done"
                if job.source is not None and error is None:
                    self.answered[job.source] = time.monotonic()
                job.done.set()


def _next_tokens(backend: ServingBackend, batch: list[Job]) -> list[TopTokens]:
    """Each prompt's ``k`` most likely next tokens, scored as the scheduler batches a sweep's prompts."""
    return backend.top_next_tokens([job.work for job in batch], [job.k for job in batch])


def _echoes(backend: ServingBackend, batch: list[Job]) -> list[PromptScores]:
    """Each prompt's tokens' log-probabilities and every position's top ``k`` (the next token's at least one), one
    forward pass. The batch's full-vocabulary log-probabilities (up to :data:`MAX_ECHO_POSITIONS` rows of them) are
    dropped before the next batch computes: the model thread holds one batch's at a time."""
    return backend.score_prompts([job.work for job in batch], [job.k for job in batch])


def _generations(backend: ServingBackend, batch: list[Job]) -> list:
    """Replies of prompts that share their settings, generated together; a row stops at the step after its caller left."""
    prompts = [job.work for job in batch]
    return backend.generate_texts(prompts, batch[0].key, batch_size=len(batch), should_stop=lambda i: batch[i].gone())


COMPUTE: dict[str, Callable[[ServingBackend, list[Job]], list]] = {
    "top": _next_tokens,
    "echo": _echoes,
    "generate": _generations,
}
