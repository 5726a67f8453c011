"""A store's costly statistics (the headline, each entry's null band and Table 5 rows), computed once per store state.

At paper scale these take seconds per entry (permutations and bootstraps
over 366 dates x 10,000 questions), so they are kept with the store
(``dateeval.results.sources.stored``) and computed where the cost is expected rather than
where a reader waits: at the end of a sweep and of ``compact`` (``dateeval.keeping.keep``, which writes what
:meth:`Results.compute_kept` computes; this layer never writes).
The explorer reads them through the same :class:`Results`, so a page finds
them kept, whatever process computed them. Everything here is independent of
Streamlit: the explorer only caches a view per store state.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dateeval import schema
from dateeval.metrics import dataset_metrics
from dateeval.names import FEWSHOT_FORMATS, TURNS  # TURNS: the name suffix of each format
from dateeval.results.chance import chance
from dateeval.results import descriptive, inference, paper
from dateeval.results.sparse import estimated
from dateeval.results.readers.bands import BandReads
from dateeval.results.readers.chance import ChanceReads
from dateeval.results.entries import EntryData, Period
from dateeval.results.readers.flips import FlipReads
from dateeval.results.readers.robust import RobustReads
from dateeval.schema import OUTCOME_COLUMNS
from dateeval.store import Store


# What a sparse entry's readers estimate and what they read from its dates scored in full (``Results.sparse_note``).
SPARSE_READS = (
    "Their drawn dates are estimated in the accuracy per date (`summary`, Curves), its worst-to-best delta and chance "
    "test (joined to the store's verdict by Bonferroni), the date-robust score and date SD (`robust`, What to report) "
    "and model against model (`compare`); Flips reads every cell scored; per-date ranks, Table 7, the CV, ECE and "
    "BLEU/chrF read only their conditions scored in full (the no-date baseline and any pilot date); docs/sparse.md"
)


class Results(EntryData):
    """One state of a store (``entries.EntryData``) with every statistic a page, a command or the report reads: each
    concern's reader built once from it and held as an attribute (``chance``, ``robust``, ``flips``, ``bands``:
    ``results.flips.between(...)``), and here only the tables that join them or belong to no one reader: the summary,
    the few-shot formats side by side, the paper beside yours, Table 5 and the other statistics, what a keep computes
    and what a sparse entry's reader must know."""

    def __init__(
        self,
        store: Store,
        fingerprint: tuple,
        sums: pd.DataFrame,
        metrics: pd.DataFrame,
        drawn: pd.DataFrame | None = None,
    ) -> None:
        super().__init__(store, fingerprint, sums, metrics, drawn)
        self.chance = ChanceReads(self)
        self.robust = RobustReads(self)
        self.flips = FlipReads(self)
        self.bands = BandReads(self)

    def sparse_note(self) -> str | None:
        """What a reader of a sparse entry must know (every page and read command says it): where its drawn dates are
        estimated, and that every other statistic reads only its dates scored in full."""
        named = self.sparse_named()
        return None if named is None else f"swept sparsely (--budget): {named}. {SPARSE_READS}"

    def sparse_named(self) -> str | None:
        """The entries swept sparsely, named (the first three, then how many more): the line a page shows, its
        ``SPARSE_READS`` one click away; None when there are none."""
        found = self.sparse_entries()
        if not found:
            return None
        return ", ".join(f"{entry} on {dataset}" for entry, dataset in found[:3]) + (
            f" and {len(found) - 3} more" if len(found) > 3 else ""
        )

    def summary(self, period: Period | None = None) -> pd.DataFrame:
        """Tables 1, 8 and 9 per entry and dataset with the date effect's null band and Cochran's Q, over the dates
        in ``period`` (baselines always): the rows ``dateeval summary``, the report, Overview and Curves show."""
        metrics = (
            self.metrics
            if period is None
            else self.metrics[(self.metrics["factor"] != "date") | period.holds(self.metrics["date"])]
        )
        table = descriptive.summarize(metrics)
        if table.empty:
            return table
        extra = self.chance.significance_table(period).rename(
            columns={"p_value": "delta_p_value", "null_upper": "delta_null_upper", "null_median": "delta_null_median"}
        )
        keep = [
            "entry",
            "dataset",
            "delta_null_median",
            "delta_null_upper",
            "delta_p_value",
            "cochran_q",
            "cochran_p",
            "cochran_permutation_p",
            "exceeds_chance",
        ]
        table = table.merge(extra[keep], on=["entry", "dataset"], how="left")
        for entry, dataset in self.sparse_entries():  # accuracy over every date, the drawn ones estimated
            at = (table["entry"].eq(entry) & table["dataset"].eq(dataset)).to_numpy()
            found = estimated.estimates_table(self.sparse_sample(entry, dataset, period))
            if at.any() and len(found):
                table.loc[at, "n_dates"] = len(found)
                for column, value in descriptive.extremes(
                    found.rename(columns={"value": "accuracy"}), "accuracy"
                ).items():
                    table.loc[at, column] = value
        if "ece_delta" in table:
            ends = [
                self.bands.ece_delta_interval(
                    row.entry, row.dataset, row.ece_worst_date, row.ece_best_date, row.n_items
                )
                for row in table.itertuples()
            ]
            table = table.assign(ece_delta_low=[low for low, _ in ends], ece_delta_high=[high for _, high in ends])
        return table

    def fewshot_formats(self, period: Period | None = None) -> pd.DataFrame:
        """The date effect under each few-shot format, side by side (paper §5.4 asks whether few-shot helps): every
        entry swept on a dataset in both formats (stored as NAME and NAME_multiturn, or NAME_singleturn for lm-eval's
        tasks), with each format's mean accuracy, worst-to-best delta, what chance gives for it and the verdict's p."""
        columns = [
            "entry",
            "dataset",
            "format",
            "n_items",
            "n_dates",
            "accuracy_mean",
            "accuracy_delta",
            "delta_null_upper",
            "cochran_permutation_p",
            "exceeds_chance",
        ]
        summary = self.summary(period)
        if summary.empty:
            return pd.DataFrame(columns=columns)
        names = set(summary["dataset"])
        rows = []
        for word, named in TURNS.items():
            suffix, other = f"_{word}", next(fewshot for fewshot in FEWSHOT_FORMATS if fewshot != named)
            for dataset in sorted(
                name for name in names if name.endswith(suffix) and name.removesuffix(suffix) in names
            ):
                base = dataset.removesuffix(suffix)
                pair = summary[summary["dataset"].isin([base, dataset])]
                pair = pair.assign(format=np.where(pair["dataset"].eq(base), other, named), dataset=base)
                both = pair.groupby("entry")["format"].transform("nunique") == 2
                rows.append(pair[both])
        if not rows:
            return pd.DataFrame(columns=columns)
        return pd.concat(rows).reindex(columns=columns).sort_values(["dataset", "entry", "format"], ignore_index=True)

    def kind(self, dataset: str) -> str | None:
        """The task kind its rows record for a dataset (``schema.GENERATION_KINDS``, ``mcqa``, ``cot``); None for rows
        written before kinds were recorded."""
        kinds = self.metrics.loc[self.metrics["dataset"] == dataset, "task"].dropna()
        return str(kinds.iloc[0]) if len(kinds) else None

    def paper_beside(self, dataset: str) -> pd.DataFrame:
        """The paper's figures about a dataset's kind beside the store's, each with chance's band and its context."""
        significance = self.chance.significance_table()
        return paper.yours(
            self.metrics,
            dataset,
            self.flips.table7(dataset),
            significance[significance["dataset"] == dataset],
            self.kind(dataset),
            self.summary(),
        )

    def factors(self, entry: str, dataset: str, conditions: pd.DataFrame) -> list[dict]:
        """``inference.entry_factors`` of one entry (its graded ``conditions``), from its matrices (kept)."""

        def keyed(keys: list | None) -> tuple[list, np.ndarray, np.ndarray]:
            return self.matrices(entry, dataset, keys, "condition_key")

        return self._kept(
            "factors", entry, dataset, (), (), lambda: inference.entry_factors(entry, dataset, conditions, keyed)
        )

    def entry_statistics(self) -> tuple[list[dict], list[chance.Significance]]:
        """Table 5 rows of every graded entry and null-band rows of those with two or more dates (each kept): only
        entries whose units changed compute."""
        factors = []
        graded = self.sums[self.sums["n_graded"] > 0]
        for (entry, dataset), part in graded.groupby(["entry", "dataset"], sort=True):
            factors += self.factors(
                entry, dataset, part[["factor", "date", "condition_key"]].drop_duplicates(ignore_index=True)
            )
        return factors, [self.chance.significance(entry, dataset) for entry, dataset in self.dated_entries()]

    def statistics(self) -> dict[str, pd.DataFrame]:
        """Table 5, the date effect against chance, run-to-run variation and Table 3, for the whole store.

        Entry by entry from its matrices, so the store's rows are never all in
        memory; rows are read only for what compares entries (precision,
        hardware) or repeats, and only of the entries that have them.
        """
        factors, significance = self.entry_statistics()
        compared = self._compared()
        across = inference.graded(self.outcome_rows(compared)) if compared.any() else pd.DataFrame()
        keys = self.sums[["model_key", "dataset", "task_key"]].apply(tuple, axis=1)
        repeated = keys.isin(set(keys[self.sums["factor"] == "repeat"]))
        factors += inference.across_factors(across.assign(entry=descriptive.entry_label(across))) if len(across) else []
        return {
            "factors": pd.DataFrame(factors, columns=inference.FACTOR_COLUMNS),
            "significance": pd.DataFrame(
                [found.record() for found in significance], columns=chance.SIGNIFICANCE_COLUMNS
            ),
            "run_to_run": inference.run_to_run(
                self.outcome_rows(repeated) if repeated.any() else pd.DataFrame(columns=OUTCOME_COLUMNS)
            ),
            "trend": inference.date_trend(self.metrics),
            "correlations": inference.cross_correlations(self.metrics),
        }

    def _compared(self) -> pd.Series:
        """Which sums belong to entries Table 5 compares with others: one model at several precisions, or on several machines."""
        sums = self.sums
        dated = sums[(sums["factor"] == "date") & (sums["n_graded"] > 0)]
        entries = sums[schema.ENTRY_KEY].astype(object).apply(tuple, axis=1)
        chosen = pd.Series(False, index=sums.index)
        for fixed, varying in ((inference.SAME_PRECISION_RUN, "dtype"), (inference.SAME_MACHINE_RUN, "hardware")):
            several = dated.groupby(fixed, dropna=False)[varying].transform("nunique") > 1
            chosen |= entries.isin(set(entries[several[several].index]))
        return chosen

    def compute_kept(self) -> None:
        """Compute the headline and every entry's statistics a page opens on (held in this process, ``stored.rows``):
        what an explicit keep (``dateeval.keeping.keep``) collects and writes, so that no explorer render is the first
        to pay for them."""
        self.entry_statistics()
        self.chance.headline()
        dated = descriptive.dated(self.metrics)
        for (entry, dataset), part in dated.groupby(["entry", "dataset"], sort=True):
            for metric in dataset_metrics(part):  # the Curves page's bands of every metric the entry has
                self.bands.band(entry, dataset, metric)
            self.flips.flips(entry, dataset, *descriptive.date_range(self.metrics, dataset))
        for dataset in sorted({dataset for _, dataset in self.dated_entries()}):
            self.robust.robust(dataset)  # What to report: each entry's two-way bootstrap, seconds at paper scale
