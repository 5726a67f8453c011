"""The request loop between tasks and a backend ("runner" means one thing in dateeval: the model runner that computes a
scheduler's batches, as in vLLM): it answers the requests a task's steps yield, and nothing else.

A task never calls a backend (``dateeval/requests.py``): it yields a batch
of requests, is sent their answers, and returns its rows. Here each batch
goes to the backend's method for its kind, so the backend's scheduler batches
it; several units' first batches of generations go out together
(:func:`answer_together`, ``Backend.generate_units``), so one unit's last long
replies decode beside the next unit's first ones. A task's declared
:class:`~dateeval.requests.Needs` are checked here too, before any item.
"""

from __future__ import annotations

from typing import Any

from dateeval.backends.base import Backend
from dateeval.errors import DateEvalError
from dateeval.requests import (
    ContinuationRequest,
    GenerationRequest,
    LabelRequest,
    ModelView,
    Request,
    Steps,
)
from dateeval.tasks.base import Task


def model_view(backend: Backend) -> ModelView:
    """What a task may know of ``backend``: its capabilities and its tokenizer (none for a server's own)."""
    return ModelView(backend.capabilities, backend.tokenizer)


def check_needs(task: Task, backend: Backend) -> None:
    """Refuse a backend that cannot answer what ``task`` cannot run without (its one line, naming the backend)."""
    needs = task.needs()
    if needs is not None and not needs.met_by(backend.capabilities):
        raise DateEvalError(
            needs.refusal.replace("{backend}", backend.name)
        )  # not format: a dataset named by a file may hold braces


def answer(backend: Backend, requests: list[Request], batch_size: int) -> list[Any]:
    """The answers to one batch of requests of one kind, in order (none asked, none answered)."""
    if not requests:
        return []
    kind = type(requests[0])
    if any(type(request) is not kind for request in requests):
        raise TypeError(f"a batch of requests holds one kind, not {kind.__name__} and others")
    if kind is LabelRequest:
        return backend.label_logprobs(requests, batch_size)
    if kind is GenerationRequest:
        return backend.generate(requests, batch_size)
    if kind is ContinuationRequest:
        return backend.continuation_logprobs(requests, batch_size)
    raise TypeError(f"no backend method answers {kind.__name__}")


class Asked:
    """A task's steps under way: the batch of requests it waits on (``requests``), or once it has returned, its ``rows``."""

    def __init__(self, steps: Steps) -> None:
        self._steps = steps
        self.requests: list[Request] = []
        self.rows: list[dict] | None = None
        self._advance(None)

    def send(self, answers: list[Any]) -> None:
        """Hand the task the answers to its waiting batch; it yields its next batch or returns its rows."""
        self._advance(answers)

    def _advance(self, answers: list[Any] | None) -> None:
        try:
            self.requests = self._steps.send(answers)
        except StopIteration as done:
            self.requests, self.rows = [], done.value


def run(asked: Asked, backend: Backend, batch_size: int) -> list[dict]:
    """Answer each batch the task yields until it returns its rows."""
    while asked.rows is None:
        asked.send(answer(backend, asked.requests, batch_size))
    return asked.rows


def answer_together(backend: Backend, waiting: list[Asked], batch_size: int) -> None:
    """Answer several units' waiting batches at once: generations in one ``generate_units`` call (each reply as its unit
    alone gets it), any other kind batch by batch. Each unit then goes on by itself (:func:`run`)."""
    waiting = [asked for asked in waiting if asked.rows is None]
    batches = [asked.requests for asked in waiting]
    if all(batch and all(type(request) is GenerationRequest for request in batch) for batch in batches):
        replies = backend.generate_units(batches, batch_size)
    else:
        replies = [answer(backend, batch, batch_size) for batch in batches]
    for asked, answers in zip(waiting, replies):
        asked.send(answers)
