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


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def planned_threads(args) -> int:
    """The thread count a command starts with, known before torch loads: --threads, else a sweep config's
    ``threads``, else $FORGETBENCH_THREADS, else 1 (what cannot be read here is refused later by the command)."""
    if getattr(args, "threads", None):
        return args.threads
    if getattr(args, "command", None) in ("sweep", "eval") and getattr(args, "config", None):
        import yaml

        try:
            with open(args.config, encoding="utf-8") as f:
                n = (yaml.safe_load(f) or {}).get("threads", 1)
        except (OSError, ValueError, AttributeError, yaml.YAMLError):
            n = None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
            return n
    env = os.environ.get("FORGETBENCH_THREADS", "1")
    return int(env) if env.isdigit() and int(env) >= 1 else 1


def early_environment(args) -> None:
    """Before torch loads (the CLI's first step in a process: its spawned workers and launched ranks inherit the
    environment): OpenMP's and the BLAS's thread pools sized to the command's thread count, so no pool of one
    thread per core is created before ``set_threads`` runs (under an address-space limit, creating it can fail
    inside libgomp); and the address-space limit checked against what the runtime maps
    (``resources`` rule 5). A process that loaded torch already (the Python API, tests) is left as it is."""
    from forgetbench.resources import RUNTIME_ADDRESS_SPACE, SWEEP_ADDRESS_SPACE, check_address_space

    if "torch" in sys.modules:
        return
    n = str(planned_threads(args))
    for var in THREAD_VARIABLES:
        os.environ[var] = n
    if args.command in ("sweep", "eval"):  # its model is counted once the config is read (sweep.plan rule 3)
        check_address_space(SWEEP_ADDRESS_SPACE, f"a `forgetbench {args.command}` process, before its model,")
    else:
        check_address_space(RUNTIME_ADDRESS_SPACE, f"`forgetbench {args.command}` (torch and transformers, before "
                                                   "any model)")


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


def override_steps(command: str, steps: int | None, train) -> None:
    """``COMMAND --steps N``: ``train.steps`` becomes N (a positive number, else the one-line error); None leaves the
    config's. The training commands' one override (train-mt, distill, pretrain-encoder)."""
    from forgetbench.errors import ForgetbenchError

    if steps is None:
        return
    if steps < 1:
        raise ForgetbenchError(f"{command} --steps {steps}: must be a positive number of steps")
    train.steps = steps


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


def add_hardware_flags(p) -> None:
    """The flags that override a config's ``hardware`` block (``models.hardware``); without one, the block's value."""
    g = p.add_argument_group("hardware (override the config's hardware block)")
    g.add_argument("--device", help="auto, cpu, cuda or cuda:N (default: the config's, else cpu)")
    g.add_argument("--dtype", help="float32, bfloat16 or float16 (default: the config's, else float32)")
    g.add_argument("--device-map", help="auto, balanced, sequential, or a plan file from plan-devices --out")
    g.add_argument("--max-memory", type=memory_map, help="per device, e.g. 0=20GiB,1=20GiB,cpu=60GiB")
    g.add_argument("--offload-folder", help="folder for the weights a device map puts on disk")


def memory_map(v: str) -> dict:
    out = {}
    for part in filter(None, v.split(",")):
        dev, sep, size = part.partition("=")
        if not sep or not dev.strip() or not size.strip():
            raise argparse.ArgumentTypeError(f"{part!r}: use DEVICE=SIZE pairs, e.g. 0=20GiB,cpu=60GiB")
        out[dev.strip()] = size.strip()
    if not out:
        raise argparse.ArgumentTypeError("give DEVICE=SIZE pairs, e.g. 0=20GiB,cpu=60GiB")
    return out


def hardware_flags(args) -> dict:
    """The hardware flags given on the command line (``models.hardware.with_overrides`` keys)."""
    return {k: getattr(args, k) for k in ("device", "dtype", "device_map", "max_memory", "offload_folder")
            if getattr(args, k, None) is not None}


def probe_line(r: dict) -> str:
    """The one line ``train-mt --probe`` and ``pretrain-encoder --probe`` print (``train.probe.figures`` and the run's
    setting)."""
    return (f"{r['parameters']:,} parameters on {r['arithmetic']['device']}, {r['arithmetic']['autocast']}, "
            f"{r['threads']} thread(s), {r['environment']['cpu']['model']}: {r['steps_timed']} steps timed, "
            f"{r['seconds_per_step']:.3f} s/step, {r['tokens_per_s']:,.0f} tokens/s, {r['steps_per_hour']:,.0f} "
            f"steps/hour; an epoch is {r['tokens_per_epoch']:,} tokens = {r['hours_per_epoch']:.2f} h; "
            f"{r['budget_hours']:g} h buy {r['epochs_in_budget']:.2f} epochs")
