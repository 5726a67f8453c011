"""Command line: ``dateeval COMMAND`` (or ``python -m dateeval``), one parser and one handler per command.

Sweeps: ``run``, ``regrade``, ``compact``. Reading a store: ``summary``, ``export``, ``robust``, ``compare``, ``report``
(:mod:`dateeval.cli_read`). The explorer: ``app``. Prompts and endpoints: ``template``, ``serve``, ``probe``.

Every user error ends as one line on stderr and a non-zero exit status;
tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dateeval import cli_read
from dateeval.errors import DateEvalError
from dateeval.sparse import check_budget

if TYPE_CHECKING:
    from dateeval.engine.plan import Progress
    from dateeval.engine.sweep import Executor

EXIT_ERROR = 2
# One condition per order: as many as a sweep may have dates, so a typo cannot ask for a billion conditions.
MAX_OPTION_ORDERS = 10_000


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line instead of usage + error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise DateEvalError(f"{message} (see `{self.prog} --help`)")  # prog: `dateeval` or `dateeval run`


def _share(text: str) -> float:
    """An argparse type for ``--budget``: a share of the dense grid in (0, 1]."""
    try:
        return check_budget(float(text))
    except (ValueError, DateEvalError):
        raise argparse.ArgumentTypeError(f"must be a share in (0, 1] such as 0.2, not {text!r}") from None


def _integer(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type for a whole number in a range: a negative count fails here instead of being silently ignored."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"{minimum} or more" if maximum is None else f"between {minimum} and {maximum}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {value}")
        return value

    return parse


def _text(text: str) -> str:
    """An argparse type for words that go into a prompt: bytes that are not UTF-8 (kept by Python as lone surrogates) are refused.

    Such text cannot be tokenized, hashed or sent, and would fail only once the model is loaded.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = ord(text[error.start])
        byte = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"code point U+{bad:04X}"
        raise argparse.ArgumentTypeError(f"not UTF-8 text ({byte} at character {error.start})") from None
    return text


def _quiet_libraries() -> None:
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _add_run(commands: argparse._SubParsersAction) -> None:
    from dateeval.backends import BACKENDS
    from dateeval.backends.openai_api import MODES
    from dateeval.backends.devices import DEVICES, DTYPES
    from dateeval.models import DEFAULT_MODEL
    from dateeval.names import FEWSHOT_FORMATS
    from dateeval.prompting import POSITIONS
    from dateeval.tasks.registry import dataset_help

    run = commands.add_parser("run", help="score datasets under every date (and baseline) condition")
    run.add_argument(
        "--model",
        action="append",
        help=f"model name, Hub id, folder or .gguf; or BACKEND:SPEC such as vllm:PATH or "
        f"openai:URL#MODEL (repeatable; default {DEFAULT_MODEL})",
    )
    run.add_argument(
        "--backend", choices=sorted(BACKENDS), help="backend for models that do not name one (default transformers)"
    )
    run.add_argument("--dataset", action="append", help=dataset_help())
    run.add_argument(
        "--shots",
        type=_integer(0),
        default=0,
        help="few-shot exemplars for every dataset that has them (paper Table 4 uses 5)",
    )
    run.add_argument(
        "--fewshot-format",
        action="append",
        choices=FEWSHOT_FORMATS,
        help="how exemplars reach the model: single-turn (all in the user message; dateeval's tasks' default) or multi-turn "
        "(a user and an assistant turn each, as lm-eval's --fewshot_as_multiturn; lm-eval tasks' default); repeat it "
        "to sweep both, stored as NAME and NAME_multiturn (or NAME_singleturn), a factor beside the date",
    )
    run.add_argument(
        "--data-dir", help="folder with the benchmarks' original files (offline); default: the Hugging Face Hub"
    )
    run.add_argument("--subjects", help="MMLU subjects, comma-separated")
    run.add_argument("--limit", type=int, help="first N items (after --sample)")
    run.add_argument("--sample", type=int, help="a seeded random sample of N items")
    run.add_argument("--seed", type=int, default=0, help="seed for --sample (default 0)")
    run.add_argument("--dates", help="dates: 2024-01-01..2024-12-31[/7d], or a comma list (default: all of 2024)")
    run.add_argument(
        "--budget",
        type=_share,
        help="sweep sparsely: score this share of the dense grid's item-dates (e.g. 0.2), the "
        "no-date baseline and 3 pilot dates in full and the other cells drawn where questions move; per-date values "
        "are then estimated with intervals (docs/sparse.md)",
    )
    run.add_argument(
        "--budget-seed",
        type=int,
        default=0,
        help="seed of the sparse draw (default 0): the same seed draws the same cells",
    )
    run.add_argument(
        "--no-date", action="store_true", help="also run the no-date baseline (the template without any date)"
    )
    run.add_argument(
        "--template-default",
        action="store_true",
        help="also run the template as shipped (its own default date or the real clock)",
    )
    run.add_argument(
        "--system-prompt",
        default=None,
        type=_text,
        help="the system message wording used throughout (default: 'You are a helpful assistant.')",
    )
    factors = run.add_argument_group(
        "other factors, each swept alone at --factor-date with the rest at their defaults (paper Table 5)"
    )
    factors.add_argument(
        "--factor-date", help="the date at which the other factors are swept (default: the first date)"
    )
    factors.add_argument("--batch-sizes", help="comma-separated batch sizes, e.g. 1,2,4,8,16,32,64,128")
    factors.add_argument(
        "--option-orders",
        type=_integer(1, MAX_OPTION_ORDERS),
        help="K seeded permutations of every question's options (orders 1..K; "
        "at most n! - 1 for questions with n options)",
    )
    factors.add_argument(
        "--system-prompts", type=_text, help="'paper' for the six wordings of App. C.4, or wordings separated by |"
    )
    factors.add_argument(
        "--locations", type=_text, help="user locations separated by |, e.g. 'Berlin|Tokyo|Lagos' (App. F)"
    )
    factors.add_argument(
        "--repeat",
        type=_integer(0),
        default=0,
        help="also run the factor date R more times: measured run-to-run variation",
    )
    run.add_argument(
        "--date-format", default="%d %b %Y", type=_text, help="strftime format of injected dates (default %%d %%b %%Y)"
    )
    run.add_argument(
        "--date-line", default="Today Date: {date}", type=_text, help="the injected line; {date} is replaced"
    )
    run.add_argument("--date-position", default="system_start", choices=POSITIONS, help="where an injected date goes")
    run.add_argument(
        "--dtype",
        action="append",
        choices=DTYPES,
        help="numerical precision (repeatable: one entry per precision; default auto)",
    )
    run.add_argument("--device", default="auto", choices=DEVICES)
    run.add_argument("--batch-size", type=_integer(1), default=32)
    run.add_argument(
        "--label-style", default="auto", choices=("auto", "space+label", "label"), help="token read for option labels"
    )
    generation = run.add_argument_group("open-ended tasks (chain of thought, GSM8K, HumanEval, WMT16)")
    generation.add_argument(
        "--max-new-tokens",
        type=_integer(1),
        help="longest reply (default per task: 384 CoT/HumanEval, 320 GSM8K, 192 WMT)",
    )
    generation.add_argument(
        "--sampling",
        action="store_true",
        help="sample with the model's own temperature/top-p and a fixed seed (App. C.2); default greedy",
    )
    generation.add_argument(
        "--generation-seed", type=_integer(0, 2**63 - 1), default=0, help="seed for --sampling (default 0)"
    )
    run.add_argument(
        "--trust-remote-code", action="store_true", help="allow model code from the Hub to run (off by default)"
    )
    run.add_argument(
        "--trust-task-code",
        action="store_true",
        help="allow an lm-eval task YAML's !function helpers (.py files beside it) to run (off by default; lm-eval's own tasks always may)",
    )
    api = _add_api_options(run)
    api.add_argument("--api-mode", default="completions", choices=tuple(MODES), help="; ".join(MODES.values()))
    api.add_argument(
        "--request-timeout",
        type=float,
        default=120.0,
        help="seconds before a request is abandoned and retried (default 120)",
    )
    api.add_argument(
        "--retries", type=_integer(0, 20), default=5, help="retries of a request on 429/5xx/timeouts (default 5)"
    )
    api.add_argument(
        "--tokenizer",
        help="completions mode: the model whose tokenizer and chat template render prompts (default: the served name)",
    )
    run.add_argument("--store", default="cache/results", help="results folder (default cache/results)")
    _add_spec_flags(run)
    cluster = run.add_argument_group("where units run (dateeval/engine/ray_executor.py)")
    cluster.add_argument(
        "--executor",
        default="local",
        choices=("local", "ray"),
        help="local: this process (default); ray: actors on a Ray cluster",
    )
    cluster.add_argument(
        "--address", help="Ray cluster: auto, HOST:PORT or ray://HOST:10001 (default: start a local Ray instance)"
    )
    cluster.add_argument(
        "--workers",
        type=_integer(1, 100_000),
        help="Ray actors, each loading the model once (default: one per CPU, or per GPU share)",
    )
    cluster.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs each Ray actor takes (default 0)")
    cluster.add_argument(
        "--no-wait",
        action="store_true",
        help="fail (non-zero exit) naming units other drivers still hold, instead of waiting for them",
    )


def _add_spec_flags(run: argparse.ArgumentParser) -> None:
    """One flag per spec key (``custom.KEYS``): what a spec says, said for the data files given as ``--dataset``."""
    from dateeval.tasks.custom import KEYS
    from dateeval.tasks.described import dest

    spec = run.add_argument_group(
        "your own data file described by flags instead of a spec: one flag per spec key, saved as a spec in "
        "STORE/.specs (docs/own-benchmark.md)"
    )
    types = {str: _text, int: int, (int, float): _finite, (str, list): _text}
    for key in KEYS:
        if key.name != "data":  # the data file is --dataset
            spec.add_argument(
                key.flag,
                dest=dest(key),
                type=types[key.kind],
                metavar=key.name.rpartition(".")[2].upper(),
                help=f"{key.help} (spec key {key.name})"
                + ("; comma-separated for several columns" if key.kind == (str, list) else ""),
            )


def _finite(text: str) -> float:
    """An argparse type for a number that is not NaN or infinite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text}")
    return value


def _add_api_options(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Options every command that talks to an ``openai:URL#MODEL`` endpoint shares."""
    api = parser.add_argument_group("OpenAI-compatible endpoints (--model openai:URL#MODEL)")
    api.add_argument(
        "--api-key-env", metavar="NAME", help="the environment variable holding the API key (its name, never the key)"
    )
    api.add_argument("--concurrency", type=_integer(1, 1024), default=8, help="requests in flight at once (default 8)")
    return api


def _add_serve(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve", help="serve a model on a minimal OpenAI-compatible endpoint (completions, chat)"
    )
    serve.add_argument(
        "--model", default="smollm2-135m", help="model name, Hub id, folder or .gguf (default smollm2-135m)"
    )
    serve.add_argument("--served-model-name", help="the name clients ask for (default: --model)")
    serve.add_argument(
        "--chat-template",
        help="apply this template to chat requests instead of the model's own (e.g. GPT-OSS's, "
        "which writes today's date: a provider injecting the date)",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)"
    )
    serve.add_argument("--port", type=_integer(0, 65535), default=8000, help="port (default 8000; 0 picks a free one)")
    serve.add_argument("--dtype", default="float32", help="numerical precision (default float32)")
    serve.add_argument("--device", default="auto")


def _add_probe(commands: argparse._SubParsersAction) -> None:
    probe = commands.add_parser(
        "probe", help="ask an endpoint, with an empty system prompt, what today's date is: does the provider inject it?"
    )
    probe.add_argument("--model", required=True, help="openai:URL#MODEL")
    probe.add_argument("--request-timeout", type=float, default=120.0)
    probe.add_argument("--json", action="store_true", help="machine-readable output")
    _add_api_options(probe)
    probe.set_defaults(concurrency=1)  # four short questions: asked one after another, a small server is not flooded


def _add_template(commands: argparse._SubParsersAction) -> None:
    template = commands.add_parser("template", help="show how chat templates inject a date, and render one")
    template.add_argument(
        "paths", nargs="+", help="chat templates: .jinja files, tokenizer_config.json files or model folders"
    )
    template.add_argument("--date", help="render a prompt with this date (YYYY-MM-DD)")


def _add_regrade(commands: argparse._SubParsersAction) -> None:
    regrade = commands.add_parser(
        "regrade", help="grade the stored outputs of generation tasks again and compare (the store is not changed)"
    )
    regrade.add_argument("--store", default="cache/results")
    regrade.add_argument("--data-dir", help="the benchmarks' files the outputs were graded against (default: the Hub)")
    regrade.add_argument("--dataset", action="append", help="only these datasets (repeatable)")
    regrade.add_argument("--csv", help="write every regraded output, stored and new grade side by side, to this CSV")


def _add_app(commands: argparse._SubParsersAction) -> None:
    app = commands.add_parser("app", help="open the explorer (Streamlit) on the built-in demo and your results")
    app.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    app.add_argument("--port", type=_integer(1, 65535), default=8501, help="port (default 8501)")
    app.add_argument("--no-browser", action="store_true", help="serve only; do not open a browser tab")


def _add_compact(commands: argparse._SubParsersAction) -> None:
    compact = commands.add_parser("compact", help="merge a store's many unit files into one file per model and dataset")
    compact.add_argument("--store", default="cache/results")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dateeval",
        description="How much do benchmark results move when only the date in the system prompt changes?",
        epilog="Environment: DATEEVAL_THREADS=auto|N (torch's CPU threads: auto follows the cores other processes "
        "leave free; N fixes them), MKL_CBWR (default AUTO,STRICT: bit-identical scores whatever the batch "
        "and threads), HF_HUB_OFFLINE=1, DATEEVAL_CACHE (converted models). docs/cli.md#environment",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_run(commands)
    _add_app(commands)
    cli_read.add_summary(commands)
    cli_read.add_export(commands)
    cli_read.add_robust(commands)
    cli_read.add_compare(commands)
    _add_template(commands)
    _add_compact(commands)
    cli_read.add_report(commands)
    _add_regrade(commands)
    _add_serve(commands)
    _add_probe(commands)
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from dateeval.backends import BackendOptions
    from dateeval.conditions import DEFAULT_SYSTEM_PROMPT
    from dateeval.engine.plan import build_spec, dated_conditions
    from dateeval.engine.sweep import Sweep
    from dateeval.keeping import keep
    from dateeval.models import DEFAULT_MODEL
    from dateeval.prompting import DateInjection
    from dateeval.store import Store
    from dateeval.tasks import GenerationOptions

    if not args.dataset:
        raise DateEvalError("give at least one --dataset (e.g. --dataset arc_challenge)")
    references = tuple(_described(args))
    conditions = (
        _server_clock_conditions(args)
        if args.api_mode == "server-clock"
        else dated_conditions(
            args.dates,
            no_date=args.no_date,
            template_default=args.template_default,
            system_prompt=DEFAULT_SYSTEM_PROMPT if args.system_prompt is None else args.system_prompt,
            injection=DateInjection(line=args.date_line, format=args.date_format, position=args.date_position),
            factors=_factor_levels(args),
            factor_date=args.factor_date,
        )
    )
    # A file or spec is registered here under its stored name, and each dataset resolved once (``SweepSpec.tasks``).
    spec = build_spec(
        tuple(args.model or [DEFAULT_MODEL]),
        references,
        tuple(conditions),
        data_dir=args.data_dir,
        shots=args.shots,
        fewshot_formats=tuple(args.fewshot_format or [None]),
        trust_task_code=args.trust_task_code,
        subjects=args.subjects or "",
        sample=args.sample,
        seed=args.seed,
        limit=args.limit,
        dtypes=tuple(args.dtype or ["auto"]),
        batch_size=args.batch_size,
        label_style=args.label_style,
        backend=args.backend,
        options=BackendOptions(
            device=args.device,
            trust_remote_code=args.trust_remote_code,
            api_key_env=args.api_key_env,
            concurrency=args.concurrency,
            timeout_s=args.request_timeout,
            retries=args.retries,
            mode=args.api_mode,
            tokenizer=args.tokenizer,
        ),
        generation=GenerationOptions(
            max_new_tokens=args.max_new_tokens, sample=args.sampling, seed=args.generation_seed
        ),
        budget=args.budget,
        budget_seed=args.budget_seed,
    )
    bar = None

    def show(progress: Progress) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=progress.units_total, unit="unit", desc="units", dynamic_ncols=True, file=sys.stderr)
        bar.total = progress.units_total
        bar.n = progress.units_done
        generated = (
            f", {progress.tokens_generated / progress.seconds:.0f} tokens/s"
            if progress.tokens_generated and progress.seconds
            else ""
        )
        # Which worker runs what (Ray): "host:pid unit" for each, so a stuck or slow worker can be seen.
        running = (
            "".join(f", [{worker}: {unit}]" for worker, unit in sorted(progress.workers.items()))
            if len(progress.workers) > 1
            else ""
        )
        bar.set_postfix_str(
            f"{progress.items_per_second:.1f} item-dates/s{generated}, {progress.units_skipped} cached{running}, {progress.current}"
        )
        bar.refresh()

    try:
        final = Sweep(
            spec, Store(args.store), on_progress=show, executor=_executor(args), wait=not args.no_wait, keep=keep
        ).run()
    finally:
        if bar is not None:
            bar.close()
    for message in final.messages:
        print(f"dateeval: warning: {message}", file=sys.stderr)
    for note in final.notes:
        print(note)
    print(
        f"done: {final.units_done} units ({final.units_skipped} already in the store), "
        f"{final.items_scored} item-dates scored in {final.seconds:.1f}s -> {args.store}"
    )
    return 0


def _described(args: argparse.Namespace) -> list[str]:
    """The ``--dataset`` values, each data file described by ``--spec-*`` flags (and each Hub dataset) replaced by the spec
    written for it into the store, which is said in one line: the user can run, or edit, that spec next time."""
    from dateeval.tasks import described

    specs = described.describe_all(args.dataset, described.values_from(vars(args)), Path(args.store))
    for reference, path in specs.items():
        print(f"dataset {reference} described as the spec {path} (run it again with --dataset {path})")
    return [str(specs.get(reference, reference)) for reference in args.dataset]


def _executor(args: argparse.Namespace) -> Executor:
    """The executor ``--executor`` names (Ray imported only when asked for)."""
    if args.executor == "local":
        if args.address or args.workers or args.gpus_per_worker:
            raise DateEvalError("--address, --workers and --gpus-per-worker apply to --executor ray")
        from dateeval.engine.sweep import LocalExecutor

        return LocalExecutor()
    from dateeval.engine.ray_executor import RayExecutor

    return RayExecutor(address=args.address, workers=args.workers, gpus_per_worker=args.gpus_per_worker)


def _server_clock_conditions(args: argparse.Namespace) -> list:
    """Server-clock mode: today's (UTC) run of the provider's own date, with an empty system prompt unless one is given."""
    from dateeval.backends import BackendOptions, split_model
    from dateeval.conditions import server_clock
    from dateeval.probe import server_day

    given = [
        flag
        for flag, value in (
            ("--dates", args.dates),
            ("--no-date", args.no_date),
            ("--template-default", args.template_default),
            ("--factor-date", args.factor_date),
        )
        if value
    ]
    if given:
        raise DateEvalError(
            f"server-clock mode sends no date of ours (the provider sets it): drop {', '.join(given)}; "
            "run it once a day for a series, --repeat to ask again on the same day"
        )
    others = [model for model in args.model or ["default"] if split_model(model, args.backend)[0] != "openai"]
    if others:
        raise DateEvalError(f"--api-mode server-clock asks an API endpoint (--model openai:URL#MODEL), not {others[0]}")
    # The provider's day, by its HTTP Date header: the date the model reads, whatever this machine's clock says.
    dated = server_day(
        list(args.model),
        BackendOptions(api_key_env=args.api_key_env, timeout_s=args.request_timeout, retries=args.retries),
    )
    if dated.warning:
        print(f"dateeval: warning: {dated.warning}", file=sys.stderr)
    return server_clock(
        dated.day, system_prompt="" if args.system_prompt is None else args.system_prompt, factors=_factor_levels(args)
    )


def _factor_levels(args: argparse.Namespace) -> dict[str, list]:
    """The other factors' levels from the command line (each swept alone)."""
    from dateeval.conditions import PAPER_SYSTEM_PROMPTS

    levels: dict[str, list] = {}
    if args.batch_sizes:
        try:
            levels["batch_size"] = [int(size) for size in args.batch_sizes.split(",")]
        except ValueError:
            raise DateEvalError(f"malformed --batch-sizes {args.batch_sizes!r}: give integers like 1,2,4,8") from None
        if min(levels["batch_size"]) < 1:
            raise DateEvalError("batch sizes must be at least 1")
    if args.option_orders:
        levels["option_order"] = list(range(1, args.option_orders + 1))
    if args.system_prompts:
        levels["system_prompt"] = (
            list(PAPER_SYSTEM_PROMPTS) if args.system_prompts == "paper" else args.system_prompts.split("|")
        )
    if args.locations:
        levels["location"] = [place.strip() for place in args.locations.split("|") if place.strip()]
    if args.repeat:
        levels["repeat"] = list(range(1, args.repeat + 1))
    return levels


def _cmd_regrade(args: argparse.Namespace) -> int:
    from dateeval.outputs import write_csv
    from dateeval.regrade import regrade
    from dateeval.store import Store

    store = Store(args.store)
    if not store.root.is_dir():
        raise DateEvalError(f"store {store.root} does not exist")
    table = regrade(store, args.data_dir, tuple(args.dataset or ()))
    for dataset, rows in table.groupby("dataset", sort=True):
        print(
            f"{dataset}: {len(rows)} stored outputs regraded, {int(rows['changed'].sum())} grades differ from the stored ones"
        )
    if args.csv:
        write_csv(table, Path(args.csv))
        print(f"comparison written to {args.csv}")
    return 0


def _cmd_template(args: argparse.Namespace) -> int:
    from dateeval.dates import parse_date
    from dateeval.prompting import ChatTemplate

    day = parse_date(args.date) if args.date else None
    for path in args.paths:
        template = ChatTemplate.from_file(Path(path))
        print(f"{path}: {template.support.kind} - {template.support.describe()}")
        if day is not None:
            messages = [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Hello"},
            ]
            print(template.render(messages, mode="date", day=day).text)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from dateeval import serve

    served = serve.load(
        args.model, name=args.served_model_name, chat_template=args.chat_template, dtype=args.dtype, device=args.device
    )
    server = serve.make_server(served, args.host, args.port)
    host, port = server.server_address[:2]
    print(serve.banner(served, host, port), flush=True)
    with server:
        server.serve_forever()
    return 0


def _cmd_app(args: argparse.Namespace) -> int:
    from dateeval import launch

    return launch.serve(args.port, args.host, browser=not args.no_browser)


def _cmd_probe(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from dateeval.backends.base import BackendOptions
    from dateeval.probe import probe

    options = BackendOptions(
        api_key_env=args.api_key_env, concurrency=args.concurrency, timeout_s=args.request_timeout, mode="chat"
    )
    report = probe(args.model, options)
    print(json.dumps(asdict(report), indent=2) if args.json else report.describe())
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    from dateeval.keeping import keep
    from dateeval.store import Store, sidecars

    store = Store(args.store)
    if not store.root.is_dir():
        raise DateEvalError(f"store {store.root} does not exist")
    store.ensure_writable()
    with _exclusive(
        store.root / ".compact.lock",
        f"store {store.root} is being compacted by another process: wait until it finishes",
    ):
        folders, removed, problems = store.compact(sidecars.merged(store))
    # The merged files are new units: statistics kept on the old ones no longer apply, so they are computed now.
    for message in dict.fromkeys(problems.messages() + keep(store)):
        print(f"dateeval: warning: {message}", file=sys.stderr)
    print(f"compacted {folders} folders, merged and removed {removed} files")
    return 0


@contextlib.contextmanager
def _exclusive(lock: Path, busy: str) -> Iterator[None]:
    """Hold an exclusive lock on ``lock`` (released by the kernel when the process ends, however it ends), or fail with ``busy``.

    Two compactions of one store would each merge and delete the other's inputs.
    """
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DateEvalError(busy) from None
        yield


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    commands = {
        "run": _cmd_run,
        "app": _cmd_app,
        "summary": cli_read.summary,
        "export": cli_read.export,
        "robust": cli_read.robust,
        "compare": cli_read.compare,
        "template": _cmd_template,
        "compact": _cmd_compact,
        "report": cli_read.report,
        "regrade": _cmd_regrade,
        "serve": _cmd_serve,
        "probe": _cmd_probe,
    }
    try:
        args = _parser().parse_args(argv)
        _quiet_libraries()
        return commands[args.command](args)
    except DateEvalError as error:
        print(f"dateeval: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # output piped into `head`: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("dateeval: interrupted; finished units are saved, run the same command again to resume", file=sys.stderr)
        return 130
