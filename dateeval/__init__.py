"""dateeval: measure how benchmark results move when only the date in the system prompt changes."""

__version__ = "0.1.0"
