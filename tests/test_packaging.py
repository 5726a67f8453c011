"""pyproject.toml against the requirement files, and the README against the docs it links (issue 38 §1-2).

`pip install .` and `./run.sh` must install the same pinned set: requirements.txt stays the tested list, so every
requirement there (and in the optional extras' files) has to appear in pyproject.toml with the same specifier, and
nothing else. The README is not part of the docs site, so `mkdocs build --strict` does not check its links: this does.
"""

from __future__ import annotations

import importlib
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
