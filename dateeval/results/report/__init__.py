"""What a store's results are printed as: the HTML report (``report``), the export (``export``) and ``summary``'s
per-entry lines (``summary_row``)."""
