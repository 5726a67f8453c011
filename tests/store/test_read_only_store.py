"""A store opened only to read (a shared or published one, a read-only mount) changes in nothing and gives the numbers a
writable store with everything kept gives: the results layer never writes (issue 37, item 4).

Tests run as root, where ``chmod a-w`` stops no write: "nothing written" is asserted by comparing a recursive listing
(sizes, modification times, modes) before and after. The real read-only case runs the commands inside a read-only bind
mount (``unshare -rm`` + ``mount --bind -o ro``), skipped with the reason where this machine cannot make one.
"""

import os
import shlex
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, run_cli
from streamlit.testing.v1 import AppTest

from dateeval import results
from dateeval.keeping import keep
from dateeval.results.sources import stored
from dateeval.store import Store, sidecars
from dateeval.store import tables as store_tables

PAGES = [
    "pages/overview.py",
    "pages/curves.py",
    "pages/leaderboard.py",
    "pages/robust.py",
    "pages/flips.py",
    "pages/factors.py",
    "pages/prompt.py",
    "pages/run.py",
]
# What each command prints, on both stores (export writes its file outside the store).
COMMANDS = {
    "summary": ["summary", "--json"],
    "robust": ["robust", "--json"],
    "export": ["export", "--out", "{out}/rows.csv"],
}


def _listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under ``root`` (itself included) with its size, modification time and mode."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in [".", *folders, *files]:
            path = Path(folder) / name
            info = path.lstat()
            found[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns, info.st_mode)
    return found


def _read_only(root: Path) -> None:
    """``chmod -R a-w``: what a shared store looks like to its readers (root writes through it all the same)."""
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            path = Path(folder) / name
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    root.chmod(root.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _forget() -> None:
    """Forget what this process read or computed, as a new process would start."""
    store_tables._READ.clear()
    store_tables._ITEMS.clear()
    stored._KEPT.clear()


def _outputs(store: Path, out: Path) -> dict[str, str]:
    """Each command's standard output (and the exported file) on ``store``; each must succeed."""
    found = {}
    for name, args in COMMANDS.items():
        done = run_cli(*[arg.format(out=out) for arg in args], "--store", str(store))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        found[name] = (out / "rows.csv").read_text() if name == "export" else done.stdout
    return found


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """The demo twice: one writable with everything kept (sidecars and statistics, as ``./run.sh app`` leaves it), one
    read-only and bare (never opened: no sidecar, no statistic); and the kept one's command outputs."""
    base = tmp_path_factory.mktemp("stores")
    kept, bare = base / "kept", base / "bare"
    shutil.copytree(ROOT / "demo" / "store", kept, ignore=shutil.ignore_patterns(sidecars.FOLDER))
    shutil.copytree(ROOT / "demo" / "store", bare, ignore=shutil.ignore_patterns(sidecars.FOLDER))
    assert keep(Store(kept)) == [] and (kept / sidecars.FOLDER / store_tables.KEPT_FOLDER).is_dir()
    _read_only(bare)
    out = base / "kept-out"
    out.mkdir()
    return kept, bare, _outputs(kept, out)


def test_a_read_only_store_opens_in_every_command_with_the_kept_numbers_and_nothing_written(stores, tmp_path):
    kept, bare, expected = stores
    before = _listing(bare)
    assert _outputs(bare, tmp_path) == expected  # summary --json and robust --json byte for byte, the export's rows too
    _forget()
    view, problems = results.open(bare)
    _forget()
    other, _ = results.open(kept)
    assert not problems.messages() and view.chance.headline() == other.chance.headline()
    mine, theirs = view.statistics(), other.statistics()
    for table in ("factors", "significance"):
        pd.testing.assert_frame_equal(mine[table], theirs[table])
    assert _listing(bare) == before


def test_keep_on_a_read_only_mount_says_so_in_one_line(stores, tmp_path):
    """The explicit keep is the one writer a reader might call on a shared store: one warning, no traceback."""
    _, bare, _ = stores
    script = f"from dateeval.keeping import keep; from dateeval.store import Store; print(keep(Store({str(bare)!r})))"
    done = _in_read_only_mount(bare, [sys.executable, "-c", script])
    assert done.returncode == 0 and "were not kept" in done.stdout and "Traceback" not in done.stderr, done.stderr


def test_a_store_on_a_read_only_mount_opens_in_every_command(stores, tmp_path):
    """The issue's user: a results folder on a read-only mount ended ``dateeval summary`` in ``OSError: Read-only file
    system: '.aggregates'``."""
    _, bare, expected = stores
    for name, args in COMMANDS.items():
        done = _in_read_only_mount(
            bare, [sys.executable, "-m", "dateeval", *[arg.format(out=tmp_path) for arg in args], "--store", str(bare)]
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert ((tmp_path / "rows.csv").read_text() if name == "export" else done.stdout) == expected[name], name


def test_every_page_opens_on_a_read_only_store(stores, monkeypatch):
    """Each explorer page on the read-only store, with no error and nothing written; under a read-only mount too."""
    _, bare, _ = stores
    before = _listing(bare)
    monkeypatch.setenv("DATEEVAL_STORE", str(bare))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for page in PAGES:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        at.query_params["store"] = "mine"
        at.run()
        at.switch_page(page).run()
        assert not at.exception and not at.error, (page, [e.message for e in at.exception], [e.value for e in at.error])
    assert _listing(bare) == before
    pages = textwrap.dedent(f"""
        from streamlit.testing.v1 import AppTest
        for page in {PAGES!r}:
            at = AppTest.from_file({str(ROOT / "app.py")!r}, default_timeout=300)
            at.query_params["store"] = "mine"
            at.run()
            at.switch_page(page).run()
            assert not at.exception and not at.error, (page, [e.message for e in at.exception], [e.value for e in at.error])
        print("every page opened")
    """)
    done = _in_read_only_mount(bare, [sys.executable, "-c", pages])
    assert done.returncode == 0 and "every page opened" in done.stdout, done.stdout[-2000:] + done.stderr[-4000:]


def _in_read_only_mount(folder: Path, command: list[str]) -> subprocess.CompletedProcess:
    """``command`` in a mount namespace of its own where ``folder`` is bind-mounted read-only (skips where this
    machine cannot make one: no ``unshare``, or user namespaces refused)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here: the read-only bind mount cannot be made")
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f"mount --bind -o ro {shlex.quote(str(folder))} {shlex.quote(str(folder))}"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"cannot make a read-only bind mount here (unshare -rm, mount --bind -o ro): {probe.stderr.strip()}"
        )
    mount = f"mount --bind -o ro {shlex.quote(str(folder))} {shlex.quote(str(folder))} && touch {shlex.quote(str(folder / '.probe'))} 2>/dev/null && exit 97; exec {shlex.join(command)}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "DATEEVAL_STORE": str(folder)}
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", mount], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900
    )
    assert done.returncode != 97, "the bind mount took a write: not read-only"
    return done


# What writes a file: Path's and pandas' writers, pyarrow's, the store's own, os-level removal and renaming.
WRITERS = {
    "write",
    "write_text",
    "write_bytes",
    "write_table",
    "to_parquet",
    "to_json",
    "mkdir",
    "makedirs",
    "unlink",
    "rmdir",
    "rmtree",
    "touch",
    "symlink_to",
}


def _writes(tree) -> list[str]:
    """The calls in ``tree`` that write: a writer by name, pandas' ``to_csv`` given a path, or ``open`` in a writing mode
    (``export.to_csv(table)``, a plain function, returns text)."""
    import ast

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        mode = next((arg.value for arg in node.args[1:2] if isinstance(arg, ast.Constant)), "r")
        if (
            name in WRITERS
            or (
                name == "to_csv"
                and isinstance(node.func, ast.Attribute)
                and (node.args or any(k.arg == "path_or_buf" for k in node.keywords))
            )
            or (name == "open" and set(str(mode)) & set("wax+"))
        ):
            found.append(f"line {node.lineno}: {name}")
    return found


def test_the_results_package_has_no_write_path():
    """Read by its source: nothing under dateeval/results/ writes a file (the user's files are :mod:`dateeval.cli.outputs`',
    kept statistics the sweep's commit and ``keep``'s); the check itself catches a writer put back in."""
    import ast

    written = {
        path.name: _writes(ast.parse(path.read_text())) for path in sorted((ROOT / "dateeval" / "results").glob("*.py"))
    }
    assert not {name: calls for name, calls in written.items() if calls}
    assert _writes(ast.parse("out.write_text('x')\nframe.to_csv(path)\nopen(p, 'w')\nstore.write(p, table)")) == [
        "line 1: write_text",
        "line 2: to_csv",
        "line 3: open",
        "line 4: write",
    ]
    assert not _writes(
        ast.parse("frame.to_csv(index=False)\nto_csv(table)\nopen(p)\nopen(p, 'rb')\ntext.replace('a', 'b')")
    )
