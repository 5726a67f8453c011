"""Start the explorer: ``dateeval app`` (what ``./run.sh app`` runs), or ``python -m dateeval.cli.launch [streamlit run
options]`` for any Streamlit option.

Both serve app.py from :func:`dateeval.bundle.folder` (a clone's top level, or the copy a wheel carries), with
the explorer's Streamlit settings (``.streamlit/config.toml``) passed as options: Streamlit reads that file only from
the working folder, and an installed explorer is started from anywhere.

Streamlit takes a ``pages/`` folder beside the main script for a v1 multipage app until the main script has called
``st.navigation`` once in the server's life. So when the first request to a fresh server was a deep link
(``/flips?store=demo&...``), Streamlit ran ``pages/flips.py`` alone, in v1 mode: file names as navigation, a centred
layout, none of app.py's page titles. app.py lists its pages with ``st.navigation``; this launcher tells Streamlit so
before the server starts, and then runs it exactly as ``streamlit run app.py`` would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from dateeval import atomic, bundle
from dateeval.errors import DateEvalError

# The demo's statistics are kept in a process of their own before the server starts, so the first screen reads them.
_KEEP = (
    "import sys; from dateeval.keeping import keep; from dateeval.store import Store\n"
    "for message in keep(Store(sys.argv[1])): print(f'dateeval: warning: {message}', file=sys.stderr)"
)


def settings() -> list[str]:
    """The explorer's Streamlit settings (``.streamlit/config.toml`` beside app.py) as ``streamlit run`` options."""
    config = tomllib.loads((bundle.folder() / ".streamlit" / "config.toml").read_text())
    return [
        option
        for section, values in config.items()
        for key, value in values.items()
        for option in (f"--{section}.{key}", str(value).lower() if isinstance(value, bool) else str(value))
    ]


def prepare_demo() -> Path:
    """The demo store with its statistics kept; an install copies the shipped demo into the user's cache first."""
    store = bundle.demo_store()
    if bundle.installed() and store == bundle.packaged_demo():  # not copied yet
        store = _copy(store, bundle.demo_copy())
    subprocess.run([sys.executable, "-c", _KEEP, str(store)], check=False, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return store


def _copy(source: Path, target: Path) -> Path:
    """Copy a folder whole or not at all, and return the store to open: the copy, or ``source`` (read-only) where it
    cannot be copied."""
    try:
        with atomic.creating(target) as staging:  # a second server may make it first: theirs stays
            shutil.copytree(source, staging)
    except OSError as error:
        print(f"dateeval: warning: the demo opens read-only (could not copy it to {target}: {error})", file=sys.stderr)
        return source
    return target


def serve(port: int, address: str, browser: bool) -> int:
    """``dateeval app``: keep the demo's statistics, then serve the explorer on ``address:port`` until stopped."""
    if not (bundle.folder() / "app.py").is_file():
        raise DateEvalError(f"the explorer's app.py is missing from {bundle.folder()}: reinstall dateeval")
    prepare_demo()
    main(["--server.port", str(port), "--server.address", address, "--server.headless", str(not browser).lower()])
    return 0


def main(argv: list[str] | None = None) -> None:
    """``streamlit run app.py`` with the explorer's settings and ``argv`` (default: this process's arguments), pages
    declared by app.py only."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    PagesManager.uses_pages_directory = False  # app.py's st.navigation, not the folder, names the pages
    options = [*settings(), *(sys.argv[1:] if argv is None else argv)]
    cli.main(["run", str(bundle.folder() / "app.py"), *options], prog_name="streamlit")


if __name__ == "__main__":
    main()
