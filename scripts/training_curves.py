"""Training curves of one or more runs side by side: the training loss and every held-out field a run logs
(``dev_*``: the encoders' held-out MLM and USL losses, the teacher's dev chrF per direction) against the step.

    python scripts/training_curves.py RUN [RUN ...] --out curves.png [--names A B ...]

Reads each ``RUN/train_log.jsonl`` (``train.loop``); writes the figure (one panel per field, one line per run, the
early-stopping best step marked where the run has one) and beside it ``curves.md``: per run, the last training loss,
each held-out field at its best measurement and the step of it, and what ended the run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def read(run: Path) -> tuple[list[dict], dict]:
    f = run / "train_log.jsonl"
    if not f.is_file():
        sys.exit(f"{run}: no train_log.jsonl; give a training run folder (train-mt, pretrain-encoder)")
    rows = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
    state = run / "checkpoint" / "state.json"
    return rows, (json.loads(state.read_text()) if state.is_file() else {})


def fields(rows: list[dict]) -> list[str]:
    keys = sorted({k for r in rows for k, v in r.items() if k.startswith("dev_") and isinstance(v, int | float)})
    return ["loss"] + keys


def best(rows: list[dict], key: str) -> tuple[int, float] | None:
    pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
    if not pts:
        return None
    lower = key == "loss" or key.endswith("_loss")
    return (min if lower else max)(pts, key=lambda p: p[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="the figure (.png); curves.md is written beside it")
    ap.add_argument("--names", nargs="+", help="a label per run (default: the folder names)")
    a = ap.parse_args(argv)
    names = a.names or [r.name for r in a.runs]
    if len(names) != len(a.runs):
        sys.exit(f"--names: {len(names)} names for {len(a.runs)} runs")
    logs = {n: read(r) for n, r in zip(names, a.runs, strict=True)}
    keys = sorted({k for rows, _ in logs.values() for k in fields(rows)}, key=lambda k: (k != "loss", k))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.4), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for name, (rows, state) in logs.items():
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
            if pts:
                line, = ax.plot(*zip(*pts, strict=True), label=name, linewidth=1.2)
                b = (state.get("early_stop") or {}).get("best_step")
                if b and key != "loss":
                    ax.axvline(b, color=line.get_color(), linestyle=":", linewidth=0.8)
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=110)
    lines = ["| run | steps | " + " | ".join(f"{k} (best, step)" for k in keys) + " | ended by |",
             "|---|---:|" + "---|" * len(keys) + "---|"]
    for name, (rows, state) in logs.items():
        cells = []
        for k in keys:
            b = best(rows, k)
            cells.append("–" if b is None else f"{b[1]:.4g} ({b[0]:,})")
        es = state.get("early_stop") or {}
        last = max((r["step"] for r in rows), default=0)
        lines.append(f"| {name} | {last:,} | " + " | ".join(cells) + f" | {es.get('stopped') or 'steps or budget'} |")
    (a.out.parent / "curves.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
