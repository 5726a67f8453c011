"""The date-robust numbers in words and as a record: the sentence a researcher pastes, how many dates a chosen width
needs and why few dates give a wide interval, model against model in words, and the machine-readable record
(``dateeval robust --json``) that holds them with what produced each entry. Every number comes from
``robust`` (the statistics) and ``ranks`` (the leaderboard)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from dateeval.metrics import METRICS, point_decimals
from dateeval.results.robust.identity import Identity
from dateeval.results.variation import Z95, Components
from dateeval.results.robust.ranks import leaderboard, pairs
from dateeval.results.robust.robust import N_BOOT, Comparison, dates_needed, interval_text
from dateeval.results.robust.robust_row import EntryStatistics, RobustRow, components_of


@dataclass(frozen=True)
class RobustEntry:
    """One entry's line of a :class:`RobustRecord`: its rank and date-robust figures (``ranks.BOARD_COLUMNS``, in that
    order; NaN as None), what produced them, its dates and score on each, the dates a target width needs, and the
    sentence and advice a researcher pastes."""

    rank: int
    entry: str
    dataset: str
    score: float
    low: float | None
    high: float | None
    half_width: float | None
    df: float | None
    bootstrap_low: float | None
    bootstrap_high: float | None
    bootstrap_low_mc_error: float | None
    bootstrap_high_mc_error: float | None
    anova_half_width: float | None
    item_only_half_width: float | None
    var_item: float
    var_date: float
    var_residual: float
    sd_date: float | None
    sd_date_low: float | None
    sd_date_high: float | None
    share_item: float | None
    share_date: float | None
    share_residual: float | None
    n_dates: int
    n_items: int
    share_scored: float
    first_date: str
    last_date: str
    rank_best: float | None
    rank_worst: float | None
    rank_low: float | None
    rank_high: float | None
    first_share: float | None
    n_ranked_dates: float | None
    identity: Identity
    dates: list[str]
    per_date: list[float]
    dates_needed: int | None
    half_width_with_dates_needed: float | None
    sentence: str
    advice: str

    def as_json(self) -> dict:
        """The line as JSON-ready values, keys in field order (``summary --json``'s ``robust``)."""
        return asdict(self)

    @property
    def components(self) -> Components:
        """The variance components the planning figures read (``robust_row.components_of`` of this line)."""
        return components_of(vars(self))


@dataclass(frozen=True)
class ReorderedPair:
    """Two entries of a :class:`RobustRecord` (``ranks.PAIR_COLUMNS``): on how many dates each is ahead, and whether
    the date reorders them while their intervals overlap (``unresolved``: no date-robust ranking of the two)."""

    entry_a: str
    entry_b: str
    a_ahead: int
    b_ahead: int
    tied: int
    flips: bool
    intervals_overlap: bool
    unresolved: bool


@dataclass(frozen=True)
class RobustRecord:
    """One dataset's date-robust numbers as every reader gets them (``Results.robust.robust_record``): ``dateeval robust``,
    What to report, the report and ``summary --json`` read its fields; :meth:`as_json` is ``robust --json``."""

    dataset: str
    metric: str
    half_width_target: float
    confidence_level: float
    interval: str
    components: str
    dateeval_version: str
    entries: list[RobustEntry]
    pairs: list[ReorderedPair]

    def as_json(self) -> dict:
        """The record as JSON-ready values, keys in field order (what ``robust --json`` prints and the page downloads)."""
        return asdict(self)

    def board(self) -> pd.DataFrame:
        """The entries as a table, one row an entry (what ``robust_format.display`` and the report's CSV read)."""
        return pd.DataFrame([entry.as_json() for entry in self.entries])

    def unresolved(self) -> list[str]:
        """The pairs the date reorders while their intervals overlap, as "A and B"."""
        return [f"{pair.entry_a} and {pair.entry_b}" for pair in self.pairs if pair.unresolved]


def _pp(value: float, decimals: int = 1) -> str:
    return f"{100 * value:+.{decimals}f}"


NO_SPREAD = "every question differs by the same amount on every date, so there is no spread to read an interval from"
NOT_SAMPLED = "not estimated from a sparse sweep's sample"


def compare_cells(found: Comparison) -> dict[str, str]:
    """:func:`compare`'s numbers as text, the digits :func:`compare_lines` and :func:`compare_table` both print:
    differences to 0.1 pp (the scores' own digits), date SDs to 0.01 pp."""
    (value, low, high), sense = found.difference, found.sensitivity
    bounds = f"[{_pp(low)}, {_pp(high)}]" if math.isfinite(low) else f"[no interval: {NO_SPREAD}]"
    return {
        "a": interval_text(*found.a, 1),
        "b": interval_text(*found.b, 1),
        "difference": _pp(value),
        "difference_interval": bounds,
        "better": "a" if low > 0 else "b" if high < 0 else "",
        "a_sd": f"{100 * sense.a_date_sd:.2f}" if math.isfinite(sense.a_date_sd) else "-",
        "b_sd": f"{100 * sense.b_date_sd:.2f}" if math.isfinite(sense.b_date_sd) else "-",
        "sd_difference": _pp(sense.value, 2) if math.isfinite(sense.value) else "-",
        "sd_interval": f"[{_pp(sense.low, 2)}, {_pp(sense.high, 2)}]"
        if math.isfinite(sense.low)
        else f"[no interval: {NOT_SAMPLED}]",
        "p": f"{sense.p_value:.3f}" if math.isfinite(sense.p_value) else "-",
        "moves_more": ("a" if sense.value > 0 else "b") if sense.p_value < 0.05 else "",
        "size": f"{found.n_items} questions x {found.n_dates} dates",
    }


def compare_lines(name_a: str, name_b: str, found: Comparison) -> list[str]:
    """:func:`compare` in words, one finding a line (percentage points)."""
    cells, names = compare_cells(found), {"a": name_a, "b": name_b}
    verdict = (
        f"{names[cells['better']]} scores higher whatever the date"
        if cells["better"]
        else "no difference shown: the interval holds 0"
    )
    verdict = verdict if math.isfinite(found.difference[1]) else "not decided by an interval"
    moved = (
        f"{names[cells['moves_more']]} moves more with the date"
        if cells["moves_more"]
        else "no difference in date sensitivity shown"
    )
    sensitivity = (
        f"date sensitivity (date SD without counting noise): A {cells['a_sd']} pp, B {cells['b_sd']} pp; "
        f"A - B {cells['sd_difference']} pp {cells['sd_interval']}, p = {cells['p']} (questions resampled, these dates): {moved}"
        if math.isfinite(found.sensitivity.value)
        else f"date sensitivity: {NOT_SAMPLED}"
    )
    return [
        f"A = {name_a}: date-robust score {cells['a']}; B = {name_b}: {cells['b']} ({cells['size']} both have)",
        f"A - B: {cells['difference']} pp {cells['difference_interval']} (95%, clustered by question"
        f"{', sparse samples' if not math.isfinite(found.sensitivity.value) else ''}): {verdict}",
        sensitivity,
    ]


def compare_table(pairs: list[tuple[str, str, Comparison]]) -> pd.DataFrame:
    """:func:`compare`'s findings of pairs of entries (A, B, found: ``Results.robust.compared``), one row a pair, in
    :func:`compare_cells`' digits: the report's model-against-model table."""
    rows = []
    for name_a, name_b, found in pairs:
        cells = compare_cells(found)
        rows.append(
            {
                "A": name_a,
                "B": name_b,
                "A (%)": cells["a"],
                "B (%)": cells["b"],
                "A - B (pp)": f"{cells['difference']} {cells['difference_interval']}",
                "higher whatever the date": {"a": "A", "b": "B", "": "not shown"}[cells["better"]],
                "date SD A, B (pp)": f"{cells['a_sd']}, {cells['b_sd']}",
                "date SD A - B (pp)": f"{cells['sd_difference']} {cells['sd_interval']}",
                "p (equal date sensitivity)": cells["p"],
                "moves more with the date": {"a": "A", "b": "B", "": "not shown"}[cells["moves_more"]],
                "questions x dates": cells["size"],
            }
        )
    return pd.DataFrame(rows)


def describe_dates(dates: list[str]) -> str:
    """How the swept dates cover their range, in words: every day of it, or how many dates within it."""
    days = pd.to_datetime(pd.Series(dates)).sort_values()
    first, last = f"{days.iloc[0]:%Y-%m-%d}", f"{days.iloc[-1]:%Y-%m-%d}"
    every_day = len(days) == (days.iloc[-1] - days.iloc[0]).days + 1
    return f"all {len(days)} days of {first}..{last}" if every_day else f"{len(days)} dates in {first}..{last}"


def sentence(metric: str, row: RobustRow, decimals: int = 1) -> str:
    """The one sentence a researcher pastes: the date-marginal score, its 95% interval as it is, the dates it is the mean over."""
    figures = row.statistics
    shown = interval_text(figures.score, figures.low, figures.high, decimals)
    sampled = figures.share_scored < 1
    estimated = (
        f", estimated from {100 * figures.share_scored:.0f}% of its item-dates (sparse sweep)" if sampled else ""
    )
    return (
        f"{metric} {shown}, mean over {describe_dates(row.dates)}, 95% CI over items and dates "
        f"({figures.n_items} items){estimated}"
    )


FEW_DF = 4  # below this many degrees of freedom, t_0.975 is over 2.7 (12.7 at 1): the interval says why it is wide


def width_reason(figures: EntryStatistics) -> str:
    """Why an interval from few dates is wide, when it is: the spread between dates rests on ``n_dates - 1``
    differences, so the interval must allow for a date effect as large as those few are consistent with (Student's t
    at Satterthwaite's df in place of 1.96). Two dates give an honest interval, not a usable one: ``docs/coverage.md``
    measured mean widths of 0.16-0.92 at 2 dates against 0.03-0.48 at 12 (10-200 questions). Empty unless the df are
    few and the dates' part of the mean's variance outweighs the questions'."""
    from scipy import stats as scipy_stats

    df, components = figures.df, figures.components
    if df >= FEW_DF or components.date / components.n_dates <= components.item / components.n_items:
        return ""  # many df, or the questions' share of the mean's variance is the larger: not the dates' doing
    differences = figures.n_dates - 1
    return (
        f"Wide because the dates' spread rests on {differences} difference{'s' if differences != 1 else ''} between dates "
        f"({df:.1f} degrees of freedom: Student's t {scipy_stats.t.ppf(0.975, df):.1f} in place of 1.96); more dates, not more "
        f"questions, narrow it. "
    )


def advice(metric: str, figures: EntryStatistics, half_width: float, first: str, last: str, decimals: int = 1) -> str:
    """How many dates, drawn how and from which range, give a +-``half_width`` interval (from the variance components),
    after :func:`width_reason` where few dates make the interval wide."""
    return width_reason(figures) + _dates_advice(metric, figures.components, half_width, first, last, decimals)


def _dates_advice(metric: str, components: Components, half_width: float, first: str, last: str, decimals: int) -> str:
    needed = dates_needed(components, half_width)
    target = f"±{100 * half_width:.{decimals}f} pp"
    if needed is None:
        floor = 100 * Z95 * math.sqrt(components.item / components.n_items)
        return (
            f"No number of dates gives {metric} {target} with these {components.n_items} items: by the variance components "
            f"(normal approximation, the method of every planned width here) the questions alone give ±{floor:.{decimals}f} pp; "
            f"add items."
        )
    return (
        f"For {metric} {target}, score {needed} dates drawn uniformly at random from {first}..{last} "
        f"(predicted ±{100 * components.half_width(needed):.{decimals}f} pp with {components.n_items} items)."
    )


def record(
    dataset: str, rows: list[RobustRow], identities: dict[str, Identity], half_width: float, version: str
) -> RobustRecord:
    """The machine-readable account of one dataset's date-robust numbers: what produced each (model identity,
    task settings, rendered prompts' digest, dates, items, dateeval's version), the numbers, and the sentences."""
    metric = METRICS["accuracy"].name_on(dataset)
    board, found = leaderboard(rows), {row.entry: row for row in rows}
    entries = []
    for line in board.to_dict("records"):
        row = found[line["entry"]]
        decimals = max(1, point_decimals(row.statistics.n_items))
        components = row.statistics.components
        needed = dates_needed(components, half_width)
        entries.append(
            RobustEntry(
                **_plain(line),
                identity=identities[line["entry"]],
                dates=row.dates,
                per_date=row.per_date,
                dates_needed=needed,
                half_width_with_dates_needed=None if needed is None else components.half_width(needed),
                sentence=sentence(metric, row, decimals),
                advice=advice(metric, row.statistics, half_width, row.first_date, row.last_date, decimals),
            )
        )
    return RobustRecord(
        dataset=dataset,
        metric=metric,
        half_width_target=half_width,
        confidence_level=0.95,
        interval="Korn-Graubard: Clopper-Pearson at the effective sample size p(1-p)/Var, Var from the variance components "
        "(unbiased, Satterthwaite df), widened to hold the same interval with one question right and one wrong on every date "
        "added (plus-two questions); bootstrap_low/high: percentile two-way bootstrap over items and dates "
        f"(Owen 2007), {N_BOOT} resamples, seed 0, with the Monte-Carlo error of each end",
        components="two-way random-effects ANOVA (items x dates, one grade per cell), method of moments, negatives set to 0",
        dateeval_version=version,
        entries=entries,
        pairs=[ReorderedPair(**_plain(pair)) for pair in pairs(rows).to_dict("records")],
    )


def _plain(row: dict) -> dict:
    """A table row as JSON-ready values: numpy scalars as Python numbers, NaN as None."""
    out = {}
    for key, value in row.items():
        value = value.item() if isinstance(value, np.generic) else value
        out[key] = None if isinstance(value, float) and math.isnan(value) else value
    return out
