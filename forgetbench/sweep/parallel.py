"""Several worker processes for one sweep without a launcher (``processes: N`` or ``--processes N``).

Rules:

1. Rank 0 is the calling process. It prepares the run (``run.prepare_run``) before ranks 1 … N−1 are *spawned*
   (fresh interpreters: no forked torch thread pools), so it starts on the first unit of work while they
   import; they run ``run_sweep`` on the same config file and run folder, each with ``threads`` threads.
2. They meet at a ``multiprocessing.Barrier`` once no unit is left. A worker that exits with an error aborts
   the barrier (a watchdog thread polls the workers every second), so no process waits forever — neither at
   the barrier nor polling for a unit (``aborted``); rank 0 then stops the others and reports one line, the
   command's last: the worker killed by signal N (SIGKILL: most often the out-of-memory killer), or exited
   with code N (its own error line printed above). The resource tracker is started quiet about what a killed
   worker leaves (``_start_resource_tracker``), so no library line follows ours.
   Everything stored so far stays: rerunning the command resumes.
3. Under a launcher (``accelerate launch``, ``torchrun``, ``srun``: ``RANK`` and ``WORLD_SIZE`` set) the
   launcher's processes are used instead, on one machine or several (``sweep.distributed``: claims on a
   key-value store, one store shard per rank; ``run_in_processes`` decides: a launcher first, then
   ``processes``). With ``device: cuda`` each process takes its share of its machine's GPUs, in either mode.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.summary import Summary


def _worker(config: str, run_dir: str, rank: int, world: int, barrier, hardware: dict,
            sentences: int | None = None) -> None:
    from forgetbench.console import quiet_libraries
    from forgetbench.sweep.config import load_sweep
    from forgetbench.sweep.run import run_sweep

    quiet_libraries()  # a fresh interpreter: rank 0's stage lines are the run's only progress output
    try:
        run_sweep(load_sweep(config, hardware, sentences), run_dir, progress=False, rank=rank, world=world, barrier=barrier.wait,
                  prepared=True, aborted=lambda: barrier.broken)
    except Exception as e:  # noqa: BLE001 - a worker's failure is one line, as the command's own (cli.main)
        import sys

        from forgetbench.resources import error_line

        line, code = error_line(e, f"sweep (worker {rank})", run_dir)
        print(f"forgetbench: error: {line}", file=sys.stderr, flush=True)
        sys.exit(code)


def _failure(name: str, exitcode: int) -> str:
    """What happened to a worker, from its exit code: killed by a signal (nothing printed; SIGKILL is most often
    the system's out-of-memory killer) or exited with a code (its error line printed above)."""
    if exitcode < 0:
        try:
            sig = signal.Signals(-exitcode).name
        except ValueError:
            sig = "an unknown signal"
        hint = " (often the system's out-of-memory killer: try processes: 1 or a smaller batch_size)" \
            if exitcode == -signal.SIGKILL else ""
        return f"sweep worker {name} was killed by signal {-exitcode} ({sig}){hint}"
    return f"sweep worker {name} exited with code {exitcode} (its error is printed above)"


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker quiet about semaphores a killed worker could not release: it still
    removes them, but its warning would print after (and so below) our one line."""
    from multiprocessing import resource_tracker

    before = os.environ.get("PYTHONWARNINGS")
    quiet = "ignore::UserWarning:multiprocessing.resource_tracker"
    os.environ["PYTHONWARNINGS"] = f"{before},{quiet}" if before else quiet
    try:
        resource_tracker.ensure_running()
    finally:
        if before is None:
            del os.environ["PYTHONWARNINGS"]
        else:
            os.environ["PYTHONWARNINGS"] = before


def run_in_processes(cfg, run_dir: str | Path, processes: int, progress=True) -> tuple[Summary | None, int, int]:
    """Run the sweep in the process mode the environment and ``processes`` ask for: under a launcher
    (``accelerate launch --num_processes N`` sets ``WORLD_SIZE``) as one of its ranks; else ``processes`` spawned
    workers (``run_parallel``), or this process alone. Returns (summary — None off rank 0 —, rank, world)."""
    from forgetbench.sweep.run import run_sweep

    if processes < 1:
        raise ForgetbenchError(f"--processes {processes}: must be a positive number of processes")
    from forgetbench.sweep import distributed

    if distributed.launched():
        rank, world = distributed.rank_world()
        return run_sweep(cfg, run_dir, progress, rank=rank, world=world, machines=True), rank, world
    if processes > 1:
        return run_parallel(cfg, run_dir, processes, progress), 0, processes
    return run_sweep(cfg, run_dir, progress), 0, 1


def run_parallel(cfg, run_dir: str | Path, world: int, progress=True) -> Summary | None:
    """``run_sweep`` on ``world`` processes; returns rank 0's summary. ``progress``: a bool or rank 0's
    ``console.Console``."""
    from forgetbench.sweep.run import prepare_run, run_sweep
    from forgetbench.sweep.schedule import SweepAborted

    prepare_run(cfg, Path(run_dir))
    _start_resource_tracker()
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(world)
    procs = [ctx.Process(target=_worker, args=(str(cfg.source), str(run_dir), r, world, barrier, cfg.hardware_flags,
                                                   cfg.quick_look),
                         name=f"forgetbench-sweep-{r}") for r in range(1, world)]
    for p in procs:
        p.start()
    stop = threading.Event()

    def watch():
        while not stop.wait(1.0):
            if any(p.exitcode not in (None, 0) for p in procs):
                barrier.abort()
                return

    threading.Thread(target=watch, daemon=True).start()
    try:
        summary = run_sweep(cfg, run_dir, progress, rank=0, world=world, barrier=barrier.wait, prepared=True,
                            aborted=lambda: barrier.broken)
    except (threading.BrokenBarrierError, SweepAborted):
        for p in procs:
            p.join(timeout=5)
        bad = [(p.name, p.exitcode) for p in procs if p.exitcode not in (None, 0)]
        for p in procs:
            if p.is_alive():
                p.terminate()
        raise ForgetbenchError(f"{_failure(*bad[0]) if bad else 'a sweep worker failed'}; finished work is kept: "
                               "rerun the same command to resume, or set processes: 1") from None
    except BaseException:
        barrier.abort()
        for p in procs:
            p.terminate()
        raise
    finally:
        stop.set()
    for p in procs:
        p.join()
    bad = [(p.name, p.exitcode) for p in procs if p.exitcode != 0]
    if bad:
        raise ForgetbenchError(f"{_failure(*bad[0])}; finished work is kept: rerun the same command to resume")
    return summary
