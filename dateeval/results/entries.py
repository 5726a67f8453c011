"""One state of a store as every statistic reads it: its per-unit sums, each entry's condition x item matrices and
a sparse entry's sample, and the kept rows (``stored.rows``) keyed on an entry's units.

The readers of each statistic (``readers.chance``, ``readers.robust``, ``readers.flips``, ``readers.bands``) are built
from an instance of this class and read only it; ``view.Results`` is one, holding a reader of each. Nothing here
computes a statistic.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from dateeval import schema
from dateeval.results import descriptive, inference
from dateeval.results.sparse import estimated
from dateeval.results.sources import item_matrices, sql, stored, unit_sums
from dateeval.schema import OUTCOME_COLUMNS
from dateeval.errors import DateEvalError
from dateeval.store import Store, StoreProblems, designs, tables

# Entries whose matrices one view holds at once (each is tens of MB at paper scale).
HELD_ENTRIES = 6

# What ``open`` builds: the class it is called on (``view.Results``).
_Read = TypeVar("_Read", bound="EntryData")


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


class EntryData:
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
        # An entry is sparse where it has drawn rows or a design record (whose draw may have chosen no cell at all).
        entries = sums[["entry", "dataset"]].drop_duplicates() if len(sums) else []
        recorded = {pair for pair in map(tuple, np.asarray(entries)) if self._record_path(*pair) is not None}
        self._sparse = sorted(set(zip(self.drawn["entry"], self.drawn["dataset"])) | recorded)
        self.entry_outcomes = functools.lru_cache(maxsize=HELD_ENTRIES)(self._entry_outcomes)
        self._whole_sample = functools.lru_cache(maxsize=HELD_ENTRIES)(self._sample_of)

    @classmethod
    def open(cls: type[_Read], store: Store) -> tuple[_Read, StoreProblems]:
        """The store as it is now, with what could not be read (damaged units are left out and reported)."""
        fingerprint = store.fingerprint()
        sums, problems = tables.unit_sums(store)
        sums = sums.assign(entry=descriptive.entry_label(sums)) if len(sums) else sums.assign(entry=None)
        sampled = estimated.drawn(sums)
        sums, drawn = sums[~sampled.to_numpy()].reset_index(drop=True), sums[sampled.to_numpy()].reset_index(drop=True)
        metrics, more = unit_sums.condition_metrics(store, sums)
        problems.corrupted += more.corrupted
        problems.foreign += more.foreign
        problems.unreachable |= more.unreachable
        return cls(store, fingerprint, sums, metrics, drawn), problems

    def sources(self, chosen: pd.Series, drawn: pd.Series | None = None) -> tuple[list[Path], pd.DataFrame, bool]:
        """The verified files holding the chosen sums (and the ``drawn`` ones: a mask over a sparse sweep's drawn
        dates' sums), the entries' keys and labels, and whether rows must be de-duplicated (an entry x condition
        spread over several files, which a read would de-duplicate)."""
        picked = self.sums[chosen.to_numpy()]
        if drawn is not None:
            picked = pd.concat([picked, self.drawn[drawn.to_numpy()]])
        keys = picked[[*schema.ENTRY_KEY, "entry"]].drop_duplicates(ignore_index=True)
        dedup = bool(picked.groupby(schema.GROUP, dropna=False)["source"].nunique().gt(1).any())
        return [self.store.root / source for source in dict.fromkeys(picked["source"])], keys, dedup

    def sources_where(self, where: Callable[[pd.DataFrame], pd.Series]) -> tuple[list[Path], pd.DataFrame, bool]:
        """:meth:`sources` of the sums ``where`` picks (a mask of a sums table), a sparse sweep's drawn dates' included:
        one question's history reads every date it was scored on."""
        return self.sources(where(self.sums), where(self.drawn))

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
        """The unit files holding one entry's results on one dataset, and its design record where it was swept
        sparsely (what its kept statistics are keyed on)."""
        sources = self._with_drawn(entry, dataset)["source"]
        record = self._record_path(entry, dataset)
        return [self.store.root / source for source in sources.unique()] + ([record] if record else [])

    def _record_path(self, entry: str, dataset: str) -> Path | None:
        """The design record of an entry swept sparsely (``dateeval.store.designs``), None where it has none."""
        picked = self._with_drawn(entry, dataset)
        if not len(picked):
            return None
        first = picked.iloc[0]
        folder = (self.store.root / first["source"]).parent
        path = designs.path_of(folder, first["model_key"], first["hardware"], first["task_key"])
        return path if path.is_file() else None

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

    def _dated(self, period: Period | None) -> pd.DataFrame:
        """The sums of graded date conditions in ``period`` (all of them without one), a sparse entry's drawn dates
        included (its dates need not include any scored in full: a design of round 2 had the no-date baseline as its pilot)."""
        both = pd.concat([self.sums, self.drawn]) if len(self.drawn) else self.sums
        dated = both[(both["factor"] == "date") & (both["n_graded"] > 0)]
        return dated if period is None else dated[period.holds(dated["date"])]

    def dated_entries(self, period: Period | None = None) -> list[tuple[str, str]]:
        """(entry, dataset) of every graded entry with two or more dates in ``period``, sorted: the one place that decides
        which entries have a date effect to test (null band, headline, Table 7, the robust number)."""
        counts = self._dated(period).groupby(["entry", "dataset"], sort=True)["condition_key"].nunique()
        return list(counts[counts >= 2].index)

    def _date_keys(self, entry: str, dataset: str, period: Period | None) -> list | None:
        """The condition keys of an entry's graded dates in ``period``; None where that is all of them (the whole
        sweep: what a sweep's end keeps, so a page whose range is the whole store reads it instead of computing)."""
        if period is None:
            return None
        dated = self._dated(None)
        mine = dated[(dated["entry"] == entry) & (dated["dataset"] == dataset)]
        inside = mine.loc[period.holds(mine["date"]), "condition_key"]
        return None if inside.nunique() == mine["condition_key"].nunique() else sorted(set(inside))

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

    def sparse_entries(self) -> list[tuple[str, str]]:
        """(entry, dataset) of every entry swept sparsely (``--budget``), sorted."""
        return self._sparse

    def _sparse_rows(self, entry: str, dataset: str) -> pd.DataFrame:
        """A sparse entry's graded rows, its dense conditions and its drawn dates, as ``estimated.sample_of`` reads."""
        picked = self._with_drawn(entry, dataset)
        keys = picked[[*schema.ENTRY_KEY, "entry"]].drop_duplicates(ignore_index=True)
        paths = [self.store.root / source for source in dict.fromkeys(picked["source"])]
        columns = ["item_id", "condition_key", "date", "factor", "design", "inclusion", "probs", "correct"]
        return sql.rows(paths, keys, True, columns)

    def sparse_sample(self, entry: str, dataset: str, period: Period | None = None) -> estimated.Sample:
        """One sparse entry's ``estimated.Sample`` of its dates in ``period`` (dates as YYYY-MM-DD)."""
        sample = self._whole_sample(entry, dataset)
        return sample if period is None else sample.of_dates(period.holds(pd.Series(sample.dates)).to_numpy())

    def widest_estimated(self, records: set[Path]) -> float:
        """The largest distance from an estimated date's value to its interval's ends over the sparse entries whose
        design records are ``records`` (``estimated.widest``): what a ``--target-width`` sweep checks after each look."""
        found = 0.0
        for entry, dataset in self.sparse_entries():
            if self._record_path(entry, dataset) in records:
                table = estimated.estimates_table(self.sparse_sample(entry, dataset))
                found = max(found, estimated.widest(table["value"], table["low"], table["high"], table["estimated"]))
        return found

    def _sample_of(self, entry: str, dataset: str) -> estimated.Sample:
        record = self._record_path(entry, dataset)
        try:
            sample = estimated.sample_of(self._sparse_rows(entry, dataset), designs.read(record) if record else None)
        except DateEvalError as error:
            raise DateEvalError(f"{entry} on {dataset} (a sparse sweep): {error}") from None
        dates = pd.to_datetime(pd.Series(sample.dates), format="mixed").dt.strftime("%Y-%m-%d")
        return sample._replace(dates=list(dates))

    def _sample_for(self, entry: str, dataset: str, period: Period | None) -> estimated.Sample:
        """An entry's :meth:`sparse_sample`, or its dense grades as one (``estimated.dense_sample``)."""
        if (entry, dataset) in self.sparse_entries():
            return self.sparse_sample(entry, dataset, period)
        dates, correct, _ = self.matrices(entry, dataset, self._date_keys(entry, dataset, period), "date")
        days = pd.to_datetime(pd.Series(dates)).dt.strftime("%Y-%m-%d").tolist()
        return estimated.dense_sample(days, list(self.question_ids(entry, dataset)), correct)
