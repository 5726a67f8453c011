"""The vLLM backend (optional extra, requirements-vllm.txt): parity with transformers, determinism, a sweep into a store.

The engine loads once for this module (about 15 s on CPU, eager). Without vLLM
the tests that need it skip with the reason; registration and the missing-extra
error are checked always.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, run_cli_process

from dateeval.backends import BACKENDS, BackendOptions
from dateeval.backends.base import FixedBatch, GenerationRequest, GenerationSettings, LabelRequest
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.engine.answers import model_view
from dateeval.errors import DateEvalError
from dateeval.models import resolve
from dateeval.tasks import build_task
from dateeval.tasks.mcqa import grade

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(
    not HAVE_VLLM,
    reason="vLLM is not installed (optional extra: ./run.sh test-vllm, or pip install -r requirements-vllm.txt)",
)
PARITY_ITEMS = 50
DATES = (dt.date(2024, 1, 1), dt.date(2025, 6, 15))
os.environ.setdefault("DATEEVAL_VLLM_KV_CACHE_GIB", "1")


def test_registered_without_importing_vllm():
    code = (
        "import sys, dateeval.backends as b; assert 'vllm' in b.BACKENDS; assert 'vllm' not in sys.modules; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_missing_extra_is_one_clear_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(DateEvalError, match="requirements-vllm.txt"):
        BACKENDS["vllm"].open(resolve("smollm2-135m"), BackendOptions(dtype="float32"))


@pytest.fixture(scope="module")
def engine():
    if not HAVE_VLLM:
        pytest.skip(
            "vLLM is not installed (optional extra: ./run.sh test-vllm, or pip install -r requirements-vllm.txt)"
        )
    backend = BACKENDS["vllm"].open(resolve("smollm2-135m"), BackendOptions(dtype="float32", device="auto"))
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def arc(data_dir):
    return build_task("arc_challenge", data_dir, Subset(limit=PARITY_ITEMS))


def _label_requests(backend, task, day: dt.date) -> list[LabelRequest]:
    task.prepare(model_view(backend))
    condition = expand([day])[0]
    requests = []
    for item in task.items:
        rendered = backend.template.render(
            task.prompt(item, condition).messages,
            mode=condition.date_mode,
            day=condition.date,
            injection=condition.injection,
        )
        requests.append(LabelRequest(rendered.text, task.labels.labels[: len(item.options)]))
    return requests


@needs_vllm
def test_identity_and_capabilities(engine):
    assert engine.identity.backend == "vllm" and engine.identity.dtype == "float32"
    assert set(engine.identity.versions) == {"vllm", "torch", "transformers"}
    assert (
        engine.capabilities.renders_locally
        and engine.capabilities.date_control == "full"
        and engine.capabilities.deterministic
    )
    assert engine.context_length == 8192


@needs_vllm
def test_option_probabilities_match_transformers(engine, backend, arc):
    """Identical rendered prompts (same tokens), float32: renormalised option probabilities, predictions and label mass."""
    ours, theirs = [], []
    for day in DATES:
        requests = _label_requests(engine, arc, day)
        assert requests == _label_requests(backend, arc, day)  # the same rendered text and label tokens
        ours += [scores.logprobs for scores in engine.label_logprobs(requests, 16)]
        theirs += [scores.logprobs for scores in backend.label_logprobs(requests, 16)]
    answers = [item.answer for item in arc.items] * len(DATES)
    graded_v = [grade(score, answer) for score, answer in zip(ours, answers)]
    graded_t = [grade(score, answer) for score, answer in zip(theirs, answers)]
    delta = max(float(np.abs(v.probs - t.probs).max()) for v, t in zip(graded_v, graded_t))
    agreement = np.mean([v.pred == t.pred for v, t in zip(graded_v, graded_t)])
    mass = max(abs(v.label_mass - t.label_mass) for v, t in zip(graded_v, graded_t))
    print(
        f"\nvLLM vs transformers, float32, {len(ours)} ARC-Challenge prompts: max |dp| {delta:.2e}, agreement {agreement:.1%}, max |d label mass| {mass:.2e}"
    )
    assert delta <= 1e-3 and agreement >= 0.99
    assert mass <= 1e-3 and all(0 < v.label_mass <= 1 for v in graded_v)


@needs_vllm
def test_same_date_repeats_exactly(engine, arc):
    requests = _label_requests(engine, arc, DATES[0])[:16]
    first, again = engine.label_logprobs(requests, 8), engine.label_logprobs(requests, 8)
    assert all((a.logprobs == b.logprobs).all() for a, b in zip(first, again))
    sampled = GenerationSettings(max_new_tokens=24, sample=True, seed=7, stop=("\n\n",))
    prompts = [GenerationRequest(r.prompt, sampled) for r in requests[:4]]
    replies = engine.generate(prompts, 4)
    assert replies == engine.generate(prompts, 4)
    # A per-request seed: a reply does not depend on what it was batched with.
    assert engine.generate(prompts[:1], 1)[0] == replies[0]
    assert all(r.n_tokens > 0 and r.prompt_tokens > 0 and "\n\n" not in r.text for r in replies)
    greedy = [GenerationRequest(r.prompt, GenerationSettings(max_new_tokens=16)) for r in requests[:4]]
    assert engine.generate(greedy, 4) == engine.generate(greedy, 2)
    # A FixedBatch (the batch-size factor) runs in the static chunks the scheduler plans, answers in input order.
    assert engine.generate(greedy, FixedBatch(3)) == engine.generate(greedy, 4)
    chunked = engine.label_logprobs(requests, FixedBatch(5))
    assert all(np.allclose(a.logprobs, b.logprobs, atol=1e-4) for a, b in zip(chunked, first))


@needs_vllm
def test_continuation_logprobs_match_transformers(engine, backend):
    from dateeval.backends.base import ContinuationRequest

    requests = [
        ContinuationRequest("Question: What is 2 + 3?\nAnswer:", " The answer is 5."),
        ContinuationRequest("The capital of France is", " Paris."),
    ]
    ours, theirs = engine.continuation_logprobs(requests, 2), backend.continuation_logprobs(requests, 2)
    assert np.allclose(ours, theirs, atol=1e-3), (ours, theirs)


@needs_vllm
def test_cli_sweep_into_a_store(data_dir, tmp_path):
    from dateeval.store import Store

    store = tmp_path / "store"
    result = run_cli_process(
        "run",
        "--model",
        "vllm:smollm2-135m",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "4",
        "--dates",
        "2024-01-01,2024-06-15",
        "--dtype",
        "float32",
        "--store",
        str(store),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "8 item-dates scored" in result.stdout
    frame, problems = Store(store).read()
    assert len(frame) == 8 and not problems.corrupted
    assert set(frame["backend"]) == {"vllm"} and set(frame["date_control"]) == {"full"}
    assert frame["probs"].map(lambda p: abs(sum(p) - 1) < 1e-9).all() and frame["label_mass"].between(0, 1).all()
