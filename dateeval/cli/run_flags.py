"""``dateeval run``'s flags: what a sweep varies (models, datasets, dates and other factors), how it runs, where it stores.

Kept apart from the command (``cli.run``), which reads them, because they are most of its length; the ``--spec-*``
flags are generated from the spec keys (``tasks.spec_keys.KEYS``).
"""

from __future__ import annotations

import argparse

from dateeval.cli import arguments


def add(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from dateeval.backends import BACKENDS
    from dateeval.backends.devices import DEVICES, DTYPES
    from dateeval.backends.openai_api import MODES
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
        type=arguments.integer(0),
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
        type=arguments.share,
        help="sweep sparsely: score this share of the dense grid's item-dates (e.g. 0.2), the "
        "baselines and the pilot (the first date) in full and the other cells drawn where questions move; "
        "per-date values are then estimated with intervals (docs/sparse.md); with --target-width, its cap",
    )
    run.add_argument(
        "--target-width",
        type=arguments.share,
        help="sweep sparsely until every estimated date's 95%% interval is within +- this share (0.01: one point), "
        "drawing in pre-declared looks up to the --budget cap (default 1) (docs/sparse.md)",
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
        type=arguments.text,
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
        type=arguments.integer(1, arguments.MAX_OPTION_ORDERS),
        help="K seeded permutations of every question's options (orders 1..K; "
        "at most n! - 1 for questions with n options)",
    )
    factors.add_argument(
        "--system-prompts",
        type=arguments.text,
        help="'paper' for the six wordings of App. C.4, or wordings separated by |",
    )
    factors.add_argument(
        "--locations", type=arguments.text, help="user locations separated by |, e.g. 'Berlin|Tokyo|Lagos' (App. F)"
    )
    factors.add_argument(
        "--repeat",
        type=arguments.integer(0),
        default=0,
        help="also run the factor date R more times: measured run-to-run variation",
    )
    run.add_argument(
        "--date-format",
        default="%d %b %Y",
        type=arguments.text,
        help="strftime format of injected dates (default %%d %%b %%Y)",
    )
    run.add_argument(
        "--date-line", default="Today Date: {date}", type=arguments.text, help="the injected line; {date} is replaced"
    )
    run.add_argument("--date-position", default="system_start", choices=POSITIONS, help="where an injected date goes")
    run.add_argument(
        "--dtype",
        action="append",
        choices=DTYPES,
        help="numerical precision (repeatable: one entry per precision; default auto)",
    )
    run.add_argument("--device", default="auto", choices=DEVICES)
    run.add_argument("--batch-size", type=arguments.integer(1), default=32)
    run.add_argument(
        "--label-style", default="auto", choices=("auto", "space+label", "label"), help="token read for option labels"
    )
    generation = run.add_argument_group("open-ended tasks (chain of thought, GSM8K, HumanEval, WMT16)")
    generation.add_argument(
        "--max-new-tokens",
        type=arguments.integer(1),
        help="longest reply (default per task: 384 CoT/HumanEval, 320 GSM8K, 192 WMT)",
    )
    generation.add_argument(
        "--sampling",
        action="store_true",
        help="sample with the model's own temperature/top-p and a fixed seed (App. C.2); default greedy",
    )
    generation.add_argument(
        "--generation-seed", type=arguments.integer(0, 2**63 - 1), default=0, help="seed for --sampling (default 0)"
    )
    run.add_argument(
        "--trust-remote-code", action="store_true", help="allow model code from the Hub to run (off by default)"
    )
    run.add_argument(
        "--trust-task-code",
        action="store_true",
        help="allow an lm-eval task YAML's !function helpers (.py files beside it) to run (off by default; lm-eval's own tasks always may)",
    )
    api = arguments.api_options(run)
    api.add_argument("--api-mode", default="completions", choices=tuple(MODES), help="; ".join(MODES.values()))
    api.add_argument(
        "--request-timeout",
        type=float,
        default=120.0,
        help="seconds before a request is abandoned and retried (default 120)",
    )
    api.add_argument(
        "--retries",
        type=arguments.integer(0, 20),
        default=5,
        help="retries of a request on 429/5xx/timeouts (default 5)",
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
        type=arguments.integer(1, 100_000),
        help="Ray actors, each loading the model once (default: one per CPU, or per GPU share)",
    )
    cluster.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs each Ray actor takes (default 0)")
    cluster.add_argument(
        "--no-wait",
        action="store_true",
        help="fail (non-zero exit) naming units other drivers still hold, instead of waiting for them",
    )
    return run


def _add_spec_flags(run: argparse.ArgumentParser) -> None:
    """One flag per spec key (``spec_keys.KEYS``): what a spec says, said for the data files given as ``--dataset``."""
    from dateeval.tasks.spec_keys import KEYS
    from dateeval.tasks.described import dest

    spec = run.add_argument_group(
        "your own data file described by flags instead of a spec: one flag per spec key, saved as a spec in "
        "STORE/.specs (docs/own-benchmark.md)"
    )
    types = {str: arguments.text, int: int, (int, float): arguments.finite, (str, list): arguments.text}
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
