"""The engine's math-library settings, decided in one place for every entry point.

Two promises depend on them (figures: ``docs/benchmarks.md``, "Same numbers, any load"):

* **Reproducible bits.** Packed scoring gives an item the same float32 log-probabilities whatever its batch, order and
  thread count. That holds only if MKL computes a row of a matrix product the same way whatever the number of rows and
  threads, which its default CPU dispatch does not promise: on AVX-512/AMX machines its kernels change with the row
  count. MKL's conditional numerical reproducibility in strict mode (``MKL_CBWR=AUTO,STRICT``: the machine's own code
  branch, AVX2 or AVX-512) makes GEMM's results independent of threads. MKL reads it when it loads, so
  :func:`configure_environment` runs when ``dateeval`` is imported, before torch; a user's own ``MKL_CBWR`` wins (spelled
  as MKL reads it: upper case, no spaces), one MKL does not know is refused (:func:`check_environment`) rather than
  silently ignored, and a branch this CPU cannot run is named in a warning (:func:`cbwr_warning`): MKL runs AUTO then.
  :func:`settings` reads back what MKL actually uses, and the backend records it with every row.
* **Half precision keeps its threads.** bfloat16 and float16 matrix products run in oneDNN, not MKL, and oneDNN has no
  strict mode: its AMX kernels (Intel Xeon from Sapphire Rapids on) split a product's reduction differently at another
  thread count, so a bfloat16 score moved by up to 0.04 when the governor went from 2 threads to 1. A model in half
  precision therefore runs at one fixed thread count (``DATEEVAL_THREADS``, else every core it may use) and is not
  governed: the same machine gives the same bits, and a busy machine costs time instead of changing results.
* **Speed on a busy machine.** torch's OpenMP threads meet at the end of every operation; when another process holds
  one of our cores, every meeting waits for a scheduler slice, and a 2-core sweep beside one CPU-bound job ran 3-4x
  slower than quiet. :class:`ThreadGovernor` keeps torch's intra-op threads at the cores other processes leave free,
  re-read twice a second from ``/proc/stat``. Results do not depend on it (the property above includes thread counts).
  The meetings themselves must not waste a shared core either: libgomp's threads spin 300,000 times (about 3 ms)
  before they sleep, and on a busy machine that spinning takes the slice the thread they wait for needs. Here a
  thread spins 10,000 times (``GOMP_SPINCOUNT``, about 0.1 ms), then sleeps: as fast as spinning quietly, as good as
  not spinning when busy (``bench/busy_machine.py``; ``docs/benchmarks.md``). A user's ``OMP_WAIT_POLICY`` or
  ``GOMP_SPINCOUNT`` wins.

``DATEEVAL_THREADS`` overrides the governor: ``auto`` (default) or a fixed number of threads.
Figures: ``docs/measurement.md`` ("Same bits at any thread count") and ``docs/benchmarks.md``.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import sys
import time
from pathlib import Path

THREADS_ENV = "DATEEVAL_THREADS"
DEFAULT_CBWR = "AUTO,STRICT"
SPIN_COUNT = "10000"  # libgomp's spins before a waiting thread sleeps (its default: 300,000)
MAX_THREADS = 4096  # more than any CPU this runs on; a larger number is a typo (libgomp would reserve stacks for each)
GOVERNED_DTYPES = ("float32",)  # dtypes whose kernels give the same bits at any thread count (MKL STRICT)
IDLE_AFTER_S = 2.0  # a window in which the model idled this long tells the load of the past, not now
FRESH_WINDOW_S = 0.05  # the window read instead: 10 clock ticks on 2 cores

# mkl_cbwr.h: the branch values MKL reports, and the STRICT flag (bitwise results whatever the thread count)
_CBWR_BRANCHES = {
    0: "OFF",
    1: "UNSET",
    2: "AUTO",
    3: "COMPATIBLE",
    4: "SSE2",
    6: "SSSE3",
    7: "SSE4_1",
    8: "SSE4_2",
    9: "AVX",
    10: "AVX2",
    11: "AVX512_MIC",
    12: "AVX512",
    13: "AVX512_MIC_E1",
    14: "AVX512_E1",
}
_CBWR_STRICT = 0x10000
_CBWR_ALL = -1
# The /proc/cpuinfo flags each branch needs (oneMKL's "Specifying Code Branches"), lowest first: the last one a CPU
# has is its best. AVX512_MIC and AVX512_MIC_E1 (Xeon Phi) are deprecated and run as AVX2; AUTO needs nothing.
_AVX2 = frozenset({"avx2", "fma"})
_AVX512 = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})
_CBWR_NEEDS = {
    "COMPATIBLE": frozenset(),
    "SSE2": frozenset({"sse2"}),
    "SSSE3": frozenset({"ssse3"}),
    "SSE4_1": frozenset({"sse4_1"}),
    "SSE4_2": frozenset({"sse4_2"}),
    "AVX": frozenset({"avx"}),
    "AVX2": _AVX2,
    "AVX512": _AVX512,
    "AVX512_E1": _AVX512 | {"avx512_vnni"},
    "AVX512_MIC": _AVX2,
    "AVX512_MIC_E1": _AVX2,
}
_ANY_VENDOR = ("AUTO", "COMPATIBLE")  # the branches MKL runs on a CPU not made by Intel; others fall back to AUTO


def configure_environment() -> None:
    """Set MKL's reproducibility before any library loads it; ``import dateeval`` calls this, a user's settings win."""
    os.environ.setdefault("MKL_DYNAMIC", "FALSE")  # MKL would otherwise take fewer threads when the machine is busy
    os.environ["MKL_CBWR"] = _spelled(os.environ.get("MKL_CBWR", DEFAULT_CBWR))
    if "OMP_WAIT_POLICY" not in os.environ:  # a user's wait policy wins (libgomp would let GOMP_SPINCOUNT override it)
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)


def _count(value: str) -> int | None:
    """A thread count written in ASCII digits, 1 to ``MAX_THREADS``; None for anything else (``²`` is a digit to
    ``str.isdigit`` but not to ``int``)."""
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 6:
        return None
    return int(value) if 1 <= int(value) <= MAX_THREADS else None


def requested_threads() -> int | None:
    """The fixed thread count ``DATEEVAL_THREADS`` asks for, or None for the governor ("auto", unset)."""
    value = os.environ.get(THREADS_ENV, "auto").strip().lower()
    if value in ("", "auto"):
        return None
    count = _count(value)
    if count is None:
        from dateeval.errors import DateEvalError

        raise DateEvalError(f"{THREADS_ENV}={value!r}: give 'auto' or a number of threads from 1 to {MAX_THREADS}")
    return count


_CBWR_WORDS = {name for name in _CBWR_BRANCHES.values() if name not in ("OFF", "UNSET")}


def _cbwr_words(value: str) -> list[str] | None:
    """An ``MKL_CBWR`` value's branch and optional ``STRICT``, in MKL's spelling; None where MKL knows no such mode."""
    words = [word.strip().upper() for word in value.split(",")]
    return words if words[0] in _CBWR_WORDS and words[1:] in ([], ["STRICT"]) else None


def _spelled(value: str) -> str:
    """A known mode as MKL reads it: MKL ignores ``avx2`` or ``AUTO,strict`` (it runs plain AUTO), so a user's
    ``avx2`` is written ``AVX2`` before MKL loads; an unknown value is left for :func:`check_environment` to refuse."""
    words = _cbwr_words(value)
    return value if words is None else ",".join(words)


def cbwr_warning(value: str, vendor: str, flags: set[str]) -> str | None:
    """Why MKL will not run the branch ``MKL_CBWR`` names on a CPU of this vendor and these ``/proc/cpuinfo`` flags
    (None where it will): MKL then runs AUTO without a word, so the mode a user asked for would not be what ran."""
    words = _cbwr_words(value)
    if words is None or words[0] == "AUTO":
        return None
    runs = ",".join(["AUTO", *words[1:]])
    if vendor != "GenuineIntel" and words[0] not in _ANY_VENDOR:
        return (
            f"MKL_CBWR={value!r}: MKL runs a branch other than {' or '.join(_ANY_VENDOR)} only on Intel CPUs (this one "
            f"is {vendor}), so it runs {runs} instead"
        )
    if not _CBWR_NEEDS[words[0]] <= flags:
        best = [branch for branch, needs in _CBWR_NEEDS.items() if needs <= flags and "MIC" not in branch][-1]
        return f"MKL_CBWR={value!r}: this CPU has no {words[0]} branch (its best: {best}), so MKL runs {runs} instead"
    return None


def _cpu_flags() -> tuple[str, set[str]] | None:
    """The CPU's vendor and instruction-set flags from ``/proc/cpuinfo``; None where it has none (not Linux x86)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    fields = {name.strip(): text.strip() for name, _, text in (line.partition(":") for line in lines)}
    return (fields["vendor_id"], set(fields["flags"].split())) if {"vendor_id", "flags"} <= fields.keys() else None


@functools.cache
def _warn(message: str) -> None:
    """One warning line on stderr, once per process: every model's load checks the environment."""
    print(f"dateeval: warning: {message}", file=sys.stderr, flush=True)


def check_environment() -> None:
    """Refuse a thread or MKL setting that MKL or OpenMP would ignore or choke on, with one line, before a model
    loads: MKL silently runs its default for a word it does not know, so the mode recorded with the rows would not be
    what ran. A branch this CPU cannot run is a warning: MKL runs AUTO instead, and the rows record that."""
    from dateeval.errors import DateEvalError

    requested_threads()
    cbwr = os.environ.get("MKL_CBWR")
    if cbwr is not None:
        if _cbwr_words(cbwr) is None:
            raise DateEvalError(
                f"MKL_CBWR={cbwr!r}: give a branch ({', '.join(sorted(_CBWR_WORDS))}), optionally with ',STRICT' (default {DEFAULT_CBWR})"
            )
        cpu = _cpu_flags()
        if cpu is not None and (message := cbwr_warning(cbwr, *cpu)):
            _warn(message)
    omp = os.environ.get("OMP_NUM_THREADS")
    if omp is not None and omp.strip() and _count(omp) is None:
        raise DateEvalError(f"OMP_NUM_THREADS={omp!r}: give a number of threads from 1 to {MAX_THREADS}")


def _mkl_cbwr() -> str:
    """MKL's conditional-reproducibility mode as MKL itself reports it (``AUTO,STRICT``), or ``n/a`` without MKL."""
    import torch

    if not torch.backends.mkl.is_available():
        return "n/a"
    try:
        get = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return "unknown"
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_int]
    mode = get(_CBWR_ALL)
    branch = _CBWR_BRANCHES.get(mode & ~_CBWR_STRICT, str(mode & ~_CBWR_STRICT))
    return branch + (",STRICT" if mode & _CBWR_STRICT else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def fixed_threads(dtype: str) -> int | None:
    """The thread count a model of ``dtype`` runs at throughout, or None where the governor may change it."""
    return requested_threads() or (None if dtype in GOVERNED_DTYPES else available_cores())


def settings(dtype: str) -> dict[str, str]:
    """What a reader needs to compare runs across machines: kernels, MKL's mode, threads. Recorded with every row."""
    import torch

    fixed = fixed_threads(dtype)
    return {
        "cpu": _cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl_cbwr": _mkl_cbwr(),
        "threads": str(fixed) if fixed else f"auto (1-{available_cores()})",
    }


def _affinity() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def available_cores() -> int:
    """The governor's ceiling: the cores this process may run on, or fewer where ``OMP_NUM_THREADS`` says so (Ray
    sets it to an actor's CPUs)."""
    cores = len(_affinity())
    omp = _count(os.environ.get("OMP_NUM_THREADS", ""))
    return min(cores, omp) if omp else cores


def _cpu_ticks(cpus: set[int]) -> tuple[int, int] | None:
    """(busy, total) clock ticks of the given CPUs since boot, from ``/proc/stat``; None where there is none."""
    busy = total = 0
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        values = [int(v) for v in rest.split()[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(values)
        busy += sum(values) - values[3] - values[4]
    return (busy, total) if total else None


class ThreadGovernor:
    """Sets torch's intra-op threads to the cores that other processes leave free, at most every ``interval_s``.

    Called before each forward pass (a forward pre-hook), so every path that runs the model follows the load. The
    other processes' share is the CPUs' busy time less this process's own, smoothed so a burst does not halve the
    threads; a core counts as free while others use under half of it (2 cores beside one busy job: 1 thread).
    """

    def __init__(self, interval_s: float = 0.5, cores: int | None = None) -> None:
        self.interval_s = interval_s
        self.cpus = _affinity()
        self.cores = cores or available_cores()
        self.others = 0.0  # cores in use by other processes, smoothed
        self._last: tuple[float, int, int, float] | None = None  # (monotonic, busy ticks, total ticks, own CPU s)

    def __call__(self, *_hook_args: object) -> None:
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < self.interval_s:
            return
        self.adjust(now)

    def adjust(self, now: float | None = None) -> int:
        """Re-read the load and set torch's threads; returns the thread count now in force."""
        import torch

        now = time.monotonic() if now is None else now
        if self._idled(now):
            # The model sat idle (a client waiting on a server, a sweep between units): the window since the last
            # reading tells what the others did then, not now, so a short fresh window replaces it. Without this, a
            # server that ran while the model idled cost its next forwards half the threads (docs/benchmarks.md).
            self._read(now, weight=0.0)
            time.sleep(FRESH_WINDOW_S)
            self._read(time.monotonic(), weight=1.0)
        else:
            self._read(now, weight=0.5)
        threads = self.threads_for(self.others)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        return threads

    def _idled(self, now: float) -> bool:
        """Whether the model sat idle for a while since the last reading: the window's wall time less the time this
        process spent computing (its CPU time over its threads; a reading comes before a forward, so a window holds the
        forward it started), over ``IDLE_AFTER_S``. A long forward is not idle: its window is the load it ran beside."""
        import torch

        if self._last is None:
            return False
        computing = (time.process_time() - self._last[3]) / torch.get_num_threads()
        return now - self._last[0] - computing > IDLE_AFTER_S

    def _read(self, now: float, weight: float) -> None:
        """Read the CPUs' ticks; fold the other processes' share since the last reading into ``others`` by ``weight``."""
        ticks, own = _cpu_ticks(self.cpus), time.process_time()
        if weight and ticks is not None and self._last is not None and ticks[1] > self._last[2]:
            _, busy, total, own_before = self._last
            share = ((ticks[0] - busy) - (own - own_before) * os.sysconf("SC_CLK_TCK")) / (ticks[1] - total)
            self.others = (1 - weight) * self.others + weight * max(0.0, share) * len(self.cpus)
        if ticks is not None:
            self._last = (now, ticks[0], ticks[1], own)

    def threads_for(self, others: float) -> int:
        """Threads for a given load of other processes (in cores): the free cores, at least one."""
        return max(1, min(self.cores, math.floor(self.cores - others + 0.5)))


def govern(model: object, dtype: str) -> ThreadGovernor | None:
    """Fix or govern the threads of a CPU model: a fixed count (``DATEEVAL_THREADS``, or every core in half
    precision, :func:`fixed_threads`) is set once, else a governor is hooked."""
    import torch

    fixed = fixed_threads(dtype)
    if fixed:
        torch.set_num_threads(fixed)
        return None
    governor = ThreadGovernor()
    model.register_forward_pre_hook(governor)
    governor.adjust()
    return governor
