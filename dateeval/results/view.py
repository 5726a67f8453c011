"""A store's costly statistics (the headline, each entry's null band and Table 5 rows), computed once per store state.

At paper scale these take seconds per entry (permutations and bootstraps
over 366 dates x 10,000 questions), so they are kept with the store
(``dateeval.results.stored``) and computed where the cost is expected rather than
where a reader waits: at the end of a sweep and of ``compact`` (``dateeval.keeping.keep``, which writes what
:meth:`Results.compute_kept` computes; this layer never writes).
The explorer reads them through the same :class:`Results`, so a page finds
them kept, whatever process computed them. Everything here is independent of
Streamlit: the explorer only caches a view per store state.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dateeval import schema
from dateeval.metrics import METRICS, dataset_metrics
from dateeval.results import (
    bands,
    chance,
    descriptive,
    estimated,
    inference,
    item_matrices,
    sparse_chance,
    sql,
    stored,
    unit_sums,
)
from dateeval.results.headline import Headline
from dateeval.results.headline import headline as find_headline
from dateeval.schema import OUTCOME_COLUMNS
from dateeval.store import Store, StoreProblems

# Permutations of the date's null band (the explorer's, the same on every page).
N_PERM = 200
# The planted date effect whose detection rate the verdict states ("finds a 5 pp date effect N% of the time").
POWER_EFFECT = 0.05
# Entries whose matrices one view holds at once (each is tens of MB at paper scale).
HELD_ENTRIES = 6


PER_DATE_COLUMNS = ["entry", "dataset", "date", "metric", "value", "low", "high", "n_scored", "n_items", "estimated"]


@dataclass(frozen=True)
class Period:
    """A range of dates, both ends included: what a page's date filter or ``summary --dates`` selects."""

    start: dt.date
    end: dt.date

    def holds(self, dates: pd.Series) -> pd.Series:
        """Which of ``dates`` (stored as text or dates; missing for baselines) fall in the period."""
        days = pd.to_datetime(dates, errors="coerce", format="mixed")
        return pd.Series(days.between(pd.Timestamp(self.start), pd.Timestamp(self.end)).to_numpy(), index=dates.index)

    def __str__(self) -> str:
        return f"{self.start.isoformat()}..{self.end.isoformat()}"


class Results:
    """One state of a store as the statistics read it: per-unit sums (with ``entry``), per-condition metrics, and
    each entry's condition x item matrices on demand (the last :data:`HELD_ENTRIES` held)."""

    def __init__(
        self,
        store: Store,
        fingerprint: tuple,
        sums: pd.DataFrame,
        metrics: pd.DataFrame,
        drawn: pd.DataFrame | None = None,
    ) -> None:
        self.store, self.fingerprint, self.sums, self.metrics = store, fingerprint, sums, metrics
        # A sparse entry's drawn dates (``dateeval.sparse``): a sample of questions each, so they are kept out of ``sums``
        # (whose statistics need every question) and read only through ``estimated``.
        self.drawn = sums.iloc[:0] if drawn is None else drawn
        self._sparse = sorted(set(zip(self.drawn["entry"], self.drawn["dataset"])))
        self.entry_outcomes = functools.lru_cache(maxsize=HELD_ENTRIES)(self._entry_outcomes)
        self._whole_sample = functools.lru_cache(maxsize=HELD_ENTRIES)(self._sample_of)
        self._computed_flips = functools.lru_cache(maxsize=HELD_ENTRIES)(
            self._compute_flips
        )  # both tables from one computation

    @classmethod
    def open(cls, store: Store) -> tuple[Results, StoreProblems]:
        """The store as it is now, with what could not be read (damaged units are left out and reported)."""
        fingerprint = store.fingerprint()
        sums, problems = unit_sums.load(store)
        sums = sums.assign(entry=descriptive.entry_label(sums)) if len(sums) else sums.assign(entry=None)
        sampled = estimated.drawn(sums)
        sums, drawn = sums[~sampled.to_numpy()].reset_index(drop=True), sums[sampled.to_numpy()].reset_index(drop=True)
        metrics, more = unit_sums.condition_metrics(store, sums)
        problems.corrupted += more.corrupted
        problems.foreign += more.foreign
        problems.unreachable |= more.unreachable
        return cls(store, fingerprint, sums, metrics, drawn), problems

    def sources(self, chosen: pd.Series) -> tuple[list[Path], pd.DataFrame, bool]:
        """The verified files holding the chosen sums, the entries' keys and labels, and whether rows must be
        de-duplicated (an entry x condition spread over several files, which a read would de-duplicate)."""
        picked = self.sums[chosen.to_numpy()]
        keys = picked[[*schema.ENTRY_KEY, "entry"]].drop_duplicates(ignore_index=True)
        dedup = bool(picked.groupby(schema.GROUP, dropna=False)["source"].nunique().gt(1).any())
        return [self.store.root / source for source in dict.fromkeys(picked["source"])], keys, dedup

    def outcome_rows(self, chosen: pd.Series) -> pd.DataFrame:
        """Per-item outcomes (``OUTCOME_COLUMNS``) of the chosen sums' entries and conditions, read by DuckDB."""
        return sql.rows(*self.sources(chosen), OUTCOME_COLUMNS)

    def _of(self, entry: str, dataset: str) -> pd.Series:
        """Which sums are one entry's on one dataset."""
        return self.sums["entry"].eq(entry) & self.sums["dataset"].eq(dataset)

    def _entry_outcomes(self, entry: str, dataset: str) -> item_matrices.Outcomes | None:
        chosen = self.sums[self._of(entry, dataset)]
        return item_matrices.load(self.store, chosen) if len(chosen) else None

    def matrices(self, entry: str, dataset: str, keys: list | None, level: str) -> tuple[list, np.ndarray, np.ndarray]:
        """``inference.outcome_matrices`` of one entry's graded rows of the conditions ``keys`` (None: its date sweep) by
        ``level``: from its matrices, or from its rows where the matrices cannot tell (see ``item_matrices.load``)."""
        found = self.entry_outcomes(entry, dataset)
        if found is not None:
            conditions = found.conditions
            wanted = conditions["factor"].eq("date") if keys is None else conditions["condition_key"].isin(keys)
            matrices = item_matrices.matrices(found, np.flatnonzero(wanted.to_numpy()), level)
            if matrices is not None:
                return matrices
        rows = inference.graded(self.outcome_rows(self._of(entry, dataset)))
        return inference.outcome_matrices(
            rows[rows["factor"].eq("date") if keys is None else rows["condition_key"].isin(keys)], level
        )

    def question_ids(self, entry: str, dataset: str) -> tuple:
        """The ids of the questions one entry answered on ``dataset``, sorted: the columns of its matrices."""
        found = self.entry_outcomes(entry, dataset)
        if found is not None:
            return tuple(found.items.tolist())
        return tuple(sorted(self.outcome_rows(self._of(entry, dataset))["item_id"].astype(str).unique()))

    def entry_units(self, entry: str, dataset: str) -> list[Path]:
        """The unit files holding one entry's results on one dataset (what its kept statistics are keyed on)."""
        sources = self._with_drawn(entry, dataset)["source"]
        return [self.store.root / source for source in sources.unique()]

    def _with_drawn(self, entry: str, dataset: str) -> pd.DataFrame:
        """One entry's sums, its drawn dates' included where it was swept sparsely."""
        drawn = self.drawn[self.drawn["entry"].eq(entry) & self.drawn["dataset"].eq(dataset)]
        return pd.concat([self.sums[self._of(entry, dataset)], drawn])

    def _kept(
        self, name: str, entry: str, dataset: str, view: tuple, constants: tuple, compute: Callable[[], list[dict]]
    ) -> list[dict]:
        """``stored.rows`` of one entry and dataset, keyed on its units: ``view`` (e.g. a metric, a date range) tells
        results of the same entry apart (a newer one of the same view replaces the older), ``constants`` are the rest."""
        label = "\0".join(str(part) for part in (entry, dataset, *view))
        return stored.rows(
            self.store, name, label, self.entry_units(entry, dataset), (entry, dataset, *view, *constants), compute
        )

    def headline(self) -> Headline | None:
        """The store's finding (kept): the verdict over its graded entries, the largest worst-to-best accuracy delta
        against the null of the largest of them, leaderboard reordering (``headline.headline``), and how often the
        verdict's test finds a 5 pp date effect on the top entry's questions and dates (``chance.power``)."""

        def compute() -> list[dict]:
            found = find_headline(self.significance_table(), self.metrics, self.verdict())
            if found is None:
                return []
            correct = self.matrices(found.entry, found.dataset, None, "condition_key")[
                1
            ]  # its date sweep, as its significance
            if found.reorder_dataset is not None:
                shuffled = self.reorder_chance(found.reorder_dataset, None, found.reorder)
                found = found.with_(
                    reorder_chance=shuffled["chance"],
                    reorder_chance_upper=shuffled["chance_upper"],
                    reorder_p_value=shuffled["p_value"],
                )
            return [found.with_(power_effect=POWER_EFFECT, power=chance.power(correct, POWER_EFFECT)).record()]

        found = stored.rows(
            self.store, "headline", "store", [Path(path) for path, *_ in self.fingerprint], (N_PERM,), compute
        )
        return Headline.from_record(found[0]) if found else None

    def verdict(self) -> float:
        """The family-wise p-value of "the date moves at least one graded entry" (``chance.date_effect_family``):
        entries on one dataset and the same dates are shuffled jointly, their rows in date order. Entries swept
        sparsely are tested each under its design (``sparse_chance``, every date) and joined by Bonferroni
        (``chance.bonferroni``): their shuffles cannot be joint with a dense grid's."""
        sparse = set(self.sparse_entries())
        table = self.significance_table()
        chosen = [(row.entry, row.dataset) in sparse for row in table.itertuples()]
        parts = table.loc[chosen, "cochran_permutation_p"].tolist()
        dense = [key for key in self.dated_entries() if key not in sparse]
        return chance.bonferroni([self._dense_verdict(dense)] * bool(dense) + parts)

    def _dense_verdict(self, entries: list[tuple[str, str]]) -> float:
        """:meth:`verdict` of dense ``entries``: their date sweeps shuffled jointly."""
        dated, keys, matrices = self._dated(None), [], []
        for entry, dataset in entries:
            levels, correct, _ = self.matrices(entry, dataset, None, "condition_key")
            mine = dated[(dated["entry"] == entry) & (dated["dataset"] == dataset)]
            day = dict(zip(mine["condition_key"], mine["date"].astype(str)))
            dates = np.array([day[level] for level in levels])
            order = np.argsort(dates, kind="stable")
            keys.append((dataset, tuple(dates[order])))
            matrices.append(correct[order])
        return chance.date_effect_family(chance.verdict_groups(keys, matrices))

    def reorder_chance(
        self, dataset: str, entries: Sequence[str] | None, observed: float, period: Period | None = None
    ) -> dict[str, float]:
        """What chance alone gives for the share of date pairs that reorder ``entries`` (all graded ones with dates
        when None) on ``dataset`` over the dates they share in ``period`` (``chance.reorder_chance``); NaN where
        they share fewer than two dates or not the same questions."""
        _, group = self.aligned(dataset, entries, period)
        if group is None:
            return {"chance": float("nan"), "chance_upper": float("nan"), "p_value": float("nan")}
        return chance.reorder_chance(group, observed)

    def aligned(
        self, dataset: str, entries: Sequence[str] | None, period: Period | None = None
    ) -> tuple[list[str], np.ndarray | None]:
        """The dates ``entries`` (every graded one with dates when None, in sorted order) share on ``dataset`` in
        ``period``, and their outcomes there: entries x dates x questions, rows in date order; None where fewer than
        two entries share two dates, or they do not share their questions."""
        found, questions = {}, set()
        for entry, name in self.dated_entries(period):
            if name == dataset and (entries is None or entry in entries):
                dates, correct, _ = self.matrices(entry, dataset, self._date_keys(entry, dataset, period), "date")
                found[entry] = (pd.to_datetime(pd.Series(dates)).dt.strftime("%Y-%m-%d").tolist(), correct)
                questions.add(self.question_ids(entry, dataset))
        common = sorted(set.intersection(*(set(dates) for dates, _ in found.values()))) if len(found) >= 2 else []
        if len(common) < 2 or len(questions) != 1 or len({correct.shape[1] for _, correct in found.values()}) != 1:
            return common, None  # paired by question id, not by count: two entries on different questions share nothing
        order = [entry for entry in (entries if entries is not None else sorted(found)) if entry in found]
        return common, np.stack([found[entry][1][[found[entry][0].index(day) for day in common]] for entry in order])

    def compared(self, dataset: str, a: str, b: str, period: Period | None = None) -> dict | None:
        """``robust.compare`` of entries ``a`` and ``b`` on the dates of ``period`` they share (None where fewer than
        two, or not the same questions); where either was swept sparsely, ``estimated.compare`` of their samples."""
        from dateeval.results import robust

        sparse = self.sparse_entries()
        if (a, dataset) not in sparse and (b, dataset) not in sparse:
            _, group = self.aligned(dataset, [a, b], period)
            return None if group is None else robust.compare(group[0], group[1])
        return estimated.compare(*(self._sample_for(entry, dataset, period) for entry in (a, b)))

    def _sample_for(self, entry: str, dataset: str, period: Period | None) -> estimated.Sample:
        """An entry's :meth:`sparse_sample`, or its dense grades as one (``estimated.dense_sample``)."""
        if (entry, dataset) in self.sparse_entries():
            return self.sparse_sample(entry, dataset, period)
        dates, correct, _ = self.matrices(entry, dataset, self._date_keys(entry, dataset, period), "date")
        days = pd.to_datetime(pd.Series(dates)).dt.strftime("%Y-%m-%d").tolist()
        return estimated.dense_sample(days, list(self.question_ids(entry, dataset)), correct)

    def significance_table(self, period: Period | None = None) -> pd.DataFrame:
        """``chance.significance`` of every graded entry with two or more dates in ``period`` (kept), with its null draws."""
        rows = [self.significance(entry, dataset, period) for entry, dataset in self.dated_entries(period)]
        return pd.DataFrame(
            rows, columns=[*chance.SIGNIFICANCE_COLUMNS, "mean_accuracy", "chance_half_width", "null_draws"]
        )

    def _dated(self, period: Period | None) -> pd.DataFrame:
        """The sums of graded date conditions in ``period`` (all of them without one)."""
        dated = self.sums[(self.sums["factor"] == "date") & (self.sums["n_graded"] > 0)]
        return dated if period is None else dated[period.holds(dated["date"])]

    def dated_entries(self, period: Period | None = None) -> list[tuple[str, str]]:
        """(entry, dataset) of every graded entry with two or more dates in ``period``, sorted: the one place that decides
        which entries have a date effect to test (null band, headline, Table 7, the robust number)."""
        counts = self._dated(period).groupby(["entry", "dataset"], sort=True)["condition_key"].nunique()
        return list(counts[counts >= 2].index)

    def per_date(self, period: Period | None = None) -> pd.DataFrame:
        """Each entry's share graded right on each date of its sweep and on its no-date baseline (``PER_DATE_COLUMNS``;
        ``date`` None for the baseline), with the Curves band's exact interval (``bands.clopper_pearson``) of its
        ``n_scored`` graded questions out of the ``n_items`` it answered: ``summary --json --per-date``. Every question
        of a stored condition is scored, so ``estimated`` is False; the metric is "accuracy" (pass@1 for HumanEval,
        exact match for GSM8K: each is the share right)."""
        graded = self.sums[self.sums["factor"].isin(["date", "no-date"]) & (self.sums["n_graded"] > 0)]
        if period is not None:
            graded = graded[(graded["factor"] != "date") | period.holds(graded["date"])]
        if graded.empty:
            return pd.DataFrame(columns=PER_DATE_COLUMNS)
        graded = graded.assign(
            n_items=graded["items"].str.partition(":")[0].astype(int),
            date=graded["date"].where(graded["factor"] == "date"),
        )
        cells = graded.groupby(["entry", "dataset", "condition_key"], sort=False, dropna=False).agg(
            date=("date", "first"),
            right=("sum_correct", "sum"),
            n_scored=("n_graded", "sum"),
            n_items=("n_items", "sum"),
        )  # a condition resumed or grown spans files of disjoint items
        low, high = bands.clopper_pearson(np.rint(cells["right"].to_numpy()), cells["n_scored"].to_numpy())
        table = cells.reset_index().assign(
            metric="accuracy",
            value=cells["right"].to_numpy() / cells["n_scored"].to_numpy(),
            low=low,
            high=high,
            estimated=False,
        )
        table["date"] = (
            pd.to_datetime(table["date"], format="mixed")
            .dt.strftime("%Y-%m-%d")
            .astype(object)
            .where(table["date"].notna(), None)
        )
        table = pd.concat([table, *self._estimated(period)], ignore_index=True) if len(self.drawn) else table
        order = table.assign(_baseline=table["date"].notna()).sort_values(
            ["entry", "dataset", "_baseline", "date"], kind="stable", na_position="first"
        )
        return order[PER_DATE_COLUMNS].reset_index(drop=True)

    def sparse_note(self) -> str | None:
        """What a reader of a sparse entry must know (every page and read command says it): where its drawn dates are
        estimated, and that every other statistic reads only its dates scored in full."""
        found = self.sparse_entries()
        if not found:
            return None
        named = ", ".join(f"{entry} on {dataset}" for entry, dataset in found[:3]) + (
            f" and {len(found) - 3} more" if len(found) > 3 else ""
        )
        return (
            f"swept sparsely (--budget): {named}. Their drawn dates are estimated in the accuracy per date (`summary`, "
            "Curves), its worst-to-best delta and chance test (joined to the store's verdict by Bonferroni), the "
            "date-robust score and date SD (`robust`, What to report) and model against model (`compare`); Flips "
            "reads every cell scored; per-date ranks, Table 7, the CV, ECE and BLEU/chrF read only their dates scored "
            "in full (the baselines and pilot dates); docs/sparse.md"
        )

    def sparse_entries(self) -> list[tuple[str, str]]:
        """(entry, dataset) of every entry swept sparsely (``--budget``), sorted."""
        return self._sparse

    def _sparse_rows(self, entry: str, dataset: str) -> pd.DataFrame:
        """A sparse entry's graded rows, its dense conditions and its drawn dates, as ``estimated.sample_of`` reads."""
        picked = self._with_drawn(entry, dataset)
        keys = picked[[*schema.ENTRY_KEY, "entry"]].drop_duplicates(ignore_index=True)
        paths = [self.store.root / source for source in dict.fromkeys(picked["source"])]
        return sql.rows(paths, keys, True, ["item_id", "condition_key", "date", "factor", "design", "probs", "correct"])

    def _estimated(self, period: Period | None) -> list[pd.DataFrame]:
        """The per-date rows of sparse entries' drawn dates (``PER_DATE_COLUMNS``), estimated."""
        tables = []
        for entry, dataset in self.sparse_entries():
            found = estimated.estimates_table(self.sparse_sample(entry, dataset, period))
            tables.append(found[found["estimated"]].assign(entry=entry, dataset=dataset, metric="accuracy"))
        return tables

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
        extra = self.significance_table(period).rename(
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
                self.ece_delta_interval(row.entry, row.dataset, row.ece_worst_date, row.ece_best_date, row.n_items)
                for row in table.itertuples()
            ]
            table = table.assign(ece_delta_low=[low for low, _ in ends], ece_delta_high=[high for _, high in ends])
        return table

    def ece_delta_interval(
        self, entry: str, dataset: str, worst: str | None, best: str | None, n_items: int
    ) -> tuple[float, float]:
        """Table 8's uncertainty (kept): ``bands.ece_difference_interval`` of the ECE on the entry's worst date less
        its best, paired over the questions; NaN without two such dates or below ``bands.ECE_BAND_MIN_ITEMS``
        questions (no matrices are read then)."""
        if not isinstance(worst, str) or not isinstance(best, str) or n_items < bands.ECE_BAND_MIN_ITEMS:
            return float("nan"), float("nan")

        def compute() -> list[dict]:
            dates, correct, confidence = self.matrices(entry, dataset, None, "date")
            pair = [list(map(str, dates)).index(worst), list(map(str, dates)).index(best)]
            low, high = bands.ece_difference_interval(confidence[pair], correct[pair])
            return [{"low": low, "high": high}]

        found = self._kept("ece_delta", entry, dataset, (worst, best), (), compute)[0]
        return float(found["low"]), float(found["high"])

    def fewshot_formats(self, period: Period | None = None) -> pd.DataFrame:
        """The date effect under each few-shot format, side by side (paper §5.4 asks whether few-shot helps): every
        entry swept on a dataset in both formats (stored as NAME and NAME_multiturn, or NAME_singleturn for lm-eval's
        tasks), with each format's mean accuracy, worst-to-best delta, what chance gives for it and the verdict's p."""
        from dateeval.names import FEWSHOT_FORMATS, TURNS  # TURNS: the name suffix of each format

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

    def table7(self, dataset: str | None = None) -> pd.DataFrame:
        """Table 7 (confidence of answers that stay vs change with the date) over each entry's whole stored range."""
        parts = [
            self._flip_table(entry, name, *descriptive.date_range(self.metrics, name), "table7")
            for entry, name in self.dated_entries()
            if dataset in (None, name)
        ]
        parts = [part for part in parts if len(part)]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=item_matrices.TABLE7_COLUMNS)

    def kind(self, dataset: str) -> str | None:
        """The task kind its rows record for a dataset (``schema.GENERATION_KINDS``, ``mcqa``, ``cot``); None for rows
        written before kinds were recorded."""
        kinds = self.metrics.loc[self.metrics["dataset"] == dataset, "task"].dropna()
        return str(kinds.iloc[0]) if len(kinds) else None

    def paper_beside(self, dataset: str) -> pd.DataFrame:
        """The paper's figures about a dataset's kind beside the store's, each with chance's band and its context."""
        from dateeval.results import paper

        significance = self.significance_table()
        return paper.yours(
            self.metrics,
            dataset,
            self.table7(dataset),
            significance[significance["dataset"] == dataset],
            self.kind(dataset),
            self.summary(),
        )

    def significance(self, entry: str, dataset: str, period: Period | None = None) -> dict:
        """``chance.significance`` of one entry's date sweep, or of its dates in ``period`` (kept): the Factors
        page's row, the summary's chance columns and the headline's null draws."""
        keys = self._date_keys(entry, dataset, period)

        def compute() -> list[dict]:
            if (entry, dataset) in self.sparse_entries():  # every date, drawn ones estimated: the design's null
                return [sparse_chance.significance(entry, dataset, self.sparse_sample(entry, dataset, period), N_PERM)]
            return [
                chance.significance(entry, dataset, self.matrices(entry, dataset, keys, "condition_key")[1], N_PERM)
            ]

        return self._kept("significance", entry, dataset, () if keys is None else (str(period),), (N_PERM,), compute)[0]

    def _date_keys(self, entry: str, dataset: str, period: Period | None) -> list | None:
        """The condition keys of an entry's graded dates in ``period``; None where that is all of them (the whole
        sweep: what a sweep's end keeps, so a page whose range is the whole store reads it instead of computing)."""
        if period is None:
            return None
        dated = self._dated(None)
        mine = dated[(dated["entry"] == entry) & (dated["dataset"] == dataset)]
        inside = mine.loc[period.holds(mine["date"]), "condition_key"]
        return None if inside.nunique() == mine["condition_key"].nunique() else sorted(set(inside))

    def factors(self, entry: str, dataset: str, conditions: pd.DataFrame) -> list[dict]:
        """``inference.entry_factors`` of one entry (its graded ``conditions``), from its matrices (kept)."""

        def keyed(keys: list | None) -> tuple[list, np.ndarray, np.ndarray]:
            return self.matrices(entry, dataset, keys, "condition_key")

        return self._kept(
            "factors", entry, dataset, (), (), lambda: inference.entry_factors(entry, dataset, conditions, keyed)
        )

    def band(self, entry: str, dataset: str, metric: str) -> pd.DataFrame:
        """``bands.date_band`` of one entry's date sweep (kept): the Curves page's 95% interval per date."""

        def compute() -> list[dict]:
            if METRICS[metric].per_item:
                return bands.date_band(entry, *self.matrices(entry, dataset, None, "date"), metric).to_dict("records")
            return bands.corpus_band(entry, *self.segment_stats(entry, dataset, metric), metric).to_dict("records")

        band = pd.DataFrame(self._kept("band", entry, dataset, (metric,), (), compute), columns=bands.BAND_COLUMNS)
        return band.assign(
            date=pd.to_datetime(band["date"])
        )  # as ``date_band`` gives them (kept rows read back as datetimes)

    def segment_stats(self, entry: str, dataset: str, metric: str) -> tuple[list, np.ndarray]:
        """One entry's dates and its segments' sufficient statistics of a corpus metric on each (dates x segments x
        statistics, NaN where absent), read from its verified files: the per-item sidecars keep only their sums."""
        rows = sql.rows(*self.sources(self._of(entry, dataset)), ["factor", "date", "item_id", f"{metric}_stats"])
        rows = rows[(rows["factor"] == "date") & rows[f"{metric}_stats"].notna()]
        if rows.empty:
            return [], np.empty((0, 0, 0))
        dates, date_index = np.unique(rows["date"].astype(str), return_inverse=True)
        items, item_index = np.unique(rows["item_id"].astype(str), return_inverse=True)
        values = np.vstack(rows[f"{metric}_stats"].to_numpy()).astype(float)
        stats = np.full((len(dates), len(items), values.shape[1]), np.nan)
        stats[date_index, item_index] = values
        return list(dates), stats

    def flips(self, entry: str, dataset: str, start: dt.date, end: dt.date) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Per-question flips and Table 7 of one entry's dates in [start, end] (each kept; the dataset's whole range is
        kept when a sweep ends), from its condition x item matrices. A sparse entry's flips read every cell it scored
        (``share_observed``: how much of each question's range was seen); its Table 7 reads its dates scored in full,
        as a question seen on fewer dates looks more consistent."""
        return self._flip_table(entry, dataset, start, end, "flips"), self._flip_table(
            entry, dataset, start, end, "table7"
        )

    def _flip_table(self, entry: str, dataset: str, start: dt.date, end: dt.date, name: str) -> pd.DataFrame:
        """One of :meth:`flips`' tables, read alone where kept (Table 7 is one row; the flips are one per question)."""

        def compute() -> list[dict]:
            return _records(self._computed_flips(entry, dataset, start, end)[("flips", "table7").index(name)])

        rows = self._kept(name, entry, dataset, (str(start), str(end)), (), compute)
        if name == "table7":
            return pd.DataFrame(rows, columns=item_matrices.TABLE7_COLUMNS).astype(
                dict.fromkeys(["consistent_confidence", "inconsistent_confidence"], float)
            )
        rates = dict.fromkeys(
            ["mean_confidence", "min_confidence", "mean_score"], float
        )  # a column missing on every item comes back as None
        flips = pd.DataFrame(rows, columns=item_matrices.FLIP_COLUMNS).astype(rates)
        return flips.assign(answer=flips["answer"].where(flips["answer"].notna(), np.nan))

    def _compute_flips(
        self, entry: str, dataset: str, start: dt.date, end: dt.date
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        found = self.entry_outcomes(entry, dataset)
        if found is None:
            return item_matrices.no_flips()
        flips, table7 = item_matrices.flips(found, start, end)
        if (entry, dataset) in self.sparse_entries():  # every cell seen, drawn dates included: who moves, how often
            observed = item_matrices.load(self.store, self._with_drawn(entry, dataset))
            flips = item_matrices.flips(observed, start, end)[0] if observed is not None else flips
        return flips, table7

    def flips_of(
        self, entries: Sequence[str], dataset: str, start: dt.date, end: dt.date
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """:meth:`flips` of several entries: their questions most-changing first, and their Table 7 rows."""
        parts = [self.flips(entry, dataset, start, end) for entry in sorted(entries)]
        flips = pd.concat(
            [part[0] for part in parts if len(part[0])] or [item_matrices.no_flips()[0]], ignore_index=True
        )
        table7 = pd.concat(
            [part[1] for part in parts if len(part[1])] or [item_matrices.no_flips()[1]], ignore_index=True
        )
        return flips.sort_values(
            ["changes", "mean_confidence"], ascending=[False, True], kind="stable", ignore_index=True
        ), table7

    # --- The date-robust number (issue 20 §2): every reader of it calls these -------------------------------------

    def robust_entry(self, entry: str, dataset: str, period: Period | None = None) -> dict | None:
        """``robust.entry_statistics`` of one entry's dates in ``period`` (kept: the two-way bootstrap and its
        matrices cost seconds at paper scale), with its ``dates`` and ``per_date`` scores; None under two dates or items."""
        from dateeval.results import robust

        keys = self._date_keys(entry, dataset, period)

        def compute() -> list[dict]:
            if (entry, dataset) in self.sparse_entries():
                return self._sparse_robust(entry, dataset, period)
            dates, correct, _ = self.matrices(entry, dataset, keys, "date")
            if min(correct.shape) < 2:
                return []
            dates = [str(day) for day in dates]
            return [
                {
                    "entry": entry,
                    "dataset": dataset,
                    **robust.entry_statistics(correct),
                    "first_date": dates[0],
                    "last_date": dates[-1],
                    "dates": dates,
                    "per_date": correct.mean(1).tolist(),
                }
            ]

        found = self._kept("robust", entry, dataset, () if keys is None else (str(period),), (robust.N_BOOT,), compute)
        return found[0] if found else None

    def _sparse_robust(self, entry: str, dataset: str, period: Period | None) -> list[dict]:
        """A sparse entry's :meth:`robust_entry` row: ``estimated.sparse_statistics`` of its dates in ``period``."""
        sample = self.sparse_sample(entry, dataset, period)
        if len(sample.dates) < 2 or len(sample.items) < 2:
            return []
        found = estimated.sparse_statistics(sample)
        first, last = sample.dates[0], sample.dates[-1]
        return [
            {"entry": entry, "dataset": dataset, **found, "first_date": first, "last_date": last, "dates": sample.dates}
        ]

    def sparse_sample(self, entry: str, dataset: str, period: Period | None = None) -> estimated.Sample:
        """One sparse entry's ``estimated.Sample`` of its dates in ``period`` (dates as YYYY-MM-DD)."""
        sample = self._whole_sample(entry, dataset)
        return sample if period is None else sample.of_dates(period.holds(pd.Series(sample.dates)).to_numpy())

    def _sample_of(self, entry: str, dataset: str) -> estimated.Sample:
        sample = estimated.sample_of(self._sparse_rows(entry, dataset))
        dates = pd.to_datetime(pd.Series(sample.dates), format="mixed").dt.strftime("%Y-%m-%d")
        return sample._replace(dates=list(dates))

    def _robust_rows(self, dataset: str, period: Period | None, entries: Sequence[str] | None) -> list[dict]:
        rows = [
            self.robust_entry(entry, dataset, period)
            for entry, name in self.dated_entries(period)
            if name == dataset and (entries is None or entry in entries)
        ]
        return [row for row in rows if row is not None]

    def robust(self, dataset: str, period: Period | None = None, entries: Sequence[str] | None = None) -> pd.DataFrame:
        """The robust leaderboard of a dataset's graded entries (``entries``: all): ``robust.leaderboard``."""
        from dateeval.results import robust

        return robust.leaderboard(self._robust_rows(dataset, period, entries))

    def robust_pairs(
        self, dataset: str, period: Period | None = None, entries: Sequence[str] | None = None
    ) -> pd.DataFrame:
        """The leaderboard's pairs, marked where the date flips their order and their intervals overlap: ``robust.pairs``."""
        from dateeval.results import robust

        return robust.pairs(self._robust_rows(dataset, period, entries))

    def robust_record(
        self, dataset: str, period: Period | None = None, entries: Sequence[str] | None = None, half_width: float = 0.01
    ) -> dict:
        """``robust.record``: the numbers, sentences and what produced them, machine-readable."""
        from dateeval import __version__
        from dateeval.results import robust

        rows = self._robust_rows(dataset, period, entries)
        return robust.record(
            dataset,
            rows,
            {row["entry"]: self.identity(row["entry"], dataset, row["dates"]) for row in rows},
            half_width,
            __version__,
        )

    def identity(self, entry: str, dataset: str, dates: Sequence[str]) -> dict:
        """What produced an entry's results on ``dates`` (kept): each recorded setting's value (a list where runs
        differ), and a digest of every rendered prompt (date, item, prompt hash), which fixes template and wording."""
        import json

        import xxhash

        columns = [
            "model",
            "model_key",
            "model_source",
            "model_revision",
            "dtype",
            "device",
            "hardware",
            "torch_version",
            "transformers_version",
            "task",
            "task_key",
            "prompt_version",
            "shots",
            "subset",
            "decoding",
            "template_date_kind",
            "date_line",
            "date_format",
            "date_position",
            "system_prompt",
        ]

        def compute() -> list[dict]:
            rows = sql.rows(
                *self.sources(self._of(entry, dataset)),
                [*columns, "factor", "date", "item_id", "prompt_hash"],
                (min(dates), max(dates)),
            )
            rows = rows[(rows["factor"] == "date") & rows["date"].astype(str).isin(set(dates))]
            found = {name: sorted({str(value) for value in rows[name].dropna().unique()}) for name in columns}
            # one hash per (date, item, prompt hash), by value (not by row order or text encoding), sorted: a digest of the set
            prompts = np.sort(
                pd.util.hash_pandas_object(rows[["date", "item_id", "prompt_hash"]].astype(str), index=False).to_numpy()
            )
            found = {name: values[0] if len(values) == 1 else (values or None) for name, values in found.items()}
            return [{"identity": json.dumps({**found, "prompts_digest": xxhash.xxh3_128_hexdigest(prompts.tobytes())})}]

        return json.loads(
            self._kept("identity", entry, dataset, (min(dates), max(dates), len(dates)), (), compute)[0]["identity"]
        )

    def entry_statistics(self) -> tuple[list[dict], list[dict]]:
        """Table 5 rows of every graded entry and null-band rows of those with two or more dates (each kept): only
        entries whose units changed compute."""
        factors = []
        graded = self.sums[self.sums["n_graded"] > 0]
        for (entry, dataset), part in graded.groupby(["entry", "dataset"], sort=True):
            factors += self.factors(
                entry, dataset, part[["factor", "date", "condition_key"]].drop_duplicates(ignore_index=True)
            )
        return factors, [self.significance(entry, dataset) for entry, dataset in self.dated_entries()]

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
            "significance": pd.DataFrame(significance, columns=chance.SIGNIFICANCE_COLUMNS),
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
        self.headline()
        dated = descriptive.dated(self.metrics)
        for (entry, dataset), part in dated.groupby(["entry", "dataset"], sort=True):
            for metric in dataset_metrics(part):  # the Curves page's bands of every metric the entry has
                self.band(entry, dataset, metric)
            self.flips(entry, dataset, *descriptive.date_range(self.metrics, dataset))
        for dataset in sorted({dataset for _, dataset in self.dated_entries()}):
            self.robust(dataset)  # What to report: each entry's two-way bootstrap, seconds at paper scale


def _records(table: pd.DataFrame) -> list[dict]:
    """A table's rows as kept rows: missing values as None (a text column holding NaN cannot be written)."""
    return table.astype(object).where(table.notna(), None).to_dict("records")
