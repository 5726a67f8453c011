"""The read side of the command line: ``summary``, ``robust``, ``compare``, ``report`` and ``export``.

Each opens the store through ``dateeval.results`` (what every explorer page reads), so a number is the same on a page,
in a command's output and in the report; none of them writes to the store (a read-only store answers the same).
``dateeval.cli`` adds their parsers (``add_*``) and runs them; a user error is a :class:`DateEvalError` it prints in
one line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from dateeval.cli import arguments
from dateeval.errors import DateEvalError

if TYPE_CHECKING:  # the results layer is imported lazily
    from dateeval.results import Period, Results


def add_summary(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    summary = commands.add_parser(
        "summary", help="accuracy and ECE over dates: min/mean/max, worst-to-best delta, baselines"
    )
    summary.add_argument("--store", default="cache/results")
    summary.add_argument("--json", action="store_true", help="machine-readable output")
    summary.add_argument(
        "--per-date",
        action="store_true",
        help="with --json: one object per entry x dataset x date (and no-date baseline), "
        "the share right with its 95%% interval",
    )
    summary.add_argument(
        "--dates", type=_period, help="only the dates START..END (both included), as a page's date filter selects them"
    )
    return summary


def _period(text: str) -> Period:
    """``START..END`` as a :class:`dateeval.results.Period` (argparse reports a bad one in one line)."""
    from dateeval.conditions.dates import parse_date
    from dateeval.results.entries import Period

    start, separator, end = text.partition("..")
    if not separator:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range START..END (e.g. 2024-01-01..2024-01-31)")
    try:
        period = Period(parse_date(start), parse_date(end))
    except DateEvalError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if period.end < period.start:
        raise argparse.ArgumentTypeError(f"{text!r} ends before it starts")
    return period


def add_export(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    export = commands.add_parser(
        "export", help="every stored per-item row with its entry and condition, as one Parquet, CSV or JSONL file"
    )
    export.add_argument("--store", default="cache/results")
    export.add_argument(
        "--out", required=True, help="a file ending in .parquet, .csv or .jsonl (the format follows the suffix)"
    )
    export.add_argument("--dates", type=_period, help="only the dates START..END (baselines are always included)")
    return export


def add_robust(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    robust = commands.add_parser(
        "robust",
        help="what to report: the date-marginal score with its interval over items and dates, the robust "
        "leaderboard, and how many dates give an interval of a chosen width",
    )
    robust.add_argument("--store", default="cache/results")
    robust.add_argument(
        "--dataset",
        action="append",
        help="only these datasets (repeatable; default: every graded dataset with two or more dates)",
    )
    robust.add_argument("--dates", type=_period, help="only the dates START..END (both included)")
    robust.add_argument(
        "--half-width",
        type=arguments.fraction,
        default=0.01,
        help="the 95%% interval's half-width to plan for, as a fraction (default 0.01 = 1 pp)",
    )
    form = robust.add_mutually_exclusive_group()
    form.add_argument(
        "--json",
        action="store_true",
        help="machine-readable records: the numbers, the sentences and what produced them",
    )
    form.add_argument("--markdown", action="store_true", help="a Markdown table per dataset, with the sentences")
    form.add_argument("--latex", action="store_true", help="a LaTeX table per dataset, the sentence as its caption")
    robust.add_argument("--figure", type=Path, help="also write the figure (.svg, .pdf or .png; needs one dataset)")
    return robust


def add_compare(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    compare = commands.add_parser(
        "compare",
        help="model A against model B on the same questions and dates: is A better whatever the date, "
        "and does one move more with the date?",
    )
    compare.add_argument("a", help="entry A, as `summary` names it, e.g. 'smollm2-135m (float32, cpu)'")
    compare.add_argument("b", help="entry B")
    compare.add_argument("--store", default="cache/results")
    compare.add_argument("--dataset", help="the dataset (default: the only one both have with two or more dates)")
    compare.add_argument("--dates", type=_period, help="only the dates START..END (both included)")
    return compare


def add_report(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    report = commands.add_parser(
        "report", help="write an HTML report with the paper's tables for whatever the store holds"
    )
    report.add_argument("--store", default="cache/results")
    report.add_argument("--out", required=True, help="output folder (index.html and one CSV per table)")
    return report


def _json_safe(value: object) -> object:
    """NaN is not JSON: missing numbers become null."""
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def _open_results(path: str) -> Results:
    """The store's results (``dateeval.results.open``, what every page reads), its problems as warnings on stderr."""
    from dateeval import results
    from dateeval.results.sources import unit_sums
    from dateeval.store import Store

    store = Store(path)
    if not store.root.is_dir():
        raise DateEvalError(
            f"store {store.root} does not exist: run `python -m dateeval run ... --store {store.root}` first"
        )
    found, problems = results.open(store)
    for message in problems.messages() + unit_sums.label_notes(found.sums):
        print(f"dateeval: warning: {message}", file=sys.stderr)
    if note := found.sparse_note():
        print(f"dateeval: note: {note}", file=sys.stderr)
    if found.sums.empty:  # every reader below needs one unit's sums; an empty or wholly damaged store has none
        raise DateEvalError(
            f"store {store.root} holds no readable results: run `dateeval run ... --store {store.root}` first"
        )
    return found


def cmd_summary(args: argparse.Namespace) -> int:
    import pandas as pd

    from dateeval.results import headline_sentence, reorder_sentence, verdict_power
    from dateeval.results.report.summary_row import SummaryRow, factor_line, precision_line

    if args.per_date and not args.json:
        raise DateEvalError("--per-date prints JSON: add --json")
    found = _open_results(args.store)
    if args.per_date:
        print(json.dumps(_json_safe(found.bands.per_date(args.dates).to_dict(orient="records")), indent=2, default=str))
        return 0
    table = found.summary(args.dates)
    # Table 5's CVs are over every stored level of each factor: shown for the whole store only, not for a --dates range.
    factors = (
        found.statistics()["factors"]
        if len(table) and args.dates is None
        else pd.DataFrame(columns=["entry", "dataset", "factor"])
    )
    if args.json:
        records = table.to_dict(orient="records")
        # What to report (``dateeval robust``'s numbers for each entry, over the same dates); None under two dates.
        robust = {
            (entry.entry, dataset): entry.as_json()
            for dataset in dict.fromkeys(table["dataset"])
            for entry in found.robust.robust_record(dataset, args.dates).entries
        }
        for record in records:
            mine = factors[(factors["entry"] == record["entry"]) & (factors["dataset"] == record["dataset"])]
            record["factors"] = mine.drop(columns=["entry", "dataset"]).to_dict(orient="records")
            record["robust"] = robust.get((record["entry"], record["dataset"]))
        print(json.dumps(_json_safe(records), indent=2, default=str))
        return 0
    if table.empty:
        print(f"no results in {args.store}")
        return 0
    if args.dates is None:  # the store's finding, as the Overview's first line says it
        top = found.chance.headline()
        print("\n".join(line for line in (headline_sentence(top), verdict_power(top), reorder_sentence(top)) if line))
    for row in map(SummaryRow.from_record, table.to_dict(orient="records")):
        mine = factors[(factors["entry"] == row.entry) & (factors["dataset"] == row.dataset)]
        print("\n".join(row.lines() + [factor_line(factor) for factor in mine.to_dict(orient="records")]))
    for factor in factors[factors["factor"] == "precision"].to_dict(orient="records"):
        print(precision_line(factor))
    return 0


def _output_folder(path: Path) -> Path:
    """Create ``path`` and prove it writable before any table is computed, so a bad ``--out`` costs nothing."""
    if path.exists() and not path.is_dir():
        raise DateEvalError(f"--out {path} is a file, not a folder: give a folder for index.html and the CSVs")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise DateEvalError(f"cannot write the report to {path}: {error.strerror or error}") from None
    return path


def cmd_report(args: argparse.Namespace) -> int:
    from dateeval.cli.outputs import check_outside, write_report

    check_outside(Path(args.out), Path(args.store))  # before the folder is made
    out = _output_folder(Path(args.out))
    found = _open_results(args.store)
    try:
        page = write_report(found, out)
    except OSError as error:  # a disk that fills up while the tables are written
        raise DateEvalError(f"cannot write the report to {out}: {error.strerror or error}") from None
    print(f"report written to {page}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from dateeval.cli.outputs import write_export
    from dateeval.results.report import export

    out = Path(args.out)
    export.check_target(out)
    count = write_export(_open_results(args.store), out, args.dates)
    print(f"exported {count} rows to {out}")
    return 0


def cmd_robust(args: argparse.Namespace) -> int:
    from dateeval.cli.outputs import write_figure
    from dateeval.results.robust import robust_format

    if args.figure and (args.figure.suffix not in robust_format.FIGURE_FORMATS or not args.figure.parent.is_dir()):
        raise DateEvalError(
            f"--figure {args.figure}: give a file ending in {', '.join(robust_format.FIGURE_FORMATS)} in a folder that exists"
        )
    found = _open_results(args.store)
    datasets = sorted(found.metrics["dataset"].unique()) if len(found.metrics) else []
    unknown = sorted(set(args.dataset or ()) - set(datasets))
    if unknown:
        raise DateEvalError(f"no dataset {unknown[0]!r} in {args.store} (it holds: {', '.join(datasets) or 'nothing'})")
    records = [
        found.robust.robust_record(name, args.dates, half_width=args.half_width) for name in args.dataset or datasets
    ]
    records = [record for record in records if record.entries]
    if not records:
        raise DateEvalError(
            f"nothing to report in {args.store}: a date-robust number needs a graded entry with two or more dates and items"
        )
    if args.figure and len(records) > 1:
        raise DateEvalError(
            f"--figure draws one dataset: add --dataset (one of {', '.join(record.dataset for record in records)})"
        )
    if args.json:
        print(json.dumps(_json_safe([record.as_json() for record in records]), indent=2))
    for record in records if not args.json else ():
        board = record.board()
        shown = robust_format.display(board, record.dataset, args.half_width)
        sentences = [f"{entry.entry}: {entry.sentence}. {entry.advice}" for entry in record.entries]
        unresolved = record.unresolved()
        if args.latex:
            print(
                robust_format.latex(
                    shown,
                    robust_format.caption(record.dataset, board) + " " + record.entries[0].sentence + ".",
                )
            )
        elif args.markdown:
            print(
                f"### {record.dataset}\n\n{robust_format.markdown(shown)}\n"
                + "".join(f"- {line}\n" for line in sentences)
            )
        else:
            print(f"{record.dataset}:\n{shown.to_string(index=False)}\n" + "".join(f"  {line}\n" for line in sentences))
        if unresolved and not args.latex:
            print(
                ("- " if args.markdown else "  ")
                + "the date reorders these pairs and their intervals overlap: "
                + "; ".join(unresolved)
                + "\n"
            )
    if args.figure:
        print(
            f"figure written to {write_figure(records[0], args.figure, found.store.root)}",
            file=sys.stderr if args.json else sys.stdout,
        )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from dateeval.results.robust import robust_record

    found = _open_results(args.store)
    dated = found.dated_entries(args.dates)
    entries = sorted({entry for entry, _ in dated})
    for name in (args.a, args.b):
        if name not in entries:
            raise DateEvalError(
                f"no entry {name!r} with two or more dates in {args.store} (it holds: {'; '.join(entries) or 'none'})"
            )
    if args.a == args.b:
        raise DateEvalError("compare needs two different entries")
    shared = sorted(
        {dataset for entry, dataset in dated if entry == args.a}
        & {dataset for entry, dataset in dated if entry == args.b}
    )
    if args.dataset is None and len(shared) != 1:
        raise DateEvalError(
            f"{args.a!r} and {args.b!r} share {len(shared)} datasets with two or more dates: pick one with --dataset"
            + (f" ({', '.join(shared)})" if shared else "")
        )
    dataset = args.dataset or shared[0]
    if dataset not in shared:
        raise DateEvalError(
            f"{args.a!r} and {args.b!r} do not both have dataset {dataset!r} on two or more dates (shared: {', '.join(shared) or 'none'})"
        )
    compared = found.robust.compared(dataset, args.a, args.b, args.dates)
    if compared is None:
        raise DateEvalError(f"{args.a!r} and {args.b!r} do not share two dates and the same questions on {dataset}")
    print(f"{dataset}:")
    print("".join(f"  {line}\n" for line in robust_record.compare_lines(args.a, args.b, compared)), end="")
    return 0
