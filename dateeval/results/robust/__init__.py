"""The date-robust number: its math (``robust``), its typed records (``robust_row``, ``identity``), the leaderboard's
ranks (``ranks``), its record and sentences (``robust_record``) and its formats (``robust_format``). Its reader is
``dateeval.results.readers.robust``; the sparse estimator (``dateeval.results.sparse``) reuses its math, which is
why the reader is not here (the entry data reads sparse samples, so a reader beside this math would close a circle)."""
