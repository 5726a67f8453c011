"""A sweep never reports success with a unit missing: it waits for units other drivers hold, or fails naming them."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time

from conftest import ROOT, run_cli_process

from dateeval.store.leases import lease_path


def _plant(unit, host: str, ttl_s: float) -> None:
    """A lease held by a driver on another host that has just beaten."""
    lease_path(unit).write_text(json.dumps({"host": host, "pid": 1, "token": "theirs", "ttl_s": ttl_s}))
    os.utime(lease_path(unit))


def test_units_held_elsewhere_are_waited_for_or_named(data_dir, tmp_path):
    store = tmp_path / "store"
    args = [
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01,2024-01-02",
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--store",
        str(store),
    ]
    assert run_cli_process(*args).returncode == 0
    unit = next(store.rglob("2024-01-02-*.parquet"))
    unit.unlink()  # as if another driver were computing it right now
    _plant(unit, "other-host", ttl_s=3600)
    refused = run_cli_process(*args, "--no-wait")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "arc_challenge / 2024-01-02" in refused.stderr and "other-host" in refused.stderr and not unit.exists()

    _plant(unit, "other-host", ttl_s=8)  # its owner stops beating: the lease expires 8 s from now
    started = time.perf_counter()
    waited = run_cli_process(*args)
    assert waited.returncode == 0, waited.stderr
    assert unit.exists() and "done: 2 units" in waited.stdout
    assert time.perf_counter() - started > 8  # it waited for the lease rather than skipping the unit

    unit.unlink()  # a lease left with a PID no process can have (was an OverflowError): taken over at once and named
    lease_path(unit).write_text(
        json.dumps({"host": "other-host", "pid": 99999999999999999999, "token": "t", "ttl_s": 60})
    )
    malformed = run_cli_process(*args, "--no-wait")
    assert malformed.returncode == 0 and unit.exists(), malformed.stderr
    assert "malformed lease" in malformed.stderr and "Traceback" not in malformed.stderr


def _args(data_dir, store) -> list[str]:
    return [
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01",
        "--dtype",
        "float32",
        "--device",
        "cpu",
        "--store",
        str(store),
    ]


def test_a_held_guard_ends_a_no_wait_run_in_one_line(data_dir, tmp_path):
    """Another process stuck while holding a folder's ``.leases.guard``: ``--no-wait`` names it rather than waiting on it."""
    store = tmp_path / "store"
    assert run_cli_process(*_args(data_dir, store)).returncode == 0
    unit = next(store.rglob("2024-01-01-*.parquet"))
    unit.unlink()
    with (unit.parent / ".leases.guard").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        refused = run_cli_process(*_args(data_dir, store), "--no-wait", timeout=120)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert ".leases.guard" in refused.stderr and "--no-wait" in refused.stderr and not unit.exists()


# Run the CLI with os.fsync killing the process (SIGKILL) at the first fsync of a file under the store's .aggregates.
_KILLED_AT_SIDECAR_FSYNC = """
import os, runpy, signal, sys
real = os.fsync
def fsync(descriptor):
    if "/.aggregates/" in os.readlink(f"/proc/self/fd/{descriptor}"):
        os.kill(os.getpid(), signal.SIGKILL)
    real(descriptor)
os.fsync = fsync
sys.argv = ["dateeval", *sys.argv[1:]]
runpy.run_module("dateeval", run_name="__main__")
"""


def test_a_kill_at_an_fsync_leaves_nothing_after_a_successful_resume(data_dir, tmp_path):
    """Killed while writing a finished unit's sidecar: its staging file and the unit's lease are gone once a resume succeeds."""
    store = tmp_path / "store"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_AT_SIDECAR_FSYNC, *_args(data_dir, store)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list(store.rglob(".*.tmp")) and list(store.rglob(".*.lease"))  # what the kill left
    resumed = run_cli_process(*_args(data_dir, store))
    assert resumed.returncode == 0, resumed.stderr
    assert not list(store.rglob(".*.tmp")) and not list(store.rglob(".*.lease")), sorted(store.rglob(".*"))
