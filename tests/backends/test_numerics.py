"""The math library's settings (``dateeval.numerics``): reproducible bits whatever the batch and thread count, and
threads that follow the machine's load."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import ROOT, run_cli_process

from dateeval import numerics
from dateeval.data import Subset


def test_mkl_runs_in_the_mode_dateeval_sets_and_a_users_own_setting_wins():
    """MKL itself reports the strict reproducible mode in this process (it reads MKL_CBWR when it loads, so the
    setting must be in force before torch: ``import dateeval`` and the tests' conftest see to it)."""
    assert os.environ["MKL_CBWR"] == numerics.DEFAULT_CBWR
    assert numerics.settings("float32")["mkl_cbwr"] == "AUTO,STRICT"
    code = "import dateeval, dateeval.numerics as n; print(n.settings('float32')['mkl_cbwr'])"
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


@pytest.fixture(scope="module", params=["float32", "bfloat16", "float16"])
def any_dtype_backend(request, backend):
    """The real default model in each precision the CPU runs (float32 is the session's ``backend``)."""
    from dateeval.backends.transformers import TransformersBackend
    from dateeval.models import resolve

    return (
        backend
        if request.param == "float32"
        else TransformersBackend(resolve("smollm2-135m"), dtype=request.param, device="cpu")
    )


PATHS = (
    "packed scoring",
    "padded scoring (FixedBatch)",
    "continuation",
    "padded continuation (FixedBatch)",
    "continuous generation",
    "static generation (FixedBatch)",
    "server echo",
)


@pytest.mark.skipif(numerics.available_cores() < 2, reason="one thread is all this machine has")
def test_every_path_gives_the_same_bits_when_the_load_moves_the_threads_mid_sweep(
    any_dtype_backend, data_dir, monkeypatch
):
    """Every path that runs the model, with the machine's load read as moving on every forward (the governor told to
    alternate 1 and all cores, as a busy neighbour starting and stopping would), against the same calls on a quiet
    machine: every number and every reply is the same, in every precision. float32 really switches threads (MKL
    STRICT makes its products thread-invariant); half precision keeps one thread count, since oneDNN's AMX kernels
    split their reductions by thread count (a padded bfloat16 batch moved by up to 0.04 when it switched)."""
    import itertools

    import torch

    from dateeval.backends.base import FixedBatch, GenerationSettings
    from dateeval.conditions import Condition
    from dateeval.engine.worker import prompt_input
    from dateeval.tasks import build_task, mcqa

    model = any_dtype_backend
    condition = Condition(date=dt.date(2024, 3, 1))
    task = build_task("arc_challenge", str(data_dir), Subset(limit=8))
    encoded = model.encode(
        [prompt_input(model, task.prompt(item, condition).messages, condition)[0] for item in task.items]
    )
    labels = [list(mcqa.label_tokens(model.tokenizer, 4).token_ids)] * len(encoded)
    gsm8k = build_task("gsm8k", str(data_dir), Subset(limit=2))
    prompts = [prompt_input(model, gsm8k.prompt(item, condition).messages, condition)[0] for item in gsm8k.items]
    context = (
        model.template.render([{"role": "user", "content": "What is the capital of France?"}], mode="none").text
        + "The capital is"
    )
    endings = [" Paris.", " Lyon, a city in the south.", " Rome."]
    settings = GenerationSettings(max_new_tokens=6)
    paths = {
        "packed scoring": lambda: np.vstack(model.next_token_logprobs(encoded, labels, batch_size=5)).tolist(),
        "padded scoring (FixedBatch)": lambda: np.vstack(
            model.next_token_logprobs(encoded, labels, batch_size=FixedBatch(4))
        ).tolist(),
        "continuation": lambda: model.continuation_texts([context] * 3, endings, batch_size=3),
        "padded continuation (FixedBatch)": lambda: model.continuation_texts(
            [context] * 3, endings, batch_size=FixedBatch(3)
        ),
        "continuous generation": lambda: [
            reply.text for reply in model.generate_texts(prompts, settings, batch_size=2)
        ],
        "static generation (FixedBatch)": lambda: [
            reply.text for reply in model.generate_texts(prompts, settings, batch_size=FixedBatch(2))
        ],
        "server echo": lambda: model.echo_logprobs(encoded[:4]).max(dim=-1).values.tolist(),
    }
    assert tuple(paths) == PATHS
    seen: list[int] = []
    hook = model.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    if model.governor is not None:
        monkeypatch.setattr(model.governor, "interval_s", 0.0)  # re-read the load before every forward

    def everything(loads: itertools.cycle) -> dict[str, object]:
        monkeypatch.setattr(numerics.ThreadGovernor, "threads_for", lambda self, _others: next(loads))
        seen.clear()
        return {name: run() for name, run in paths.items()}

    cores = numerics.available_cores()
    try:
        quiet = everything(itertools.cycle([cores]))
        moving = everything(itertools.cycle([1, cores]))
    finally:
        hook.remove()
    expected = {1, cores} if model.dtype == "float32" else {cores}
    assert [name for name in PATHS if quiet[name] != moving[name]] == []
    assert set(seen) == expected, f"{model.dtype}: forwards ran at {sorted(set(seen))} threads"


def test_a_bad_thread_setting_is_one_line(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DATEEVAL_THREADS", "lots")
    result = run_cli_process(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "1",
        "--dates",
        "2024-01-01",
        "--store",
        str(tmp_path),
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "DATEEVAL_THREADS='lots': give 'auto' or a number of threads" in result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("DATEEVAL_THREADS", "²", "give 'auto' or a number of threads from 1 to 4096"),
        ("DATEEVAL_THREADS", "99999999999999999999", "give 'auto' or a number of threads from 1 to 4096"),
        ("DATEEVAL_THREADS", "1000000000", "give 'auto' or a number of threads from 1 to 4096"),
        ("OMP_NUM_THREADS", "²", "OMP_NUM_THREADS='²': give a number of threads"),
        ("MKL_CBWR", "garbage", "MKL_CBWR='garbage': give a branch"),
        ("MKL_CBWR", "", "MKL_CBWR='': give a branch"),
        ("MKL_CBWR", "AVX2,LOOSE", "MKL_CBWR='AVX2,LOOSE': give a branch"),
    ],
)
def test_a_thread_or_mkl_setting_nothing_would_honour_is_refused_before_a_model_loads(monkeypatch, name, value, says):
    """MKL runs its default for a word it does not know (so the mode recorded with the rows would not be what ran), and
    OpenMP reserves a stack per thread asked for: each is one line, not a traceback or 216 GB."""
    from dateeval.errors import DateEvalError

    monkeypatch.setenv(name, value)
    with pytest.raises(DateEvalError, match=re.escape(says)):
        numerics.check_environment()


@pytest.mark.parametrize("value", ["AUTO,STRICT", "avx2", "AVX512,STRICT", "COMPATIBLE"])
def test_every_mkl_branch_mkl_knows_is_taken(monkeypatch, value):
    monkeypatch.setenv("MKL_CBWR", value)
    numerics.check_environment()


AVX2_CPU = {"sse2", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma"}  # Intel Haswell to Comet Lake
AVX512_CPU = AVX2_CPU | {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}  # Intel Skylake-SP


@pytest.mark.parametrize(
    ("value", "vendor", "flags", "says"),
    [
        ("AVX512,STRICT", "GenuineIntel", AVX2_CPU, "no AVX512 branch (its best: AVX2), so MKL runs AUTO,STRICT"),
        ("AVX512_E1", "GenuineIntel", AVX2_CPU, "no AVX512_E1 branch (its best: AVX2), so MKL runs AUTO instead"),
        ("AVX2,STRICT", "GenuineIntel", AVX2_CPU, None),
        ("AVX512_MIC,STRICT", "GenuineIntel", AVX2_CPU, None),  # deprecated: runs as AVX2
        ("SSE4_2", "GenuineIntel", AVX2_CPU, None),
        ("AVX512,STRICT", "GenuineIntel", AVX512_CPU, None),
        ("AVX512_E1,STRICT", "GenuineIntel", AVX512_CPU, "no AVX512_E1 branch (its best: AVX512), so MKL runs AUTO"),
        ("AVX512_E1,STRICT", "GenuineIntel", AVX512_CPU | {"avx512_vnni"}, None),
        ("AVX2,STRICT", "AuthenticAMD", AVX512_CPU, "only on Intel CPUs (this one is AuthenticAMD), so it runs AUTO"),
        ("COMPATIBLE", "AuthenticAMD", AVX2_CPU, None),
        ("AUTO,STRICT", "GenuineIntel", {"sse2"}, None),
    ],
)
def test_a_branch_the_cpu_cannot_run_is_named(value, vendor, flags, says):
    """MKL runs AUTO, without a word, for a branch the CPU lacks (and for any but AUTO and COMPATIBLE on a CPU not made
    by Intel): the mode asked for is then not the one that ran, so it is said, as an unknown value is."""
    found = numerics.cbwr_warning(value, vendor, flags)
    assert found == says if says is None else (found.startswith(f"MKL_CBWR={value!r}: ") and says in found), found


def test_a_branch_the_cpu_cannot_run_is_one_warning_line_and_the_load_goes_on(monkeypatch, capsys):
    monkeypatch.setattr(numerics, "_cpu_flags", lambda: ("GenuineIntel", AVX2_CPU))
    monkeypatch.setenv("MKL_CBWR", "AVX512,STRICT")
    numerics._warn.cache_clear()
    numerics.check_environment()
    numerics.check_environment()  # a second model's load: said once
    said = capsys.readouterr().err.splitlines()
    assert said == [
        "dateeval: warning: MKL_CBWR='AVX512,STRICT': this CPU has no AVX512 branch (its best: AVX2), so MKL runs "
        "AUTO,STRICT instead"
    ]


@pytest.mark.parametrize("value", ["COMPATIBLE", "compatible", "AVX2,STRICT", "AVX512_E1,STRICT", "AUTO,strict"])
def test_the_mode_mkl_reports_is_the_one_the_warning_foretells(value):
    """On this machine's CPU, MKL itself runs the branch asked for exactly where no warning is given (else AUTO, with
    STRICT kept); a branch in other case is spelled as MKL reads it (MKL ran plain AUTO for ``compatible`` or
    ``AUTO,strict``)."""
    code = "import dateeval, dateeval.numerics as n; print(n.settings('float32')['mkl_cbwr'])"
    env = {**os.environ, "MKL_CBWR": value, "PYTHONPATH": str(ROOT)}
    ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    words = value.upper().split(",")
    warned = numerics.cbwr_warning(value, *numerics._cpu_flags())
    assert ran.stdout.strip() == ",".join(["AUTO", *words[1:]] if warned else words), warned
