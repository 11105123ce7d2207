"""The ``forgetbench`` command line: the entry point and its error policy (``mt`` and ``parse`` hold the commands).

Bad input: one line on stderr (``forgetbench: error: what, where, how to fix``), exit 2, nothing
written; every command checks its inputs and its output (``forgetbench.outputs``) before any work.
An unexpected exception also ends in one line (exit 1), with ``--debug`` for the traceback; a full disk or memory
(``forgetbench.resources``) is said as such, with where, how much is free and what to do (exit 2).
"""

from __future__ import annotations

import argparse
import os
import sys

# torch's C++ layer would print its own warnings (a lost TCPStore connection: a stack trace) beside our one line;
# read once, when torch loads, which no command has done yet
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

from forgetbench.cli import mt, parse  # noqa: E402
from forgetbench.cli.common import Parser  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="forgetbench", description="Who pays for compression? Compress, translate, score and report "
                                                "per language, tier, gender and word sense.")
    p.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    mt.add_commands(sub)
    parse.add_commands(sub)
    mt.add_recipes(sub)
    _debug_everywhere(sub)
    return p


def _debug_everywhere(sub) -> None:
    """``--debug`` accepted before or after any (sub)command: ``forgetbench eval CFG --debug``."""
    for command in sub.choices.values():
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show the traceback of an unexpected error")
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                _debug_everywhere(action)


def _output_of(args) -> str | None:
    """The path a command writes under: --out (a sweep's default runs/<config name>), else None."""
    if getattr(args, "out", None):
        return args.out
    if getattr(args, "run_dir", None):
        return args.run_dir
    return "runs" if args.command in ("sweep", "eval") else None


def main(argv: list[str] | None = None) -> int:
    from forgetbench.errors import ForgetbenchError
    from forgetbench.resources import error_line

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or one error line (2)
        return e.code if isinstance(e.code, int) else 2
    from forgetbench.cli.common import early_environment

    try:
        early_environment(args)  # thread pools and the address-space limit, before torch loads
    except ForgetbenchError as e:
        print(f"forgetbench: error: {error_line(e, args.command, None)[0]}", file=sys.stderr)
        return e.exit_code
    from forgetbench.console import quiet_libraries

    quiet_libraries(debug=args.debug)  # library chatter never precedes our one line (console rule 4)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("forgetbench: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the one place that turns any failure into one line
        if args.debug and not isinstance(e, ForgetbenchError):
            raise
        command = " ".join(x for x in (args.command, getattr(args, "action", None)) if x)
        line, code = error_line(e, command, _output_of(args))
        print(f"forgetbench: error: {line}", file=sys.stderr)
        return code
