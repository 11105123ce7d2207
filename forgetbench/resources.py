"""A full disk or a full memory told as what it is: never "damaged" or "unexpected" when nothing is.

Rules:

1. ``exhausted(e)`` recognises resource exhaustion wherever it is raised: ``OSError`` with ``ENOSPC`` / ``EDQUOT``
   (and the same text inside a library's own error, e.g. safetensors' "No space left on device (os error 28)"),
   SQLite's "database or disk is full", ``MemoryError``, torch's CPU allocator ("can't allocate memory") and
   CUDA's out-of-memory errors. It answers ``"disk"``, ``"memory"`` or None, following ``__cause__`` /
   ``__context__`` (a library may wrap the original error).
2. ``explain(kind, command, where)`` is the one line for it (exit 2): what ran out, while which command worked on
   which path, how much is free there now (disk: the filesystem of the path; memory: what the system reports
   available), what to do, and that finished work is kept and the same command resumes (every write is atomic:
   nothing partial stands as complete).
3. ``free_disk(path)`` and ``available_memory()`` are the two measurements, each from the OS; the pre-checks
   (``check_disk``) compare a plan's bytes with them before any work.
4. ``error_line(e, command, where)`` is the one line and exit code of any failure, for the CLI and a sweep's
   spawned workers alike: a ``ForgetbenchError`` as it says (its code), exhaustion as rule 2 (2), anything else
   as "unexpected" with its first line (1).
5. An address-space limit (``ulimit -v``, RLIMIT_AS, as some clusters set one) is read at start and compared with
   what the command will map (``check_address_space``): the runtime before torch loads (``RUNTIME_ADDRESS_SPACE``),
   a sweep's model before anything is written (``sweep.plan``). Too small: one line with the limit, the need and
   the fix (exit 2). Memory exhausted under such a limit says the limit, not the system's available memory.
6. A wall deadline (a lent machine's slot): ``train-mt``, ``distill`` and ``pretrain-encoder --stop-after MINUTES``
   set ``$FORGETBENCH_STOP_AT`` (Unix time; a launcher may set it for every process of a run); their loops check
   ``past_stop_at()`` after each step, write a checkpoint and stop, "stopped by the wall deadline", and the same
   command resumes where they stopped. A deadline from the environment already past when a command starts is
   said in one warning line first (the run stops after its first step).
7. A stop signal: while a training loop runs (``stop_on_signals``), SIGTERM or SIGINT (Ctrl-C) asks it to stop as
   the wall deadline does — the step finishes, a checkpoint is written, "stopped by SIGTERM" — instead of losing
   the steps since the last periodic checkpoint; a second signal ends the process at once. A repeat within
   ``SIGNAL_REPEAT_S`` of the first is the same request, not a second: a launcher (``accelerate launch``,
   ``torchrun``) relays the signal it receives to its workers, and Ctrl-C reaches the whole process group, so a
   worker is told twice in the same instant (it used to die without its checkpoint). The launcher waits 30 s for
   its workers before it kills them: a stop that lands in a dev evaluation longer than that loses the steps since
   the last checkpoint; a deadline (rule 6) never does.
"""

from __future__ import annotations

import errno
import resource
import shutil
from contextlib import contextmanager
from pathlib import Path

from forgetbench.errors import ForgetbenchError

STOP_AT_ENV = "FORGETBENCH_STOP_AT"
DISK_TEXT = ("no space left on device", "disk quota exceeded", "database or disk is full", "os error 28")
MEMORY_TEXT = ("can't allocate memory", "cuda out of memory", "out of memory", "cannot allocate memory", "bad_alloc")


def exhausted(e: BaseException | None) -> str | None:
    """Rule 1: "disk", "memory" or None."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return "disk"
        if isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError":
            return "memory"
        text = str(e).lower()
        if any(t in text for t in DISK_TEXT):
            return "disk"
        if isinstance(e, (RuntimeError, OSError)) and any(t in text for t in MEMORY_TEXT):
            return "memory"
        e, seen = e.__cause__ or e.__context__, seen + 1
    return None


def free_disk(path: str | Path) -> int | None:
    """Free bytes on the filesystem holding ``path`` (its nearest existing ancestor); None if unknown."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (Linux); None elsewhere."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


# What the runtime maps before any model: torch, transformers' M2M-100 and the tokenizers imported, their thread
# pools sized (one thread). Measured (VmPeak) 754 MiB on the AMD EPYC host, torch 2.13.0, transformers 5.x.
RUNTIME_ADDRESS_SPACE = 800 * 2**20
# A CPU sweep process's mappings beside its model: the runtime, sacrebleu, the store, the compressions' and the
# passes' working sets. Measured on the AMD EPYC host: the demo sweep of the shipped teacher (8.4 M parameters,
# 0.06 GiB as ``sweep.plan`` counts them) fails under ulimit -v 1400000 and runs under 1500000.
SWEEP_ADDRESS_SPACE = int(1.30 * 2**30)


def address_space_limit() -> int | None:
    """The soft RLIMIT_AS of this process in bytes (``ulimit -v``); None when unlimited or unknown."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def check_address_space(need: int, what: str) -> None:
    """Rule 5: refuse before any work when the address-space limit is below ``need`` bytes (``what`` needs them)."""
    limit = address_space_limit()
    if limit is not None and need > limit:
        kib = -(-need // 2**20) * 1024  # rounded up to a MiB, as ulimit -v counts (KiB)
        raise ForgetbenchError(f"the address-space limit (ulimit -v {limit // 1024}) is {size(limit)} per process and "
                               f"{what} needs about {size(need)}; raise it (ulimit -v {kib} or more) or lift it "
                               "(ulimit -v unlimited)")


def size(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, step in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= step:
            return f"{n / step:.1f} {unit}"
    return f"{n} B"


def explain(kind: str, command: str, where: str | Path | None) -> str:
    """Rule 2's line."""
    kept = "finished work is kept: rerun the same command to resume"
    if kind == "disk":
        at = f" under {where}" if where else ""
        return (f"the disk is full: `{command}` could not write{at} (free on that filesystem now: "
                f"{size(free_disk(where or '.'))}); free space there or choose an output on another disk; {kept}")
    limit = address_space_limit()
    if limit is not None:
        return (f"out of memory while `{command}` ran under the address-space limit (ulimit -v {limit // 1024}) of "
                f"{size(limit)} per process; raise or lift it (ulimit -v unlimited); {kept}")
    return (f"out of memory while `{command}` ran (available now: {size(available_memory())}); use fewer processes "
            "(processes: 1), a smaller generation batch_size, compress-stream for compression, or a device map with "
            f"disk offload (hardware.device_map, offload_folder); {kept}")


def check_disk(need: int, where: str | Path, what: str) -> None:
    """Refuse before any work when ``need`` bytes cannot fit on ``where``'s filesystem (rule 3)."""
    free = free_disk(where)
    if free is not None and need > free:
        raise ForgetbenchError(f"{where}: {what} needs about {size(need)} and its filesystem has {size(free)} free; "
                               "free space or choose an output on another disk")


def error_line(e: BaseException, command: str, where: str | Path | None) -> tuple[str, int]:
    """Rule 4: (the text after ``forgetbench: error:``, the exit code)."""
    if isinstance(e, ForgetbenchError):
        return " ".join(str(e).split()), e.exit_code
    kind = exhausted(e)
    if kind is not None:
        return explain(kind, command, where), 2
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return f"unexpected {type(e).__name__}: {first} (rerun with --debug for the traceback)", 1


def set_stop_after(minutes: float | None) -> None:
    """Rule 6: this process (and those it starts) stop their training ``minutes`` of wall time from now."""
    import os
    import time

    if minutes is not None:
        if not minutes >= 0:
            raise ForgetbenchError(f"--stop-after {minutes}: give minutes of wall time, 0 or more")
        os.environ[STOP_AT_ENV] = repr(time.time() + 60 * minutes)
    elif os.environ.get(STOP_AT_ENV) and past_stop_at():  # a deadline from the environment, already gone
        import sys

        late = time.time() - float(os.environ[STOP_AT_ENV])
        print(f"forgetbench: warning: ${STOP_AT_ENV} is {late / 3600:.1f} h in the past ("
              f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(float(os.environ[STOP_AT_ENV])))} UTC): the run stops "
              "after its first step; give a future Unix time, e.g. $(date -d 'tomorrow 00:45' +%s)", file=sys.stderr)


_SIGNALLED: list[str] = []  # the stop signal received while a training loop listens (rule 7)
_SIGNALLED_AT: list[float] = []  # when (time.monotonic)
SIGNAL_REPEAT_S = 5.0  # a repeat this soon after the first signal is the same stop request (rule 7)


@contextmanager
def stop_on_signals():
    """Rule 7 for the loop inside: SIGTERM and SIGINT set the stop that ``past_stop_at`` reads; a second one ends
    the process, unless it comes within ``SIGNAL_REPEAT_S`` of the first (the same request relayed by a launcher
    or sent to the process group). The previous handlers come back after. Only the main thread can take signals:
    elsewhere nothing changes."""
    import os
    import signal
    import threading
    import time

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        now = time.monotonic()
        if _SIGNALLED:
            if now - _SIGNALLED_AT[0] < SIGNAL_REPEAT_S:  # the same request, relayed: already stopping
                return
            signal.signal(signum, signal.SIG_DFL)  # a second: at once, as without the handler
            os.kill(os.getpid(), signum)
            return
        _SIGNALLED.append(signal.Signals(signum).name)
        _SIGNALLED_AT.append(now)

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _SIGNALLED.clear()
        _SIGNALLED_AT.clear()


def stop_reason() -> str:
    """What made ``past_stop_at`` true, for a run's ``stopped_by``."""
    if _SIGNALLED:
        return f"{_SIGNALLED[0]} (a checkpoint written; the same command resumes)"
    return "the wall deadline (--stop-after)"


def past_stop_at() -> bool:
    """Rules 6 and 7: whether the wall deadline in ``$FORGETBENCH_STOP_AT`` has passed (False without one) or a
    stop signal came."""
    import os
    import time

    if _SIGNALLED:
        return True
    v = os.environ.get(STOP_AT_ENV)
    if not v:
        return False
    try:
        return time.time() >= float(v)
    except ValueError:
        raise ForgetbenchError(f"${STOP_AT_ENV}={v!r}: give a Unix time in seconds") from None
