"""dateeval: measure how benchmark results move when only the date in the system prompt changes."""

from dateeval.numerics import configure_environment

# Before torch loads MKL (imported lazily by the backends): reproducible bits whatever the batch and threads.
configure_environment()

__version__ = "0.1.0"
