"""Each date's 95% interval (``bands``: Clopper-Pearson, the ECE bootstrap, the BLEU/chrF jackknife). Its reader is
``dateeval.results.readers.bands``; the robust number's math reuses these intervals."""
