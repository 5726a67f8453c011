"""The math library's settings (``dateeval.numerics``): reproducible bits whatever the batch and thread count, and
threads that follow the machine's load."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, run_cli
from dateeval import numerics
from dateeval.data import Subset


def test_mkl_runs_in_the_mode_dateeval_sets_and_a_users_own_setting_wins():
    """MKL itself reports the strict reproducible mode in this process (it reads MKL_CBWR when it loads, so the
    setting must be in force before torch: ``import dateeval`` and the tests' conftest see to it)."""
    assert os.environ["MKL_CBWR"] == numerics.DEFAULT_CBWR
    assert numerics.settings()["mkl_cbwr"].endswith(",STRICT")
    code = "import dateeval, dateeval.numerics as n; print(n.settings()['mkl_cbwr'])"
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE", "PYTHONPATH": str(ROOT)}
    user = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert user.stdout.strip() == "COMPATIBLE"


def test_threads_for_a_load_keep_the_cores_others_leave_free():
    governor = numerics.ThreadGovernor(cores=4)
    assert [governor.threads_for(load) for load in (0.0, 0.4, 0.6, 1.0, 2.2, 3.0, 8.0)] == [4, 4, 3, 3, 2, 1, 1]
    assert numerics.ThreadGovernor(cores=1).threads_for(0.0) == 1


@pytest.mark.parametrize(("others_after", "threads"), [(0, 2), (2, 1)])
def test_after_the_model_idled_the_governor_reads_the_load_now_not_while_it_idled(monkeypatch, others_after, threads):
    """The model idled 15 s while others used both cores (a server it waited on). Then those others stopped (the
    server answered: every core is free) or kept on: the next forward gets the threads the load *now* leaves, read
    in a fresh window, not half of them from the idle window's average. Clock ticks scripted, so the machine's own
    load cannot decide the outcome."""
    hz = os.sysconf("SC_CLK_TCK")
    fresh = round(numerics.FRESH_WINDOW_S * hz * 2)
    ticks = [(0, 0), (15 * hz * 2, 15 * hz * 2), (15 * hz * 2 + others_after * fresh // 2, 15 * hz * 2 + fresh)]
    assert _governed(monkeypatch, ticks, own_cpu_s=0.0) == threads


def test_a_long_forward_is_not_idle_its_window_is_the_load_it_ran_beside(monkeypatch):
    """One forward of 15 s on both cores, nobody else: the window is read as it is (all the busy time was this
    process's own), and no fresh window is taken (the scripted clock has no third reading)."""
    hz = os.sysconf("SC_CLK_TCK")
    assert _governed(monkeypatch, [(0, 0), (15 * hz * 2, 15 * hz * 2)], own_cpu_s=30.0) == 2


def _governed(monkeypatch, ticks: list[tuple[int, int]], own_cpu_s: float) -> int:
    """A 2-core governor read at 100 s and at 115 s on scripted (busy, total) ticks, this process having used
    ``own_cpu_s`` of CPU between the two; the threads it sets at 115 s."""
    import torch

    readings, own = iter(ticks), [0.0]
    monkeypatch.setattr(numerics, "_cpu_ticks", lambda cpus: next(readings))
    monkeypatch.setattr(numerics.time, "process_time", lambda: own[0])
    monkeypatch.setattr(numerics.time, "sleep", lambda seconds: None)
    governor = numerics.ThreadGovernor(cores=2)
    governor.cpus = {0, 1}
    try:
        assert governor.adjust(now=100.0) == 2
        own[0] = own_cpu_s
        return governor.adjust(now=115.0)
    finally:
        torch.set_num_threads(numerics.available_cores())


@pytest.mark.skipif(numerics.available_cores() < 2, reason="the governor has nothing to give up on one core")
def test_the_governor_gives_up_the_cores_busy_processes_take():
    """Real load: a busy loop on every core, read from /proc/stat; the governor drops to one thread."""
    import torch

    governor = numerics.ThreadGovernor(interval_s=0.2)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(governor.cores)]
    try:
        governor.adjust()
        deadline = time.monotonic() + 20
        while governor.others < governor.cores - 0.5 and time.monotonic() < deadline:
            time.sleep(0.3)
            governor.adjust()
        assert governor.adjust() == 1 and torch.get_num_threads() == 1, f"others at {governor.others:.2f} cores"
    finally:
        for burner in burners:
            burner.kill()
        torch.set_num_threads(numerics.available_cores())


@pytest.mark.skipif(numerics.available_cores() < 2, reason="one thread is all this machine has")
def test_scores_continuations_and_replies_are_bit_identical_at_one_and_many_threads(backend, data_dir, monkeypatch):
    """Packed scoring, padded continuations and greedy generation, the governor forced to 1 thread and to all cores:
    the forwards really ran at those thread counts, and every float32 number and every reply is the same."""
    import torch

    from dateeval.backends.base import GenerationSettings
    from dateeval.conditions import Condition
    from dateeval.tasks import build_task, mcqa
    from dateeval.worker import prompt_input

    condition = Condition(date=dt.date(2024, 3, 1))
    task = build_task("mmlu", str(data_dir), Subset(limit=12))
    encoded = backend.encode([prompt_input(backend, task.prompt(item, condition).messages, condition)[0] for item in task.items])
    labels = [list(mcqa.label_tokens(backend.tokenizer, 4).token_ids)] * len(encoded)
    gsm8k = build_task("gsm8k", str(data_dir), Subset(limit=2))
    prompts = [prompt_input(backend, gsm8k.prompt(item, condition).messages, condition)[0] for item in gsm8k.items]
    context = backend.template.render([{"role": "user", "content": "What is the capital of France?"}], mode="none").text + "The capital is"
    seen: list[int] = []
    hook = backend.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))

    def everything(threads: int):
        monkeypatch.setattr(backend.governor, "threads_for", lambda _load: threads)
        backend.governor._last = None  # the next forward re-decides at once
        seen.clear()
        scores = backend.next_token_logprobs(encoded, labels, batch_size=5)
        totals = backend.continuation_texts([context] * 3, [" Paris.", " Lyon.", " Rome."], batch_size=3)
        replies = backend.generate_texts(prompts, GenerationSettings(max_new_tokens=12), batch_size=2)
        assert set(seen) == {threads}
        return np.vstack(scores), totals, [reply.text for reply in replies]

    try:
        one, many = everything(1), everything(numerics.available_cores())
    finally:
        hook.remove()
        backend.governor._last = None
    assert (one[0] == many[0]).all() and one[1] == many[1] and one[2] == many[2]


def test_a_bad_thread_setting_is_one_line(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DATEEVAL_THREADS", "lots")
    result = run_cli("run", "--dataset", "arc_challenge", "--data-dir", str(data_dir), "--limit", "1", "--dates", "2024-01-01",
                     "--store", str(tmp_path))  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "DATEEVAL_THREADS='lots': give 'auto' or a number of threads" in result.stderr.strip().splitlines()[-1]
