"""The store's finding in numbers (:class:`Headline`) and in words: one type that the Overview, ``dateeval summary``
and the report read, and one formatter (:func:`headline_sentence`, :func:`verdict_power`, :func:`reorder_sentence`,
:meth:`Headline.delta_text`...), so a figure prints the same wherever it is shown.

The headline is kept with the store as one row (``dateeval.results.sources.stored``): :meth:`Headline.record` and
:meth:`Headline.from_record` are its only way in and out of that row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace

import pandas as pd

from dateeval.metrics import METRICS, percent, points
from dateeval.results.chance.chance import largest_of
from dateeval.results.descriptive import kendall_taus, reordering, summarize

NAN = float("nan")


@dataclass(frozen=True)
class Headline:
    """The verdict over a store's K graded entries (``p_value``: the family-wise p of :func:`dateeval.results.chance.chance.
    date_effect_family`), its largest worst-to-best accuracy delta (``entry`` on ``dataset``) against the largest of K
    shuffled deltas, that entry's own null band, how often two dates reorder the models of one dataset (``reorder_*``,
    NaN / None where no dataset has two models) and how often the verdict's test finds a ``power_effect`` date effect
    on the top entry's questions and dates (``power``)."""

    entry: str
    dataset: str
    delta: float
    n_dates: int
    n_items: int
    k_entries: int
    null_median: float
    null_upper: float
    p_value: float
    beyond_chance: bool
    delta_p_value: float
    entry_null_upper: float
    entry_p_value: float
    worst_date: str | None = None
    best_date: str | None = None
    reorder: float = NAN
    reorder_dataset: str | None = None
    reorder_entries: int | None = None
    reorder_pairs: int | None = None
    reorder_defined: int | None = None
    reorder_undefined: int | None = None
    reorder_count: int | None = None
    reorder_chance: float = NAN
    reorder_chance_upper: float = NAN
    reorder_p_value: float = NAN
    power_effect: float = NAN
    power: float = NAN

    def record(self) -> dict:
        """The row the headline is kept as."""
        return asdict(self)

    @classmethod
    def from_record(cls, record: dict) -> Headline:
        """A kept row back as a headline (a missing value read back as None stays None; a missing float is NaN)."""
        names = {field.name for field in fields(cls)}
        return cls(**{name: value for name, value in record.items() if name in names and value is not None})

    def with_(self, **changes: object) -> Headline:
        """This headline with some fields replaced (what the kept statistics add: reorder chance, power)."""
        return replace(self, **changes)

    @property
    def verdict(self) -> str:
        """ "Beyond chance" or "Within chance": the verdict's words, the first of the headline sentence."""
        return "Beyond chance" if self.beyond_chance else "Within chance"

    @property
    def of_k(self) -> str:
        """Which delta the headline names, among how many."""
        return (
            f"the largest of {self.k_entries} model x dataset deltas"
            if self.k_entries > 1
            else "the only model x dataset delta"
        )

    def delta_text(self) -> str:
        """The largest delta in percentage points at the precision the questions allow."""
        return points(self.delta, int(self.n_items))

    def chance_text(self) -> str:
        """What the largest of K shuffled deltas stays below in 95% of shuffles, as :meth:`delta_text` writes a delta."""
        return points(self.null_upper, int(self.n_items))

    def reorder_counts(self) -> dict[str, int | None]:
        """The reorder counts as ``descriptive.reordering`` gives them (for ``descriptive.reordering_words``)."""
        return {
            "n_pairs": self.reorder_pairs,
            "n_defined": self.reorder_defined,
            "n_undefined": self.reorder_undefined,
            "n_reordered": self.reorder_count,
        }

    def has_reorder(self) -> bool:
        """Whether a dataset with two or more models gave a reorder share."""
        return self.reorder_dataset is not None and math.isfinite(self.reorder)


def headline(significance: pd.DataFrame, metrics: pd.DataFrame, verdict: float) -> Headline | None:
    """The finding of a store in numbers: the verdict, whether the date moves any of the K graded entries (``verdict``,
    the family-wise p-value of ``chance.date_effect_family`` over those entries (``Results.chance.verdict``: Bonferroni with
    each sparse entry's design test where some were swept with ``--budget``): Cochran's Q by joint permutation, min-p,
    its size kept for any K in ``docs/coverage.md``); its largest worst-to-best accuracy delta with what the largest of K
    shuffled deltas gives (``chance.largest_of``, and that delta's own p-value); how often two dates rank the entries
    differently.

    ``significance`` holds ``chance.significance`` rows (with their ``null_draws``) of every entry with two or more
    dates. None when there is none.
    """
    if significance.empty:
        return None
    top = significance.loc[significance["delta"].idxmax()]
    summary = summarize(metrics)
    dates = summary[(summary["entry"] == top["entry"]) & (summary["dataset"] == top["dataset"])].iloc[0]
    family = largest_of(significance["delta"].tolist(), significance["null_draws"].tolist())
    found = Headline(
        entry=top["entry"],
        dataset=top["dataset"],
        delta=family["delta"],
        n_dates=int(top["n_dates"]),
        n_items=int(top["n_items"]),
        k_entries=len(significance),
        null_median=family["null_median"],
        null_upper=family["null_upper"],
        p_value=verdict,
        beyond_chance=verdict < 0.05,
        delta_p_value=family["p_value"],
        entry_null_upper=top["null_upper"],
        entry_p_value=top["p_value"],
        worst_date=dates.get("accuracy_worst_date"),
        best_date=dates.get("accuracy_best_date"),
    )
    entries = metrics[metrics["factor"] == "date"].groupby("dataset")["entry"].nunique()
    if len(entries) and entries.max() >= 2:
        dataset = top["dataset"] if entries.get(top["dataset"], 0) >= 2 else entries.idxmax()
        shares = reordering(kendall_taus(metrics, dataset))
        found = found.with_(
            reorder=shares["share"],
            reorder_dataset=dataset,
            reorder_entries=int(entries[dataset]),
            reorder_pairs=shares["n_pairs"],
            reorder_defined=shares["n_defined"],
            reorder_undefined=shares["n_undefined"],
            reorder_count=shares["n_reordered"],
        )
    return found


def headline_sentence(top: Headline | None, strong: Callable[[str], str] = str) -> str:
    """The store's finding in one sentence, verdict first: what the Overview shows, `summary` prints and the report
    writes (``strong`` marks the entry, dataset and delta, e.g. in Markdown bold)."""
    if top is None:
        return "No headline: it needs one model scored on two or more dates."
    n = int(top.n_items)
    if top.delta == 0:
        return f"Within chance: on the {top.n_dates} dates and {n} questions of this store, changing the date moved no score."
    return (
        f"{top.verdict} (p = {top.p_value:.3f}): changing only the date moves {METRICS['accuracy'].name_on(top.dataset)} of "
        f"{strong(top.entry)} on {strong(top.dataset)} by up to {strong(top.delta_text())} ({top.of_k}, {n} questions x "
        f"{top.n_dates} dates); chance alone gives up to {top.chance_text()} in 95% of shuffles."
    )


def verdict_power(top: Headline | None) -> str:
    """The verdict's test and how often it finds a real date effect here: the line under the headline (empty
    where there is no verdict)."""
    if top is None or top.delta == 0:
        return ""
    tested = (
        (
            f"Cochran's Q by permutation over the {top.k_entries} entries (min-p; each question's dates shuffled alike in every "
            "entry)"
        )
        if top.k_entries > 1
        else "Cochran's Q by permutation"
    )
    if not math.isfinite(top.power):  # a sparse entry's: its power is measured by simulation in docs/coverage.md
        return f"p from {tested} (a sparse sweep's: its drawn grades shuffled among their dates; docs/coverage.md)."
    return (
        f"p from {tested}. With {int(top.n_items)} questions x {top.n_dates} dates this test finds a "
        f"{100 * top.power_effect:.0f} pp date effect {100 * top.power:.0f}% of the time (simulated on these questions; "
        f"docs/coverage.md)."
    )


def reorder_sentence(top: Headline | None) -> str:
    """The headline's reorder share beside what chance alone gives: the line ``summary`` and the report print under the
    verdict (empty where no dataset has two models)."""
    if top is None or not top.has_reorder():
        return ""
    chance = top.reorder_chance
    beside = (
        (
            f"; with the answers shuffled across the dates within each question (no date effect) {100 * chance:.2f}% "
            f"(95% of shuffles <= {100 * top.reorder_chance_upper:.2f}%), p = {top.reorder_p_value:.3f} that the date "
            "reorders them more than chance"
        )
        if math.isfinite(chance)
        else "; no chance value (the models share no questions and dates)"
    )
    return (
        f"Date pairs that reorder the {top.reorder_entries} models on {top.reorder_dataset}: {100 * top.reorder:.2f}% "
        f"({top.reorder_count:,} of {top.reorder_defined:,}){beside}."
    )


def reorder_chance_text(top: Headline) -> str | None:
    """The reorder share chance alone gives, as the Overview's metric shows it beside the observed share (None without one)."""
    return f"chance alone {percent(top.reorder_chance)}" if math.isfinite(top.reorder_chance) else None
