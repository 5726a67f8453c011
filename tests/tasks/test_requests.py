"""Tasks ask, the runner answers (issue 37 §1): a task states its work as batches of requests and grades the answers,
never touching a backend; ``dateeval/engine/answers.py`` hands each batch to the real model's backend."""

import datetime as dt
import math
from types import SimpleNamespace

import numpy as np
import pytest

from dateeval.backends import Backend
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.engine import answers
from dateeval.engine.answers import Asked
from dateeval.engine.worker import prompt_input
from dateeval.errors import DateEvalError
from dateeval.requests import (
    GENERATE,
    Capabilities,
    ContinuationRequest,
    GenerationRequest,
    GenerationSettings,
    LabelRequest,
    PromptInput,
)
from dateeval.tasks import GenerationOptions, build_task, gsm8k
from dateeval.tasks.base import Prompt, Task

CONDITION = expand([dt.date(2024, 3, 1)])[0]


def _inputs(backend: Backend, task: Task, items: list) -> tuple[list[Prompt], list[PromptInput]]:
    prompts = [task.prompt(item, CONDITION) for item in items]
    return prompts, [prompt_input(backend, prompt.messages, CONDITION)[0] for prompt in prompts]


def test_gsm8k_generates_then_asks_for_the_confidence_of_each_number_it_found(backend, data_dir):
    """Two rounds in one generator: the replies, then one continuation per reply with a number (its own tokens after the
    text before it), whose log-probability becomes the row's confidence."""
    task = gsm8k.GSM8KTask(
        "gsm8k", gsm8k.load_items(data_dir)[:3], settings=GenerationSettings(max_new_tokens=48, stop=("\nQuestion:",))
    )
    model = answers.model_view(backend)
    task.prepare(model)
    prompts, texts = _inputs(backend, task, task.items)
    asked = Asked(task.steps(task.items, prompts, texts, model))
    assert asked.requests == [GenerationRequest(text, task.settings) for text in texts] and asked.rows is None
    replies = answers.answer(backend, asked.requests, 4)
    asked.send(replies)
    numbered = [(text, reply) for text, reply in zip(texts, replies) if gsm8k.find_number(reply.text) is not None]
    assert numbered, "no reply has a number to score"
    assert len(asked.requests) == len(numbered) and all(
        isinstance(request, ContinuationRequest) for request in asked.requests
    )
    assert all(
        request.context.startswith(text) and reply.text.startswith(request.context[len(text) :])
        for request, (text, reply) in zip(asked.requests, numbered)
    )
    logprobs = answers.answer(backend, asked.requests, 4)
    asked.send(logprobs)
    assert asked.rows is not None and [row["output"] for row in asked.rows] == [reply.text for reply in replies]
    confident = [row["confidence"] for row in asked.rows if not math.isnan(row["confidence"])]
    assert confident == [math.exp(logprob) for logprob in logprobs]


def test_units_asked_together_get_the_rows_each_gets_alone(backend, data_dir):
    """Scoring units asked together are answered batch by batch; generation units in one pooled call: both as alone."""
    for name in ("arc_challenge", "arc_challenge_cot"):
        task = build_task(name, data_dir, Subset(limit=4), GenerationOptions(max_new_tokens=24))
        model = answers.model_view(backend)
        task.prepare(model)
        units = [task.items[:2], task.items[2:]]
        started = [Asked(task.steps(items, *_inputs(backend, task, items), model)) for items in units]
        answers.answer_together(backend, started, 4)
        together = [answers.run(asked, backend, 4) for asked in started]
        alone = [
            answers.run(Asked(task.steps(items, *_inputs(backend, task, items), model)), backend, 4) for items in units
        ]
        for rows, expected in zip(together, alone):
            assert [row["pred"] for row in rows] == [row["pred"] for row in expected]
            assert np.array_equal(
                np.array([row["confidence"] for row in rows]),
                np.array([row["confidence"] for row in expected]),
                equal_nan=True,
            )


def test_a_backend_that_cannot_answer_what_a_task_needs_is_refused_in_one_line(data_dir):
    """The task declares what it needs; the runner checks it against the backend's capabilities before any item."""
    task = build_task("arc_challenge", data_dir, Subset(limit=2))
    chat_only = SimpleNamespace(name="openai", capabilities=Capabilities(frozenset({GENERATE}), renders_locally=False))
    with pytest.raises(
        DateEvalError,
        match="^arc_challenge reads next-token probabilities, which backend openai cannot give: use arc_challenge_cot$",
    ):
        answers.check_needs(task, chat_only)
    answers.check_needs(
        build_task("arc_challenge_cot", data_dir, Subset(limit=2)), chat_only
    )  # generation needs nothing declared


def test_a_batch_holds_requests_of_one_kind_and_an_empty_one_asks_nothing(backend):
    mixed = [LabelRequest("Hi", ()), GenerationRequest("Hi", GenerationSettings(max_new_tokens=1))]
    with pytest.raises(TypeError, match="one kind"):
        answers.answer(backend, mixed, 2)
    assert answers.answer(backend, [], 2) == []
