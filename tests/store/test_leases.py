"""Leases on work units: live owners keep them, dead or silent ones lose them, takeover is atomic."""

import fcntl
import json
import os
import socket
import threading
import time

import pytest

from dateeval.errors import DateEvalError
from dateeval.store.leases import GUARD_PATIENCE_S, MAX_CLOCK_SKEW_S, Leases, Owner, holder, lease_path


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
    contenders = [
        Leases(owner=Owner(f"host{i}", i + 1, str(i))) for i in range(8)
    ]  # process ids start at 1 (0 is no process)
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


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            '{"host": "%s", "pid": 99999999999999999999, "token": "t", "ttl_s": 60}',
            "pid 99999999999999999999 is not a process id",
        ),
        ('{"host": "%s", "pid": -7, "token": "t", "ttl_s": 60}', "pid -7 is not a process id"),
        ('{"host": "%s", "pid": "12", "token": "t", "ttl_s": 60}', "pid '12' is not a process id"),
        ('{"host": "%s", "pid": 1, "token": "t", "ttl_s": Infinity}', "ttl_s inf is not a number of seconds"),
        ('{"host": "%s", "pid": 1, "token": "t", "ttl_s": NaN}', "ttl_s nan is not a number of seconds"),
        ('{"host": "%s", "pid": 1, "token": "t", "ttl_s": 1e300}', "ttl_s 1e+300 is not a number of seconds"),
        ('{"host": "%s", "pid": 1, "token": "t", "ttl_s": "60"}', "ttl_s '60' is not a number of seconds"),
        ('{"host": "%s", "pid": 1, "token": "t"}', "no field 'ttl_s'"),
        ('["%s"]', "list indices must be integers"),
        ('{"host": "%s", "pid": 1, "tok', "Unterminated string"),
        ("[" * 2000 + "1" + "]" * 2000, "recursion"),
        ("%s" + " " * 5000, "longer than 4096 bytes"),
        ('{"host": "%s", "pid": 1, "token": "t", "ttl_s": 60, "x": "\xff"}', ""),
    ],
)
def test_a_malformed_lease_is_taken_over_at_once_and_named(tmp_path, text, fragment):
    """Bad fields a hand or a crash can leave: never a traceback (OverflowError on a huge PID) nor a wait without end (NaN, Infinity)."""
    unit = tmp_path / "u.parquet"
    path = lease_path(unit)
    path.write_text(text.replace("%s", socket.gethostname()), encoding="latin-1" if "\xff" in text else "utf-8")
    assert holder(unit).expired
    leases = Leases()
    started = time.monotonic()
    assert leases.acquire(unit) and holder(unit).owner == leases.owner
    assert time.monotonic() - started < 5
    assert len(leases.notes) == 1 and f"malformed lease {path}" in leases.notes[0] and fragment in leases.notes[0], (
        leases.notes
    )
    leases.close()


def test_a_heartbeat_far_in_the_future_does_not_hold_a_unit_forever(tmp_path):
    unit = tmp_path / "u.parquet"
    _plant(unit, "other-host", 1, ttl_s=60, age_s=-10 * 365 * 86400)
    leases = Leases()
    assert leases.acquire(unit)
    assert "in the future" in leases.notes[0]
    leases.close()


def _finishes(call, seconds: float = 10.0):
    """``call()``'s result or exception, failing the test (rather than hanging it) when it does not return in time."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append(call())
        except Exception as error:  # whatever it raises is handed back to the test
            outcome.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds} s"
    return outcome[0]


def test_a_fifo_in_place_of_a_lease_is_malformed_not_a_hang(tmp_path):
    unit = tmp_path / "u.parquet"
    os.mkfifo(lease_path(unit))
    leases = Leases()
    assert _finishes(lambda: leases.acquire(unit)) is True and holder(unit).owner == leases.owner
    assert "not a regular file" in leases.notes[0], leases.notes
    leases.close()


def test_a_fifo_in_place_of_the_guard_is_named_not_a_hang(tmp_path):
    os.mkfifo(tmp_path / ".leases.guard")
    outcome = _finishes(lambda: Leases().acquire(tmp_path / "u.parquet"))
    assert isinstance(outcome, DateEvalError) and "is not a regular file" in str(outcome), outcome


def test_a_held_guard_fails_without_waiting_when_told_not_to_wait(tmp_path):
    """Another process stuck while holding the guard: ``--no-wait`` (``wait=False``) says so instead of waiting for it."""
    with (tmp_path / ".leases.guard").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another open file: flock excludes it as it would another process
        started = time.monotonic()
        outcome = _finishes(lambda: Leases(wait=False).acquire(tmp_path / "u.parquet"))
        assert isinstance(outcome, DateEvalError) and ".leases.guard" in str(outcome) and "--no-wait" in str(outcome), (
            outcome
        )
        assert time.monotonic() - started < GUARD_PATIENCE_S + 1
    leases = Leases(wait=False)
    assert leases.acquire(tmp_path / "u.parquet")  # released: taken at once
    leases.close()


@pytest.mark.parametrize(
    ("ahead_s", "believed"), [(MAX_CLOCK_SKEW_S / 2, True), (MAX_CLOCK_SKEW_S * 2, False), (3000, False)]
)
def test_a_heartbeat_ahead_of_the_clock_is_believed_only_within_the_skew_allowance(tmp_path, ahead_s, believed):
    """A live owner whose clock runs a little fast keeps its unit; a heartbeat minutes ahead would hold it that long."""
    unit = tmp_path / "u.parquet"
    _plant(unit, "other-host", 1, ttl_s=60, age_s=-ahead_s)
    leases = Leases()
    assert leases.acquire(unit) is not believed
    assert believed or "in the future" in leases.notes[0]
    leases.close()


def test_expired_leases_are_removed_and_live_ones_kept(tmp_path):
    """A driver killed after writing its unit leaves the unit's lease, which no sweep takes again: ``remove_expired`` goes."""
    dead, live = tmp_path / "m" / "d" / "dead.parquet", tmp_path / "m" / "d" / "live.parquet"
    _plant(dead, socket.gethostname(), 999_999_999, ttl_s=60, age_s=0)
    _plant(live, "other-host", 1, ttl_s=60, age_s=1)
    lease_path(tmp_path / "m" / "d" / "bad.parquet").write_text("{")
    removed = Leases().remove_expired(tmp_path)
    assert (
        len(removed) == 2
        and f"removed {lease_path(dead)}, an expired lease of" in removed[1]
        and "malformed lease" in removed[0]
    ), removed
    assert holder(dead) is None and holder(live) is not None
