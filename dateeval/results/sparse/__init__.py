"""A sparse (``--budget``) entry's sample: design-based estimates, its robust figures and compare (``estimated``), and
a design replayed on a dense grid (``replay``)."""
