"""Command line: ``dateeval COMMAND`` (or ``python -m dateeval``), one parser and one handler per command, in one list.

Sweeps: ``run`` (:mod:`.run`, its flags :mod:`.run_flags`), ``regrade``, ``compact``. Reading a store: ``summary``,
``export``, ``robust``, ``compare``, ``report`` (:mod:`.read`; the files they write, :mod:`.outputs`). The explorer:
``app`` (:mod:`.launch`). Prompts and endpoints: ``template``, ``serve``, ``probe`` (:mod:`.tools`).

Every user error ends as one line on stderr and a non-zero exit status;
tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import NamedTuple

from dateeval.cli import arguments, read, run, run_flags, tools
from dateeval.errors import DateEvalError

EXIT_ERROR = 2


class Command(NamedTuple):
    """One subcommand: what adds its parser (returning it) and what runs it (returning the exit status)."""

    add: Callable[[argparse._SubParsersAction], argparse.ArgumentParser]
    handle: Callable[[argparse.Namespace], int]


# In the order ``dateeval --help`` lists them.
COMMANDS = (
    Command(run_flags.add, run.cmd_run),
    Command(tools.add_app, tools.cmd_app),
    Command(read.add_summary, read.cmd_summary),
    Command(read.add_export, read.cmd_export),
    Command(read.add_robust, read.cmd_robust),
    Command(read.add_compare, read.cmd_compare),
    Command(tools.add_template, tools.cmd_template),
    Command(tools.add_compact, tools.cmd_compact),
    Command(read.add_report, read.cmd_report),
    Command(tools.add_regrade, tools.cmd_regrade),
    Command(tools.add_serve, tools.cmd_serve),
    Command(tools.add_probe, tools.cmd_probe),
)


def parser() -> argparse.ArgumentParser:
    """The whole command line: each command's parser, with its handler as the ``handle`` default."""
    top = arguments.Parser(
        prog="dateeval",
        description="How much do benchmark results move when only the date in the system prompt changes?",
        epilog="Environment: DATEEVAL_THREADS=auto|N (torch's CPU threads: auto follows the cores other processes "
        "leave free; N fixes them), MKL_CBWR (default AUTO,STRICT: bit-identical scores whatever the batch "
        "and threads), HF_HUB_OFFLINE=1, DATEEVAL_CACHE (converted models). docs/cli.md#environment",
    )
    commands = top.add_subparsers(dest="command", required=True, parser_class=arguments.Parser)
    for command in COMMANDS:
        command.add(commands).set_defaults(handle=command.handle)
    return top


def quiet_libraries() -> None:
    """No progress bars, advisories or tokenizer-fork warnings from the libraries: dateeval prints its own progress."""
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


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    try:
        args = parser().parse_args(argv)
        quiet_libraries()
        return args.handle(args)
    except DateEvalError as error:
        print(f"dateeval: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # output piped into `head`: not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("dateeval: interrupted; finished units are saved, run the same command again to resume", file=sys.stderr)
        return 130
