"""The sandbox contains hostile programs; HumanEval's canonical solutions pass in it."""

import os
import socket
import time
from pathlib import Path

import pytest

from dateeval.sandbox import NETWORK_ISOLATED, UNPRIVILEGED, Limits, run_many, run_program
from dateeval.tasks import humaneval

FAST = Limits(timeout_s=4, cpu_s=4)


def test_pass_and_fail():
    assert run_program("def f(x):\n    return x + 1\nassert f(1) == 2\n").status == "passed"
    outcome = run_program("assert 1 == 2, 'wrong'\n")
    assert outcome.status == "failed" and "wrong" in outcome.message


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("infinite loop", "while True:\n    pass\n", "timeout"),
        ("sleeping forever", "import time\ntime.sleep(1000)\n", "timeout"),
        ("fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", "timeout"),
        ("memory bomb", "block = bytearray(8 * 1024 ** 3)\n", "error"),
        ("gigabytes of output", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", "error"),
        ("sys.exit(0) before the tests", "import sys\nsys.exit(0)\nassert False\n", "error"),
        ("os._exit(0) before the tests", "import os\nos._exit(0)\nassert False\n", "error"),
        ("patched AssertionError", "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\nassert False\n", "failed"),
    ],
)
def test_hostile_programs_are_contained(name, code, status):
    started = time.perf_counter()
    outcome = run_program(code, FAST)
    assert outcome.status == status, (name, outcome)
    assert time.perf_counter() - started < FAST.timeout_s + 5


def test_fork_bomb_leaves_no_process_behind():
    run_program("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", FAST)
    time.sleep(0.5)
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).endswith("harness.py")]
    assert not leftovers


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_secrets_in_the_parent_environment_are_not_inherited(monkeypatch):
    monkeypatch.setenv("DATEEVAL_TEST_SECRET", "hunter2")
    outcome = run_program("import os\nassert 'DATEEVAL_TEST_SECRET' not in os.environ\nassert 'hunter2' not in str(os.environ)\n")
    assert outcome.passed


@pytest.mark.skipif(not UNPRIVILEGED, reason="the sandbox cannot drop privileges here (root without setpriv)")
def test_cannot_write_or_delete_outside_its_folder(tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    os.chmod(tmp_path, 0o755)
    code = f"import os\ntry:\n    os.remove({str(victim)!r})\nexcept OSError:\n    pass\ntry:\n    open({str(tmp_path / 'new.txt')!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
    run_program(code)
    assert victim.read_text() == "precious" and not (tmp_path / "new.txt").exists()
    # Its own folder is writable, and removed afterwards.
    outcome = run_program("import os\nopen('scratch.txt', 'w').write('x')\nprint(os.getcwd())\n")
    assert outcome.passed


@pytest.mark.skipif(not NETWORK_ISOLATED, reason="no network namespace on this OS (unshare --net unavailable)")
def test_no_network():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
        outcome = run_program(code)
    assert outcome.status == "error" and "Error" in outcome.message


def test_programs_run_in_parallel():
    started = time.perf_counter()
    outcomes = run_many(["import time\ntime.sleep(1)\n"] * 4, workers=4)
    assert all(o.passed for o in outcomes)
    assert time.perf_counter() - started < 3.5  # four one-second programs side by side, not one after another


def test_every_canonical_humaneval_solution_passes_and_empty_bodies_fail(data_dir):
    problems = humaneval.load_problems(data_dir)
    assert len(problems) == 164
    passed = humaneval.grade(problems, [p.canonical_solution for p in problems])
    assert [p.task_id for p, o in zip(problems, passed) if not o.passed] == []
    empty = humaneval.grade(problems[:10], ["    pass\n"] * 10)
    assert not any(o.passed for o in empty)


def test_completions_as_body_or_whole_function_both_run(data_dir):
    problem = humaneval.load_problems(data_dir)[0]
    body_only = "```python\n" + problem.canonical_solution + "```"
    whole = f"Here it is:\n```python\n{problem.prompt}{problem.canonical_solution}```\nDone."
    broken = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    completions = [humaneval.extract_completion(text, problem) for text in (body_only, whole, broken)]
    outcomes = humaneval.grade([problem] * 3, completions)
    assert [o.status for o in outcomes] == ["passed", "passed", "failed"]
    assert "```python" in humaneval.user_message(problem)
