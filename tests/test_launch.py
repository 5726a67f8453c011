"""The first command on a fresh machine: ``./run.sh app`` serves the explorer without asking anything."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request

from conftest import ROOT
from test_browser import _free_port


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
