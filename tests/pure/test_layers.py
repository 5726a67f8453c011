"""The import layers (``.importlinter``): checked here as CI checks them, and shown to catch what they forbid.

The contract names the layers (the CLI above the explorer above the keep above results above the engine above the
store above tasks and backends) and the engine's own order (Ray executor, driver, worker, answers and plan), forbids
statistics and the store from importing a task, a backend or the sandbox, the results layer from reading the store's
sidecars or sums (it asks ``store/tables.py``), backends from importing a task, tasks from importing a backend (they
ask through ``dateeval.requests``), and any import circle; docs/architecture.md names every module and states the
layers in the contract's order. Skipped, with the reason, where import-linter is not installed.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None,
    reason="import-linter is not installed (.venv/bin/python -m pip install import-linter)",
)


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package under ``root`` with its ``.importlinter``, as CI runs it."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "1000"}  # one line per contract in the report
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env, timeout=300)


def test_the_import_contract_holds():
    checked = _lint_imports(ROOT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "10 kept, 0 broken" in checked.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("metrics.py", "from dateeval.tasks import registry as _registry", "Statistics and the store never import"),
        (
            "results/sources/unit_sums.py",
            "from dateeval import sandbox as _sandbox",
            "Statistics and the store never import",
        ),
        ("store/sidecars.py", "from dateeval.results import view as _view", "No import circle"),
        ("results/descriptive.py", "from dateeval.store import sums as _sums", "The store owns its format"),
        ("engine/sweep.py", "from dateeval import keeping as _keeping", "The CLI above the explorer"),
        ("store/runs.py", "from dateeval.engine import plan as _plan", "The CLI above the explorer"),
        ("engine/answers.py", "from dateeval.engine import worker as _worker", "Inside the engine"),
        ("backends/base.py", "from dateeval.tasks import base as _tasks", "Backends never import a task"),
        ("tasks/gsm8k.py", "from dateeval.backends import base as _backends", "Tasks never import a backend"),
        ("requests.py", "from dateeval.tasks import base as _tasks", "The requests know no task"),
    ],
)
def test_the_contract_fails_on_an_upward_import_or_a_circle(tmp_path, module, line, broken):
    """One forbidden import added to a copy of the package breaks the contract that forbids it (and, where it also
    closes a circle or crosses a layer, those too): the check can fail."""
    shutil.copytree(ROOT / "dateeval", tmp_path / "dateeval", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    with (tmp_path / "dateeval" / module).open("a") as handle:
        handle.write(f"\n{line}\n")  # a late, unused import: only import-linter reads the copy
    checked = _lint_imports(tmp_path)
    verdicts = [line for line in checked.stdout.splitlines() if line.endswith(("KEPT", "BROKEN"))]
    assert checked.returncode != 0 and next(line for line in verdicts if line.startswith(broken)).endswith("BROKEN"), (
        checked.stdout
    )


def test_the_architecture_page_names_every_module():
    """docs/architecture.md draws the folders as they are: every module of dateeval is named there (a package by its
    folder, ``engine/``), so a module added or moved without its line in the layout fails here."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    unnamed = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "dateeval").rglob("*.py"))
        if (f"{path.parent.name}/" if path.name == "__init__.py" else path.name) not in page
    ]
    assert not unnamed, f"docs/architecture.md does not name {unnamed}"


# How the architecture page's contract paragraph names each top-level layer of ``.importlinter``.
LAYER_WORDS = {
    "__main__": None,  # `python -m dateeval`: the CLI's entry, not a layer of its own on the page
    "cli": "the CLI",
    "explorer": "the explorer",
    "widths": "`widths`",
    "keeping": "the keep",
    "stats": "`stats`",
    "results": "`results`",
    "engine": "the engine",
    "serve": "`serve`",
    "regrade": "`regrade`",
    "store": "the store",
    "tasks": "tasks",
    "backends": "backends",
}


def test_the_architecture_page_states_the_layers_in_the_contracts_order():
    """docs/architecture.md's paragraph on the contract names the layers of ``.importlinter`` top to bottom, each
    after the one above it: a layer added, removed or moved in the contract without the page fails here."""
    import configparser

    contract = configparser.ConfigParser()
    contract.read(ROOT / ".importlinter")
    rows = [
        [name.strip().removeprefix("dateeval.") for name in row.split(":")]
        for row in contract["importlinter:contract:layers"]["layers"].split("\n")
        if row.strip()
    ]
    assert {name for row in rows for name in row} == set(LAYER_WORDS), "a layer without its words on the page"
    page = (ROOT / "docs" / "architecture.md").read_text()
    paragraph = page[page.index("The layers are a contract") :].split("\n\n", 1)[0]
    at = 0
    for row in [row for row in rows if row != ["__main__"]]:
        found = [paragraph.find(LAYER_WORDS[name], at) for name in row]
        assert min(found) >= 0, (row, paragraph[at:])
        at = max(found)
