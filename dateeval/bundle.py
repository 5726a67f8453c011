"""Where the explorer's files are: a clone's top level, or the copy a wheel carries.

A clone serves ``app.py``, ``pages/``, ``demo/store`` and ``.streamlit/config.toml`` from its top level (the design
card's layout). A wheel holds only packages, so setup.py's build hook copies them into ``dateeval/_explorer/``; an
install serves that copy, and opens the demo from a writable copy in the user's cache (``dateeval app`` makes it):
site-packages may be read-only, and the demo's statistics are kept beside the store. Where there is no copy, or a link
stands on its way, the install opens the shipped demo and writes nothing into it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from dateeval.models import cache_dir

PACKAGE = Path(__file__).resolve().parent
PACKAGED = PACKAGE / "_explorer"
CLONE = PACKAGE.parent
DEMO = Path("demo") / "store"
# Set by `dateeval app --store PATH` (dateeval.cli.launch) for the explorer it serves in the same process: the store
# the explorer opens on, beside the demo, and the one its Run page writes into.
OPENED_STORE = "DATEEVAL_APP_STORE"


def folder() -> Path:
    """The folder holding app.py, pages/ and the demo: the wheel's copy in an install, the clone's top level otherwise."""
    return PACKAGED if (PACKAGED / "app.py").is_file() else CLONE


def installed() -> bool:
    """Whether the explorer runs from a wheel's copy (not from a clone)."""
    return folder() == PACKAGED


def packaged_demo() -> Path:
    """The demo store as it was shipped: the clone's own, or the wheel's (read-only in site-packages)."""
    return folder() / DEMO


def demo_copy() -> Path:
    """Where an install keeps its writable copy of the demo: named by the shipped files, so a new demo gets a new copy."""
    shipped = packaged_demo()
    files = sorted(path for path in shipped.rglob("*") if path.is_file())
    digest = hashlib.sha256("".join(f"{p.relative_to(shipped)}:{p.stat().st_size}\n" for p in files).encode())
    return cache_dir() / "demo" / digest.hexdigest()[:16] / "store"


def demo_store() -> Path:
    """The demo store the explorer opens: a clone's own; in an install the copy once made, else the shipped one."""
    if not installed():
        return packaged_demo()
    copy = demo_copy()
    return copy if copy.is_dir() and planted_link(copy) is None else packaged_demo()


def planted_link(copy: Path) -> Path | None:
    """The first link on the way to the demo's copy under the cache (``demo/<digest>/store``), or None. dateeval makes
    none there, so a link leads to another store or folder: opened as the demo, its files would be read and written.
    The cache folder itself may be a link (a cache on another disk)."""
    owned = (copy.parent.parent, copy.parent, copy)
    return next((path for path in owned if path.is_symlink()), None)
