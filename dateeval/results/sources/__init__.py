"""What the entry data is read from: the per-condition metrics finished from the store's per-unit sums (``unit_sums``),
an entry's condition x item matrices and its flips (``item_matrices``), per-item rows by DuckDB (``sql``) and the
costly statistics kept with the store (``stored``). The files themselves are the store's (``dateeval.store.tables``)."""
