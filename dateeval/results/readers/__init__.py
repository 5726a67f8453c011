"""The readers :class:`~dateeval.results.view.Results` is made of, one per statistic (``chance``, ``robust``, ``flips``,
``bands``), each reading the shared entry data (``dateeval.results.entries``) and independent of the others. They sit
above the entry data, whose sparse samples use the statistics' math, so they live here rather than beside it."""
