"""The sandbox contains hostile programs; HumanEval's canonical solutions pass in it.

Every attack found against the previous sandbox (issue 9) is a test here: the
attack is tried for real and the test checks it was contained and that other
programs' grades did not change.
"""

import shutil
import socket
import time
import uuid
from pathlib import Path

import pytest

from dateeval.sandbox import Check, Limits, run_check, run_many
from dateeval.tasks import humaneval

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
FAST = Limits(timeout_s=5, cpu_s=5)


def probe(body: str, expected: object, limits: Limits = FAST) -> object:
    """Run ``body`` as the model's function ``f()`` and check it returns ``expected``: 'passed' means contained."""
    solution = "import os, sys, ctypes, socket, glob\n\ndef f():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return run_check(Check(solution, f"assert candidate() == {expected!r}, candidate()\n", "f"), limits)


def program(code: str, limits: Limits = FAST):
    """A whole program as the 'solution' (it runs when loaded) with a checker that needs ``f() == 1``."""
    return run_check(Check(code + "\ndef f():\n    return 1\n", "assert candidate() == 1\n", "f"), limits)


def test_pass_fail_and_error():
    assert program("x = 1").status == "passed"
    wrong = run_check(Check("def f():\n    return 2\n", "assert candidate() == 1, 'wrong'\n", "f"))
    assert wrong.status == "failed" and "wrong" in wrong.message
    raising = run_check(Check("def f():\n    raise ValueError('boom')\n", "candidate()\n", "f"))
    assert raising.status == "error" and "ValueError: boom" in raising.message
    assert program("def broken(:\n").status == "error"


def test_values_cross_as_plain_data():
    values = "[1, 2.5, 'x', None, True, (1, 2), {3, 4}, frozenset({5}), {'k': [1]}, {(1, 2): 3}, b'\\x00', 10**40, float('inf')]"
    assert run_check(Check("def f(x):\n    return x\n", f"v = {values}\nassert candidate(v) == v\nassert type(candidate((1,))) is tuple\n", "f")).passed


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("infinite loop", "while True:\n    pass\n", "timeout"),
        ("sleeping forever", "import time\ntime.sleep(1000)\n", "timeout"),
        ("fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", "timeout"),
        ("memory bomb", "block = bytearray(8 * 1024 ** 3)\n", "error"),
        ("gigabytes of output", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", "error"),
        ("sys.exit(0) before the tests", "import sys\nsys.exit(0)\n", "error"),
        ("os._exit(0) before the tests", "import os\nos._exit(0)\n", "error"),
        ("kill the checker's group", "import os, signal\nos.kill(-1, signal.SIGKILL)\n", "error"),
    ],
)
def test_hostile_programs_are_contained(name, code, status):
    started = time.perf_counter()
    outcome = program(code)
    assert outcome.status == status, (name, outcome)
    assert time.perf_counter() - started < FAST.timeout_s + 5


def test_patched_builtins_or_eq_cannot_fake_a_pass():
    patched = "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\ndef f():\n    return 2\n"
    assert run_check(Check(patched, "assert candidate() == 1\n", "f")).status == "failed"
    always_equal = "class Yes:\n    def __eq__(self, other):\n        return True\ndef f():\n    return Yes()\n"
    assert run_check(Check(always_equal, "assert candidate() == 1\n", "f")).status == "failed"
    int_subclass = "class Yes(int):\n    def __eq__(self, other):\n        return True\ndef f():\n    return Yes(0)\n"
    assert run_check(Check(int_subclass, "assert candidate() == 1\n", "f")).status == "failed"


def test_a_forged_verdict_on_every_descriptor_is_ignored():
    """The old pass token lived in the harness's frame; now nothing the program holds leads to the verdict."""
    forge = (
        "import os, json, sys\n"
        "frames = []\nframe = sys._getframe()\nwhile frame:\n    frames.append(repr(frame.f_locals))\n    frame = frame.f_back\n"
        "for fd in range(0, 64):\n    try:\n        os.write(fd, b'{\"status\": \"passed\", \"message\": \"\"}\\n')\n    except OSError:\n        pass\n"
        "os._exit(0)\n"
    )
    outcome = run_check(Check(forge, "assert candidate() == 1\n", "f"), FAST)
    assert outcome.status == "error", outcome


def test_one_attacker_cannot_change_other_programs_grades():
    """Nine always-failing programs and one attacker that looks for them everywhere it can reach."""
    attacker = (
        "import os, glob\n"
        "def f():\n"
        "    for path in glob.glob('/proc/*/cwd') + glob.glob('/tmp/*') + glob.glob('/tmp/dateeval-sandbox-*/*'):\n"
        "        try:\n"
        "            open(os.path.join(path, 'harness.py'), 'w').write('import os\\nos._exit(0)\\n')\n"
        "        except OSError:\n"
        "            pass\n"
        "    for pid in os.listdir('/proc'):\n"
        "        if pid.isdigit() and int(pid) != os.getpid():\n"
        "            try:\n"
        "                os.kill(int(pid), 9)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return 1\n"
    )
    failing = Check("def f():\n    import time\n    time.sleep(0.3)\n    return 2\n", "assert candidate() == 1\n", "f")
    outcomes = run_many([failing] * 4 + [Check(attacker, "assert candidate() == 1\n", "f")] + [failing] * 5, FAST, workers=4)
    assert [o.status for o in outcomes] == ["failed"] * 4 + ["passed"] + ["failed"] * 5


def test_the_grader_never_follows_a_path_the_program_planted(tmp_path):
    secret = tmp_path / "root-only.txt"
    secret.write_text("TOP-SECRET-7731")
    secret.chmod(0o600)
    plant = (
        "import os\n"
        f"for name in ('stdout', 'stderr', 'verdict', 'program.py', 'harness.py'):\n"
        f"    os.symlink({str(secret)!r}, name)\n"
        "os.mkfifo('fifo')\n"
        "for name in ('out', 'result'):\n"
        "    os.mkfifo(name)\n"
        f"print(open({str(secret)!r}).read())\n"
    )
    started = time.perf_counter()
    outcome = program(plant)
    assert outcome.status == "error" and "TOP-SECRET" not in outcome.message, outcome
    assert "FileNotFoundError" in outcome.message
    assert time.perf_counter() - started < FAST.timeout_s  # a FIFO where output was read cannot hang the grader


def test_host_processes_data_store_and_packages_are_out_of_sight(data_dir, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "unit.parquet").write_bytes(b"PAR1")
    visible_pids = "return sorted(p for p in os.listdir('/proc') if p.isdigit())"
    assert probe(visible_pids, ["1", "2"]).passed  # bwrap's init and the program itself: nobody else's command line
    found = (
        "hits = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root.startswith(('/proc', '/sys', '/dev')):\n"
        "        dirs.clear()\n"
        "        continue\n"
        "    hits += [os.path.join(root, n) for n in files if 'HumanEval' in n or n.endswith(('.parquet', '.gguf', '.jsonl.gz'))]\n"
        f"hits += [p for p in ({str(data_dir)!r}, {str(store)!r}, {str(Path.cwd())!r}, '/etc/passwd', '/etc/shadow', '/var') if os.path.exists(p)]\n"
        "return hits"
    )
    assert probe(found, []).passed


def test_host_unix_sockets_are_unreachable(tmp_path):
    path = tmp_path / "host.sock"
    abstract = f"\0dateeval-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as on_disk, socket.socket(socket.AF_UNIX) as in_abstract:
        on_disk.bind(str(path))
        on_disk.listen()
        in_abstract.bind(abstract)
        in_abstract.listen()
        body = (
            "reached = []\n"
            f"for address in ({str(path)!r}, {abstract!r}):\n"
            "    try:\n"
            "        socket.socket(socket.AF_UNIX).connect(address)\n"
            "        reached.append(address)\n"
            "    except OSError:\n"
            "        pass\n"
            "return reached"
        )
        assert probe(body, []).passed


def test_no_network():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        body = f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\nexcept OSError:\n    return 'refused'\nreturn 'connected'"
        assert probe(body, "refused").passed


def test_no_new_user_or_mount_namespaces():
    body = (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "return [libc.unshare(flag) for flag in (0x10000000, 0x00020000, 0x10000000 | 0x00020000)]"  # NEWUSER, NEWNS
    )
    assert probe(body, [-1, -1, -1]).passed


def test_scratch_space_is_private_capped_and_gone_afterwards():
    marker = f"dateeval-marker-{uuid.uuid4().hex}"
    fill = (
        "written = []\n"
        "for folder in ('/tmp', '/dev/shm', '/var/tmp', '.'):\n"
        "    try:\n"
        "        os.makedirs(folder, exist_ok=True)\n"
        f"        with open(os.path.join(folder, {marker!r}), 'wb') as handle:\n"
        "            for _ in range(64):\n"
        "                handle.write(b'x' * (1 << 20))\n"
        "        written.append(folder)\n"
        "    except OSError:\n"
        "        pass\n"
        "return written"
    )
    assert probe(fill, [], Limits(timeout_s=10, tmp_mb=8)).passed  # 64 MB fits nowhere with 8 MB of scratch
    assert probe(f"open('/tmp/{marker}', 'w').write('x')\nreturn os.listdir('/tmp')", [marker]).passed
    assert probe("return os.listdir('/tmp') + os.listdir('/dev/shm')", []).passed  # the next program starts empty
    assert not any(marker in str(p) for folder in ("/tmp", "/dev/shm", "/var/tmp") for p in Path(folder).glob("*"))


def test_the_process_limit_is_per_program():
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    threaded = (
        "import threading\n"
        "def f():\n"
        "    results = []\n"
        "    threads = [threading.Thread(target=results.append, args=(i,)) for i in range(16)]\n"
        "    [t.start() for t in threads]\n"
        "    [t.join() for t in threads]\n"
        "    return sorted(results)\n"
    )
    late = "import time\ntime.sleep(1)\n"  # the threaded program starts while the bomb is at its limit
    checks = [Check(bomb + "def f():\n    return 1\n", "assert candidate() == 1\n", "f"),
              Check(late + threaded, "assert candidate() == list(range(16))\n", "f")]  # fmt: skip
    bomb_outcome, threaded_outcome = run_many(checks, FAST, workers=2)
    assert bomb_outcome.status == "timeout" and threaded_outcome.passed, (bomb_outcome, threaded_outcome)


def test_a_fork_bomb_is_capped_at_its_own_limit():
    """Not the host's limit: as root the sandbox drops to its own user id, which the kernel does count."""
    counter = (
        "import os, time\n"
        "def f():\n"
        "    children = 0\n"
        "    while True:\n"
        "        try:\n"
        "            pid = os.fork()\n"
        "        except OSError:\n"
        "            return children\n"
        "        if pid == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        children += 1\n"
    )
    outcome = run_check(Check(counter, f"assert candidate() < {FAST.processes}, candidate()\n", "f"), FAST)
    assert outcome.passed, outcome


def test_programs_run_unprivileged_and_filtered():
    body = (
        "status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "return [os.getuid() != 0, int(status['CapEff'], 16), int(status['CapPrm'], 16), status['Seccomp'].strip(),\n"
        "        libc.ptrace(16, 1, 0, 0)]"  # PTRACE_ATTACH to init
    )
    assert probe(body, [True, 0, 0, "2", -1]).passed


def test_nothing_is_left_running():
    program("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and "solution.py" in _cmdline(p)]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def test_secrets_in_the_parent_environment_are_not_inherited(monkeypatch):
    monkeypatch.setenv("DATEEVAL_TEST_SECRET", "hunter2")
    assert probe("return [k for k, v in os.environ.items() if 'hunter2' in v or k == 'DATEEVAL_TEST_SECRET']", []).passed


def test_a_correct_solution_printing_a_megabyte_passes():
    chatty = "def f():\n    print('y' * (1 << 20))\n    return 1\n"
    outcome = run_check(Check(chatty, "assert candidate() == 1\n", "f"))
    assert outcome.passed, outcome


def test_programs_run_in_parallel():
    started = time.perf_counter()
    outcomes = run_many([Check("import time\ntime.sleep(1)\ndef f():\n    return 1\n", "assert candidate() == 1\n", "f")] * 4, workers=4)
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
    cut_off = f"Here it is:\n```python\n{problem.prompt}{problem.canonical_solution}"  # --max-new-tokens hit: no closing fence
    broken = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    completions = [humaneval.extract_completion(text, problem) for text in (body_only, whole, cut_off, broken)]
    assert "```" not in completions[2]
    outcomes = humaneval.grade([problem] * 4, completions)
    assert [o.status for o in outcomes] == ["passed", "passed", "passed", "failed"]
    assert "```python" in humaneval.user_message(problem)


def test_missing_bubblewrap_is_one_clear_error(monkeypatch):
    from dateeval import sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    sandbox._base_command.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxUnavailable, match="apt-get install -y bubblewrap"):
            sandbox.bwrap_path()
    finally:
        sandbox._base_command.cache_clear()
