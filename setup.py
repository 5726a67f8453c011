"""Build hook (pyproject.toml holds everything else): the wheel carries the explorer and the built-in demo store.

A clone keeps ``app.py``, ``pages/``, ``demo/store`` and the explorer's Streamlit settings at the top level, where
``./run.sh app`` serves them; a wheel holds only packages, so the build copies them into ``dateeval/_explorer/`` and
``dateeval app`` serves that copy from a pip install, outside any clone. The demo's kept statistics (``.aggregates``, computed beside a store) stay behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
EXPLORER = ("app.py", "pages", "demo/store", ".streamlit/config.toml")


class BuildWithExplorer(build_py):
    """``build_py`` that also copies :data:`EXPLORER` into the package's ``_explorer`` folder."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the clone, whose top level holds the explorer
        target = Path(self.build_lib) / "dateeval" / "_explorer"
        for name in EXPLORER:
            source, copy = HERE / name, target / name
            if source.is_dir():
                shutil.copytree(source, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".*", "__pycache__"))
            else:
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy)


setup(cmdclass={"build_py": BuildWithExplorer})
