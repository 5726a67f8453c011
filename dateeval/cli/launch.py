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

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from dateeval import atomic, bundle
from dateeval.errors import DateEvalError
from dateeval.store import Store

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
    """The demo store with its statistics kept, where that writes nothing it must not: a clone keeps them beside its
    own demo; an install copies the shipped demo into the user's cache first and keeps them in the copy. Where no copy
    can be made (or a link stands where it goes), the shipped demo opens read-only: site-packages may be shared or
    read-only, so nothing is written into it, and the explorer computes the statistics in memory when first shown."""
    shipped = bundle.packaged_demo()
    store = bundle.demo_store()
    if bundle.installed() and store == shipped:  # not copied yet
        store = _copy(shipped, bundle.demo_copy())
    if not bundle.installed() or store != shipped:
        subprocess.run(
            [sys.executable, "-c", _KEEP, str(store)], check=False, env={**os.environ, "HF_HUB_OFFLINE": "1"}
        )
    return store


def _copy(source: Path, target: Path) -> Path:
    """Copy a folder whole or not at all, and return the store to open: the copy, or ``source`` (read-only) where it
    cannot be copied. A link on the way to ``target`` is left alone and never followed: dateeval makes none there, so
    it leads to another store or folder, which must neither open as the demo nor receive its files."""
    try:
        link = bundle.planted_link(target)
        if link is not None:
            raise OSError(f"{link} is a link, which dateeval never makes there: remove it to let the demo be copied")
        with atomic.creating(target) as staging:  # a second server may make it first: theirs stays
            shutil.copytree(source, staging)
    except OSError as error:
        print(
            f"dateeval: warning: the demo opens read-only, its statistics computed when first shown "
            f"(could not copy it to {target}: {error})",
            file=sys.stderr,
        )
        return source
    return target


def serve(port: int, host: str, browser: bool, store: str | None = None) -> int:
    """``dateeval app``: check where it is to listen, Streamlit's settings folder and the ``--store`` to open, keep the
    demo's statistics, then serve the explorer on ``host:port`` until stopped. The checks come first, so a mistake
    costs no work."""
    if not (bundle.folder() / "app.py").is_file():
        raise DateEvalError(f"the explorer's app.py is missing from {bundle.folder()}: reinstall dateeval")
    address = listening(host, port)
    streamlit_home()
    if store is not None:
        os.environ[bundle.OPENED_STORE] = str(
            results_in(store)
        )  # the server runs in this process, and its pages read it
    prepare_demo()
    main(["--server.port", str(port), "--server.address", address, "--server.headless", str(not browser).lower()])
    return 0


def listening(host: str, port: int) -> str:
    """The address to give Streamlit for ``--host host``, checked by binding it as Streamlit will, so that a name that
    does not resolve or another machine's address is one line here, not Streamlit's traceback after the demo is
    prepared. ``''`` (every interface) becomes ``0.0.0.0``, which Streamlit binds the same and shows as its local and
    network URLs (``''`` printed ``http://:PORT``). Any address that is not loopback gets a warning: whoever reaches
    the explorer may read this machine's files, start sweeps and upload."""
    address = host or "0.0.0.0"
    found = _bind(address, port)
    if not all(ip.is_loopback for ip in found):
        where = (
            f"port {port} on every interface"
            if any(ip.is_unspecified for ip in found)
            else f"http://{_netloc(address, port)}"
        )
        print(
            f"dateeval: warning: --host {host or repr(host)} opens the explorer to the network ({where}): whoever "
            "reaches it can read files on this machine, start sweeps and upload; the default 127.0.0.1 serves this "
            "machine only",
            file=sys.stderr,
        )
    return address


def _bind(address: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The IP addresses ``address`` names, the first bound and let go again as Streamlit's server binds it (IPv6 for an
    address with a colon, IPv4 for any other, names included); raises :class:`DateEvalError` where it cannot be."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        found = socket.getaddrinfo(address, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except (OSError, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise DateEvalError(
            f"--host {address} cannot be resolved ({reason}): give an address or name of this machine, e.g. 127.0.0.1"
        ) from None
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Streamlit's own socket
            probe.bind(found[0][4])
    except OSError as error:
        raise DateEvalError(f"cannot listen on {_netloc(address, port)}: {error.strerror or error}") from None
    return [ipaddress.ip_address(info[4][0]) for info in found]


def _netloc(address: str, port: int) -> str:
    """``address:port`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def results_in(path: str) -> Path:
    """``--store path`` as the explorer opens it (absolute), refused in one line where it holds no results: a path that
    does not exist, a file, or a folder with no unit files would open as an empty store and look like a lost sweep."""
    root = Path(path).expanduser().absolute()
    if not root.exists():
        raise DateEvalError(f"--store {path}: no such folder; give the folder `dateeval run --store` wrote")
    if not root.is_dir():
        raise DateEvalError(
            f"--store {path} is a file, not a results store: give the folder `dateeval run --store` wrote"
        )
    if not Store(root).files():
        raise DateEvalError(
            f"--store {path} holds no results (no model/dataset/*.parquet files): give the folder `dateeval run "
            "--store` wrote, or leave --store out and run a sweep from the Run page"
        )
    return root


def streamlit_home() -> None:
    """Refuse, in one line, a ``HOME`` where Streamlit's settings folder (``~/.streamlit``, whose secrets it reads at
    start) cannot be: a file there is Streamlit's ``NotADirectoryError`` traceback, after the demo is prepared."""
    settings = Path.home() / ".streamlit"
    for folder in (settings.parent, settings):
        if folder.exists() and not folder.is_dir():
            raise DateEvalError(
                f"{folder} is a file, not a folder: Streamlit reads its settings from {settings}; "
                "set HOME to a folder (or move the file)"
            )


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
