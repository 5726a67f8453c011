"""Plotly figures shared by the explorer and exports: one function per figure, data in, figure out."""

from __future__ import annotations

import difflib
import html

import pandas as pd
import plotly.graph_objects as go

from dateeval.analysis import HIGHER_IS_BETTER, SCALE, metric_label


def axis_label(metric: str, dataset: str = "") -> str:
    name = metric_label(metric, dataset)
    return (name.capitalize() if name == "accuracy" else name) + (" (%)" if SCALE[metric] == 100 else "")


def _layout(figure: go.Figure, title: str, y_title: str, x_title: str = "Date") -> go.Figure:
    figure.update_layout(
        title=title, xaxis_title=x_title, yaxis_title=y_title, hovermode="x unified", template="plotly_white",
        legend={"orientation": "h", "y": -0.2}, margin={"t": 60, "b": 40},
    )  # fmt: skip
    return figure


def curves(dated: pd.DataFrame, metric: str, baselines: pd.DataFrame, rolling: int = 1, default_dates: dict[str, pd.Timestamp] | None = None,
           dataset: str = "") -> go.Figure:  # fmt: skip
    """Metric against date, one line per entry (paper Figures 2, 11-13).

    Worst and best dates are marked; each entry's no-date value is a dashed
    horizontal line; ``rolling`` > 1 adds a centred rolling mean.
    """
    figure = go.Figure()
    higher_is_better = HIGHER_IS_BETTER[metric]
    for entry, group in dated.groupby("entry", sort=True):
        values = SCALE[metric] * group[metric]
        figure.add_trace(go.Scatter(x=group["date"], y=values, mode="lines", name=entry, opacity=0.45 if rolling > 1 else 1))
        if rolling > 1:
            figure.add_trace(go.Scatter(x=group["date"], y=values.rolling(rolling, center=True, min_periods=1).mean(), mode="lines",
                                        name=f"{entry} ({rolling}-day mean)", line={"width": 3}))  # fmt: skip
        best = values.idxmax() if higher_is_better else values.idxmin()
        worst = values.idxmin() if higher_is_better else values.idxmax()
        for index, name, symbol in ((best, "best", "triangle-up"), (worst, "worst", "triangle-down")):
            figure.add_trace(go.Scatter(x=[group.loc[index, "date"]], y=[values[index]], mode="markers", marker={"size": 12, "symbol": symbol},
                                        name=f"{entry}: {name} {group.loc[index, 'date']:%Y-%m-%d} ({values[index]:.2f})"))  # fmt: skip
        baseline = baselines[(baselines["entry"] == entry) & (baselines["date_mode"] == "none")]
        if len(baseline):
            figure.add_hline(y=SCALE[metric] * baseline[metric].iloc[0], line_dash="dash", annotation_text=f"{entry}: no date", opacity=0.7)
        if default_dates and default_dates.get(entry):
            figure.add_vline(x=default_dates[entry].timestamp() * 1000, line_dash="dot", annotation_text=f"{entry}: template default date")
    return _layout(figure, f"{axis_label(metric, dataset).removesuffix(' (%)')} by date in the system prompt", axis_label(metric, dataset))


def bump(ranked: pd.DataFrame) -> go.Figure:
    """Rank of each entry on each date (Figure 1b as a bump chart); rank 1 at the top."""
    figure = go.Figure()
    for entry, group in ranked.groupby("entry", sort=True):
        figure.add_trace(go.Scatter(x=group["date"], y=group["rank"], mode="lines", line={"shape": "hv"}, name=entry))
    figure.update_yaxes(autorange="reversed", dtick=1)
    return _layout(figure, "Leaderboard position by date", "Rank (1 = best)")


def tau_histogram(taus: pd.DataFrame) -> go.Figure:
    figure = go.Figure(go.Histogram(x=taus["tau"], nbinsx=21))
    return _layout(figure, "Kendall tau between the rankings of every pair of dates", "Date pairs", x_title="Kendall tau (1 = same order)")


def option_heatmap(rows: pd.DataFrame, labels: list[str]) -> go.Figure:
    """Probability of each option (rows) on each date (columns) for one question."""
    matrix = pd.DataFrame(rows["probs"].tolist(), index=rows["date"]).T
    matrix.index = labels[: len(matrix)]
    figure = go.Figure(go.Heatmap(z=matrix.to_numpy(), x=matrix.columns, y=matrix.index, colorscale="Viridis", zmin=0, zmax=1,
                                  colorbar={"title": "P(option)"}, hovertemplate="%{x}<br>option %{y}: %{z:.3f}<extra></extra>"))  # fmt: skip
    figure.update_yaxes(autorange="reversed")
    return _layout(figure, "Option probabilities across dates", "Option")


def highlighted_diff(first: str, second: str) -> tuple[str, str]:
    """HTML for two prompts with the characters that differ highlighted."""
    matcher = difflib.SequenceMatcher(a=first, b=second, autojunk=False)
    left, right = [], []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        a, b = html.escape(first[a0:a1]), html.escape(second[b0:b1])
        if tag == "equal":
            left.append(a)
            right.append(b)
        else:
            left.append(f"<mark style='background:#ffb3b3'>{a}</mark>" if a else "")
            right.append(f"<mark style='background:#b3ffb3'>{b}</mark>" if b else "")
    wrap = "<pre style='white-space:pre-wrap;font-size:0.8rem'>{}</pre>"
    return wrap.format("".join(left)), wrap.format("".join(right))


def factor_bars(table: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """Table 5 as bars: CV of a metric per factor, with bootstrap 95% intervals, one colour per entry."""
    figure = go.Figure()
    for entry, group in table.groupby("entry", sort=True):
        value, low, high = 100 * group[f"{metric}_cv"], 100 * group[f"{metric}_cv_low"], 100 * group[f"{metric}_cv_high"]
        figure.add_trace(go.Bar(x=group["factor"], y=value, name=entry, error_y={"type": "data", "symmetric": False, "array": high - value,
                                                                                   "arrayminus": value - low}))  # fmt: skip
    figure.update_layout(barmode="group")
    return _layout(figure, f"Variation of {axis_label(metric).removesuffix(' (%)')} by source (coefficient of variation)", "CV (%)", x_title="Factor")


def item_over_dates(outputs: pd.DataFrame, dataset: str) -> go.Figure:
    """One item's result on each date: right/wrong (with the parsed answer on hover), or sentence chrF for translations."""
    graded = outputs["correct"].notna().any()
    y = outputs["correct"].astype(float) if graded else outputs["score"].astype(float)
    hover = outputs["parsed"].fillna("(unparseable)").astype(str).str.slice(0, 80)
    figure = go.Figure(go.Scatter(x=pd.to_datetime(outputs["date"]), y=y, mode="markers", marker={"size": 7}, text=hover,
                                  hovertemplate="%{x|%Y-%m-%d}: %{y}<br>%{text}<extra></extra>"))  # fmt: skip
    if graded:
        figure.update_yaxes(tickvals=[0, 1], ticktext=["wrong", "right"], range=[-0.3, 1.3])
    return _layout(figure, "This item on each date", metric_label("accuracy", dataset) if graded else "Sentence chrF")
