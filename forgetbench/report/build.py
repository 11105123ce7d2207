"""The report folder written whole from a run's typed summary (``eval.summary.Summary``): ``summary.json`` (its
``to_dict()``), ``report.md``, ``report.html`` and a CSV per table (``report.tables``, ``report.figures``,
``report.render``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from forgetbench.eval.summary import Summary
from forgetbench.io import atomic_write_json, atomic_write_text
from forgetbench.report.figures import figures
from forgetbench.report.render import html_report, markdown
from forgetbench.report.tables import csv_name, tables


def write_report(summary: Summary, out_dir: str | Path, started: float | None = None) -> Path:
    """Write the report folder as a whole: built in a temporary sibling and swapped in, so a killed write
    leaves the previous complete report (or none), never a half-updated one; a rerun rewrites it."""
    import time

    from forgetbench.io import atomic_directory

    t0 = time.perf_counter()
    table_map = tables(summary)
    figs = figures(summary)
    summary.run.setdefault("stages", {})["report"] = round(time.perf_counter() - t0, 1)
    if started is not None:  # the whole command, from its start to the report (its files are written next)
        summary.run["command_seconds"] = round(time.perf_counter() - started, 1)
    with atomic_directory(out_dir, replace=True) as out:
        atomic_write_json(out / "summary.json", summary.to_dict())
        atomic_write_text(out / "report.md", markdown(summary, table_map))
        atomic_write_text(out / "report.html", html_report(summary, table_map, figs))
        for name, (headers, rows) in table_map.items():
            buf = io.StringIO()
            w = csv.writer(buf)
            w.writerow(headers)
            w.writerows(rows)
            atomic_write_text(out / f"{csv_name(name)}.csv", buf.getvalue())
    return Path(out_dir) / "report.html"
