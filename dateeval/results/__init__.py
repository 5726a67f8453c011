"""The results layer: everything that reads a store and every number any screen, command or report shows.

One entry point: :func:`open` gives a :class:`Results` (one state of a store) and every reader (each explorer
page, ``dateeval summary``, ``dateeval report``, ``dateeval export``) asks it. Where each number is computed:

* ``unit_sums``: per-unit additive sums (rows, right answers, confidence and ECE bin sums, BLEU/chrF sufficient
  statistics), read from the sidecars the store writes when a sweep commits a unit (``dateeval.store.sidecars``) or
  summed in memory where it has none, and per-condition metrics finished from them;
* ``item_matrices``: one entry's condition x item outcome matrices, read from the per-item sidecars;
* ``sql``: per-item reads by DuckDB where no matrix can tell (one question's history, overlapping files);
* ``descriptive``: tables over per-condition metrics (summary, ranks, Kendall tau, top-k reordering);
* ``inference``: the statistics over outcome matrices (bootstraps, CV, variance components, trends);
* ``chance``: what the date's effect would be if it had none (null bands, Cochran's Q, the verdict, reordering);
* ``bands``: each date's 95% interval (Clopper-Pearson, bootstrap, jackknife);
* ``headline``: the store's finding as a typed :class:`Headline` and its one formatter (the sentences);
* ``stored``: the costly results kept with the store, keyed on the units they were computed from (written only by
  an explicit keep, ``dateeval.keeping.keep``);
* ``view``: :class:`Results`, which ties them together per entry; ``paper`` and ``report`` format what it gives.

The row schema the layer reads is :mod:`dateeval.schema`. Nothing here writes to a store: a read-only store opens
with the same numbers, and its folder is left as it was.
"""

from __future__ import annotations

from pathlib import Path

from dateeval.results.headline import Headline, headline_sentence, reorder_sentence, verdict_power
from dateeval.results.chance_reads import N_PERM
from dateeval.results.entries import Period
from dateeval.results.view import Results
from dateeval.store import Store, StoreProblems

__all__ = ["N_PERM", "Headline", "Period", "Results", "headline_sentence", "open", "reorder_sentence", "verdict_power"]


def open(store: Store | str | Path) -> tuple[Results, StoreProblems]:  # the layer's one verb, read as results.open
    """The store as it is now, with what could not be read (damaged units are left out and reported)."""
    return Results.open(store if isinstance(store, Store) else Store(store))
