"""The first command on a fresh machine: ``./run.sh app`` serves the explorer without asking anything; ``dateeval app``
says when the explorer is open to the network, refuses in one line what it cannot serve, and an install's demo is
never written into the package or through a link (issue 62 §5)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, demo_copy
from test_browser import _free_port

from dateeval import bundle, cli
from dateeval.cli import launch


def test_the_explorer_starts_with_no_streamlit_credentials_and_no_terminal(tmp_path):
    """A new user (a ``HOME`` with no ``~/.streamlit``), stdin from /dev/null as in a container or under nohup, and the
    README's command with its browser opening on (``server.headless=false``): the server answers its health check and
    nothing asks for an email address. ``BROWSER=true`` makes the browser Streamlit opens a no-op."""
    port = _free_port()
    env = {**os.environ, "HOME": str(tmp_path), "BROWSER": "true", "HF_HUB_OFFLINE": "1"}
    env.pop("XDG_CONFIG_HOME", None)
    process = subprocess.Popen(
        ["./run.sh", "app", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as answer:
                    assert answer.read() == b"ok"
                    break
            except OSError:
                time.sleep(0.5)
        else:
            process.kill()
            raise AssertionError(
                f"no health check answered (exit {process.poll()}):\n{process.communicate()[0][-3000:]}"
            )
    finally:
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert "Email" not in output and not (tmp_path / ".streamlit" / "credentials.toml").exists(), output


# Issue 62 §5: where `dateeval app` listens, a HOME Streamlit cannot use, and an install's demo that is never written
# through a link or into the installed package.


@pytest.fixture
def started(monkeypatch) -> list:
    """`dateeval app` up to the server: what it prepares and starts is recorded instead of done (the demo's statistics,
    Streamlit), so a test sees whether any work began and what Streamlit was given."""
    calls: list = []
    monkeypatch.setattr(launch, "prepare_demo", lambda: calls.append("demo"))
    monkeypatch.setattr(launch, "main", lambda argv=None: calls.append(argv))
    return calls


def _app(*options: str) -> int:
    return cli.main(["app", "--port", str(_free_port()), "--no-browser", *options])


@pytest.mark.parametrize("host", ["0.0.0.0", "", "::"])
def test_an_explorer_open_to_the_network_says_so(host, started, capsys):
    """Every interface (`0.0.0.0`, `''`, `::`) serves the explorer, which reads this machine's files, starts sweeps and
    takes uploads, to whoever reaches it: one warning line says so. `''` is handed to Streamlit as `0.0.0.0` (the same
    sockets), which it shows as local and network URLs instead of `URL: http://:PORT`."""
    assert _app("--host", host) == 0
    warning = capsys.readouterr().err.splitlines()
    assert len(warning) == 1 and warning[0].startswith("dateeval: warning: --host "), warning
    assert "opens the explorer to the network" in warning[0] and "every interface" in warning[0]
    options = started[-1]
    assert options[options.index("--server.address") + 1] == (host or "0.0.0.0")


def test_another_address_of_this_machine_is_warned_with_its_url(started, capsys):
    """A specific address that is not loopback (the one this machine would send from) is open to its network too."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as route:
        try:
            route.connect(("198.51.100.1", 9))  # picks the outgoing interface; sends nothing
        except OSError:
            pytest.skip("this machine has no route off loopback")
        own = route.getsockname()[0]
    assert _app("--host", own) == 0
    warning = capsys.readouterr().err
    assert f"opens the explorer to the network (http://{own}:" in warning, warning


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_a_loopback_explorer_warns_nothing(host, started, capsys):
    assert _app("--host", host) == 0
    assert capsys.readouterr().err == "" and len(started) == 2


@pytest.mark.parametrize("host", ["no.such.host.invalid", "203.0.113.77", "a" * 70])
def test_a_host_this_machine_cannot_listen_on_is_one_line_before_any_work(host, started, capsys):
    """A name that does not resolve (`socket.gaierror`), another machine's address (TEST-NET-3: `Cannot assign requested
    address`) or a label too long to encode were Streamlit's tracebacks, after the demo's statistics were kept."""
    assert _app("--host", host) == cli.EXIT_ERROR
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].startswith("dateeval: error: ") and host in error[0], error
    assert started == []


@pytest.mark.parametrize("file", ["", ".streamlit"])
def test_a_home_streamlit_cannot_keep_its_settings_in_is_one_line_before_any_work(
    file, tmp_path, monkeypatch, started, capsys
):
    """HOME a file, or ~/.streamlit a file: Streamlit reads ~/.streamlit/secrets.toml at start and died with
    `NotADirectoryError`."""
    home = tmp_path / "home"
    (home / file).parent.mkdir(parents=True, exist_ok=True)
    (home / file).write_text("")
    monkeypatch.setenv("HOME", str(home))
    assert _app() == cli.EXIT_ERROR
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].startswith(f"dateeval: error: {home / file} is a file"), error
    assert started == []


@pytest.fixture
def shipped(tmp_path, monkeypatch) -> Path:
    """An install's explorer (a wheel's `dateeval/_explorer/` with its demo store) and the user's cache, both under
    `tmp_path`; returns the shipped demo store."""
    explorer = tmp_path / "site-packages" / "dateeval" / "_explorer"
    store = demo_copy(explorer / "demo")
    (explorer / "app.py").write_text("")
    monkeypatch.setattr(bundle, "PACKAGED", explorer)
    monkeypatch.setenv("DATEEVAL_CACHE", str(tmp_path / "cache"))
    assert bundle.installed() and bundle.packaged_demo() == store
    return store


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder``, with its size and modification time: what any write changes."""
    return {
        str(path.relative_to(folder)): (path.lstat().st_size, path.lstat().st_mtime_ns) for path in folder.rglob("*")
    }


def test_an_install_keeps_the_demos_statistics_in_its_copy(shipped, capsys):
    before = _files(shipped)
    store = launch.prepare_demo()
    assert store == bundle.demo_copy() == bundle.demo_store() and list(store.glob(".aggregates/derived/*/*.parquet"))
    assert _files(shipped) == before and "read-only" not in capsys.readouterr().err


def test_a_demo_that_cannot_be_copied_opens_read_only_and_nothing_is_written_into_the_install(
    shipped, tmp_path, monkeypatch, capsys
):
    """The user's cache cannot be made (here: a file stands where a folder must be): the warning says "the demo opens
    read-only", and it does (the statistics were kept into site-packages: 79 files)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("DATEEVAL_CACHE", str(blocker / "cache"))
    before = _files(shipped)
    assert launch.prepare_demo() == shipped
    assert _files(shipped) == before
    assert "the demo opens read-only" in capsys.readouterr().err


@pytest.mark.parametrize("level", ["store", "its folder"])
def test_a_link_planted_at_the_demo_copy_is_neither_opened_nor_written_through(level, shipped, tmp_path, capsys):
    """A link where the demo's copy goes (the store, or the folder named by the shipped files), leading to another
    store: that store opened as the demo and got its statistics (64 files). The link is left as it is, not followed:
    the shipped demo opens read-only, and neither store changes."""
    other = demo_copy(tmp_path / "other")
    planted, target = (bundle.demo_copy(), other) if level == "store" else (bundle.demo_copy().parent, other.parent)
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.symlink_to(target, target_is_directory=True)
    others, shipped_before = _files(other.parent), _files(shipped)
    assert launch.prepare_demo() == shipped and bundle.demo_store() == shipped
    assert _files(other.parent) == others and _files(shipped) == shipped_before and planted.is_symlink()
    assert f"{planted} is a link" in capsys.readouterr().err


# Issue 64 §4: `dateeval app --store PATH` opens the store `dateeval run --store PATH` wrote, beside the demo; a path
# that holds no results is one line before any work.


@pytest.fixture
def unopened(monkeypatch) -> None:
    """No store opened by `dateeval app --store` (the variable it sets, put back as it was after the test)."""
    monkeypatch.setenv(bundle.OPENED_STORE, "")  # recorded, so the delete below is undone
    monkeypatch.delenv(bundle.OPENED_STORE)


@pytest.mark.parametrize("kind", ["missing", "file", "empty folder", "folder of other files"])
def test_a_store_that_is_no_store_is_one_line_before_any_work(kind, tmp_path, started, capsys, unopened):
    """Opened as it was, each showed an empty explorer ("My results" with no dataset), as if the sweep were lost."""
    path = tmp_path / "store"
    if kind == "file":
        path.write_text("")
    elif kind != "missing":
        path.mkdir()
    if kind == "folder of other files":
        (path / "notes").mkdir()
        (path / "notes" / "read.me").write_text("")
    assert _app("--store", str(path)) == cli.EXIT_ERROR
    error = capsys.readouterr().err.splitlines()
    assert len(error) == 1 and error[0].startswith(f"dateeval: error: --store {path}"), error
    assert started == [] and bundle.OPENED_STORE not in os.environ


def test_a_store_opens_beside_the_demo_and_the_run_page_writes_into_it(tmp_path, started, monkeypatch, unopened):
    """The explorer (served in this process) opens on the store, "My results", and its Run page writes there, whatever
    `DATEEVAL_STORE` says; a relative path is taken from where the command ran."""
    from dateeval.explorer import state

    store = demo_copy(tmp_path / "mine")
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "elsewhere"))
    monkeypatch.chdir(tmp_path)
    assert _app("--store", "mine/store") == 0 and started[0] == "demo"
    assert os.environ[bundle.OPENED_STORE] == str(store)
    assert state.results_store() == store and state.default_store() == "mine"
    assert state.store_choices() == {"Built-in demo": state.DEMO_STORE, "My results": store}


def test_without_a_store_the_explorer_opens_on_the_demo(monkeypatch, tmp_path, unopened):
    from dateeval.explorer import state

    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path))
    assert state.default_store() == "demo" and state.results_store() == tmp_path
