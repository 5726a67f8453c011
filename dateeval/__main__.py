"""Allow ``python -m dateeval``."""

from dateeval.cli import main

raise SystemExit(main())
