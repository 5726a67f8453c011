"""The commands beside sweeping and reading: ``template``, ``compact``, ``regrade``, ``app``, ``serve`` and ``probe``.

Each is a parser (``add_*``) and a handler of the same name; heavy modules are imported inside the handler, so
``dateeval --help`` and the read side start without torch.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from dateeval.cli import arguments
from dateeval.errors import DateEvalError


def add_serve(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
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
    serve.add_argument(
        "--port", type=arguments.integer(0, 65535), default=8000, help="port (default 8000; 0 picks a free one)"
    )
    serve.add_argument("--dtype", default="float32", help="numerical precision (default float32)")
    serve.add_argument("--device", default="auto")
    return serve


def add_probe(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    probe = commands.add_parser(
        "probe", help="ask an endpoint, with an empty system prompt, what today's date is: does the provider inject it?"
    )
    probe.add_argument("--model", required=True, help="openai:URL#MODEL")
    probe.add_argument("--request-timeout", type=float, default=120.0)
    probe.add_argument("--json", action="store_true", help="machine-readable output")
    arguments.api_options(probe)
    probe.set_defaults(concurrency=1)  # four short questions: asked one after another, a small server is not flooded
    return probe


def add_template(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    template = commands.add_parser("template", help="show how chat templates inject a date, and render one")
    template.add_argument(
        "paths", nargs="+", help="chat templates: .jinja files, tokenizer_config.json files or model folders"
    )
    template.add_argument("--date", help="render a prompt with this date (YYYY-MM-DD)")
    return template


def add_regrade(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    regrade = commands.add_parser(
        "regrade", help="grade the stored outputs of generation tasks again and compare (the store is not changed)"
    )
    regrade.add_argument("--store", default="cache/results")
    regrade.add_argument("--data-dir", help="the benchmarks' files the outputs were graded against (default: the Hub)")
    regrade.add_argument("--dataset", action="append", help="only these datasets (repeatable)")
    regrade.add_argument("--csv", help="write every regraded output, stored and new grade side by side, to this CSV")
    return regrade


def add_app(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    app = commands.add_parser("app", help="open the explorer (Streamlit) on the built-in demo and your results")
    app.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    app.add_argument("--port", type=arguments.integer(1, 65535), default=8501, help="port (default 8501)")
    app.add_argument("--no-browser", action="store_true", help="serve only; do not open a browser tab")
    app.add_argument(
        "--store",
        help="a results store (what `dateeval run --store PATH` wrote) to open beside the demo, as 'My results': the "
        "explorer opens on it and the Run page writes into it (default: $DATEEVAL_STORE, else cache/results)",
    )
    return app


def add_compact(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    compact = commands.add_parser("compact", help="merge a store's many unit files into one file per model and dataset")
    compact.add_argument("--store", default="cache/results")
    return compact


def cmd_regrade(args: argparse.Namespace) -> int:
    from dateeval.cli.outputs import write_csv
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


def cmd_template(args: argparse.Namespace) -> int:
    from dateeval.conditions.dates import parse_date
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


def cmd_serve(args: argparse.Namespace) -> int:
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


def cmd_app(args: argparse.Namespace) -> int:
    from dateeval.cli import launch

    return launch.serve(args.port, args.host, browser=not args.no_browser, store=args.store)


def cmd_probe(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from dateeval.backends.base import BackendOptions
    from dateeval.probe import probe

    options = BackendOptions(
        api_key_env=args.api_key_env, concurrency=args.concurrency, timeout_s=args.request_timeout, mode="chat"
    )
    report = probe(args.model, options)
    print(json.dumps(asdict(report), indent=2) if args.json else report.describe())
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    from dateeval.keeping import keep
    from dateeval.store import Store, sidecars, upkeep

    store = Store(args.store)
    if not store.root.is_dir():
        raise DateEvalError(f"store {store.root} does not exist")
    store.ensure_writable()
    with _exclusive(
        store.root / ".compact.lock",
        f"store {store.root} is being compacted by another process: wait until it finishes",
    ):
        folders, removed, problems = upkeep.compact(store, sidecars.merged(store))
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
