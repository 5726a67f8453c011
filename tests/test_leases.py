"""Leases on work units: live owners keep them, dead or silent ones lose them, takeover is atomic."""

import json
import os
import socket
import threading
import time

from dateeval.leases import Leases, Owner, holder, lease_path


def _plant(unit, host: str, pid: int, ttl_s: float, age_s: float) -> None:
    """A lease written by someone else, whose last heartbeat was ``age_s`` ago."""
    unit.parent.mkdir(parents=True, exist_ok=True)
    path = lease_path(unit)
    path.write_text(json.dumps({"host": host, "pid": pid, "token": "theirs", "ttl_s": ttl_s}))
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_a_live_holder_keeps_its_unit_and_release_frees_it(tmp_path):
    unit = tmp_path / "m" / "d" / "u.parquet"
    first, second = Leases(), Leases()
    assert first.acquire(unit)
    assert not second.acquire(unit)  # this process is alive and beating
    first.release(unit)
    assert second.acquire(unit) and holder(unit).owner == second.owner
    second.close()
    assert holder(unit) is None


def test_a_dead_owner_on_this_host_loses_its_lease_at_once(tmp_path):
    unit = tmp_path / "u.parquet"
    _plant(unit, socket.gethostname(), 999_999_999, ttl_s=3600, age_s=0)  # a PID that cannot exist
    leases = Leases()
    assert leases.acquire(unit) and holder(unit).owner == leases.owner
    leases.close()


def test_a_live_owner_on_another_host_keeps_it_until_its_heartbeat_stops(tmp_path):
    unit = tmp_path / "u.parquet"
    _plant(unit, "other-host", 1, ttl_s=30, age_s=1)  # beat a second ago: alive, wherever it runs
    leases = Leases()
    assert not leases.acquire(unit)
    _plant(unit, "other-host", 1, ttl_s=30, age_s=31)  # silent for longer than its time to live
    assert leases.acquire(unit)
    leases.close()


def test_a_reused_pid_is_not_mistaken_for_the_owner(tmp_path):
    """Our own PID in a lease with another token and a stale heartbeat: the token tells them apart, age expires it."""
    unit = tmp_path / "u.parquet"
    _plant(unit, socket.gethostname(), os.getpid(), ttl_s=5, age_s=10)
    leases = Leases()
    assert leases.acquire(unit)
    leases.close()


def test_the_heartbeat_keeps_a_lease_young(tmp_path):
    unit = tmp_path / "u.parquet"
    leases = Leases(ttl_s=0.4)
    assert leases.acquire(unit)
    time.sleep(1.0)  # more than twice the time to live: only the heartbeat keeps it
    assert holder(unit).age_s < 0.4 and not holder(unit).expired
    assert not Leases(owner=Owner("other-host", 1, "x"), ttl_s=0.4).acquire(unit)
    leases.close()


def test_only_one_of_many_takes_over_an_expired_lease(tmp_path):
    unit = tmp_path / "u.parquet"
    _plant(unit, "gone-host", 1, ttl_s=1, age_s=100)
    contenders = [Leases(owner=Owner(f"host{i}", i, str(i))) for i in range(8)]
    won = []
    barrier = threading.Barrier(len(contenders))

    def race(leases: Leases) -> None:
        barrier.wait()
        if leases.acquire(unit):
            won.append(leases.owner)

    threads = [threading.Thread(target=race, args=(leases,)) for leases in contenders]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(won) == 1 and holder(unit).owner == won[0]
