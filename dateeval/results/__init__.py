"""The results layer: everything that reads a store and every number any screen, command or report shows.

One entry point: :func:`open` gives a :class:`Results` (one state of a store) and every reader (each explorer
page, ``dateeval summary``, ``dateeval report``, ``dateeval export``) asks it. Where each number is computed:

* ``sources``: what the entry data is read from: per-condition metrics finished from the per-unit sums the store gives
  (``unit_sums``; the sidecars and their format are the store's, ``dateeval.store.tables``), one entry's condition x
  item matrices (``item_matrices``), per-item reads by DuckDB where no matrix can tell (``sql``), and the costly
  results kept with the store (``stored``; written only by an explicit keep, ``dateeval.keeping.keep``);
* ``entries``: the entry data every reader reads (sums, metrics, an entry's matrices and sparse sample);
* ``descriptive``: tables over per-condition metrics (summary, ranks, Kendall tau, top-k reordering);
* ``inference`` and ``variation``: the statistics over outcome matrices (bootstraps, CV, variance components, trends);
* ``chance/``: what the date's effect would be if it had none (null bands, Cochran's Q, the verdict, reordering), and
  the store's finding as a typed :class:`Headline` with its one formatter (``headline``);
* ``robust/``: the date-robust number, its typed rows, ranks, record and formats;
* ``bands/``: each date's 95% interval (Clopper-Pearson, bootstrap, jackknife);
* ``sparse/``: a sparse entry's design-based estimates, and a design replayed on a dense grid;
* ``readers/``: one reader per statistic (chance, robust, flips, bands), each built from the entry data;
* ``view``: :class:`Results`, the entry data holding one reader of each (``results.chance``, ``results.robust``,
  ``results.flips``, ``results.bands``), with the tables that join them; ``paper`` and ``report/`` format what it gives.

The row schema the layer reads is :mod:`dateeval.schema`. Nothing here writes to a store: a read-only store opens
with the same numbers, and its folder is left as it was.
"""

from __future__ import annotations

from pathlib import Path

from dateeval.results.chance.headline import Headline, headline_sentence, reorder_sentence, verdict_power
from dateeval.results.readers.chance import N_PERM
from dateeval.results.entries import Period
from dateeval.results.view import Results
from dateeval.store import Store, StoreProblems

__all__ = ["N_PERM", "Headline", "Period", "Results", "headline_sentence", "open", "reorder_sentence", "verdict_power"]


def open(store: Store | str | Path) -> tuple[Results, StoreProblems]:  # the layer's one verb, read as results.open
    """The store as it is now, with what could not be read (damaged units are left out and reported)."""
    return Results.open(store if isinstance(store, Store) else Store(store))
