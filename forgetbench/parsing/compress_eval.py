"""Compress trained parsers with the MT recipes and report, per treebank, what was lost.

    forgetbench parse compress --models runs/parsers/en_lines runs/parsers/tr_imst ... \\
        --test data/ud/.../en_lines-ud-test.conllu ... --recipes prune-30 prune-45 ptq-int8 --out runs/parse-compress

For each treebank and recipe: LAS/UAS/CLAS before and after, relative LAS drop, the share of
sentences whose LAS fell (the parsing analogue of ΔchrF losers) and the most-losing sentences,
model size (nominal) and parsing speed (sentences/s, 1 thread). PTQ calibrates on the
treebank's dev set. Writes summary.json, report.md, report.html and parse_compression.csv.
"""

from __future__ import annotations

import copy
import csv
import html
import io
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from forgetbench.compress import prune, quantize
from forgetbench.compress.pipeline import write_artefacts
from forgetbench.compress.recipe import load_recipe
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json, atomic_write_text
from forgetbench.parsing.batching import batches, batchify
from forgetbench.parsing.conll import read_conllu
from forgetbench.parsing.metrics import score
from forgetbench.parsing.model import save_module_dir
from forgetbench.parsing.tagger import load_tagger, tag, with_tags
from forgetbench.parsing.train import load_parser, predict


def _sentence_las(gold, pred) -> list[float]:
    out = []
    for (gh, gd), (ph, pd) in zip(gold, pred, strict=True):
        ok = sum(a == c and b.split(":")[0] == d.split(":")[0] for a, b, c, d in zip(gh, gd, ph, pd, strict=True))
        out.append(100.0 * ok / len(gh))
    return out


def apply_to_parser(model, vocab, recipe, calib_sents):
    """The recipe's steps on a parser, in place (PTQ calibrated on ``calib_sents``); returns the QuantState or None."""
    qstate = None
    for step in recipe.steps:
        if step.kind == "prune":
            prune(model, step.config)
        else:
            data = [batchify(bs, vocab) for bs in batches(calib_sents, 3000, shuffle=False)]
            qstate = quantize(model, step.config,
                              calibrate=lambda m, data=data: [m(b["words"], b["chars"], b["tags"]) for b in data])
    return qstate


def variant_sizes(model, recipe, qstate) -> dict:
    """Real on-disk sizes of the compressed parser (dense fp32, int8, sparse), written to a scratch folder."""
    with tempfile.TemporaryDirectory() as d:
        save_module_dir(model, "forgetbench-biaffine", model.cfg.to_dict(), Path(d))
        return write_artefacts(model, recipe, qstate, Path(d))


def run(models: list[str], tests: list[str], devs: list[str], recipes: list[str], out_dir: str | Path,
        threads: int = 1, n_examples: int = 5) -> dict:
    if not len(models) == len(tests) == len(devs):
        raise ForgetbenchError("give one --test and one --dev file per --models folder, in the same order")
    torch.set_num_threads(threads)
    recs = [load_recipe(r) for r in recipes]
    summary = {"recipes": recipes, "treebanks": [], "threads": threads, "loadavg": os.getloadavg()[0]}
    for mdir, tfile, dfile in zip(models, tests, devs, strict=True):
        base, vocab = load_parser(mdir)
        tagger = load_tagger(mdir)  # predicted-tag parsers: the tagger stays uncompressed, tags computed once
        sents, dev = read_conllu(tfile), read_conllu(dfile)[:200]
        gold = [(s.heads, s.deprels) for s in sents]
        if tagger is not None:
            sents, dev = with_tags(sents, tag(tagger, vocab, sents)), with_tags(dev, tag(tagger, vocab, dev))
        t0 = time.perf_counter()
        pb = predict(base, vocab, sents)
        base_speed = len(sents) / (time.perf_counter() - t0)
        sb = score(gold, pb)
        las_b = _sentence_las(gold, pb)
        tb = {"model": str(mdir), "test": str(tfile), "sentences": len(sents), "tags": "gold" if tagger is None else "predicted",
              "base": sb.to_dict() | {"sent_per_s": base_speed},
              "variants": {}}
        for name, rec in zip(recipes, recs, strict=True):
            m = copy.deepcopy(base)
            sizes = variant_sizes(m, rec, apply_to_parser(m, vocab, rec, dev))
            t0 = time.perf_counter()
            pv = predict(m, vocab, sents)
            speed = len(sents) / (time.perf_counter() - t0)
            sv = score(gold, pv)
            las_v = _sentence_las(gold, pv)
            deltas = [b - a for a, b in zip(las_b, las_v, strict=True)]
            worst = sorted(range(len(sents)), key=lambda i: deltas[i])[:n_examples]
            tb["variants"][name] = sv.to_dict() | {
                "sent_per_s": speed, "rel_las": (sv.las - sb.las) / sb.las * 100, "sizes": sizes,
                "losers_pct": 100 * sum(d < 0 for d in deltas) / len(deltas),
                "winners_pct": 100 * sum(d > 0 for d in deltas) / len(deltas),
                "worst": [{"sentence": " ".join(sents[i].forms), "las_base": las_b[i], "las": las_v[i]} for i in worst]}
        summary["treebanks"].append(tb)
    write(summary, Path(out_dir))
    return summary


def write(S: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "summary.json", S)
    head = ["treebank", "tags", "variant", "LAS", "UAS", "CLAS", "rel. LAS %", "sentences losing LAS %", "nominal size",
            "real artefact (vs fp32)", "sent/s"]
    rows = []
    for tb in S["treebanks"]:
        name = Path(tb["model"]).name
        b = tb["base"]
        tags = tb.get("tags", "gold")
        rows.append([name, tags, "base", f"{b['las']:.2f}", f"{b['uas']:.2f}", f"{b['clas']:.2f}", "–", "–", "1.00", "1.00",
                     f"{b['sent_per_s']:.1f}"])
        for v, d in tb["variants"].items():
            sz = d.get("sizes", {})
            real = min((sz[k], k[:-6]) for k in ("int8_ratio", "sparse_ratio") if k in sz) if sz else None
            rows.append([name, tags, v, f"{d['las']:.2f}", f"{d['uas']:.2f}", f"{d['clas']:.2f}", f"{d['rel_las']:.2f}",
                         f"{d['losers_pct']:.1f}", f"{sz.get('nominal_ratio', float('nan')):.2f}",
                         f"{real[0]:.3f} ({real[1]})" if real else "–", f"{d['sent_per_s']:.1f}"])
    buf = io.StringIO()
    csv.writer(buf).writerows([head, *rows])
    atomic_write_text(out / "parse_compression.csv", buf.getvalue())
    md = ["# Parser compression report", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    atomic_write_text(out / "report.md", "\n".join(md) + "\n")
    e = html.escape
    table = ("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>")
    worst = "".join(f"<h3>{e(Path(tb['model']).name)} — {e(v)}: most-losing sentences</h3><ul>"
                    + "".join(f"<li>{e(w['sentence'])} (LAS {w['las_base']:.0f} → {w['las']:.0f})</li>" for w in d["worst"])
                    + "</ul>" for tb in S["treebanks"] for v, d in tb["variants"].items())
    atomic_write_text(out / "report.html", f"<!doctype html><meta charset='utf-8'><title>parser compression</title>"
                                           f"<h1>Parser compression report</h1>{table}{worst}"
                                           f"<pre>{e(json.dumps({k: S[k] for k in ('recipes', 'threads', 'loadavg')}))}</pre>")
