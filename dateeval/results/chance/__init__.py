"""The date's effect against chance: null bands, Cochran's Q, the verdict and reordering (``chance``), the same test on
a sparse entry's sample (``sparse_chance``), and the store's finding as a typed record with its one formatter
(``headline``). Its reader is ``dateeval.results.readers.chance``."""
