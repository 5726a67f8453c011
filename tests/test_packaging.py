"""pyproject.toml against the requirement files, and the README against the docs it links (issue 38 §1-2).

`pip install .` and `./run.sh` must install the same pinned set: requirements.txt stays the tested list, so every
requirement there (and in the optional extras' files) has to appear in pyproject.toml with the same specifier, and
nothing else. The README is not part of the docs site, so `mkdocs build --strict` does not check its links: this does.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from packaging.requirements import Requirement

from conftest import ROOT

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
    assert tested & dev_tools == {"pytest>=8", "pytest-xdist>=3.5", "playwright>=1.45"}
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


def test_an_installed_package_runs_and_keeps_its_cache_outside_site_packages(tmp_path) -> None:
    """`pip install .` puts dateeval in site-packages, which a user may not write to (and which an upgrade wipes): there
    the cache (converted models) goes to the user's cache folder, while a checkout keeps it in its `cache/`."""
    import shutil
    import subprocess
    import sys

    source = tmp_path / "source"  # a copy: an in-tree build would leave build/ and *.egg-info in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "dateeval", source / "dateeval", ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            *isolation,
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    env = {key: value for key, value in os.environ.items() if key not in ("DATEEVAL_CACHE", "XDG_CACHE_HOME")}
    env.update(PYTHONPATH=str(site), HOME=str(tmp_path / "home"))
    where = subprocess.run(
        [sys.executable, "-c", "import dateeval.models as m; print(m.__file__); print(m.cache_dir())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    module, cache = where.stdout.split()
    assert module.startswith(str(site)) and cache == str(tmp_path / "home" / ".cache" / "dateeval")
    script = subprocess.run(
        [str(site / "bin" / "dateeval"), "--help"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert script.returncode == 0 and "usage: dateeval" in script.stdout, script.stderr
    from dateeval.models import cache_dir

    assert os.environ.get("DATEEVAL_CACHE") or cache_dir() == ROOT / "cache"  # the checkout's own
