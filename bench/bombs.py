"""Benchmark: the seconds and peak memory each input bomb of issue 25 takes before its one-line error.

Each bomb is a few KB (or a sparse file) that parsing would blow up: a YAML "billion laughs" spec, a run-length encoded
Parquet file, a gzip of blank lines, a 2 GB sparse JSONL, a 50 MiB JSONL of empty rows, a catastrophic grading regex, a
reply of blank lines for HumanEval's completion extractor, an lm-eval task YAML of laughs, an lm-eval template
multiplying a string to 1 GB, and a "Hub" dataset (a local folder, loaded through the Hub's code path) of 300,000 rows
or of the run-length encoded Parquet file. Each runs in its own process under an address-space limit (``--limit-gb``, so
a bomb that still explodes fails with MemoryError instead of exhausting a shared machine); the figures are its wall and
CPU seconds, its peak resident memory (the child's own ``VmHWM``: Linux carries ``ru_maxrss`` over exec from the
launching process) and the first words of what it ended with. ``--root`` picks the checkout whose ``dateeval`` is
measured (another checkout gives the "before" figures).

    .venv/bin/python bench/bombs.py [--root .] [--limit-gb 4] [--timeout 120]
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROWS = '{"question": "2 + 2 = ?", "choices": ["3", "4"], "answer": 1}\n'
LAUGHS = (
    "[&l0 lol, " + ", ".join(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]" for n in range(1, 10)) + "]"
)  # 9**9 lols

# What each child runs: it prints how it ended, then its own peak RSS (KiB, VmHWM) as the last line.
LOAD = "build_task(resolve({path!r}))"
CHILD = """
import sys, time
sys.path.insert(0, {root!r})
def peak():
    return int(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")).split()[1])
from dateeval.tasks import build_task, resolve
from dateeval.tasks.grading import Grading, extract_answer
from dateeval.tasks.humaneval import Problem, extract_completion
print(f"imports: peak {{peak() / 2**10:.0f}} MiB", file=sys.stderr)
start, cpu = time.perf_counter(), time.process_time()
try:
{body}
    ended = "returned"
except BaseException as error:
    ended = f"{{type(error).__name__}}: {{str(error)[:90]}}"
print(f"{{time.perf_counter() - start:.2f}} s ({{time.process_time() - cpu:.2f}} s CPU) | {{ended}}")
print(peak())
"""
# An lm-eval multiple-choice task over two documents, with ``{extra}`` YAML lines (lm-eval's own loader reads it after dateeval).
TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: multiple_choice
doc_to_text: {text}
doc_to_choice: '{{{{choices}}}}'
doc_to_target: answer
{extra}"""


def make_bombs(folder: Path) -> dict[str, str]:
    """Each bomb's name and the code that sets it off (files written into ``folder``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "rows.jsonl").write_text(ROWS)
    (folder / "laughs.yaml").write_text(f"data: rows.jsonl\nsystem_prompt: {LAUGHS}\n")
    (folder / "nan.toml").write_text(
        'kind = "generation"\ndata = "open.jsonl"\n[grading]\nmethod = "numeric"\ntolerance = nan\n'
    )
    (folder / "open.jsonl").write_text('{"question": "2 + 2?", "answer": "4"}\n')
    question = pa.DictionaryArray.from_arrays(
        pa.array([0] * 3000, pa.int32()), pa.array(["x" * 2**20])
    )  # 3 GB decoded, KB on disk
    pq.write_table(
        pa.table({"question": question, "choices": [["a", "b"]] * 3000, "answer": [0] * 3000}), folder / "rle.parquet"
    )
    with gzip.open(folder / "blank.jsonl.gz", "wb", compresslevel=9) as handle:
        for _ in range(16):
            handle.write(b"\n" * 2**26)
    with open(folder / "sparse.jsonl", "wb") as handle:
        handle.truncate(2 * 2**30)
    (folder / "empty_rows.jsonl").write_bytes(b"{}\n" * (50 * 2**20 // 3))
    task = {"name": "bomb", "rows": folder / "rows.jsonl", "text": "'{{question}}'", "extra": ""}
    (folder / "task_laughs.yaml").write_text(TASK_YAML.format(**task | {"extra": f"metadata:\n  lols: {LAUGHS}\n"}))
    (folder / "task_jinja.yaml").write_text(TASK_YAML.format(**task | {"text": "\"{{ 'a' * 10**9 }}\""}))
    for name, data in (("hub_rows", folder / "many"), ("hub_rle", folder / "rle")):
        data.mkdir()
        (folder / f"{name}.toml").write_text(f'data = "hf:{data}"\n')
    (folder / "many" / "test.jsonl").write_text("".join(ROWS.replace("2 + 2", f"{n} + 2") for n in range(300_000)))
    (folder / "rle" / "test.parquet").write_bytes((folder / "rle.parquet").read_bytes())
    files = [
        "laughs.yaml",
        "rle.parquet",
        "blank.jsonl.gz",
        "sparse.jsonl",
        "empty_rows.jsonl",
        "task_laughs.yaml",
        "task_jinja.yaml",
        "hub_rows.toml",
        "hub_rle.toml",
    ]
    load = {
        name: LOAD.format(path=("lmeval:" if name.startswith("task_") else "") + str(folder / name)) for name in files
    }
    return {
        **load,
        "nan.toml (load, then grade)": LOAD.format(path=str(folder / "nan.toml")).replace(
            "build_task(", "task = build_task("
        )
        + "\nprint(task.grade(task.items, ['4'], [None]))",
        "grading regex (a+)+$, 27 chars": "extract_answer('a' * 26 + '!', Grading('exact', extract='(a+)+$'))",
        "grading regex (a|aa)+$, 37 chars": "extract_answer('a' * 36 + '!', Grading('exact', extract='(a|aa)+$'))",
        "extract_completion, 80,000 newlines": "extract_completion('\\n' * 80000 + 'x', Problem('HumanEval/0', 'def f():\\n', '', '', 'f'))",
    }


def measure(name: str, body: str, root: Path, limit: int, timeout: float, env: dict[str, str]) -> str:
    """One bomb in its own process under ``prlimit --as``: seconds, how it ended, peak RSS."""
    code = CHILD.format(root=str(root), body=textwrap.indent(body, "    "))
    try:
        done = subprocess.run(
            ["prlimit", f"--as={limit}", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=timeout,
            env=env,
        )
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
        # The Hub unreachable, datasets' cache in the folder, no progress bars on stderr (its first line is the imports' peak).
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_CACHE": str(Path(folder) / "cache"),
            "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        }
        for name, body in make_bombs(Path(folder)).items():
            print(measure(name, body, args.root.resolve(), int(args.limit_gb * 1e9), args.timeout, env), flush=True)


if __name__ == "__main__":
    main()
