"""Start the explorer: ``python -m dateeval.launch [streamlit run options]``, what ``./run.sh app`` runs.

Streamlit takes a ``pages/`` folder beside the main script for a v1 multipage app until the main script has called
``st.navigation`` once in the server's life. So when the first request to a fresh server was a deep link
(``/flips?store=demo&...``), Streamlit ran ``pages/flips.py`` alone, in v1 mode: file names as navigation, a centred
layout, none of app.py's page titles. app.py lists its pages with ``st.navigation``; this launcher tells Streamlit so
before the server starts, and then runs it exactly as ``streamlit run app.py`` would."""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app.py"


def main(argv: list[str] | None = None) -> None:
    """``streamlit run app.py`` with ``argv`` (default: this process's arguments), pages declared by app.py only."""
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    PagesManager.uses_pages_directory = False  # app.py's st.navigation, not the folder, names the pages
    cli.main(["run", str(APP), *(sys.argv[1:] if argv is None else argv)], prog_name="streamlit")


if __name__ == "__main__":
    main()
