"""pyproject.toml against the requirement files, the README against the docs it links (issue 38 §1-2), and the
installed package: its cache outside site-packages, the explorer served from the wheel alone (issue 48 §7).

`pip install .` and `./run.sh` must install the same pinned set: requirements.txt stays the tested list, so every
requirement there (and in the optional extras' files) has to appear in pyproject.toml with the same specifier, and
nothing else. The README is not part of the docs site, so `mkdocs build --strict` does not check its links: this does.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from test_browser import CHROMIUM

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
README_MAX_LINES = 250


def _requirements(name: str) -> set[str]:
    """A requirement file's own lines (not the files it includes), normalised: name, extras, specifier, marker."""
    lines = (line.split("#", 1)[0].strip() for line in (ROOT / name).read_text().splitlines())
    return {str(Requirement(line)) for line in lines if line and not line.startswith("-r")}


def _declared(*groups: str) -> set[str]:
    """pyproject.toml's runtime dependencies plus the named extras, normalised as `_requirements` does."""
    project = PYPROJECT["project"]
    found = [*project["dependencies"], *(dep for group in groups for dep in project["optional-dependencies"][group])]
    return {str(Requirement(dep)) for dep in found}


def test_pyproject_installs_what_requirements_txt_pins() -> None:
    """Runtime dependencies plus the `ray` extra and the test tools of `dev` are exactly requirements.txt."""
    dev_tools = {str(Requirement(dep)) for dep in PYPROJECT["project"]["optional-dependencies"]["dev"]}
    tested = _requirements("requirements.txt")
    assert _declared("ray") == tested - dev_tools
    assert tested & dev_tools == {"pytest>=8", "pytest-xdist>=3.8", "playwright>=1.45"}
    assert "torch==2.13.0" in _declared()


def test_the_optional_extras_match_their_requirement_files() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {str(Requirement(dep)) for dep in extras["vllm"]} == _requirements("requirements-vllm.txt")
    assert {str(Requirement(dep)) for dep in extras["lmeval"]} == _requirements("requirements-lmeval.txt")


def test_the_console_script_is_the_cli_entry_point() -> None:
    module, _, function = PYPROJECT["project"]["scripts"]["dateeval"].partition(":")
    main = getattr(importlib.import_module(module), function)
    assert main(["summary", "--store", str(ROOT / "no-such-store")]) != 0  # one line on stderr, a non-zero status


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (mkdocs) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_the_readme_is_short_and_its_links_reach_existing_pages_and_headings() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < README_MAX_LINES
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", text)
    local = [(path, anchor) for path, anchor in links if "://" not in path]
    assert len(local) >= 10, "the README links the docs pages"
    for path, anchor in local:
        target = ROOT / path
        assert target.is_file(), f"README links {path}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.M)
            assert anchor in {_slug(heading) for heading in headings}, f"README links {path}#{anchor}: no such heading"


# What `pip install .` builds from: the package, and what setup.py's build hook copies into the wheel (the explorer).
SOURCES = (
    "pyproject.toml",
    "README.md",
    "setup.py",
    "MANIFEST.in",
    "app.py",
    ".streamlit",
    "pages",
    "demo",
    "dateeval",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """dateeval installed with `pip install --target` from a copy of the clone's files (an in-tree build would leave
    build/ and *.egg-info in the checkout): its folder, and an environment that sees only it, with its own home."""
    tmp_path = tmp_path_factory.mktemp("installed")
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", ".aggregates"))
        else:
            shutil.copy(ROOT / name, source / name)
    site = tmp_path / "site"
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation, "--target", str(site)]
    install = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    shutil.rmtree(source)  # nothing may be read from the copy the wheel was built from
    env = {key: value for key, value in os.environ.items() if key not in ("DATEEVAL_CACHE", "XDG_CACHE_HOME")}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"), DATEEVAL_STORE=str(tmp_path / "results"))
    return {"site": site, "env": env, "cwd": tmp_path, "home": tmp_path / "home"}


def test_an_installed_package_runs_and_keeps_its_cache_outside_site_packages(installed) -> None:
    """`pip install .` puts dateeval in site-packages, which a user may not write to (and which an upgrade wipes): there
    the cache (converted models) goes to the user's cache folder, while a checkout keeps it in its `cache/`."""
    site, env, cwd = installed["site"], installed["env"], installed["cwd"]
    where = subprocess.run(
        [sys.executable, "-c", "import dateeval.models as m; print(m.__file__); print(m.cache_dir())"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    module, cache = where.stdout.split()
    assert module.startswith(str(site)) and cache == str(installed["home"] / ".cache" / "dateeval")
    script = subprocess.run(
        [str(site / "bin" / "dateeval"), "--help"], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )
    assert script.returncode == 0 and "usage: dateeval" in script.stdout, script.stderr
    from dateeval.models import cache_dir

    assert os.environ.get("DATEEVAL_CACHE") or cache_dir() == ROOT / "cache"  # the checkout's own


def test_the_wheel_serves_the_explorer_on_its_demo_outside_the_clone(installed) -> None:
    """`dateeval app --port N` from the installed wheel alone (issue 48 §7): app.py, the pages, the Streamlit settings
    and the demo store travel in the wheel; the demo is copied into the user's cache and its statistics kept there
    (site-packages stays as installed); the Overview opens on the demo in a real browser, without an error."""
    from test_browser import _free_port, _open, chromium, wait_until_served

    site, env = installed["site"], installed["env"]
    shipped = site / "dateeval" / "_explorer"
    assert {path.name for path in (shipped / "pages").glob("*.py")} == {
        path.name for path in (ROOT / "pages").glob("*.py")
    }
    assert (shipped / ".streamlit" / "config.toml").read_text() == (ROOT / ".streamlit" / "config.toml").read_text()
    port, log = _free_port(), installed["cwd"] / "app.log"
    command = [str(site / "bin" / "dateeval"), "app", "--port", str(port), "--no-browser"]
    with (
        log.open("wb") as output,
        subprocess.Popen(command, cwd=installed["cwd"], env=env, stdout=output, stderr=output) as app,
    ):
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_served(url, app)
            copies = list((installed["home"] / ".cache" / "dateeval" / "demo").glob("*/store"))
            assert len(copies) == 1 and list(copies[0].glob(".aggregates/derived/*/*.parquet")), "kept in the copy"
            assert not (shipped / "demo" / "store" / ".aggregates").exists(), "site-packages stays as installed"
            if not CHROMIUM.exists():
                pytest.skip("served; Debian's chromium is not installed for the page check (.ci/run installs it)")
            with contextlib.contextmanager(chromium)() as browser:
                page, errors = _open(browser, url)
                assert page.get_by_text("About this demo").count() >= 1
                assert not errors, errors
        finally:
            app.terminate()
            app.wait(timeout=30)


def test_the_explorers_streamlit_settings_travel_as_options() -> None:
    """Streamlit reads `.streamlit/config.toml` only from the working folder; `dateeval app` runs from anywhere, so the
    launcher passes every setting as an option (e.g. no file watcher, no usage statistics sent)."""
    from dateeval.cli import launch

    options = launch.settings()
    pairs = dict(zip(options[::2], options[1::2]))
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert len(pairs) == len(options) // 2 == sum(len(values) for values in config.values())
    assert pairs["--server.fileWatcherType"] == "none" and pairs["--browser.gatherUsageStats"] == "false"
    assert pairs["--server.maxUploadSize"] == "50"
    assert pairs["--client.toolbarMode"] == "minimal"  # no Deploy button or main menu, installed or not (issue 64 §3)
