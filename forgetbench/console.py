"""What a long command shows while it works: the one place that decides.

    con = Console("sweep", quiet=args.quiet)
    stage = con.stage("units of work", total=46, unit="units", count_unit="sentences")
    stage.update(done=12, count=700)      # absolute: units done, sentences so far (all processes)
    stage.close()
    con.line("report: runs/demo/report/report.html")   # the result path: printed even when quiet

Rules:

1. On a terminal (the stream is a TTY): a live bar per stage (tqdm): done / total, the throughput of the
   stage's count (sentences/s, steps/s), elapsed and estimated time left.
2. Otherwise (a log file, a pipe): one line when a stage with a total starts, one each time a further tenth of
   it is done, and one when it ends, as ``[command] stage: done/total unit (p %), count, rate, elapsed, left``;
   the rate and the time left count only this run's work: the first ``update`` gives what a resumed run found
   done;
   a stage without a total prints one line when it ends, with its time (on a terminal too). Log files stay
   readable.
3. ``quiet``: no stage output at all; errors and the result path (``line(..., result=True)``) only.
4. ``quiet_libraries`` silences what libraries print on their own — transformers' warnings, load reports and
   "Loading weights" bars, and Python warnings (``FutureWarning``, ``DeprecationWarning``, …) — so that our own
   line is the only one. ``--debug`` keeps them, and so does a warnings option the user gave (``-W``,
   ``PYTHONWARNINGS``: the warnings module's own rule); the test suite runs the main job with library
   deprecations as errors, so no deprecated call hides behind the filter. Every process that loads a model
   calls it (the CLI and each spawned sweep worker).
"""

from __future__ import annotations

import sys
import time


def quiet_libraries(debug: bool = False) -> None:
    import sys
    import warnings

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not debug:
        hf_logging.set_verbosity_error()
        if not sys.warnoptions:  # the warnings module's own idiom: -W / PYTHONWARNINGS given by the user win
            warnings.simplefilter("ignore")


def clock(seconds: float) -> str:
    """``1:05`` (m:ss) or ``1:02:05`` (h:mm:ss)."""
    s = int(round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


class Stage:
    """One stage of a command: ``update`` with absolute numbers, ``close`` once (also by ``with``)."""

    def __init__(self, console: Console, name: str, total: int | None, unit: str, count_unit: str | None):
        self.console, self.name, self.total, self.unit, self.count_unit = console, name, total, unit, count_unit
        self.done, self.count, self.t0, self.closed = 0, 0, time.perf_counter(), False
        self.start_done: int | None = None
        self.start_count = 0
        self.next_tenth = 1
        self.bar = None
        if console.quiet:
            return
        if console.tty and total is not None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=f"{console.command}: {name}", unit=f" {unit}" if unit else "it",
                            file=console.stream, dynamic_ncols=True, leave=True)
        elif total:
            self._line()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        if exc_type is None:
            self.close()
        else:  # a failing stage prints no "done": the error line is the command's last word
            self.closed = True
            if self.bar is not None:
                self.bar.close()

    def rate(self) -> str:
        elapsed = time.perf_counter() - self.t0
        if not self.count_unit or elapsed <= 0:
            return ""
        if not self.count:
            return f"0 {self.count_unit}"
        return f"{self.count:,} {self.count_unit}, {(self.count - self.start_count) / elapsed:.1f} {self.count_unit}/s"

    def describe(self) -> str:
        elapsed = time.perf_counter() - self.t0
        parts = [self.rate()]
        if self.total:
            parts.insert(0, f"{self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f} %)")
        parts.append(f"elapsed {clock(elapsed)}")
        run = self.done - (self.start_done or 0)  # units done by this run: a resumed run's earlier ones took no time
        if self.total and run > 0 and self.done < self.total:
            parts.append(f"left ~{clock(elapsed / run * (self.total - self.done))}")
        return ", ".join(p for p in parts if p)

    def _line(self) -> None:
        self.console.line(f"{self.name}: {self.describe()}")

    def update(self, done: int | None = None, count: int | None = None) -> None:
        if self.closed or self.console.quiet:
            return
        self.done = self.done if done is None else min(done, self.total or done)
        self.count = self.count if count is None else count
        if self.start_done is None and done is not None:
            self.start_done, self.start_count = self.done, self.count  # the first report: what a resumed run found
        if self.bar is not None:
            self.bar.update(self.done - self.bar.n)
            if self.count_unit:
                self.bar.set_postfix_str(self.rate(), refresh=False)
        elif self.total:
            tenth = int(10 * self.done / self.total)
            if tenth >= self.next_tenth and self.done < self.total:
                self.next_tenth = tenth + 1
                self._line()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.console.quiet:
            return
        if self.bar is not None:
            self.bar.update(self.done - self.bar.n)
            self.bar.close()
        else:
            self.console.line(f"{self.name}: done, {self.describe()}")


class Console:
    def __init__(self, command: str, quiet: bool = False, stream=None, tty: bool | None = None):
        self.command, self.quiet = command, quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty

    def stage(self, name: str, total: int | None = None, unit: str = "", count_unit: str | None = None) -> Stage:
        return Stage(self, name, total, unit, count_unit)

    def line(self, text: str, result: bool = False) -> None:
        """A line of the command's own: stage lines go to the stream unless quiet; the result (``result=True``)
        is printed to stdout always."""
        if result:
            print(text, flush=True)
        elif not self.quiet:
            print(f"[{self.command}] {text}", file=self.stream, flush=True)



def as_console(progress: bool | Console, command: str) -> Console:
    """A caller's console, or one for ``command`` that is quiet unless ``progress``."""
    return progress if isinstance(progress, Console) else Console(command, quiet=not progress)
