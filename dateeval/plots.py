"""Plotly figures shared by the explorer and exports: one function per figure, data in, figure out."""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from dateeval.metrics import METRICS


def axis_label(metric: str, dataset: str = "") -> str:
    return METRICS[metric].axis_label(dataset)


# Every chart's modebar: the camera button saves an SVG (vector, for a paper or slides) named after the chart.
CHART_CONFIG = {"toImageButtonOptions": {"format": "svg", "filename": "dateeval-chart"}, "displaylogo": False}
DAY_MS = 86_400_000


def standalone_html(figure: go.Figure) -> str:
    """A chart as one HTML file that works offline (plotly.js inside, no CDN) whose camera saves a PNG at twice the
    size: the page's own camera saves SVG, so a user has both (raster for slides and documents, vector for papers)."""
    config = {
        **CHART_CONFIG,
        "toImageButtonOptions": {**CHART_CONFIG["toImageButtonOptions"], "format": "png", "scale": 2},
    }
    return figure.to_html(include_plotlyjs=True, config=config)


def _layout(figure: go.Figure, title: str, y_title: str, x_title: str = "Date", traces: int = 0) -> go.Figure:
    """Shared layout. With many traces the legend goes to the right, in a scrolling column, so it never squeezes the
    plot; date axes tick in days (a store of two dates gets no hour ticks)."""
    side = traces > 6
    figure.update_layout(
        title=title,
        xaxis_title=x_title,
        yaxis_title=y_title,
        hovermode="x unified",
        template="plotly_white",
        legend={"orientation": "v", "x": 1.02, "y": 1} if side else {"orientation": "h", "y": -0.25, "yanchor": "top"},
        margin={"t": 60, "b": 40},
        height=620 if side else 520,  # tall enough to read above (or beside) a legend of a dozen lines
        hoverlabel={
            "namelength": -1
        },  # full entry names: "smollm2-135m (bfloat16, cpu)" and "(float32, cpu)" differ at the end
    )
    if x_title == "Date":
        figure.update_xaxes(tickformat="%Y-%m-%d")
        dates = [pd.Timestamp(x) for trace in figure.data for x in (trace.x if trace.x is not None else ())]
        if dates and (max(dates) - min(dates)).days <= 14:
            figure.update_xaxes(dtick=DAY_MS)
    return figure


def curves(
    dated: pd.DataFrame,
    metric: str,
    baselines: pd.DataFrame,
    rolling: int = 1,
    default_dates: dict[str, pd.Timestamp] | None = None,
    dataset: str = "",
    band: pd.DataFrame | None = None,
    chance: pd.DataFrame | None = None,
    estimated: pd.DataFrame | None = None,
) -> go.Figure:
    """Metric against date, one line per entry (paper Figures 2, 11-13).

    Worst and best dates are marked (none on a flat line); each entry's
    no-date value is a dashed line named in the legend (labels written on the
    plot would print over each other); ``rolling`` > 1 adds a centred mean
    over that many calendar days (not points: on monthly data a 7-day mean
    is the value itself); ``band`` (entry, date, low, high) shades a 95%
    interval per date; ``chance`` (entry, low, high) draws each entry's chance
    band as two dotted lines over its dates: where the date has no effect,
    the whole line stays between them in 95% of shuffles; ``estimated`` (entry, date, value, low, high, share) draws a
    sparse sweep's estimated dates as open markers with their 95% interval, named with the share of the grid scored.
    """
    figure = go.Figure()
    spec = METRICS[metric]
    for index, (entry, group) in enumerate(dated.groupby("entry", sort=True)):
        colour = PALETTE[index % len(PALETTE)]
        values = spec.shown(group[metric])
        if band is not None and len(band[band["entry"] == entry]):
            _band(figure, band[band["entry"] == entry], spec.scale, entry, colour)
        dash = DASHES[
            (index // len(PALETTE)) % len(DASHES)
        ]  # past ten entries colours repeat: the line style tells them apart
        figure.add_trace(
            go.Scatter(
                x=group["date"],
                y=values,
                mode="lines+markers" if len(group) <= 31 else "lines",
                name=entry,
                line={"color": colour, "dash": dash},
                opacity=0.45 if rolling > 1 else 1,
                customdata=[entry] * len(group),
            )
        )
        if rolling > 1:
            mean = (
                pd.Series(values.to_numpy(), index=pd.DatetimeIndex(group["date"]))
                .rolling(f"{rolling}D", center=True, min_periods=1)
                .mean()
            )
            figure.add_trace(
                go.Scatter(
                    x=group["date"],
                    y=mean.to_numpy(),
                    mode="lines",
                    name=f"{entry} ({rolling}-day mean)",
                    line={"width": 3, "color": colour},
                )
            )
        _extremes(figure, group, values, spec.higher_is_better, entry, colour)
        if estimated is not None and len(estimated[estimated["entry"] == entry]):
            _estimated(figure, estimated[estimated["entry"] == entry], spec.scale, entry, colour)
        if chance is not None and len(chance[chance["entry"] == entry]) and len(group):
            _chance(figure, chance[chance["entry"] == entry].iloc[0], group["date"], spec.scale, entry, colour)
        baseline = baselines[(baselines["entry"] == entry) & (baselines["date_mode"] == "none")]
        if len(baseline) and len(group):
            level = spec.shown(float(baseline[metric].iloc[0]))
            figure.add_trace(
                go.Scatter(
                    x=[group["date"].min(), group["date"].max()],
                    y=[level, level],
                    mode="lines",
                    name=f"{entry}: no date",
                    line={"dash": "dash", "color": colour},
                    opacity=0.8,
                    hovertemplate=f"no date: {level:.2f}<extra></extra>",
                )
            )
        if default_dates and default_dates.get(entry) and len(group):
            day = default_dates[entry]
            figure.add_trace(
                go.Scatter(
                    x=[day, day],
                    y=[values.min(), values.max()],
                    mode="lines",
                    line={"dash": "dot", "color": colour},
                    name=f"{entry}: the template's own date ({day:%Y-%m-%d})",
                )
            )
    figure = _layout(
        figure,
        f"{spec.axis_label(dataset).removesuffix(' (%)')} by date in the system prompt",
        spec.axis_label(dataset),
        traces=dated["entry"].nunique() * (2 if band is not None else 1),
    )
    return figure.update_yaxes(rangemode="nonnegative") if spec.higher_is_better or spec.percent else figure


DASHES = ["solid", "dot", "dashdot"]
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def _band(figure: go.Figure, band: pd.DataFrame, scale: float, entry: str, colour: str) -> None:
    """A shaded 95% interval: the upper edge, then the lower edge filled up to it."""
    band = band.sort_values("date")
    figure.add_trace(
        go.Scatter(
            x=band["date"],
            y=scale * band["high"],
            mode="lines",
            line={"width": 0},
            showlegend=False,
            hoverinfo="skip",
            legendgroup=f"{entry} band",
        )
    )
    figure.add_trace(
        go.Scatter(
            x=band["date"],
            y=scale * band["low"],
            mode="lines",
            line={"width": 0},
            fill="tonexty",
            opacity=0.2,
            fillcolor=_transparent(colour),
            name=f"{entry}: 95% interval",
            hoverinfo="skip",
            legendgroup=f"{entry} band",
        )
    )


def _chance(figure: go.Figure, row: pd.Series, dates: pd.Series, scale: float, entry: str, colour: str) -> None:
    """An entry's chance band: its lower and upper edge as dotted lines over its dates, one legend entry for both."""
    for edge, shown in (("low", True), ("high", False)):
        level = scale * float(row[edge])
        figure.add_trace(
            go.Scatter(
                x=[dates.min(), dates.max()],
                y=[level, level],
                mode="lines",
                line={"dash": "dot", "color": colour, "width": 1},
                name=f"{entry}: chance band (no date effect)",
                legendgroup=f"{entry} chance",
                showlegend=shown,
                hovertemplate=f"chance band {edge}: {level:.2f}<extra></extra>",
            )
        )


def _estimated(figure: go.Figure, points: pd.DataFrame, scale: float, entry: str, colour: str) -> None:
    """A sparse sweep's estimated dates: open circles with their interval as error bars, apart from the measured line."""
    points = points.sort_values("date")
    y = scale * points["value"].astype(float)
    figure.add_trace(
        go.Scatter(
            x=points["date"],
            y=y,
            mode="markers",
            marker={"symbol": "circle-open", "size": 8, "color": colour},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": scale * points["high"].astype(float) - y,
                "arrayminus": y - scale * points["low"].astype(float),
                "color": _transparent(colour, 0.6),
            },
            name=f"{entry}: estimated ({points['share'].iloc[0]:.0%} of the grid scored)",
            customdata=[entry] * len(points),
        )
    )


def _transparent(colour: str, alpha: float = 0.18) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def _extremes(
    figure: go.Figure, group: pd.DataFrame, values: pd.Series, higher_is_better: bool, entry: str, colour: str
) -> None:
    """Triangles on the best and worst date; a flat line has neither."""
    if len(values) < 2 or values.max() == values.min():
        return
    best = values.idxmax() if higher_is_better else values.idxmin()
    worst = values.idxmin() if higher_is_better else values.idxmax()
    for index, name, symbol in ((best, "best", "triangle-up"), (worst, "worst", "triangle-down")):
        figure.add_trace(
            go.Scatter(
                x=[group.loc[index, "date"]],
                y=[values[index]],
                mode="markers",
                marker={"size": 12, "symbol": symbol, "color": colour},
                name=f"{entry}: {name} {group.loc[index, 'date']:%Y-%m-%d} ({values[index]:.2f})",
            )
        )


def bump(ranked: pd.DataFrame) -> go.Figure:
    """Rank of each entry on each date (Figure 1b as a bump chart); rank 1 at the top. Entries that tie share a rank, so
    each line is drawn a little off its rank (a fixed offset per entry, within +-0.2) to keep tied lines side by side
    instead of one hiding the others; the hover gives the true rank."""
    figure = go.Figure()
    entries = sorted(ranked["entry"].unique())
    for index, (entry, group) in enumerate(ranked.groupby("entry", sort=True)):
        offset = 0.0 if len(entries) == 1 else 0.4 * index / (len(entries) - 1) - 0.2
        figure.add_trace(
            go.Scatter(
                x=group["date"],
                y=group["rank"] + offset,
                mode="lines",
                line={"shape": "hv"},
                name=entry,
                customdata=group["rank"],
                hovertemplate="rank %{customdata}<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_yaxes(autorange="reversed", dtick=1)
    return _layout(figure, "Leaderboard position by date (tied models drawn side by side)", "Rank (1 = best)")


def tau_histogram(taus: pd.DataFrame) -> go.Figure:
    figure = go.Figure(go.Histogram(x=taus["tau"], nbinsx=21))
    return _layout(
        figure,
        "Kendall tau between the rankings of every pair of dates",
        "Date pairs",
        x_title="Kendall tau (1 = same order)",
    )


def option_lines(
    rows: pd.DataFrame, labels: list[str], answer: int, title: str = "Option probabilities across dates"
) -> go.Figure:
    """Probability of each option on each date for one question, one line per option; the correct one drawn thick."""
    matrix = pd.DataFrame(rows["probs"].tolist(), index=pd.to_datetime(rows["date"]))
    figure = go.Figure()
    for column in matrix.columns:
        correct = column == answer
        figure.add_trace(
            go.Scatter(
                x=matrix.index,
                y=100 * matrix[column],
                mode="lines+markers" if len(matrix) < 40 else "lines",
                name=f"{labels[column]}" + (" (correct)" if correct else ""),
                line={"width": 4 if correct else 1.5},
            )
        )
    figure.update_yaxes(range=[0, 100])
    return _layout(figure, title, "P(option) (%)")


def highlighted_diff(first: str, second: str, special: Sequence[str] = ()) -> tuple[str, str]:
    """HTML for two texts exactly as written (whitespace kept), the characters that differ highlighted.

    For ``st.html``, never Markdown: Markdown would eat line breaks and treat
    a generated ``` fence as its own. ``special`` tokens (e.g. ``<|im_start|>``)
    are boxed, and line ends marked, so a prompt shows what the model reads.
    """
    matcher = difflib.SequenceMatcher(a=first, b=second, autojunk=False)
    left, right = [], []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        a, b = _visible(first[a0:a1], special), _visible(second[b0:b1], special)
        if tag == "equal":
            left.append(a)
            right.append(b)
        else:
            left.append(f"<mark style='background:#ffb3b3'>{a}</mark>" if a else "")
            right.append(f"<mark style='background:#b3ffb3'>{b}</mark>" if b else "")
    wrap = "<pre style='white-space:pre-wrap;word-break:break-word;font-size:0.8rem;padding:0.6rem;background:#f6f6f6'>{}</pre>"
    return wrap.format("".join(left)), wrap.format("".join(right))


def _visible(text: str, special: Sequence[str]) -> str:
    """Escaped text with special tokens boxed and each line end marked (↵) before the break itself."""
    escaped = html.escape(text)
    for token in sorted({t for t in special if t}, key=len, reverse=True):
        escaped = escaped.replace(
            html.escape(token),
            f"<span style='border:1px solid #888;border-radius:3px;color:#555'>{html.escape(token)}</span>",
        )
    return escaped.replace("\n", "<span style='color:#aaa'>↵</span>\n") if special else escaped


def factor_bars(table: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """Table 5 as bars: the measured CV of a metric per factor, one colour per entry. Accuracy adds its CV without
    counting noise as a diamond with that one's 95% interval; ECE's CV (the paper's, of the plug-in ECE) has no interval
    (``variation.bootstrap_cv`` says why)."""
    figure = go.Figure()
    for index, (entry, group) in enumerate(table.groupby("entry", sort=True)):
        figure.add_trace(
            go.Bar(
                x=group["factor"],
                y=100 * group[f"{metric}_cv"],
                name=entry,
                marker_color=PALETTE[index % len(PALETTE)],
                offsetgroup=entry,
            )
        )
        if metric == "accuracy":
            centre = 100 * group["accuracy_cv_noise_free"]
            error = {
                "type": "data",
                "symmetric": False,
                "array": 100 * group["accuracy_cv_high"] - centre,
                "arrayminus": centre - 100 * group["accuracy_cv_low"],
            }
            figure.add_trace(
                go.Scatter(
                    x=group["factor"],
                    y=centre,
                    mode="markers",
                    marker={"symbol": "diamond", "color": "black", "size": 8},
                    name="without counting noise, 95% CI",
                    offsetgroup=entry,
                    legendgroup="noise-free",
                    showlegend=index == 0,
                    error_y=error,
                )
            )
    figure.update_layout(barmode="group", scattermode="group")
    return _layout(
        figure,
        f"Variation of {axis_label(metric).removesuffix(' (%)')} by source (coefficient of variation)",
        "CV (%)",
        x_title="Factor",
    )


def item_over_dates(outputs: pd.DataFrame, dataset: str) -> go.Figure:
    """One item's result on each date: right/wrong (with the parsed answer on hover), or sentence chrF for translations."""
    graded = outputs["correct"].notna().any()
    y = outputs["correct"].astype(float) if graded else outputs["score"].astype(float)
    hover = outputs["parsed"].fillna("(unparseable)").astype(str).str.slice(0, 80)
    figure = go.Figure(
        go.Scatter(
            x=pd.to_datetime(outputs["date"]),
            y=y,
            mode="markers",
            marker={"size": 7},
            text=hover,
            hovertemplate="%{x|%Y-%m-%d}: %{y}<br>%{text}<extra></extra>",
        )
    )
    if graded:
        figure.update_yaxes(tickvals=[0, 1], ticktext=["wrong", "right"], range=[-0.3, 1.3])
    return _layout(
        figure, "This item on each date", METRICS["accuracy"].name_on(dataset) if graded else "Sentence chrF"
    )
