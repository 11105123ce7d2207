"""RESULTS.md's tables as data: each marked table is rendered from a committed result file under ``docs/results/``.

    python scripts/results.py render            # rewrite every marked table of RESULTS.md and the model cards
    python scripts/results.py check             # exit 1 where a marked table differs from its file's rendering
    python scripts/results.py mt-geneval RUN    # docs/results/mt-geneval.json from a sweep run with bias.mt_geneval
    python scripts/results.py distill-bias RUN  # docs/results/distill-bias.json from a distillation evaluation run
    python scripts/results.py sweep RUN NAME    # docs/results/NAME.json: a sweep's variant table (who pays, per variant)
    python scripts/results.py groups RUN NAME   # docs/results/NAME.json: a student's share of its teacher per pair group

A marked table sits between ``<!-- results: FILE TABLE -->`` and ``<!-- /results -->`` (FILE: a name under
``docs/results/`` without ``.json``). A result file holds the command that produced it, the commit, host, date, the
model's and data's hashes, and ``tables``: TABLE -> {"columns": [{"name", "digits"}], "rows": [[cell, …]]}; a cell
is text, a number (rounded to the column's digits) or [value, low, high] (a value and its 95 % interval).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RESULTS = REPO / "docs" / "RESULTS.md"


def documents() -> list[Path]:
    """The documents whose marked tables are rendered: RESULTS.md and every shipped model's card."""
    return [RESULTS, *sorted((REPO / "artifacts").glob("*/README.md"))]
FOLDER = REPO / "docs" / "results"
BLOCK = re.compile(r"(<!-- results: (\S+) (\S+) -->\n)(.*?)(<!-- /results -->)", re.S)


def cell(x, digits: int) -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, list):
        v, lo, hi = x
        return "–" if v is None else f"{v:.{digits}f}" + ("" if lo is None else f" [{lo:.{digits}f}, {hi:.{digits}f}]")
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    return f"{x:.{digits}f}"


def render_table(table: dict) -> str:
    cols = table["columns"]
    lines = ["| " + " | ".join(c["name"] for c in cols) + " |",
             "|" + "|".join("---" if c.get("align") == "left" else "---:" for c in cols) + "|"]
    by_row = table.get("digits_by_row", {})
    for row in table["rows"]:
        d = by_row.get(row[0]) if row and isinstance(row[0], str) else None
        lines.append("| " + " | ".join(cell(x, c.get("digits", 2) if d is None or i == 0 else d)
                                       for i, (x, c) in enumerate(zip(row, cols, strict=True))) + " |")
    return "\n".join(lines) + "\n"


def lookup(ref: dict, folder: Path = FOLDER):
    """One cell of another result file: {file, table, row (its first cell), column (its name)}."""
    f = folder / f"{ref['file']}.json"
    if not f.is_file():
        raise SystemExit(f"results: {f} not found (named by a headline)")
    table = json.loads(f.read_text(encoding="utf-8"))["tables"][ref["table"]]
    names = [c["name"] for c in table["columns"]]
    k = names.index(ref["column"])
    want = ref["row"] if isinstance(ref["row"], list) else [ref["row"]]
    row = next((r for r in table["rows"] if r[:len(want)] == want), None)
    if row is None:
        raise SystemExit(f"results: {f} table {ref['table']} has no row {ref['row']!r}")
    d = table.get("digits_by_row", {}).get(want[0], table["columns"][k].get("digits", 2))
    return cell(row[k], d)


def resolve(table: dict, folder: Path = FOLDER) -> dict:
    """A headline table: each row's number read from the result file it names, never written twice."""
    rows = [[h["question"], h["section"], h["what"],
             " · ".join(lookup(r, folder) for r in h["from"]) if h.get("from") else h.get("pending", "–"),
             ", ".join(f"`{f}`" for f in dict.fromkeys(r["file"] for r in h.get("from", []))) or "–"]
            for h in table["headlines"]]
    return {"columns": table["columns"], "rows": rows}


def render(text: str, folder: Path = FOLDER) -> str:
    """``text`` with every marked table rendered from its result file."""

    def one(m: re.Match) -> str:
        f = folder / f"{m.group(2)}.json"
        if not f.is_file():
            raise SystemExit(f"results: {f} not found (named by a marker in RESULTS.md)")
        tables = json.loads(f.read_text(encoding="utf-8"))["tables"]
        if m.group(3) not in tables:
            raise SystemExit(f"results: {f} has no table {m.group(3)!r} (it has {sorted(tables)})")
        table = tables[m.group(3)]
        return m.group(1) + render_table(resolve(table, folder) if "headlines" in table else table) + m.group(5)

    return BLOCK.sub(one, text)


def _host() -> dict:
    import os
    import platform

    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() else ""
    return {"cpu": model, "threads": os.cpu_count(), "load": round(os.getloadavg()[0], 2)}


def mt_geneval(run: Path) -> dict:
    """The result file of a sweep with ``bias.mt_geneval``: per variant the language average, per language and
    variant the counterfactual accuracies and the gap, with intervals; what was skipped."""
    import subprocess

    S = json.loads((run / "report" / "summary.json").read_text(encoding="utf-8"))
    mg = S["bias"]["mt_geneval"]

    def iv(d, m):
        return [d.get(m), *(d.get(f"{m}_ci") or [None, None])]

    def ch(d, m):
        c = d.get(f"{m}_change_ci")
        return None if c is None else f"[{c[0]:.1f}, {c[1]:.1f}]"

    avg = {"columns": [{"name": "variant", "align": "left"}, {"name": "languages", "align": "left"},
                       *({"name": f"{m} % [95 % CI]", "digits": 1} for m in ("feminine", "masculine", "gap",
                                                                           "combined", "contextual")),
                       *({"name": f"{m} change", "align": "left"} for m in ("feminine", "masculine", "gap"))],
           "rows": [[v, " ".join(d["languages"]), *(iv(d, m) for m in ("feminine", "masculine", "gap", "combined",
                                                                       "contextual")),
                     *(ch(d, m) or "–" for m in ("feminine", "masculine", "gap"))] for v, d in mg["average"].items()]}
    langs = {"columns": [{"name": "language", "align": "left"}, {"name": "variant", "align": "left"},
                         {"name": "pairs", "digits": 0}, {"name": "feminine % [95 % CI]", "digits": 1},
                         {"name": "masculine % [95 % CI]", "digits": 1}, {"name": "gap [95 % CI]", "digits": 1},
                         {"name": "gap change", "align": "left"}, {"name": "committed %", "digits": 1},
                         {"name": "contextual % [95 % CI]", "digits": 1}, {"name": "unsplit", "align": "left"}],
             "rows": [[lang, v, d["pairs"], iv(d, "feminine"), iv(d, "masculine"), iv(d, "gap"), ch(d, "gap") or "–",
                       d.get("committed"), iv(d, "contextual"), f"{d['unsplit']} of {d['contextual_items']}"]
                      for lang, res in mg["languages"].items() for v, d in res.items()]}
    from forgetbench.eval.store import Store
    from forgetbench.sweep import load_sweep

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    store = Store(run / "store.sqlite")
    source = Path(store.meta("config_source"))
    store.close()
    cfg = load_sweep(source)
    config = source.resolve().relative_to(REPO) if source.resolve().is_relative_to(REPO) else source
    return {"command": f"forgetbench sweep {config} --out RUN && python scripts/results.py mt-geneval RUN",
            "commit": commit, "host": _host(), "models": S["signatures"]["models"],
            "data": {lang: job.benchmark.digest for lang, (_, job) in cfg.bias.mt_geneval.items()},
            "settings": mg["settings"], "skipped": mg["skipped"],
            "findings": [f for f in S["findings"] if "MT-GenEval" in f["claim"]],
            "tables": {"average": avg, "languages": langs}}


def _provenance(run: Path, S: dict, command: str) -> dict:
    """What every result file names: the command, the commit, host, the models' hashes and the run's config."""
    import subprocess

    from forgetbench.eval.store import Store
    from forgetbench.io import sha256_file

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    store = Store(run / "store.sqlite")
    source = Path(store.meta("config_source"))
    store.close()
    config = (source.resolve().relative_to(REPO) if source.resolve().is_relative_to(REPO)
              else str(source).replace(str(Path.home()), "~", 1))
    import datetime

    return {"command": command.format(config=config), "config": str(config), "date": datetime.date.today().isoformat(),
            "config_sha256": sha256_file(run / "config.yaml") if (run / "config.yaml").is_file() else None,
            "commit": commit, "host": _host(), "models": S["signatures"]["models"]}


def distill_bias(run: Path) -> dict:
    """The result file of a distillation evaluation with a bias block: per variant and language ψ, ψ* (MT-Gender)
    and their change from the base with intervals, MuCoW's word-sense accuracy per pair, MT-GenEval's language
    average, and every configured contrast (a student against the teacher, KD against its twin) per benchmark."""
    S = json.loads((run / "report" / "summary.json").read_text(encoding="utf-8"))
    B = S["bias"]

    def iv(v, ci):
        return [v, *(ci or [None, None])]

    def ch(ci, digits=3):
        return "–" if ci is None else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"

    g = B.get("gender") or {}
    gender = {"columns": [{"name": "language", "align": "left"}, {"name": "variant", "align": "left"},
                          {"name": "n", "digits": 0}, {"name": "accuracy [95 % CI]", "digits": 3},
                          {"name": "ψ [95 % CI]", "digits": 3}, {"name": "ψ* [95 % CI]", "digits": 3},
                          {"name": "ψ change", "align": "left"}, {"name": "ψ* change", "align": "left"}],
              "rows": []}
    langs = sorted({lang for d in g.values() for lang in d["languages"]})
    for lang in ["all", *langs]:
        for v, d in g.items():
            x = d["average"] if lang == "all" else d["languages"].get(lang)
            if x is None:
                continue
            ci = d.get("ci", {}) if lang == "all" else x
            change = d.get("change_ci", {}) if lang == "all" else x
            key = (lambda m: m) if lang == "all" else (lambda m: f"{m}_ci")
            n = sum(y["n"] for y in d["languages"].values()) if lang == "all" else x["n"]
            gender["rows"].append([lang, v, n, iv(x["accuracy"], ci.get(key("accuracy"))),
                                   iv(x["psi"], ci.get(key("psi"))), iv(x["psi_star"], ci.get(key("psi_star"))),
                                   ch(change.get("psi") if lang == "all" else x.get("psi_change_ci")),
                                   ch(change.get("psi_star") if lang == "all" else x.get("psi_star_change_ci"))])
    ws = B.get("word_sense") or {}
    sense = {"columns": [{"name": "pair", "align": "left"}, {"name": "variant", "align": "left"},
                         {"name": "sentences", "digits": 0}, {"name": "judged", "digits": 0},
                         {"name": "accuracy [95 % CI]", "digits": 3}, {"name": "wrong-sense rate", "digits": 3},
                         {"name": "miss rate", "digits": 3}, {"name": "accuracy change", "align": "left"}],
             "rows": [[pair, v, d["n"], d["correct"] + d["wrong"], iv(d["accuracy"], d.get("accuracy_ci")),
                       d["wrong_rate"], d["miss_rate"], ch(d.get("accuracy_change_ci"))]
                      for pair, res in ws.items() for v, d in res.items()]}
    mg = (B.get("mt_geneval") or {}).get("average") or {}
    geneval = {"columns": [{"name": "variant", "align": "left"}, {"name": "languages", "align": "left"},
                           *({"name": f"{m} % [95 % CI]", "digits": 1} for m in ("feminine", "masculine", "gap"))],
               "rows": [[v, " ".join(d["languages"]), *(iv(d[m], d.get(f"{m}_ci")) for m in
                                                        ("feminine", "masculine", "gap"))] for v, d in mg.items()]}
    cgender = {"columns": [{"name": "contrast (a − b)", "align": "left"}, {"name": "language", "align": "left"},
                           *({"name": f"{m} a − b [95 % CI]", "digits": 3} for m in ("accuracy", "ψ", "ψ*"))],
               "rows": []}
    cother = {"columns": [{"name": "contrast (a − b)", "align": "left"}, {"name": "benchmark", "align": "left"},
                          {"name": "where", "align": "left"}, {"name": "metric", "align": "left"},
                          {"name": "a − b [95 % CI]", "digits": 3}], "rows": []}
    for name, c in (B.get("contrasts") or {}).items():
        label = name.replace(" vs ", " − ")
        for where, metrics in [("all", c.get("gender", {})), *sorted(c.get("gender_languages", {}).items())]:
            if metrics:
                cgender["rows"].append([label, where, *(iv(metrics[m]["difference"], metrics[m].get("ci"))
                                                        for m in ("accuracy", "psi", "psi_star"))])
        for pair, d in sorted(c.get("word_sense", {}).items()):
            for m, x in d.items():
                cother["rows"].append([label, "MuCoW", pair, m, iv(x["difference"], x.get("ci"))])
        for m, x in (c.get("mt_geneval") or {}).items():
            cother["rows"].append([label, "MT-GenEval", "language average", f"{m} (pp)", iv(x["difference"], x.get("ci"))])
    out = _provenance(run, S, "forgetbench sweep {config} --out RUN && python scripts/results.py distill-bias RUN")
    out.update({"variants": list(g) or list(ws.get(next(iter(ws), ""), {})),
                "settings": {"gender_sentences": {v: {lang: x["n"] for lang, x in d["languages"].items()}
                                                  for v, d in list(g.items())[:1]},
                             "generation": S["run"]["generation"]},
                "findings": [f for f in S["findings"] if any(k in f["claim"] for k in ("ψ", "MT-GenEval", "sense"))],
                "tables": {"gender": gender, "word_sense": sense, "mt_geneval": geneval, "contrasts_gender": cgender,
                           "contrasts_other": cother}})
    return out


def sweep(run: Path) -> dict:
    """The result file of any sweep: per compared variant the average scores, the relative change with its
    interval, the pairs significantly worse / better, the thesis tiers' Low and High relative spBLEU, the ΔchrF
    losers and winners, off-target on the losers, λ, and MT-Gender accuracy and ψ* where measured (one column
    per variant, the rows as the main command's table)."""
    S = json.loads((run / "report" / "summary.json").read_text(encoding="utf-8"))
    rows = {r["variant"]: r for r in S["variant_table"]}
    base, comps = S["base"], [v for v in S["variants"] if v != S["base"]]
    tier = (S.get("tiers") or {}).get("thesis", {}).get("tier", {})
    gender = ((S.get("bias") or {}).get("gender")) or {}

    def iv(v, ci):
        return [v, *(ci or [None, None])]

    def col(v):
        r = rows[v]
        if v == base:
            return [[r["spBLEU"], None, None], [r["chrF"], None, None], *[None] * 10,
                    iv(gender[v]["average"]["accuracy"], gender[v].get("ci", {}).get("accuracy")) if v in gender else None,
                    [gender[v]["average"]["psi_star"], None, None] if v in gender else None]
        sig = (r.get("significantly") or {}).get("spBLEU", {})
        ot, lam = S["off_target"][v], S["hallucination"][v]
        ci = ot.get("losers_change_ci") or [None, None]
        d = S["delta"][v]
        g = gender.get(v)
        return [[r["spBLEU"], None, None], [r["chrF"], None, None], [100 * r["chrF"] / rows[base]["chrF"], None, None],
                iv(r.get("rel_spBLEU"), r.get("rel_spBLEU_ci")),
                iv(r.get("rel_chrF"), r.get("rel_chrF_ci")), f"{sig.get('worse', 0)} / {sig.get('better', 0)}",
                *(iv(tier[x][v]["spBLEU"], tier[x][v]["spBLEU_ci"]) if tier.get(x, {}).get("pairs") else None
                  for x in ("Low", "High")),
                f"{d['losers_pct']:.1f} / {d['winners_pct']:.1f}",
                f"{ot['losers']['base']['off_target_pct']:.1f} → {ot['losers']['compressed']['off_target_pct']:.1f} % "
                + ("" if ci[0] is None else f"([{ci[0]:.1f}, {ci[1]:.1f}] pp)"),
                f"{lam['losers']['lambda']:.3f} / {lam['winners']['lambda']:.3f}"
                if lam["losers"].get("lambda") is not None and lam["winners"].get("lambda") is not None else None,
                None,
                iv(g["average"]["accuracy"], g.get("ci", {}).get("accuracy")) if g else None,
                iv(g["average"]["psi_star"], (g.get("change_ci") or {}).get("psi_star")) if g else None]

    pairs = {x: tier.get(x, {}).get("pairs", 0) for x in ("Low", "High")}
    names = ["avg spBLEU-local", "avg chrF", "avg chrF, % of the base's", "rel. spBLEU % [95 % CI]", "rel. chrF % [95 % CI]",
             "pairs significantly worse / better (spBLEU, BH)", f"rel. spBLEU %, Low-tier pairs (thesis tiers, "
             f"{pairs['Low']} pair{'' if pairs['Low'] == 1 else 's'})", f"rel. spBLEU %, High-tier pairs ({pairs['High']} pair{'' if pairs['High'] == 1 else 's'})",
             "ΔchrF losers / winners (% of sentences)", "off-target on losers, base → variant (change)",
             "λ losers / winners (on-target)", "–", "MT-Gender accuracy [95 % CI]",
             "MT-Gender ψ* (variant: [its change's 95 % CI])"]
    cols = {v: col(v) for v in [base, *comps]}
    table_rows = []
    for i, name in enumerate(names):
        if name == "–":
            continue
        cells = [cols[v][i] for v in cols]
        if all(c is None for c in cells):
            continue
        if i == 13:  # ψ*: the base's value, each variant's value and its change interval
            cells = [None if c is None else (f"{c[0]:.3f}" if c[1] is None else f"{c[0]:.3f}, [{c[1]:.2f}, {c[2]:.2f}]")
                     for c in cells]
        table_rows.append([name, *cells])
    table = {"columns": [{"name": "", "align": "left"}, *({"name": v, "digits": 2} for v in cols)],
             "rows": table_rows,
             "digits_by_row": {"MT-Gender accuracy [95 % CI]": 3, "avg chrF, % of the base's": 1}}
    tables = {"variants": table}
    for fam, F in (S.get("families") or {}).items():  # a ladder or a comparison: one row per member
        tables[f"family_{fam}"] = {
            "columns": [{"name": F["axis"], "align": "left"}, {"name": "avg spBLEU [95 % CI]", "digits": 2},
                        {"name": "avg chrF [95 % CI]", "digits": 2}, {"name": "rel. spBLEU % [95 % CI]", "digits": 1},
                        {"name": "rel. chrF % [95 % CI]", "digits": 1},
                        {"name": f"rel. spBLEU %, Low tier ({pairs['Low']} pairs)", "digits": 1}],
            "rows": [[("0 (base)" if p["variant"] == base else f"{100 * p['value']:g} %") if F["axis"] == "sparsity"
                      else f"{p['value']:g}" if F.get("numeric") else str(p["value"]),
                      iv(p["spBLEU"], p.get("spBLEU_ci")), iv(p["chrF"], p.get("chrF_ci")),
                      iv(p.get("rel_spBLEU"), p.get("rel_spBLEU_ci")), iv(p.get("rel_chrF"), p.get("rel_chrF_ci")),
                      iv(tier["Low"][p["variant"]]["spBLEU"], tier["Low"][p["variant"]]["spBLEU_ci"])
                      if p["variant"] != base and tier.get("Low", {}).get("pairs") else None]
                     for p in F["points"]]}
    groups_ = (S.get("pair_groups") or {}).get("thesis", {})
    crows = []
    for g in ("all", "low"):
        for name, c in ((groups_.get(g) or {}).get("contrasts") or {}).items():
            if name.endswith(f" vs {base}"):
                continue  # each variant against the base is the variants table's
            crows.append([name.replace(" vs ", " − "), f"{g} ({groups_[g]['pairs']} pairs)",
                          *([c[m]["difference"], *(c[m].get("ci") or [None, None])] if m in c else None
                            for m in ("chrF", "spBLEU"))])
    names = [n for n in ((groups_.get("all") or {}).get("contrasts") or {}) if not n.endswith(f" vs {base}")]
    if names:  # chrF per pair group, one column per contrast
        tables["contrasts_by_group"] = {
            "columns": [{"name": "group (pairs)", "align": "left"},
                        *({"name": f"{n.replace(' vs ', ' − ')} chrF", "digits": 2} for n in names)],
            "rows": [[f"{g} ({d['pairs']})", *([d["contrasts"][n]["chrF"]["difference"],
                                               *(d["contrasts"][n]["chrF"].get("ci") or [None, None])]
                                              if n in (d.get("contrasts") or {}) else None for n in names)]
                     for g, d in groups_.items() if d.get("pairs")]}
    if crows:
        tables["contrasts"] = {"columns": [{"name": "contrast (a − b)", "align": "left"},
                                           {"name": "pairs (thesis tiers)", "align": "left"},
                                           {"name": "chrF [95 % CI]", "digits": 2},
                                           {"name": "spBLEU [95 % CI]", "digits": 2}], "rows": crows}
    out = _provenance(run, S, "forgetbench sweep {config} --out RUN && python scripts/results.py sweep RUN NAME")
    out.update({"variants": list(cols), "base": base, "data": S["signatures"].get("data"),
                "settings": {"pairs": len(S["pairs"]), "kept": sum(p["kept"] for p in S["pairs"]),
                             "generation": S["run"]["generation"], "thresholds": S["thresholds"],
                             "environment": S["run"].get("environment")},
                "findings": S["findings"], "tables": tables})
    return out


# SMaLL-100 thesis, Tables 6.2 (low-resource groups, FLORES-101 "AVG") and 6.9 (M2M … H2H): SMaLL-100 and
# M2M-100 12B spBLEU on FLORES-101, directions where the 12B reaches 3 spBLEU.
THESIS_SPBLEU = {"L2H": (14.3, 18.2), "M2H": (24.2, 29.5), "H2L": (10.2, 13.9), "H2M": (22.6, 27.6),
                 "H2H": (28.8, 34.3), "low": (10.7, 13.3)}


def groups(run: Path, student: str = "student-kd") -> dict:
    """The result file of a distillation evaluation's pair groups (thesis tiers, the analysis's kept pairs): per
    group the teacher's and the student's spBLEU and chrF, the student's share of each, its spBLEU difference with
    the stratified paired interval, and beside it SMaLL-100's share of M2M-100 12B's spBLEU (thesis Tables 6.2 and
    6.9)."""
    S = json.loads((run / "report" / "summary.json").read_text(encoding="utf-8"))
    base, pg = S["base"], S["pair_groups"]["thesis"]
    rows = []
    for g, d in pg.items():
        if not d.get("pairs"):
            continue
        t, s = d["scores"][base], d["scores"][student]
        c = (d.get("contrasts") or {}).get(f"{student} vs {base}", {}).get("spBLEU") or {}
        th = THESIS_SPBLEU.get(g)
        rows.append([g, d["pairs"], t["spBLEU"], s["spBLEU"], 100 * s["spBLEU"] / t["spBLEU"] if t["spBLEU"] else None,
                     [c.get("difference"), *(c.get("ci") or [None, None])], t["chrF"], s["chrF"],
                     100 * s["chrF"] / t["chrF"] if t["chrF"] else None, None if th is None else 100 * th[0] / th[1]])
    table = {"columns": [{"name": "pair group (thesis tiers)", "align": "left"}, {"name": "directions", "digits": 0},
                         {"name": "teacher spBLEU", "digits": 2}, {"name": f"{student} spBLEU", "digits": 2},
                         {"name": "share of the teacher's spBLEU %", "digits": 1},
                         {"name": f"{student} − teacher spBLEU [95 % CI]", "digits": 2},
                         {"name": "teacher chrF", "digits": 2}, {"name": f"{student} chrF", "digits": 2},
                         {"name": "share of the teacher's chrF %", "digits": 1},
                         {"name": "SMaLL-100's share of M2M-100 12B's spBLEU % (thesis)", "digits": 1}],
             "rows": rows}
    out = _provenance(run, S, "forgetbench sweep {config} --out RUN && python scripts/results.py groups RUN NAME")
    out.update({"base": base, "student": student, "settings": {"generation": S["run"]["generation"],
                                                               "thresholds": S["thresholds"],
                                                               "kept": sum(p["kept"] for p in S["pairs"]),
                                                               "pairs": len(S["pairs"])},
                "thesis": "SMaLL-100 thesis Tables 6.2 and 6.9, FLORES-101, SMaLL-100 / M2M-100 12B spBLEU",
                "tables": {"groups": table}})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("render")
    sub.add_parser("check")
    m = sub.add_parser("mt-geneval")
    m.add_argument("run", type=Path)
    m.add_argument("--out", type=Path, default=FOLDER / "mt-geneval.json")
    d = sub.add_parser("distill-bias")
    d.add_argument("run", type=Path)
    d.add_argument("--out", type=Path, default=FOLDER / "distill-bias.json")
    d.add_argument("--note", default=None, help="what a reader must know of the run (kept in the file)")
    s = sub.add_parser("sweep")
    s.add_argument("run", type=Path)
    s.add_argument("name", help="the result file's name under docs/results (without .json)")
    s.add_argument("--note", default=None, help="what a reader must know of the run (kept in the file)")
    g = sub.add_parser("groups")
    g.add_argument("run", type=Path)
    g.add_argument("name", help="the result file's name under docs/results (without .json)")
    g.add_argument("--student", default="student-kd")
    g.add_argument("--note", default=None, help="what a reader must know of the run (kept in the file)")
    a = ap.parse_args()
    exporters = {"mt-geneval": lambda: mt_geneval(a.run), "distill-bias": lambda: distill_bias(a.run),
                 "sweep": lambda: sweep(a.run), "groups": lambda: groups(a.run, a.student)}
    if a.cmd in exporters:
        from forgetbench.io import atomic_write_json

        out = a.out if a.cmd in ("mt-geneval", "distill-bias") else FOLDER / f"{a.name}.json"
        result = exporters[a.cmd]()
        if getattr(a, "note", None):
            result["note"] = a.note
        atomic_write_json(out, result)
        print(out)
        return 0
    status = 0
    for doc in documents():
        text = doc.read_text(encoding="utf-8")
        new = render(text)
        if a.cmd == "check":
            if new != text:
                bad = [m.group(2) + " " + m.group(3) for m, n in zip(BLOCK.finditer(text), BLOCK.finditer(new),
                                                                     strict=True) if m.group(0) != n.group(0)]
                print(f"results: {doc.relative_to(REPO)} differs from its result files in {', '.join(bad)}: run "
                      "python scripts/results.py render", file=sys.stderr)
                status = 1
        elif new != text:
            doc.write_text(new, encoding="utf-8")
    return status

if __name__ == "__main__":
    sys.exit(main())
