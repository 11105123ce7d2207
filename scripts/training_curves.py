"""Training curves of one or more runs side by side: the training loss and every held-out field a run logs
(``dev_*``: the encoders' held-out MLM and USL losses, the teacher's dev chrF per direction) against the step.

    python scripts/training_curves.py RUN [RUN ...] --out curves.png [--names A B ...] [--groups] [--directions]

Reads each ``RUN/train_log.jsonl`` (``train.loop``). A run that logs its dev chrF per direction (``dev_chrf``:
train-mt with ``train.dev_directions``, distill) without its mean gets ``dev_chrF_mean``, the mean over its
directions (the score its early stopping reads; a distill run logs it as ``dev_score``); with ``--directions`` also one field per direction, ``dev_chrF_<src>-<tgt>``; with
``--groups`` a distill run's one field per pair group, ``dev_chrF_<group>``: the mean over the group's directions,
each direction's group from ``RUN/quotas.json`` (the run's own tiers, METHOD §3). Writes the figure (one panel per field, one line per run, the
early-stopping best step marked where the run has one) and beside it ``curves.md``: per run, the last training loss,
each held-out field at its best measurement and the step of it, and what ended the run (its exported record's
``stopped_by`` where that is of its last logged step). A distill run's ``loss`` adds the KD term after phase 1, so
its ``ce`` (the references' cross-entropy, logged in both phases) is drawn beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from forgetbench.io import read_run_log


def read(run: Path, groups: bool = False, directions: bool = False) -> tuple[list[dict], dict]:
    f = run / "train_log.jsonl"
    if not f.is_file():
        sys.exit(f"{run}: no train_log.jsonl; give a training run folder (train-mt, pretrain-encoder, distill)")
    rows = read_run_log(f)  # each step once, in a log from before resumes trimmed it
    rows = [r | per_direction(r, directions) if isinstance(r.get("dev_chrf"), dict) and r["dev_chrf"] else r for r in rows]
    if groups and any(isinstance(r.get("dev_chrf"), dict) for r in rows):
        group = direction_groups(run)
        rows = [r | group_means(r["dev_chrf"], group) if isinstance(r.get("dev_chrf"), dict) else r for r in rows]
    state = run / "checkpoint" / "state.json"
    return rows, (json.loads(state.read_text()) if state.is_file() else {})


def per_direction(row: dict, directions: bool) -> dict[str, float]:
    """``dev_chrF_mean`` over the row's measured directions where it has no ``dev_score``, and with ``directions``
    each as ``dev_chrF_<direction>``."""
    chrf = row["dev_chrf"]
    out = {} if isinstance(row.get("dev_score"), int | float) else {"dev_chrF_mean": round(sum(chrf.values()) / len(chrf), 4)}
    return out | ({f"dev_chrF_{d}": v for d, v in chrf.items()} if directions else {})


def direction_groups(run: Path) -> dict[str, str]:
    """Each direction's pair group, from RUN/quotas.json (a distill run's own tiers)."""
    q = run / "quotas.json"
    if not q.is_file():
        sys.exit(f"{run}: --groups needs the run's quotas.json (a distill run folder)")
    return {d: v["group"] for d, v in json.loads(q.read_text())["directions"].items()}


def group_means(per_direction: dict[str, float], group: dict[str, str]) -> dict[str, float]:
    """``dev_chrF_<group>``: the mean dev chrF of each pair group's directions."""
    by: dict[str, list[float]] = {}
    for d, v in per_direction.items():
        by.setdefault(group[d], []).append(v)
    return {f"dev_chrF_{g}": round(sum(v) / len(v), 4) for g, v in by.items()}


def fields(rows: list[dict]) -> list[str]:
    keys = sorted({k for r in rows for k, v in r.items() if k.startswith("dev_") and isinstance(v, int | float)})
    ce = ["ce"] if any(isinstance(r.get("ce"), int | float) for r in rows) else []
    return ["loss", *ce, *keys]


def best(rows: list[dict], key: str) -> tuple[int, float] | None:
    pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
    if not pts:
        return None
    if key == "loss":  # the training loss's last value (a distill run's changes meaning at phase 2)
        return pts[-1]
    lower = key == "ce" or key.endswith("_loss")
    return (min if lower else max)(pts, key=lambda p: p[1])


def ended(run: Path, state: dict, last: int) -> str:
    """What ended the run: its exported record's ``stopped_by`` where that record is of the last logged step, the
    early stop in its state, else "steps or budget" (or, with an older record, that the run goes on)."""
    es = state.get("early_stop") or {}
    if es.get("stopped"):
        return es["stopped"]
    rec = run / "model" / "training.json"
    if rec.is_file():
        r = json.loads(rec.read_text())
        if r.get("steps", 0) >= last:
            return str(r.get("stopped_by", "steps or budget"))
        return f"not finished (exported at step {r.get('steps', 0):,}: {r.get('stopped_by', '?')})"
    return "steps or budget"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="the figure (.png); curves.md is written beside it")
    ap.add_argument("--names", nargs="+", help="a label per run (default: the folder names)")
    ap.add_argument("--groups", action="store_true", help="distill runs: dev chrF per pair group as well")
    ap.add_argument("--directions", action="store_true", help="dev chrF per direction as well")
    a = ap.parse_args(argv)
    names = a.names or [r.name for r in a.runs]
    if len(names) != len(a.runs):
        sys.exit(f"--names: {len(names)} names for {len(a.runs)} runs")
    logs = {n: read(r, a.groups, a.directions) for n, r in zip(names, a.runs, strict=True)}
    keys = sorted({k for rows, _ in logs.values() for k in fields(rows)}, key=lambda k: (k != "loss", k))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(keys))
    rows_n = -(-len(keys) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.5 * cols, 3.4 * rows_n), squeeze=False)
    for ax in axes.flat[len(keys):]:
        ax.set_visible(False)
    for ax, key in zip(axes.flat, keys, strict=False):  # the grid may have more panels
        for name, (rows, state) in logs.items():
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
            if pts:
                line, = ax.plot(*zip(*pts, strict=True), label=name, linewidth=1.2,
                                 marker=None if key in ("loss", "ce") else "o", markersize=2.5)  # measurements marked
                b = (state.get("early_stop") or {}).get("best_step")
                if b and key != "loss":
                    ax.axvline(b, color=line.get_color(), linestyle=":", linewidth=0.8)
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=110)
    lines = ["| run | steps | " + " | ".join(f"{k} ({'last' if k == 'loss' else 'best'}, step)" for k in keys)
             + " | ended by |",
             "|---|---:|" + "---|" * len(keys) + "---|"]
    for (name, (rows, state)), run in zip(logs.items(), a.runs, strict=True):
        cells = []
        for k in keys:
            b = best(rows, k)
            cells.append("–" if b is None else f"{b[1]:.4g} ({b[0]:,})")
        last = max((r["step"] for r in rows), default=0)
        lines.append(f"| {name} | {last:,} | " + " | ".join(cells) + f" | {ended(run, state, last)} |")
    (a.out.parent / "curves.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
