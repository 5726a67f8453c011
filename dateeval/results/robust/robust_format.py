"""The date-robust leaderboard as people read it: one display table (the CLI, the report and the explorer page show
it), the same table as Markdown and LaTeX for a paper, and a figure (SVG or PDF, by matplotlib).

Formatting only: every number comes from :meth:`dateeval.results.Results.robust.robust` (``dateeval.results.robust.robust``).
"""

from __future__ import annotations

import pandas as pd

from dateeval.errors import DateEvalError
from dateeval.metrics import METRICS, missing, point_decimals
from dateeval.results.robust import robust, robust_row
from dateeval.results.robust.robust_record import RobustRecord

FIGURE_FORMATS = (".svg", ".pdf", ".png")


def _decimals(board: pd.DataFrame) -> int:
    """One decimal at least, more where the questions support it (``metrics.point_decimals``)."""
    return max(1, point_decimals(int(board["n_items"].min()))) if len(board) else 1


def _span(low: object, high: object) -> str:
    if missing(low) or missing(high):
        return "-"
    return f"{int(low)}" if low == high else f"{int(low)}–{int(high)}"


CI_HELP = (
    "95% interval over items and dates: Korn-Graubard, exact at the effective sample size the variance components give"
)


SD_HEADING = "Date SD (pp) [95% CI]"
SD_HELP = (
    "How much the date moves the score: the SD across dates of the dates' true rates, without the counting noise "
    "(two-way ANOVA's date component), with the noncentral F's interval; for a sparse entry, over the sample's noise too"
)


def _sd_text(row: dict, decimals: int) -> str:
    """The date effect's SD in pp with its interval as it is (no interval where no question changes: SD 0 for certain)."""
    value = f"{100 * row['sd_date']:.{decimals}f}"
    if missing(row["sd_date_low"]):
        return value
    return f"{value} [{100 * row['sd_date_low']:.{decimals}f}, {100 * row['sd_date_high']:.{decimals}f}]"


def display(board: pd.DataFrame, dataset: str, half_width: float) -> pd.DataFrame:
    """The leaderboard's rows as text under human headings (rates in %, differences in pp), what a reader plans with
    first (score, interval, dates needed, where the variance comes from), then how much the date moves the score and
    the ranks: at 1280 px the first six are in view without scrolling sideways."""
    decimals = _decimals(board)
    name = METRICS["accuracy"].title(dataset)
    target = f"{100 * half_width:.{decimals}f}"
    rows = []
    for row in board.to_dict("records"):
        needed = robust.dates_needed(robust_row.components_of(row), half_width)
        rows.append(
            {
                "Rank": str(row["rank"]),
                "Model": row["entry"],
                f"{name} (%)": f"{100 * row['score']:.{decimals}f}",
                "95% CI": f"[{100 * row['low']:.{decimals}f}, {100 * row['high']:.{decimals}f}]",
                f"Dates for ±{target} pp": "unreachable (add items)" if needed is None else str(needed),
                "Variance %: item/date/item×date": "/".join(
                    "-" if missing(row[f"share_{part}"]) else f"{100 * row[f'share_{part}']:.0f}"
                    for part in ("item", "date", "residual")
                ),
                SD_HEADING: _sd_text(row, decimals),
                "Ranks over dates": _span(row["rank_best"], row["rank_worst"]),
                "Central 95% of ranks": _span(row["rank_low"], row["rank_high"]),
                "First on (% of dates)": "-" if missing(row["first_share"]) else f"{100 * row['first_share']:.0f}",
                "Dates × items": f"{int(row['n_dates'])} × {int(row['n_items'])}",
            }
        )
    return pd.DataFrame(rows, columns=None if rows else ["Rank", "Model"])


def markdown(shown: pd.DataFrame) -> str:
    """A :func:`display` table as a GitHub Markdown table."""
    lines = [
        "| " + " | ".join(shown.columns) + " |",
        "|" + "|".join("---:" if name != "Model" else "---" for name in shown.columns) + "|",
    ]
    lines += [
        "| " + " | ".join(str(value).replace("|", "\\|") for value in row) + " |"
        for row in shown.itertuples(index=False)
    ]
    return "\n".join(lines) + "\n"


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "×": r"$\times$",
    "–": "--",
}


def _tex(text: object) -> str:
    return "".join(_LATEX.get(character, character) for character in str(text))


def latex(shown: pd.DataFrame, caption: str) -> str:
    """A :func:`display` table as a LaTeX ``table`` (booktabs), with ``caption`` (e.g. the sentence and how it was computed)."""
    spec = "".join("l" if name == "Model" else "r" for name in shown.columns)
    body = [" & ".join(_tex(value) for value in row) + r" \\" for row in shown.itertuples(index=False)]
    return (
        "\n".join(
            [
                r"\begin{table}[t]",
                r"\centering",
                r"\small",
                rf"\begin{{tabular}}{{{spec}}}",
                r"\toprule",
                " & ".join(_tex(name) for name in shown.columns) + r" \\",
                r"\midrule",
                *body,
                r"\bottomrule",
                r"\end{tabular}",
                rf"\caption{{{_tex(caption)}}}",
                r"\end{table}",
            ]
        )
        + "\n"
    )


def caption(dataset: str, board: pd.DataFrame) -> str:
    """What the table shows, in words a caption needs."""
    name = METRICS["accuracy"].name_on(dataset)
    return (
        f"Date-robust {name} on {dataset}: the mean over the swept dates, with a 95% interval over items and dates (Korn-Graubard: "
        f"exact at the effective sample size the variance components give, Satterthwaite df); ranks are each model's rank on each date; variance shares from a two-way random-effects ANOVA."
    )


def figure(record: RobustRecord, suffix: str) -> bytes:
    """A two-panel figure of a ``Results.robust.robust_record`` for a paper, as the bytes of an SVG, PDF or PNG file (by
    ``suffix``; ``dateeval.cli.outputs.write_figure`` writes it): (a) each entry's date-marginal score with its 95% interval
    over items and dates, beside the range of its per-date scores; (b) the predicted half-width against the number of
    dates, with the target's."""
    import io

    if suffix not in FIGURE_FORMATS:
        raise DateEvalError(f"--figure: give a file ending in {', '.join(FIGURE_FORMATS)}")
    try:
        import matplotlib
    except ImportError:
        raise DateEvalError("the figure needs matplotlib: `pip install matplotlib` (in requirements.txt)") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    matplotlib.rcParams.update(
        {"svg.hashsalt": "dateeval", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False}
    )
    board, dataset, half_width = record.entries, record.dataset, record.half_width_target
    name = METRICS["accuracy"].axis_label(dataset)
    fig, (left, right) = pyplot.subplots(
        1, 2, figsize=(7.2, 1.6 + 0.4 * max(len(board), 2)), gridspec_kw={"width_ratios": [3, 2]}
    )
    positions = list(range(len(board)))[::-1]
    for y, row in zip(positions, board):
        per_date = [100 * value for value in row.per_date]
        left.plot(
            [min(per_date), max(per_date)],
            [y, y],
            color="0.8",
            linewidth=6,
            solid_capstyle="butt",
            label="per-date range" if y == positions[0] else None,
        )
        left.errorbar(
            100 * row.score,
            y,
            xerr=[[100 * (row.score - row.low)], [100 * (row.high - row.score)]],
            fmt="o",
            color="C0",
            capsize=3,
            label="mean over dates, 95% CI" if y == positions[0] else None,
        )
        plan = robust.plan(row.components)
        right.plot(plan["dates"], 100 * plan["half_width"], marker=".", label=row.entry)
    left.set_yticks(positions, [f"{row.rank}. {row.entry}" for row in board])
    left.set_xlabel(name)
    left.set_ylim(-0.6, len(board) - 0.4)
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=2, fontsize=7, frameon=False)
    left.set_title("(a) date-marginal score", loc="left")
    right.axhline(100 * half_width, color="0.4", linestyle="--", linewidth=1)
    right.set_xscale("log", base=2)
    right.set_xticks(list(robust.PLAN_SIZES[::2]), [str(size) for size in robust.PLAN_SIZES[::2]])
    right.set_ylim(bottom=0)
    right.set_xlabel("dates drawn uniformly")
    right.set_ylabel("95% half-width (pp)")
    right.set_title("(b) dates needed", loc="left")
    right.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), fontsize=6, frameon=False)
    fig.tight_layout()
    drawn = io.BytesIO()
    try:
        fig.savefig(
            drawn,
            format=suffix[1:],
            dpi=200,
            bbox_inches="tight",
            metadata={"Date": None} if suffix in (".svg", ".pdf") else None,
        )
    finally:
        pyplot.close(fig)
    return drawn.getvalue()


def _rendered(record: RobustRecord, suffix: str) -> bytes | None:
    """:func:`figure` in memory as ``suffix`` (".svg", ".png"); None without matplotlib (the page then shows no figure)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return None
    return figure(record, suffix)


def svg(record: RobustRecord) -> str | None:
    """:func:`figure` as an ``<svg>`` element (no XML prologue), for embedding in the HTML report (None without matplotlib)."""
    found = _rendered(record, ".svg")
    if found is None:
        return None
    text = found.decode()
    return text[text.index("<svg") :]


def png(record: RobustRecord) -> bytes | None:
    """:func:`figure` as PNG bytes at 200 dpi, for slides and documents that take no SVG (None without matplotlib)."""
    return _rendered(record, ".png")
