"""``dateeval run``: the flags turned into one sweep spec (``engine.plan.build_spec``, as the Run page does) and run.

Conditions come from the dates and the other factors' flags, or, in server-clock mode, from the provider's own day;
progress goes to stderr, the summary line to stdout.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dateeval.errors import DateEvalError

if TYPE_CHECKING:
    from dateeval.engine.plan import Progress, SweepSpec
    from dateeval.engine.sweep import Executor, Keep


def cmd_run(args: argparse.Namespace) -> int:
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
    from dateeval.widths import to_width

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

    def sweep(spec: SweepSpec, keeping: Keep | None = None) -> Progress:
        return Sweep(
            spec, Store(args.store), on_progress=show, executor=_executor(args), wait=not args.no_wait, keep=keeping
        ).run()

    try:
        if args.target_width is None:
            final = sweep(spec, keep)
        else:
            final = to_width(replace(spec, budget=args.budget), Store(args.store), args.target_width, sweep)
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
