"""A sweep never reports success with a unit missing: it waits for units other drivers hold, or fails naming them."""

import json
import os
import time

from conftest import run_cli

from dateeval.leases import lease_path


def _plant(unit, host: str, ttl_s: float) -> None:
    """A lease held by a driver on another host that has just beaten."""
    lease_path(unit).write_text(json.dumps({"host": host, "pid": 1, "token": "theirs", "ttl_s": ttl_s}))
    os.utime(lease_path(unit))


def test_units_held_elsewhere_are_waited_for_or_named(data_dir, tmp_path):
    store = tmp_path / "store"
    args = ["run", "--dataset", "arc_challenge", "--data-dir", str(data_dir), "--limit", "2", "--dates", "2024-01-01,2024-01-02",
            "--dtype", "float32", "--device", "cpu", "--store", str(store)]  # fmt: skip
    assert run_cli(*args).returncode == 0
    unit = next(store.rglob("2024-01-02-*.parquet"))
    unit.unlink()  # as if another driver were computing it right now
    _plant(unit, "other-host", ttl_s=3600)
    refused = run_cli(*args, "--no-wait")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "arc_challenge / 2024-01-02" in refused.stderr and "other-host" in refused.stderr and not unit.exists()

    _plant(unit, "other-host", ttl_s=8)  # its owner stops beating: the lease expires 8 s from now
    started = time.perf_counter()
    waited = run_cli(*args)
    assert waited.returncode == 0, waited.stderr
    assert unit.exists() and "done: 2 units" in waited.stdout
    assert time.perf_counter() - started > 8  # it waited for the lease rather than skipping the unit

    unit.unlink()  # a lease left with a PID no process can have (was an OverflowError): taken over at once and named
    lease_path(unit).write_text(json.dumps({"host": "other-host", "pid": 99999999999999999999, "token": "t", "ttl_s": 60}))
    malformed = run_cli(*args, "--no-wait")
    assert malformed.returncode == 0 and unit.exists(), malformed.stderr
    assert "malformed lease" in malformed.stderr and "Traceback" not in malformed.stderr
