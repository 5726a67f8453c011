"""Paper-style tables for whatever a store holds, and a self-contained HTML report, built as text: the files are
written by :mod:`dateeval.cli.outputs` (``results`` never writes).

``paper_tables`` assembles the paper's tables from :class:`dateeval.results.Results`, the same object every
explorer page and ``dateeval summary`` read, so a number is the same wherever it is shown. A table the store
cannot fill is listed with the command that would fill it.
"""

from __future__ import annotations

import datetime as dt
import html
from itertools import combinations

import pandas as pd

from dateeval import metrics, names, plots
from dateeval.metrics.columns import formatted
from dateeval.results import descriptive
from dateeval.results.report.export import to_csv
from dateeval.results.chance.headline import headline_sentence, reorder_sentence, verdict_power
from dateeval.results.view import Results
from dateeval.schema import GENERATION_KINDS

# Tables that need a kind of dataset the store may not hold: (name, how to fill it) per kind.
MISSING = {
    "generation": (
        "Table 2 (GSM8K, HumanEval, WMT16 deltas)",
        "`python -m dateeval run --dataset gsm8k --dataset humaneval --dataset wmt16_en_de ...`",
    ),
    "fewshot": ("Table 4 (5-shot deltas)", "`python -m dateeval run --dataset mmlu --shots 5 ...`"),
    "cot": (
        "Figure 4 (chain of thought vs next-token)",
        "`python -m dateeval run --dataset mmlu --dataset mmlu_cot ...`",
    ),
}


def _variant(dataset: str, task: str | None) -> str:
    """Which of the paper's tables a dataset belongs to: mcqa (Table 1), generation (Table 2), fewshot (Table 4), cot
    (Figure 4); by what its name says (``dateeval.names``), else by its rows' task kind."""
    if names.shots(dataset):
        return "fewshot"
    if names.says_cot(dataset) or task == "cot":
        return "cot"
    return "generation" if task in GENERATION_KINDS else "mcqa"


def _pick(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The columns a table has values in (a store of MCQA only has no BLEU)."""
    return table[[c for c in columns if c in table and (c in ("entry", "dataset") or table[c].notna().any())]]


def paper_tables(results: Results) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """Every paper table the store can fill, and the missing ones with what would fill them (all read from ``results``)."""
    summary = results.summary()
    tables: dict[str, pd.DataFrame] = {}
    variant = (
        summary["dataset"].map(lambda dataset: _variant(dataset, results.kind(dataset)))
        if len(summary)
        else pd.Series(dtype=object)
    )
    kinds = set(variant)
    missing = dict(value for kind, value in MISSING.items() if kind not in kinds)
    if summary.empty:
        missing["Tables 1, 8, 9"] = (
            "the store has no results: `python -m dateeval run --dataset mmlu --data-dir DIR --no-date`"
        )
        return tables, missing
    delta = ["entry", "dataset", "n_items", "n_dates"]
    accuracy = [
        "accuracy_min",
        "accuracy_max",
        "accuracy_delta",
        "accuracy_worst_date",
        "accuracy_best_date",
        "delta_null_upper",
        "delta_p_value",
        "cochran_p",
    ]
    titles = {
        "mcqa": ("Table 1: accuracy, worst-to-best date", accuracy),
        "generation": (
            "Table 2: open-ended tasks, worst-to-best date (accuracy; pass@1 on HumanEval; BLEU and chrF on WMT16)",
            accuracy[:3]
            + ["bleu_min", "bleu_max", "bleu_delta", "chrf_min", "chrf_max", "chrf_delta", "delta_p_value"],
        ),
        "fewshot": ("Table 4: few-shot accuracy, worst-to-best date", accuracy),
        "cot": (
            "Figure 4: chain-of-thought accuracy, worst-to-best date (compare with the next-token rows of Table 1)",
            accuracy,
        ),
    }
    for kind, (title, columns) in titles.items():
        if (variant == kind).any():
            tables[title] = _pick(summary[variant == kind], delta + columns)
    if "ece_delta" in summary and summary["ece_delta"].notna().any():
        tables["Table 8: ECE, worst-to-best date"] = _pick(
            summary[summary["ece_delta"].notna()],
            delta
            + ["ece_min", "ece_max", "ece_delta", "ece_delta_low", "ece_delta_high", "ece_worst_date", "ece_best_date"],
        )
    baselines = [c for c in summary if c.startswith("no_date_")]
    if any(summary[c].notna().any() for c in baselines):
        tables["Table 9: no date in the prompt"] = _pick(
            summary, ["entry", "dataset", *baselines, "accuracy_min", "accuracy_max", "bleu_min", "bleu_max"]
        )
    else:
        missing["Table 9 (no-date baseline)"] = "rerun the same sweep with `--no-date` (only the baseline is computed)"
    statistics = results.statistics()
    trend, correlations = statistics["trend"], statistics["correlations"]
    if len(trend):
        tables["Table 3: trend over the year (Spearman)"] = trend
    if len(correlations):
        tables["Table 3: correlation across datasets and models (Pearson)"] = correlations
    else:
        missing["Table 3 (correlations)"] = (
            "needs a second dataset or model over the same dates (repeat `--dataset` or `--model`)"
        )
    factors = statistics["factors"]
    if set(factors["factor"]) - {"date"}:
        tables["Table 5: coefficient of variation per factor"] = factors
    else:
        missing["Table 5 (other factors)"] = (
            "add `--batch-sizes 1,8,32 --option-orders 5 --system-prompts paper --dtype float32 --dtype bfloat16`"
        )
    formats = results.fewshot_formats()
    if len(formats):
        tables["Table 4 (§5.4): the date effect under each few-shot format"] = formats
    tables["Table 7: confidence of consistent vs inconsistent predictions"] = results.flips.table7()
    determinism = statistics["run_to_run"]
    if len(determinism):
        tables["Run-to-run variation (repeats of one condition)"] = determinism
    else:
        missing["Run-to-run variation"] = "add `--repeat 3`"
    return tables, missing


def _robust_section(results: Results, files: dict[str, str], half_width: float = 0.01) -> list[str]:
    """What to report, per dataset (``Results.robust.robust_record``, as ``dateeval robust`` prints it): the robust
    leaderboard, the sentences to paste, the pairs the date reorders, the figure; the leaderboard's numbers as CSV."""
    from dateeval.results.robust import robust_format

    parts = []
    for dataset in sorted(results.metrics["dataset"].unique()) if len(results.metrics) else []:
        record = results.robust.robust_record(dataset, half_width=half_width)
        if not record.entries:
            continue
        board = record.board()
        files[f"robust-{dataset}.csv"] = to_csv(
            board.drop(columns=["identity", "dates", "per_date", "sentence", "advice"])
        )
        sentences = "".join(
            f"<li><b>{html.escape(entry.entry)}</b>: {html.escape(entry.sentence)}. {html.escape(entry.advice)}</li>"
            for entry in record.entries
        )
        unresolved = "; ".join(record.unresolved())
        shown = robust_format.display(board, dataset, half_width).to_html(index=False, border=0)
        parts.append(
            f"<h2>What to report: {html.escape(dataset)}</h2><p>{html.escape(robust_format.caption(dataset, board))}</p>{shown}<ul>{sentences}</ul>"
            + (
                f"<p>The date reorders these pairs and their intervals overlap: {html.escape(unresolved)}.</p>"
                if unresolved
                else ""
            )
            + (robust_format.svg(record) or "")
            + f"<p><a href='robust-{dataset}.csv'>CSV</a></p>"
        )
        parts += _compare_section(results, dataset, files)
    return parts


def _compare_section(results: Results, dataset: str, files: dict[str, str]) -> list[str]:
    """Model against model on ``dataset`` (``robust_record.compare_table``, as ``dateeval compare`` prints each pair), for the
    graded entries that share two or more dates and their questions; nothing where fewer do."""
    from dateeval.results.robust import robust_record

    names = sorted({entry for entry, name in results.dated_entries() if name == dataset})
    found = [(a, b, results.robust.compared(dataset, a, b)) for a, b in combinations(names, 2)]
    pairs = [(a, b, compared) for a, b, compared in found if compared is not None]
    if not pairs:
        return []
    table = robust_record.compare_table(pairs)
    files[f"compare-{dataset}.csv"] = to_csv(table)
    return [
        f"<h3>Model against model: {html.escape(dataset)}</h3><p>Each pair on the questions and dates both have: A - B "
        "is the difference of the date-robust scores, its 95% interval clustered by question; date SD is each model's "
        "date standard deviation without counting noise, the questions resampled (paired) for its interval and p.</p>"
        f"{table.to_html(index=False, border=0)}<p><a href='compare-{dataset}.csv'>CSV</a></p>"
    ]


def build_report(results: Results) -> dict[str, str]:
    """A self-contained HTML report (tables, figures, missing cells) plus one CSV per table: file name -> text, the
    page ``index.html`` last."""
    files: dict[str, str] = {}
    store = results.store.root
    tables, missing = paper_tables(results)
    top = results.chance.headline()
    parts = [
        f"<h1>dateeval report</h1><p>Store <code>{html.escape(str(store))}</code>, written {dt.datetime.now():%Y-%m-%d %H:%M}. "
        "Rates, CVs and shares are percentages; BLEU and chrF are points; the CSV files keep rates as fractions.</p>",
        f"<p class='headline'><b>{html.escape(headline_sentence(top))}</b></p>",
        f"<p>{html.escape(verdict_power(top))}</p>",
        f"<p>{html.escape(reorder_sentence(top))}</p>",
    ]
    for number, (title, table) in enumerate(tables.items(), 1):
        files[f"table-{number}.csv"] = to_csv(table)
        parts.append(
            f"<h2>{html.escape(title)}</h2>{formatted(table).to_html(index=False, border=0)}<p><a href='table-{number}.csv'>CSV</a></p>"
        )
    per_condition = results.metrics
    dated = descriptive.dated(per_condition)
    for index, (dataset, group) in enumerate(dated.groupby("dataset")):
        metric = metrics.dataset_metrics(group)[0]
        figure = plots.curves(group, metric, per_condition[per_condition["dataset"] == dataset], dataset=dataset)
        figure.update_layout(title=f"{plots.axis_label(metric, dataset)} by date: {dataset}")
        parts.append(figure.to_html(full_html=False, include_plotlyjs=index == 0))
    parts += _robust_section(results, files)
    if missing:
        items = "".join(f"<li><b>{html.escape(name)}</b>: {html.escape(how)}</li>" for name, how in missing.items())
        parts.append(f"<h2>Not in this store</h2><ul>{items}</ul>")
    style = "body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;font-size:.85rem}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
    files["index.html"] = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>dateeval report</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
    )
    return files
