"""Benchmark: the seconds and peak memory each input bomb of issue 25 takes before its one-line error.

Each bomb is a few KB (or a sparse file) that parsing would blow up: a YAML "billion laughs" spec, a run-length encoded
Parquet file, a gzip of blank lines, a 2 GB sparse JSONL, a 50 MiB JSONL of empty rows, a catastrophic grading regex, a
reply of blank lines for HumanEval's completion extractor. Each runs in its own process under an address-space limit
(``--limit-gb``, so a bomb that still explodes fails with MemoryError instead of exhausting a shared machine); the
figures are its wall and CPU seconds, its peak resident memory and the first words of what it ended with. ``--root`` picks the
checkout whose ``dateeval`` is measured (another worktree gives the "before" figures).

    .venv/bin/python bench/bombs.py [--root .] [--limit-gb 4] [--timeout 120]
"""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = '{"question": "2 + 2 = ?", "choices": ["3", "4"], "answer": 1}\n'
LAUGHS = "[&l0 lol, " + ", ".join(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, 10)) + "]"  # 9**9 lols

# What each child runs: it prints how it ended, then its peak RSS (KiB) as the last line.
LOAD = "build_task(resolve({path!r}))"
CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from dateeval.tasks import build_task, resolve
from dateeval.tasks.custom import Grading, extract_answer
from dateeval.tasks.humaneval import Problem, extract_completion
print(f"imports: peak {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f}} MiB", file=sys.stderr)
start, cpu = time.perf_counter(), time.process_time()
try:
{body}
    ended = "returned"
except BaseException as error:
    ended = f"{{type(error).__name__}}: {{str(error)[:90]}}"
print(f"{{time.perf_counter() - start:.2f}} s ({{time.process_time() - cpu:.2f}} s CPU) | {{ended}}")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def make_bombs(folder: Path) -> dict[str, str]:
    """Each bomb's name and the code that sets it off (files written into ``folder``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "rows.jsonl").write_text(ROWS)
    (folder / "laughs.yaml").write_text(f"data: rows.jsonl\nsystem_prompt: {LAUGHS}\n")
    (folder / "nan.toml").write_text('kind = "generation"\ndata = "open.jsonl"\n[grading]\nmethod = "numeric"\ntolerance = nan\n')
    (folder / "open.jsonl").write_text('{"question": "2 + 2?", "answer": "4"}\n')
    question = pa.DictionaryArray.from_arrays(pa.array([0] * 3000, pa.int32()), pa.array(["x" * 2**20]))  # 3 GB decoded, KB on disk
    pq.write_table(pa.table({"question": question, "choices": [["a", "b"]] * 3000, "answer": [0] * 3000}), folder / "rle.parquet")
    with gzip.open(folder / "blank.jsonl.gz", "wb", compresslevel=9) as handle:
        for _ in range(16):
            handle.write(b"\n" * 2**26)
    with open(folder / "sparse.jsonl", "wb") as handle:
        handle.truncate(2 * 2**30)
    (folder / "empty_rows.jsonl").write_bytes(b"{}\n" * (50 * 2**20 // 3))
    load = {name: LOAD.format(path=str(folder / name)) for name in ("laughs.yaml", "rle.parquet", "blank.jsonl.gz", "sparse.jsonl", "empty_rows.jsonl")}
    return {
        **load,
        "nan.toml (load, then grade)": LOAD.format(path=str(folder / "nan.toml")).replace("build_task(", "task = build_task(")
        + "\nprint(task.grade(task.items, ['4'], [None]))",
        "grading regex (a+)+$, 27 chars": "extract_answer('a' * 26 + '!', Grading('exact', extract='(a+)+$'))",
        "grading regex (a|aa)+$, 37 chars": "extract_answer('a' * 36 + '!', Grading('exact', extract='(a|aa)+$'))",
        "extract_completion, 80,000 newlines": "extract_completion('\\n' * 80000 + 'x', Problem('HumanEval/0', 'def f():\\n', '', '', 'f'))",
    }


def measure(name: str, body: str, root: Path, limit: int, timeout: float) -> str:
    """One bomb in its own process under ``prlimit --as``: seconds, how it ended, peak RSS."""
    code = CHILD.format(root=str(root), body=textwrap.indent(body, "    "))
    try:
        done = subprocess.run(["prlimit", f"--as={limit}", sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"{name:38} | still running after {timeout:g} s (a hang; stopped)"
    lines = done.stdout.strip().splitlines()
    if len(lines) < 2 or not lines[-1].isdigit():
        return f"{name:38} | died (rc {done.returncode}): {(done.stderr.strip().splitlines() or [''])[-1][:90]}"
    return f"{name:38} | {lines[-2]} | peak {int(lines[-1]) / 2**10:.0f} MiB ({done.stderr.strip().splitlines()[0]})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose dateeval is measured")
    parser.add_argument("--limit-gb", type=float, default=4.0, help="address-space limit of each bomb's process")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds after which a bomb counts as a hang")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for name, body in make_bombs(Path(folder)).items():
            print(measure(name, body, args.root.resolve(), int(args.limit_gb * 1e9), args.timeout), flush=True)


if __name__ == "__main__":
    main()
