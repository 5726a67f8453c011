"""The Ray executor on a real two-node cluster (on this machine): the same store as the local executor, bit for bit.

Ray binds to the machine's network address, which these machines may not use,
so each scenario runs in a private network namespace with only loopback
(``unshare``, as root); a PID namespace around it ends every Ray process with it.
"""

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from conftest import ROOT
from dateeval.engine.sweep import LocalExecutor, Sweep
from dateeval.schema import ROW_KEY
from dateeval.store import Store

SCRIPT = ROOT / "tests" / "scripts" / "ray_sweep.py"
pytestmark = [
    pytest.mark.skipif(
        shutil.which("unshare") is None or os.geteuid() != 0,
        reason="needs root and unshare for a loopback-only namespace",
    ),
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed"),
]


def _isolated(command: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run a shell command in new network and PID namespaces with loopback up."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [
            "unshare",
            "--net",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "sh",
            "-c",
            f"ip link set lo up; {command}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def _scenario(store: Path, data_dir: Path, name: str) -> dict:
    result = _isolated(f"{sys.executable} {SCRIPT} {store} {data_dir} {name}")
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _rows(store: Path):
    """Every stored row, duplicates included (read file by file, not through the store's de-duplication)."""
    return pd.concat([pq.read_table(path).to_pandas() for path in Store(store).files()], ignore_index=True)


def _assert_same_results(store: Path, reference: Path, datasets: set[str] | None = None) -> None:
    ours, theirs = _rows(store), _rows(reference)
    if datasets is not None:
        theirs = theirs[theirs["dataset"].isin(datasets)]
    assert not ours.duplicated(subset=ROW_KEY).any(), "a unit was written twice"
    assert len(ours) == len(theirs)
    ours, theirs = (frame.sort_values(ROW_KEY).reset_index(drop=True) for frame in (ours, theirs))
    assert ours[ROW_KEY].equals(theirs[ROW_KEY])
    # a store of scored datasets only has no output column
    for column in [
        c for c in ("probs", "pred", "correct", "confidence", "label_mass", "output") if c in ours and c in theirs
    ]:
        assert [_plain(v) for v in ours[column]] == [_plain(v) for v in theirs[column]], column


def _plain(value: object) -> object:
    """A stored value comparable with ``==``: arrays as lists, a generation row's missing numbers (NaN) as None."""
    if hasattr(value, "__len__") and not isinstance(value, str):
        return list(value)
    return None if isinstance(value, float) and math.isnan(value) else value


@pytest.fixture(scope="module")
def local_store(tmp_path_factory, data_dir):
    sys.path.insert(0, str(SCRIPT.parent))
    from ray_sweep import spec

    store = tmp_path_factory.mktemp("local")
    Sweep(spec(str(data_dir)), Store(store), executor=LocalExecutor()).run()
    return store


def test_two_nodes_give_the_local_store_even_when_a_worker_is_killed_mid_unit(tmp_path, data_dir, local_store):
    """One actor per node; one actor's process is killed with SIGKILL while it computes: its units run on the other.
    GSM8K's units are generated in pools, as the local executor pools them, with the same replies and confidences."""
    report = _scenario(tmp_path, data_dir, "kill-worker")
    assert report["killed"] and any("died while computing" in message for message in report["messages"])
    assert report["units_done"] == report["units_total"] == 14
    assert any(label.startswith("gsm8k / ") and label.endswith("conditions together") for label in report["computing"])
    _assert_same_results(tmp_path, local_store)


def test_a_killed_driver_resumes(tmp_path, data_dir, local_store):
    """Kill -9 the driver once its first unit is stored; a rerun takes over its leases and finishes the rest."""
    run = (
        f"{sys.executable} -m dateeval run --executor ray --workers 1 --model smollm2-135m --dataset arc_challenge "
        f"--data-dir {data_dir} --limit 6 --dates 2024-01-01..2024-05-30/30d --no-date --dtype float32 --device cpu --batch-size 4 "
        f"--store {tmp_path}"
    )
    script = (
        f"{run} & driver=$!; "
        f"while [ -z \"$(find {tmp_path} -name '*.parquet' 2>/dev/null)\" ]; do sleep 0.5; done; "
        f"kill -9 $driver; sleep 1; {run}"
    )
    result = _isolated(script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "done: 7 units" in result.stdout
    _assert_same_results(tmp_path, local_store, datasets={"arc_challenge"})
