"""The readers :class:`~dateeval.results.view.Results` composes, one per statistic (``chance``, ``robust``, ``flips``,
``bands``): each is built from the shared entry data (``dateeval.results.entries``), reads it as ``self.data``, and is
independent of the others; ``Results`` holds one of each (``results.chance``, ``results.robust``, ``results.flips``,
``results.bands``). They sit above the entry data, whose sparse samples use the statistics' math, so they live here
rather than beside it."""
