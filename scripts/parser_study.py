"""The graph-to-graph parser study: every architecture on each treebank's test set, per-iteration refinement,
the LayerNorm ablation and the refinement gain with its paired bootstrap interval.

    scripts/train_g2g_parsers.sh runs/g2g            # biaffine, SynTr, RNGTr (LN on/off) per treebank, G2GTr on Wolof
    python scripts/parser_study.py runs/g2g --out runs/g2g/study.json > runs/g2g/study.md

Rows per treebank (test set, predicted tags from the biaffine parser's tagger, CoNLL 2018 LAS):
biaffine, SynTr, biaffine+RNGTr with the refiner trained on 2-fold biaffine predictions ("k-fold"),
biaffine / SynTr / empty + the refiner trained from empty graphs ("empty": one network, three G⁰),
the latter without the relation LayerNorm (the ablation); then G2GTr where trained. Every comparison is
LAS(b) − LAS(a) on the same sentences with its paired bootstrap 95 % interval (``evaluate.las_gain``).
1 thread; speed = test sentences per second, parsing only (tags given).
"""

import argparse
import json
import sys
from pathlib import Path

import torch

from forgetbench.env import environment
from forgetbench.parsing.evaluate import las_gain, parse_file
from forgetbench.parsing.metrics import score
from forgetbench.parsing.parsers import interface as parsers

TREEBANKS = {"en_lines": "UD_English-LinES", "tr_imst": "UD_Turkish-IMST", "wo_wtb": "UD_Wolof-WTB"}


def systems(runs: Path, code: str) -> dict[str, tuple[Path, str | None]]:
    """name → (model folder, RNGTr initial override)."""
    d = {"biaffine": (runs / f"{code}-biaffine", None), "SynTr": (runs / f"{code}-syntr", None),
         "biaffine+RNGTr (k-fold)": (runs / f"{code}-rngtr-kfold", None),
         "biaffine+RNGTr (empty)": (runs / f"{code}-rngtr", None),
         "SynTr+RNGTr (empty)": (runs / f"{code}-rngtr", str(runs / f"{code}-syntr")),
         "empty+RNGTr (empty)": (runs / f"{code}-rngtr", "empty"),
         "biaffine+RNGTr (empty), no relation LN": (runs / f"{code}-rngtr-noln", None),
         "G2GTr": (runs / f"{code}-g2gtr", None)}
    return {k: v for k, v in d.items() if (v[0] / "config.json").is_file()}


CONTRASTS = [("biaffine", "biaffine+RNGTr (k-fold)"), ("biaffine", "biaffine+RNGTr (empty)"),
             ("biaffine+RNGTr (empty)", "biaffine+RNGTr (k-fold)"),
             ("SynTr", "SynTr+RNGTr (empty)"), ("SynTr", "empty+RNGTr (empty)"), ("biaffine", "SynTr"),
             ("biaffine+RNGTr (empty), no relation LN", "biaffine+RNGTr (empty)"), ("biaffine", "G2GTr")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--data", type=Path, default=Path("data/ud"))
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    study = {"environment": environment(), "treebanks": {}}
    md = []
    for code, folder in TREEBANKS.items():
        test = a.data / folder / f"{code}-ud-test.conllu"
        res, rows = {}, {}
        for name, (d, initial) in systems(a.runs, code).items():
            p = parsers.load(d, initial=initial)
            r = parse_file(p, test, record=True)
            info = json.loads((d / "training.json").read_text())
            s = score(r["gold"], r["preds"]).to_dict() | {"sent_per_s": len(r["gold"]) / r["seconds"],
                                                          "train_seconds": info.get("train_seconds"),
                                                          "epochs": info.get("epochs"), "best_epoch": info.get("best_epoch")}
            if r["per_iteration"] is not None:
                s["per_iteration_las"] = [score(r["gold"], q).las for q in r["per_iteration"]]
                s["iterations_run"] = {t: r["ran"].count(t) for t in sorted(set(r["ran"]))}
            res[name], rows[name] = r, s
        gains = {f"{b} − {a_}": las_gain(res[a_]["gold"], res[a_]["preds"], res[b]["preds"])
                 for a_, b in CONTRASTS if a_ in res and b in res}
        study["treebanks"][code] = {"test": str(test), "systems": rows, "gains": gains}
        md += [f"### {folder} (test, {len(next(iter(res.values()))['gold'])} sentences)", "",
               "| system | LAS | UAS | CLAS | LAS after iteration 1 / 2 / 3 | sentences stopping at 1 / 2 / 3 | sent/s | training |",
               "|---|---:|---:|---:|---|---|---:|---|"]
        for name, s in rows.items():
            per = " / ".join(f"{x:.2f}" for x in s["per_iteration_las"]) if "per_iteration_las" in s else "–"
            stop = " / ".join(str(s["iterations_run"].get(t, 0)) for t in (1, 2, 3)) if "iterations_run" in s else "–"
            md.append(f"| {name} | {s['las']:.2f} | {s['uas']:.2f} | {s['clas']:.2f} | {per} | {stop} | "
                      f"{s['sent_per_s']:.0f} | {s['train_seconds'] / 60:.1f} min, best epoch {s['best_epoch']} of {s['epochs']} |")
        md += ["", "| LAS difference | points [95 % CI] | p |", "|---|---:|---:|"]
        md += [f"| {k} | {g['delta']:+.2f} [{g['delta_ci'][0]:+.2f}, {g['delta_ci'][1]:+.2f}] | {g['p']:.3f} |"
               for k, g in gains.items()]
        md.append("")
    a.out.write_text(json.dumps(study, indent=2) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
