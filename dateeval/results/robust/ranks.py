"""The leaderboard by date-robust score: each entry's range of ranks over dates, how often it is first, and the pairs
of entries the date reorders. Pure functions of the entries' ``robust_row.RobustRow``s (their figures and per-date
scores), so the CLI, the report and the explorer rank the same way."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from dateeval.results.robust.robust_row import RobustRow


RANK_COLUMNS = ["rank_best", "rank_worst", "rank_low", "rank_high", "first_share", "n_ranked_dates"]


def per_date_ranks(scores: pd.DataFrame) -> pd.DataFrame:
    """Each entry's rank on each date (dates x entries; 1 = best, ties share the best rank, as ``descriptive.ranks``)."""
    return scores.rank(axis=1, ascending=False, method="min").astype(int)


def rank_intervals(scores: pd.DataFrame) -> pd.DataFrame:
    """Per entry (the columns of ``scores``, dates x entries, dates every entry has): its best and worst rank over
    dates, the central 95% of its ranks (observed ranks: the 2.5% and 97.5% quantiles of the inverted CDF), and the
    share of dates at which it ranks first (ties included)."""
    ranks = per_date_ranks(scores).to_numpy()
    low, high = np.quantile(ranks, [0.025, 0.975], axis=0, method="inverted_cdf")
    return pd.DataFrame(
        {
            "entry": scores.columns,
            "rank_best": ranks.min(0),
            "rank_worst": ranks.max(0),
            "rank_low": low.astype(int),
            "rank_high": high.astype(int),
            "first_share": (ranks == 1).mean(0),
            "n_ranked_dates": len(ranks),
        }
    )


PAIR_COLUMNS = ["entry_a", "entry_b", "a_ahead", "b_ahead", "tied", "flips", "intervals_overlap", "unresolved"]


def flipping_pairs(scores: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """Every pair of entries, ``entry_a`` the one with the higher date-marginal score: on how many dates each is
    ahead, whether their order flips with the date, whether their 95% intervals overlap, and ``unresolved``
    (both: the date decides which ranks higher, and the data cannot tell them apart).

    ``scores`` is dates x entries; ``intervals`` has ``entry``, ``score``, ``low`` and ``high`` per entry.
    """
    known = intervals.set_index("entry")
    order = known.loc[list(scores.columns)].sort_values("score", ascending=False, kind="stable").index
    rows = []
    for a, b in combinations(order, 2):
        ahead, behind = int((scores[a] > scores[b]).sum()), int((scores[a] < scores[b]).sum())
        overlap = bool(known.at[a, "low"] <= known.at[b, "high"] and known.at[b, "low"] <= known.at[a, "high"])
        flips = ahead > 0 and behind > 0
        rows.append(
            {
                "entry_a": a,
                "entry_b": b,
                "a_ahead": ahead,
                "b_ahead": behind,
                "tied": len(scores) - ahead - behind,
                "flips": flips,
                "intervals_overlap": overlap,
                "unresolved": flips and overlap,
            }
        )
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


ENTRY_ROW_COLUMNS = [
    "entry",
    "dataset",
    "score",
    "low",
    "high",
    "half_width",
    "df",
    "bootstrap_low",
    "bootstrap_high",
    "bootstrap_low_mc_error",
    "bootstrap_high_mc_error",
    "anova_half_width",
    "item_only_half_width",
    "var_item",
    "var_date",
    "var_residual",
    "sd_date",
    "sd_date_low",
    "sd_date_high",
    "share_item",
    "share_date",
    "share_residual",
    "n_dates",
    "n_items",
    "share_scored",
    "first_date",
    "last_date",
]
BOARD_COLUMNS = ["rank", *ENTRY_ROW_COLUMNS[:2], *ENTRY_ROW_COLUMNS[2:], *RANK_COLUMNS]


def date_scores(rows: Sequence[RobustRow]) -> pd.DataFrame:
    """Per-date scores (dates x entries) of entries' rows, on the dates every entry has: ranks compare entries on one
    date."""
    series = {row.entry: pd.Series(row.per_date, index=row.dates, dtype=float) for row in rows}
    return pd.DataFrame(series).dropna().sort_index()


def leaderboard(rows: Sequence[RobustRow]) -> pd.DataFrame:
    """Entries ordered by date-marginal score (``rank``: 1 = best, ties share the best), with each one's interval,
    variance components and rank interval over the dates they all have (missing where they share none)."""
    if not rows:
        return pd.DataFrame(columns=BOARD_COLUMNS)
    board = pd.DataFrame([row.record() for row in rows])[ENTRY_ROW_COLUMNS]
    scores = date_scores(rows)
    ranks = (
        rank_intervals(scores)
        if len(scores)
        else pd.DataFrame({"entry": board["entry"]}).assign(**dict.fromkeys(RANK_COLUMNS, np.nan))
    )
    board = board.merge(ranks, on="entry", how="left").sort_values(
        ["score", "entry"], ascending=[False, True], ignore_index=True
    )
    board.insert(0, "rank", board["score"].rank(ascending=False, method="min").astype(int))
    return board[BOARD_COLUMNS]


def pairs(rows: Sequence[RobustRow]) -> pd.DataFrame:
    """:func:`flipping_pairs` of entries' rows, on the dates they all have."""
    scores = date_scores(rows)
    return (
        flipping_pairs(scores, pd.DataFrame([row.record() for row in rows]))
        if len(rows) >= 2 and len(scores)
        else pd.DataFrame(columns=PAIR_COLUMNS)
    )
