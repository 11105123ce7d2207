"""What every command of the CLI shares: argument types, the --help format, one-line argument errors, torch
threads."""

from __future__ import annotations

import argparse
import os
import sys


def thread_count(n: int | None) -> int:
    """--threads, else $FORGETBENCH_THREADS, else 1. Deliberate: with another busy process, 2 torch threads
    ran generate 25-45x slower than 1 here."""
    from forgetbench.errors import ForgetbenchError

    if n is not None:
        return n
    env = os.environ.get("FORGETBENCH_THREADS", "1")
    if not env.isdigit() or int(env) < 1:
        raise ForgetbenchError(f"$FORGETBENCH_THREADS={env!r}: give a positive integer (torch threads)")
    return int(env)


def set_threads(n: int | None) -> None:
    import torch

    torch.set_num_threads(thread_count(n))


class HelpFormatter(argparse.HelpFormatter):
    """Shows an option's default in --help where it has a meaningful one."""

    def _get_help_string(self, action):
        h = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in h and action.option_strings:
            h += " (default: %(default)s)"
        return h


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``forgetbench: error: …``, exit 2) and defaults shown in --help."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message):
        sys.stderr.write(f"forgetbench: error: {self.prog}: {message}; see `{self.prog} --help`\n")
        sys.exit(2)


def positive(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{v!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{v} must be at least 1")
    return n


def positive_minutes(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{v!r} is not a number of minutes") from None
    if not x > 0 or x != x or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{v} must be a positive number of minutes")
    return x


THREADS_HELP = "torch threads (default: $FORGETBENCH_THREADS, else 1)"
