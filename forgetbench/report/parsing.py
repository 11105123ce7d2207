"""The parser compression report: the summary of ``parsing.compress_eval.run`` as JSON, CSV, Markdown
and HTML (model text escaped)."""

from __future__ import annotations

import csv
import html
import io
import json
from pathlib import Path

from forgetbench.io import atomic_write_json, atomic_write_text


def _ci(ci, nd=2) -> str:
    return "" if not ci or ci[0] is None else f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def _num(x, fmt: str = ".2f") -> str:
    """A number, or – where there is none (a relative change from a base LAS of 0)."""
    return "–" if x is None else format(x, fmt)


def _p(p) -> str:
    return "–" if p is None else f"{p:.3f}"


def _treebank(tb: dict) -> str:
    """The test file a row was scored on (its stem, e.g. ``ta_ttb-ud-test``); the model folder where none is kept."""
    return Path(tb["test"]).stem if tb.get("test") else Path(tb["model"]).name


def write_parse_report(S: dict, out: Path) -> None:
    """summary.json, parse_compression.csv, parse_relation_classes.csv, report.md and report.html of ``forgetbench
    parse compress`` (+ parse_contrasts.csv and a "which forgets more" table when models share a test file)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "summary.json", S)
    head = ["treebank", "model", "tags", "variant", "LAS", "UAS", "CLAS", "rel. LAS % [95 % CI]", "p", "sentences losing LAS % [95 % CI]",
            "nominal size", "real artefact (vs fp32)", "sent/s"]
    rows = []
    for tb in S["treebanks"]:
        name, model = _treebank(tb), Path(tb["model"]).name
        b = tb["base"]
        tags = tb.get("tags", "gold")
        rows.append([name, model, tags, "base", f"{b['las']:.2f}", f"{b['uas']:.2f}", f"{b['clas']:.2f}", "–", "–", "–", "1.00",
                     "1.00", f"{b['sent_per_s']:.1f}"])
        for v, d in tb["variants"].items():
            sz = d.get("sizes", {})
            real = min((sz[k], k[:-6]) for k in ("int8_ratio", "sparse_ratio") if k in sz) if sz else None
            rows.append([name, model, tags, v, f"{d['las']:.2f}", f"{d['uas']:.2f}", f"{d['clas']:.2f}",
                         f"{_num(d['rel_las'])} {_ci(d.get('rel_las_ci'))}", _p(d.get("las_p")),
                         f"{d['losers_pct']:.1f} {_ci(d.get('losers_pct_ci'), 1)}", f"{sz.get('nominal_ratio', float('nan')):.2f}",
                         f"{real[0]:.3f} ({real[1]})" if real else "–", f"{d['sent_per_s']:.1f}"])
    buf = io.StringIO()
    csv.writer(buf).writerows([head, *rows])
    atomic_write_text(out / "parse_compression.csv", buf.getvalue())
    c_head = ["test", "reference", "model", "recipe", "LAS change (reference)", "LAS change (model)",
              "model − reference, points [95 % CI]"]
    c_rows = [[Path(c["test"]).name, Path(c["reference"]).name, Path(c["model"]).name, c["recipe"],
               f"{c['las_change']['reference']:+.2f}", f"{c['las_change']['other']:+.2f}",
               f"{c['delta']:+.2f} {_ci(c['delta_ci'])}"] for c in S.get("contrasts", [])]
    if c_rows:
        buf = io.StringIO()
        csv.writer(buf).writerows([c_head, *c_rows])
        atomic_write_text(out / "parse_contrasts.csv", buf.getvalue())
    r_head = ["treebank", "model", "variant", "relation class", "words", "LAS base", "LAS", "change, points [95 % CI]"]
    r_rows = [[_treebank(tb), Path(tb["model"]).name, v, k, str(x["words"]), f"{x['las_base']:.2f}", f"{x['las']:.2f}",
               f"{x['delta']:+.2f} {_ci(x['delta_ci'])}"]
              for tb in S["treebanks"] for v, d in tb["variants"].items() for k, x in d.get("relation_classes", {}).items()]
    if r_rows:
        buf = io.StringIO()
        csv.writer(buf).writerows([r_head, *r_rows])
        atomic_write_text(out / "parse_relation_classes.csv", buf.getvalue())
    md = ["# Parser compression report", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    if c_rows:
        md += ["", "## Which forgets more (same test sentences, same resamples; negative: the model loses more)", "",
               "| " + " | ".join(c_head) + " |", "|" + "---|" * len(c_head)]
        md += ["| " + " | ".join(r) + " |" for r in c_rows]
    if r_rows:
        md += ["", "## LAS per relation class (UD's groups, by the gold relation)", "",
               "| " + " | ".join(r_head) + " |", "|" + "---|" * len(r_head)]
        md += ["| " + " | ".join(r) + " |" for r in r_rows]
    atomic_write_text(out / "report.md", "\n".join(md) + "\n")
    e = html.escape

    def _table(h, rs):
        return ("<table><tr>" + "".join(f"<th>{e(x)}</th>" for x in h) + "</tr>"
                + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rs) + "</table>")

    table = _table(head, rows) + (f"<h2>Which forgets more</h2>{_table(c_head, c_rows)}" if c_rows else "") + (
        f"<h2>LAS per relation class</h2>{_table(r_head, r_rows)}" if r_rows else "")
    worst = "".join(f"<h3>{e(_treebank(tb))}, {e(Path(tb['model']).name)} — {e(v)}: most-losing sentences</h3><ul>"
                    + "".join(f"<li>{e(w['sentence'])} (LAS {w['las_base']:.0f} → {w['las']:.0f})</li>" for w in d["worst"])
                    + "</ul>" for tb in S["treebanks"] for v, d in tb["variants"].items())
    atomic_write_text(out / "report.html", f"<!doctype html><meta charset='utf-8'><title>parser compression</title>"
                                           f"<h1>Parser compression report</h1>{table}{worst}"
                                           f"<pre>{e(json.dumps({k: S[k] for k in ('recipes', 'threads', 'environment', 'bootstrap') if k in S}))}</pre>")
