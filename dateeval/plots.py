"""Plotly figures shared by the explorer and exports: one function per figure, data in, figure out."""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sample_colorscale
from plotly.subplots import make_subplots

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


TITLE_PX = 44  # the title's strip at the top of every figure; the legend hangs under it, the plot under the legend
KEY_PX = 18  # a key's line of text, under the x axis's tick labels
KEY_CHARS = 110  # a key's line wraps before this many characters (about 700 px at 12 px)


def _layout(
    figure: go.Figure,
    title: str,
    y_title: str,
    x_title: str | None = None,
    key: Sequence[str] = (),
    height: int = 520,
) -> go.Figure:
    """Shared layout, sized so the plot keeps most of the figure whatever the number of entries: one legend entry
    per entry, in a row (wrapping when long) between the title and the plot, which Plotly moves down by the legend's
    height (the legend is placed on the figure, not the plot, so it reserves its own room); ``key``, what the shared
    styles mean, is a caption under the axis (wrapped when long), said once rather than once per entry (18 legend
    entries under three models' curves left the plot a third of the figure, issue 64). Dates need no axis title
    (the ticks are dates) and tick in days (a store of two dates gets no hour ticks)."""
    lines = _wrapped(key, KEY_CHARS)
    figure.update_layout(
        title={"text": title, "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 14}},
        xaxis_title=x_title,
        yaxis_title=y_title,
        hovermode="x unified",
        template="plotly_white",
        legend={
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "yref": "container",
            "y": 1 - TITLE_PX / height,
            "yanchor": "top",
        },
        margin={"t": TITLE_PX + 8, "b": 40 + KEY_PX * len(lines), "l": 60, "r": 20},
        height=height,
        hoverlabel={
            "namelength": -1
        },  # full entry names: "smollm2-135m (bfloat16, cpu)" and "(float32, cpu)" differ at the end
    )
    if lines:
        figure.add_annotation(
            text="<br>".join(lines),
            align="left",
            xref="paper",
            yref="paper",
            x=0,
            y=0,
            xanchor="left",
            yanchor="top",
            yshift=-(40 if x_title else 24),  # under the tick labels (and the axis title when there is one)
            showarrow=False,
            font={"size": 12, "color": "#555"},
        )
    if x_title is None:  # a date axis
        figure.update_xaxes(tickformat="%Y-%m-%d")
        dates = [pd.Timestamp(x) for trace in figure.data for x in (trace.x if trace.x is not None else ())]
        if dates and (max(dates) - min(dates)).days <= 14:
            figure.update_xaxes(dtick=DAY_MS)
    return figure


def _wrapped(items: Sequence[str], width: int) -> list[str]:
    """Items joined by " · " into lines of fewer than ``width`` characters (an item longer than that alone on its
    line): Plotly does not wrap text."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 3 + len(item) < width:
            lines[-1] += f" · {item}"
        else:
            lines.append(item)
    return lines


DASHES = ["solid", "dot", "dashdot"]
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
# What each of Curves' shared styles means, said once in the key under the plot (only the styles the figure draws).
CURVE_KEY = {
    "band": "shading: 95% interval per date",
    "mean": "thick: {rolling}-day mean",
    "extremes": "▲▼ best, worst date",
    "estimated": "○ estimated date (sparse sweep), 95% interval",
    "chance": "··· chance band (no date effect)",
    "no date": "– – no date",
    "template": "┊ the template's own date",
}


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
    panels: bool = False,
) -> go.Figure:
    """Metric against date, one colour per entry (paper Figures 2, 11-13), read at a glance with up to six entries.

    Each entry is one legend entry: everything drawn for it shares its
    legend group, so one click shows or hides all of it, and the shared
    styles are explained once, in a key under the plot (``CURVE_KEY``). Worst
    and best dates are marked (none on a flat line); each entry's no-date
    value is a dashed line; ``rolling`` > 1 adds a centred mean over that
    many calendar days (not points: on monthly data a 7-day mean is the
    value itself); ``band`` (entry, date, low, high) shades a 95% interval
    per date; ``chance`` (entry, low, high) draws each entry's chance band as
    two dotted lines over its dates: where the date has no effect, the whole
    line stays between them in 95% of shuffles; ``estimated`` (entry, date,
    value, low, high, share) draws a sparse sweep's estimated dates as open
    markers with their 95% interval. ``panels`` draws each entry in its own
    panel on one scale, for entries whose bands overlap.
    """
    spec = METRICS[metric]
    entries = sorted(dated["entry"].unique())
    stacked = panels and len(entries) > 1
    figure = _panels(entries) if stacked else go.Figure()
    drawn: set[str] = set()
    below, above = [], []  # every entry's bands under every entry's lines: no shading covers another entry's line
    for index, (entry, group) in enumerate(dated.groupby("entry", sort=True)):
        colour = PALETTE[index % len(PALETTE)]
        # past ten entries colours repeat: the dash tells them apart
        dash = DASHES[(index // len(PALETTE)) % len(DASHES)]
        values = spec.shown(group[metric])
        parts = {
            "band": _band(_of(band, entry), spec.scale, colour, shared=len(entries) > 1 and not stacked),
            "line": _line(group, values, entry, colour, dash, faint=rolling > 1),
            "mean": _rolling_mean(group, values, entry, colour, rolling),
            "extremes": _extremes(group, values, spec.higher_is_better, entry, colour),
            "estimated": _estimated(_of(estimated, entry), spec.scale, entry, colour),
            "chance": _chance(_of(chance, entry), group["date"], spec.scale, entry, colour),
            "no date": _no_date(_of(baselines, entry), metric, group["date"], entry, colour),
            "template": _template_date((default_dates or {}).get(entry), values, entry, colour),
        }
        drawn |= {style for style, traces in parts.items() if traces}
        for style, traces in parts.items():
            for trace in traces:  # the legend names the entry once: on its line (its mean when there is one)
                trace.update(legendgroup=entry, showlegend=trace.name == entry)
            (below if style == "band" else above).append((index, traces))
    for index, traces in below + above:
        figure.add_traces(traces, **({"rows": index + 1, "cols": 1} if stacked else {}))
    figure = _layout(
        figure,
        f"{spec.axis_label(dataset).removesuffix(' (%)')} by date in the system prompt",
        spec.axis_label(dataset),
        key=[text.format(rolling=rolling) for style, text in CURVE_KEY.items() if style in drawn],
        height=_stacked_height(len(entries)) if stacked else 520,
    )
    if stacked:
        _label_panels(figure, len(entries), spec.axis_label(dataset))
    return figure.update_yaxes(rangemode="nonnegative") if spec.higher_is_better or spec.percent else figure


def _of(table: pd.DataFrame | None, entry: str) -> pd.DataFrame:
    """One entry's rows of an optional per-entry table (none when the table is absent)."""
    return pd.DataFrame(columns=["entry"]) if table is None else table[table["entry"] == entry]


PANEL_GAP_PX = 14  # between stacked panels


def _stacked_height(rows: int) -> int:
    """A figure of stacked panels grows with them, so each keeps a readable height (about 150 px)."""
    return max(520, 150 * rows + 150)


def _panels(entries: list[str]) -> go.Figure:
    """One panel per entry, stacked on one date axis, each named small at its top left, inside it (a title above
    each panel would need a gap as tall as itself between panels)."""
    plotted = _stacked_height(len(entries)) - 150  # about the figure's height less its title, legend and ticks
    figure = make_subplots(
        rows=len(entries), cols=1, shared_xaxes=True, vertical_spacing=PANEL_GAP_PX / plotted, subplot_titles=entries
    )
    return figure.update_annotations(
        x=0, xanchor="left", yanchor="top", font={"size": 12}, bgcolor="rgba(255,255,255,0.8)"
    )


def _label_panels(figure: go.Figure, rows: int, y_title: str) -> None:
    """Stacked panels share one y scale (a difference between entries reads as a difference in height), named once,
    on the middle panel."""
    figure.update_yaxes(matches="y", title_text=None).update_yaxes(title_text=y_title, row=(rows + 1) // 2, col=1)


def _line(group: pd.DataFrame, values: pd.Series, entry: str, colour: str, dash: str, faint: bool) -> list[go.Scatter]:
    """The entry's measured dates joined, each a point while they can be told apart; faint under a rolling mean (which
    then carries the entry's name in the legend). Its points carry the entry, for a click to open its questions."""
    return [
        go.Scatter(
            x=group["date"],
            y=values,
            mode="lines+markers" if len(group) <= 31 else "lines",
            name=f"{entry} (each date)" if faint else entry,
            line={"color": colour, "dash": dash},
            opacity=0.45 if faint else 1,
            customdata=[entry] * len(group),
        )
    ]


def _rolling_mean(group: pd.DataFrame, values: pd.Series, entry: str, colour: str, rolling: int) -> list[go.Scatter]:
    """A centred mean over ``rolling`` calendar days, drawn thick; nothing when ``rolling`` is 1."""
    if rolling <= 1:
        return []
    mean = (
        pd.Series(values.to_numpy(), index=pd.DatetimeIndex(group["date"]))
        .rolling(f"{rolling}D", center=True, min_periods=1)
        .mean()
    )
    return [
        go.Scatter(
            x=group["date"],
            y=mean.to_numpy(),
            mode="lines",
            name=entry,
            line={"width": 3, "color": colour},
            customdata=[entry] * len(group),
        )
    ]


def _band(band: pd.DataFrame, scale: float, colour: str, shared: bool) -> list[go.Scatter]:
    """A shaded 95% interval: the upper edge, then the lower edge filled up to it, each edge a faint line of the
    entry's colour so overlapping bands stay told apart; lighter in a plot ``shared`` with other entries' bands, so
    where they overlap the lines still stand out."""
    if band.empty:
        return []
    band = band.sort_values("date")
    edge = {"width": 0.6, "color": _transparent(colour, 0.45)}
    upper = go.Scatter(x=band["date"], y=scale * band["high"], mode="lines", line=edge, hoverinfo="skip")
    lower = go.Scatter(
        x=band["date"],
        y=scale * band["low"],
        mode="lines",
        line=edge,
        fill="tonexty",
        fillcolor=_transparent(colour, 0.06 if shared else 0.14),
        name="95% interval",
        hoverinfo="skip",
    )
    return [upper, lower]


def _chance(chance: pd.DataFrame, dates: pd.Series, scale: float, entry: str, colour: str) -> list[go.Scatter]:
    """An entry's chance band: its lower and upper edge as dotted lines over its dates."""
    if chance.empty or dates.empty:
        return []
    row = chance.iloc[0]
    return [
        go.Scatter(
            x=[dates.min(), dates.max()],
            y=[scale * float(row[edge])] * 2,
            mode="lines",
            line={"dash": "dot", "color": colour, "width": 1},
            name=f"{entry}: chance band (no date effect)",
            hovertemplate=f"chance band {edge}: {scale * float(row[edge]):.2f}<extra></extra>",
        )
        for edge in ("low", "high")
    ]


def _no_date(baselines: pd.DataFrame, metric: str, dates: pd.Series, entry: str, colour: str) -> list[go.Scatter]:
    """The entry's value with no date in the prompt, dashed across its dates."""
    baseline = baselines[baselines["date_mode"] == "none"]
    if baseline.empty or dates.empty:
        return []
    level = METRICS[metric].shown(float(baseline[metric].iloc[0]))
    return [
        go.Scatter(
            x=[dates.min(), dates.max()],
            y=[level, level],
            mode="lines",
            name=f"{entry}: no date",
            line={"dash": "dash", "color": colour},
            opacity=0.8,
            hovertemplate=f"no date: {level:.2f}<extra></extra>",
        )
    ]


def _template_date(day: pd.Timestamp | None, values: pd.Series, entry: str, colour: str) -> list[go.Scatter]:
    """A vertical dotted line on the date the entry's chat template writes when none is given."""
    if day is None or values.empty:
        return []
    return [
        go.Scatter(
            x=[day, day],
            y=[values.min(), values.max()],
            mode="lines",
            line={"dash": "dot", "color": colour},
            name=f"{entry}: the template's own date ({day:%Y-%m-%d})",
        )
    ]


def _estimated(points: pd.DataFrame, scale: float, entry: str, colour: str) -> list[go.Scatter]:
    """A sparse sweep's estimated dates: open circles with their interval as error bars, apart from the measured line."""
    if points.empty:
        return []
    points = points.sort_values("date")
    y = scale * points["value"].astype(float)
    return [
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
    ]


def _transparent(colour: str, alpha: float = 0.18) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},{alpha})"


def _extremes(
    group: pd.DataFrame, values: pd.Series, higher_is_better: bool, entry: str, colour: str
) -> list[go.Scatter]:
    """Triangles on the best and worst date; a flat line has neither."""
    if len(values) < 2 or values.max() == values.min():
        return []
    best = values.idxmax() if higher_is_better else values.idxmin()
    worst = values.idxmin() if higher_is_better else values.idxmax()
    return [
        go.Scatter(
            x=[group.loc[index, "date"]],
            y=[values[index]],
            mode="markers",
            marker={"size": 12, "symbol": symbol, "color": colour},
            name=f"{entry}: {name} {group.loc[index, 'date']:%Y-%m-%d} ({values[index]:.2f})",
        )
        for index, name, symbol in ((best, "best", "triangle-up"), (worst, "worst", "triangle-down"))
    ]


BUMP_DATES = 31  # above this many dates a bump chart's steps read as a barcode: ranks are drawn as a heatmap instead


def ranking(ranked: pd.DataFrame) -> go.Figure:
    """The leaderboard over the dates (Figure 1b): a bump chart over a month or less, a heatmap of rank by date over
    more (366 dates of lines stepping between tied ranks read as a barcode)."""
    return bump(ranked) if ranked["date"].nunique() <= BUMP_DATES else rank_heatmap(ranked)


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
                line={"shape": "hv", "color": PALETTE[index % len(PALETTE)]},
                name=entry,
                customdata=group["rank"],
                hovertemplate="rank %{customdata}<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_yaxes(autorange="reversed", dtick=1)
    return _layout(figure, "Leaderboard position by date (tied models drawn side by side)", "Rank (1 = best)")


def rank_heatmap(ranked: pd.DataFrame) -> go.Figure:
    """Rank of each entry (a row) on each date (a column), one colour per rank, rank 1 darkest: over hundreds of dates
    the runs of one rank, and the dates where the order changes, read as bands of colour. Rows go by mean rank, best
    on top, each labelled with its share of dates ranked first (ties share the best rank)."""
    table = ranked.pivot_table(index="entry", columns="date", values="rank")
    table = table.loc[table.mean(axis=1).sort_values(kind="stable").index]
    first = (table == 1).sum(axis=1) / table.notna().sum(axis=1)
    size = max(int(ranked["rank"].max()), 2)
    colours = sample_colorscale("Viridis", [step / (size - 1) for step in range(size)])
    scale = [[bound, colour] for step, colour in enumerate(colours) for bound in (step / size, (step + 1) / size)]
    figure = go.Figure(
        go.Heatmap(
            x=table.columns,
            y=[f"{entry}<br>first on {first[entry]:.0%} of dates" for entry in table.index],
            z=table.to_numpy(),
            zmin=0.5,
            zmax=size + 0.5,
            colorscale=scale,
            colorbar={"title": {"text": "Rank"}, "tickvals": list(range(1, size + 1)), "thickness": 14},
            hovertemplate="%{x|%Y-%m-%d}: rank %{z}<extra>%{y}</extra>",
            ygap=2,
        )
    )
    figure.update_yaxes(autorange="reversed")
    figure = _layout(
        figure, "Leaderboard position by date (1 = best; ties share the best rank)", "", height=70 * len(table) + 140
    )
    return figure.update_layout(hovermode="closest")


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
    counting noise as a diamond with that one's 95% interval, in its entry's legend group (one click hides both) and
    explained once in the legend's title; ECE's CV (the paper's, of the plug-in ECE) has no interval
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
                legendgroup=entry,
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
                    name=f"{entry}: without counting noise, 95% CI",
                    offsetgroup=entry,
                    legendgroup=entry,
                    showlegend=False,
                    error_y=error,
                )
            )
    figure.update_layout(barmode="group", scattermode="group")
    return _layout(
        figure,
        f"Variation of {axis_label(metric).removesuffix(' (%)')} by source (coefficient of variation)",
        "CV (%)",
        x_title="Factor",
        key=["◆ CV without counting noise, with its 95% interval"] if metric == "accuracy" else [],
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
