"""The report's tables, one builder per section (headers and rows, the CSVs' and the Markdown's), and the HTML table
they render to; the most affected pairs, the variants' methods, deployment sizes and speeds."""

from __future__ import annotations

import html
from pathlib import Path

from forgetbench.eval.languages import PAIR_GROUPS, TIERS
from forgetbench.eval.summary import Summary
from forgetbench.report.numbers import MARK, interval, num, num_interval
from forgetbench.report.sections import MOST_AFFECTED


def html_table(headers: list[str], rows: list[list], cls: str = "") -> str:
    h = "".join(f"<th>{html.escape(str(x))}</th>" for x in headers)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>'


Table = tuple[list[str], list[list]]


def tables(summary: Summary) -> dict[str, Table]:
    """Every table of the report as (headers, rows) — shared by HTML, Markdown and CSV; one builder per table
    (``TABLES``), each giving the tables its summary section has (none where the summary lacks it)."""
    table_map: dict[str, Table] = {}
    for build in TABLES:
        table_map |= build(summary)
    return table_map


def _variants_table(summary: Summary) -> dict[str, Table]:
    base, bases, backends = summary.base, summary.bases, summary.backends
    return {"variants": (["variant", "backend", "compared with", "nominal size", "disk (real artefact)", "avg spBLEU",
                          "avg chrF", "rel. spBLEU % [95 % CI]", "rel. chrF % [95 % CI]", "pairs improved",
                          "pairs sig. worse / better (spBLEU)"],
                         [[r.variant, backends.get(r.variant, "torch"),
                           bases.get(r.variant, "–" if r.variant == base else base), num(r.size.get("nominal_ratio")),
                           _disk(r.size), num(r.spBLEU), num(r.chrF), num_interval(r.rel_spBLEU, r.rel_spBLEU_ci),
                           num_interval(r.rel_chrF, r.rel_chrF_ci), "–" if r.improved_pairs is None else r.improved_pairs,
                           (f"{r.significantly['spBLEU']['worse']} / {r.significantly['spBLEU']['better']}"
                            if r.significantly else "–")] for r in summary.variant_table])}


def csv_name(table: str) -> str:
    """A table's CSV file name: a head-to-head key ``a|b`` becomes ``a_vs_b`` (no shell-special character)."""
    return table.replace("|", "_vs_")


def _pair_scores_table(summary: Summary) -> dict[str, Table]:
    """Every pair's corpus scores and empty outputs for every series, kept by the filter or not: always shown."""
    bar, series = summary.thresholds.bleu_filter, summary.variants
    return {"pair_scores": (["pair", "benchmark", "tier", "kept"]
                            + [f"{v} {c}" for v in series for c in ("spBLEU", "chrF", "empty")],
                            [[f"{p.src}-{p.tgt}", p.benchmark, p.tier["thesis"], "yes" if p.kept else f"no (base spBLEU < {bar})"]
                             + [x for v in series for x in (num(p.scores[v]["spBLEU"]), num(p.scores[v]["chrF"]),
                                                            p.empty_outputs.get(v, "–"))]
                             for p in summary.pairs])}


def _tier_tables(summary: Summary) -> dict[str, Table]:
    comps, table_map = summary.comparisons, {}
    for view, tiers in summary.tiers.items():
        for axis in ("tier", "src_tier", "tgt_tier"):
            cells = {t: tiers[axis][t] for t in TIERS}
            table_map[f"{axis}_{view}"] = ([axis.replace("_", " "), "pairs"] + [f"{v} rel. spBLEU % [95 % CI]" for v in comps]
                                   + [f"{v} rel. chrF % [95 % CI]" for v in comps],
                                   [[t, c.pairs] + [num_interval(c.by_variant[v][m], c.by_variant[v].get(f"{m}_ci"))
                                                    for m in ("spBLEU", "chrF") for v in comps]
                                    for t, c in cells.items()])
    return table_map


def _delta_tables(summary: Summary) -> dict[str, Table]:
    """ΔchrF losers and winners, off-target rates, λ."""
    comps, delta, off_target, lam = summary.comparisons, summary.delta, summary.off_target, summary.hallucination
    return {
        "delta": (["variant", "sentences", "losers", "losers % [95 % CI]", "winners", "winners % [95 % CI]"],
                  [[v, d.sentences, d.losers, num_interval(d.losers_pct, d.losers_pct_ci, 1),
                    d.winners, num_interval(d.winners_pct, d.winners_pct_ci, 1)] for v in comps for d in [delta[v]]]),
        "off_target": (["variant", "losers: base", "losers: compressed", "losers: change pp [95 % CI]", "n (losers)",
                        "overall: base", "overall: compressed", "overall: change pp [95 % CI]"],
                       [[v, num(o.losers.base.off_target_pct, pct=True), num(o.losers.compressed.off_target_pct, pct=True),
                         interval(o.losers_change_ci, 1), o.losers.base.n,
                         num(o.overall.base.off_target_pct, pct=True), num(o.overall.compressed.off_target_pct, pct=True),
                         interval(o.overall_change_ci, 1)] for v in comps for o in [off_target[v]]]),
        "hallucination": (["variant", "λ losers [95 % CI]", "λ winners [95 % CI]", "λ all [95 % CI]",
                           "median per-sentence ratio (losers)", "n losers (on-target)", "losers left out: off-target",
                           "n winners (on-target)", "winners left out: off-target"],
                          [[v] + [num_interval(lam[v][k].lambda_, lam[v][k].lambda_ci, 3) for k in ("losers", "winners", "all")]
                           + [num(lam[v]["losers"].per_sentence["median"]), lam[v]["losers"].n,
                              lam[v]["losers"].off_target, lam[v]["winners"].n, lam[v]["winners"].off_target]
                           for v in comps]),
        "findings": (["claim", "variant", "outcome (95 %)", "numbers"],
                     [[f.claim, f.variant, f.outcome, f.numbers] for f in summary.findings])}


def _gender_tables(summary: Summary) -> dict[str, Table]:
    bias, table_map = summary.bias, {}
    if bias and bias.gender:
        table_map["gender"] = (["variant", "accuracy [95 % CI]", "F1 male", "F1 female", "ΔG", "ΔS", "ψ [95 % CI]", "ψ* [95 % CI]",
                        "ψ* change [95 % CI]", "rel. ψ %", "rel. accuracy %"],
                       [[v, num_interval(g.average["accuracy"], (g.ci or {}).get("accuracy"), 3), num(g.average["f1_male"], 3),
                         num(g.average["f1_female"], 3), num(g.average["delta_g"], 3), num(g.average["delta_s"], 3),
                         num_interval(g.average["psi"], (g.ci or {}).get("psi"), 3),
                         num_interval(g.average["psi_star"], (g.ci or {}).get("psi_star"), 3),
                         "–" if g.change_ci is None else interval(g.change_ci.get("psi_star"), 3),
                         num((g.relative_to_base or {}).get("psi")),
                         num((g.relative_to_base or {}).get("accuracy"))] for v, g in bias.gender.items()])
        table_map["gender_languages"] = (["variant", "language", "n", "accuracy", "F1 male", "F1 female", "ψ [95 % CI]",
                                          "ψ* [95 % CI]", "ψ* change [95 % CI]"],
                                 [[v, lang, d["n"], num(d["accuracy"], 3), num(d["f1_male"], 3), num(d["f1_female"], 3),
                                   num_interval(d["psi"], d.get("psi_ci"), 3),
                                   num_interval(d["psi_star"], d.get("psi_star_ci"), 3),
                                   interval(d["psi_star_change_ci"], 3) if "psi_star_change_ci" in d else "–"]
                                  for v, g in bias.gender.items() for lang, d in g.languages.items()])
    if bias and bias.contrasts:
        rows = []
        for key, rec in bias.contrasts.items():
            rows += [[key, "MT-Gender", k, num_interval(x["difference"], x["ci"], 3)] for k, x in rec.get("gender", {}).items()]
            rows += [[key, f"MT-Gender {lang}", k, num_interval(x["difference"], x["ci"], 3)]
                     for lang, d in rec.get("gender_languages", {}).items() for k, x in d.items() if k != "accuracy"]
            rows += [[key, f"MuCoW {pair}", k, num_interval(x["difference"], x["ci"], 3)]
                     for pair, d in rec.get("word_sense", {}).items() for k, x in d.items()]
            rows += [[key, "MT-GenEval", k, num_interval(x["difference"], x["ci"], 1)]
                     for k, x in rec.get("mt_geneval", {}).items()]
        table_map["bias_contrasts"] = (["contrast", "benchmark", "metric", "difference a − b [95 % CI]"], rows)
    if bias and bias.aligner_comparison:
        by = bias.aligner_comparison.by_variant
        table_map["aligners"] = (["variant", "aligner", "accuracy", "ψ", "ψ*"],
                         [[v, a, num(by[v][a]["accuracy"], 3), num(by[v][a]["psi"], 3), num(by[v][a]["psi_star"], 3)]
                          for v in by if "fast_align" in by[v] for a in ("cross_attention", "fast_align") if a in by[v]])
    return table_map


def _word_sense_table(summary: Summary) -> dict[str, Table]:
    ws = summary.bias.word_sense if summary.bias else None
    if not ws:
        return {}
    return {"word_sense": (["pair", "variant", "n", "accuracy [95 % CI]", "accuracy change [95 % CI]", "wrong-sense rate",
                            "miss rate", "rel. accuracy %"],
                           [[pair, v, d["n"], num_interval(d["accuracy"], d.get("accuracy_ci"), 3),
                             interval(d.get("accuracy_change_ci"), 3) if "accuracy_change_ci" in d else "–",
                             num(d["wrong_rate"], 3), num(d["miss_rate"], 3),
                             num(d.get("relative_accuracy"))] for pair, res in ws.items() for v, d in res.items()])}


def _mt_geneval_tables(summary: Summary) -> dict[str, Table]:
    """MT-GenEval: per variant its accuracies averaged over the languages, then per language and variant; each with
    its interval, changes from the base paired."""
    mg = summary.bias.mt_geneval if summary.bias else None
    if not mg or not mg.average:
        return {}

    def cell(d, m):
        return num_interval(d.get(m), d.get(f"{m}_ci"), 1) if m in d else "–"

    def change(d, m):
        return interval(d[f"{m}_change_ci"], 1) if f"{m}_change_ci" in d else "–"

    ms = ("feminine", "masculine", "gap", "combined", "contextual")
    return {"mt_geneval": (["variant", "languages", *(f"{m} % [95 % CI]" for m in ms),
                            *(f"{m} change [95 % CI]" for m in ("feminine", "masculine", "gap", "contextual"))],
                           [[v, " ".join(d["languages"]), *(cell(d, m) for m in ms),
                             *(change(d, m) for m in ("feminine", "masculine", "gap", "contextual"))]
                            for v, d in mg.average.items()]),
            "mt_geneval_languages": (["language", "variant", "pairs", "feminine % [95 % CI]", "masculine % [95 % CI]",
                                      "gap [95 % CI]", "gap change [95 % CI]", "committed %", "contextual % [95 % CI]",
                                      "unsplit", "empty"],
                                     [[lang, v, d["pairs"], cell(d, "feminine"), cell(d, "masculine"), cell(d, "gap"),
                                       change(d, "gap"), num(d.get("committed"), 1), cell(d, "contextual"),
                                       f"{d['unsplit']} of {d['contextual_items']}", d["empty"]]
                                      for lang, res in mg.languages.items() for v, d in res.items()])}


def _movement_tables(summary: Summary) -> dict[str, Table]:
    """Per (a, b) asked for: a's sentences by category (rows) against b's (columns); then the loser→winner ones."""
    table_map = {}
    for key, M in summary.movement.items():
        cats = ("loser", "neither", "winner")
        table_map[f"movement_{key}"] = ([f"{M.a} \\ {M.b}", *cats, "sentences"],
                                [[x, *(M.counts[x][y] for y in cats), sum(M.counts[x].values())] for x in cats])
        table_map[f"moves_{key}"] = (["pair", "sentence", f"ΔchrF {M.a}", f"ΔchrF {M.b}"],
                             [[m["pair"], m["idx"], num(m["delta_a"]), num(m["delta_b"])] for m in M.loser_to_winner])
    return table_map


def _attention_texts(summary: Summary) -> dict[str, Table]:
    """The texts of each variant's mapped examples (the figure's rows, in order)."""
    table_map = {}
    for v, rec in summary.attention_maps.items():
        b = summary.base_of(v)
        table_map[f"attention_{v}"] = (["example", "pair", "ΔchrF", "source", b, v],
                               [[subset[:-1], x["pair"], num(x["delta_chrF"]), x["source"], x["base"], x["compressed"]]
                                for subset in ("losers", "winners") for x in rec.get(subset, [])])
    return table_map


def _dibimt_table(summary: Summary) -> dict[str, Table]:
    """DiBiMT per language and variant: accuracy, SFII, SPDI, MFS, MFS⁺ with intervals, and SFII's and MFS's changes
    from the base (lower SFII / SPDI / MFS is less biased)."""
    dib = summary.bias.dibimt if summary.bias else None
    if not dib:
        return {}
    ms = ("accuracy", "SFII", "SPDI", "MFS", "MFS+")
    return {"dibimt": (["language", "variant", "items", "judged"] + [f"{m} [95 % CI]" for m in ms]
                       + ["SFII change [95 % CI]", "MFS change [95 % CI]"],
                       [[lang, v, d["n"], d["good"] + d["bad"]] + [num_interval(d[m], d.get(f"{m}_ci"), 3) for m in ms]
                        + [interval(d.get(f"{m}_change_ci"), 3) if f"{m}_change_ci" in d else "–" for m in ("SFII", "MFS")]
                        for lang, res in dib.items() for v, d in res.items()])}


def _deploy_table(summary: Summary) -> dict[str, Table]:
    if not summary.speed:
        return {}
    sp0 = summary.speed.get(summary.base, {})
    b1, bb = sp0.get("sentences_per_s"), (sp0.get("batched") or {}).get("sentences_per_s")
    env = summary.run.get("environment", {}).get("cpu", {})
    return {"deploy": (["variant", "model", "deployable form", "disk MiB", "batch-1 sentences/s", "batch-1 tokens/s",
                        "batch-1 speed-up vs base", "batched sentences/s", "batched speed-up vs base", "measured on"],
                       [[v, _model_name(summary.variant_models.get(v, summary.model)), sp.get("form", "torch fp32"),
                         f"{sp['disk_bytes'] / 2**20:.1f}" if sp.get("disk_bytes") else _disk_mib(summary, v),
                         *_deploy_speeds(sp, b1, bb, env)]
                        for v, sp in summary.speed.items()])}


def _group_tables(summary: Summary) -> dict[str, Table]:
    table_map = {}
    series = summary.variants
    for view, groups in summary.pair_groups.items():
        if not any(c.contrasts for c in groups.values()) and len(series) < 2:
            continue
        names = list(next(iter(groups.values())).contrasts) if groups else []
        table_map[f"groups_{view}"] = (["pair group", "pairs", "sentences"] + [f"{v} chrF" for v in series]
                               + [f"{v} spBLEU" for v in series]
                               + [f"{c}: chrF diff. [95 % CI]" for c in names]
                               + [f"{c}: spBLEU diff. [95 % CI]" for c in names],
                               [[g, c.pairs, c.sentences] + [num(c.scores[v][m]) for m in ("chrF", "spBLEU") for v in series]
                                + [num_interval(c.contrasts[n][m].difference, c.contrasts[n][m].ci)
                                   for m in ("chrF", "spBLEU") for n in names]
                                for g, c in groups.items()])
    return table_map


def _signals_table(summary: Summary) -> dict[str, Table]:
    sig = summary.distillation_signals
    if not sig:
        return {}
    groups = [g for g in PAIR_GROUPS if any(g in s["last"]["groups"] for s in sig.values())]
    return {"signals": (["pair group"] + [f"{v}: KL(teacher‖student) start → end" for v in sig]
                        + [f"{v}: CE start → end" for v in sig],
                        [[g] + [f"{num(s['first']['groups'].get(g, {}).get('kl'), 3)} → {num(s['last']['groups'].get(g, {}).get('kl'), 3)}"
                                for s in sig.values()]
                         + [f"{num(s['first']['groups'].get(g, {}).get('ce'), 3)} → {num(s['last']['groups'].get(g, {}).get('ce'), 3)}"
                            for s in sig.values()] for g in groups])}


def _lid_table(summary: Summary) -> dict[str, Table]:
    return {"lid": (["language", "code", "identifier"], [[c.name, c.lang, c.identifier] for c in summary.lid_coverage])}


def _parity_tables(summary: Summary) -> dict[str, Table]:
    table_map = {}
    scores = {(p.benchmark, f"{p.src}-{p.tgt}"): p.scores for p in summary.pairs}
    for b2, par in summary.backend_parity.items():
        table_map[f"parity_{b2}"] = (["pair", "benchmark", "sentences", "identical hypotheses", f"{par.of} chrF", f"{b2} chrF",
                              "chrF diff. [95 % CI]", f"{par.of} spBLEU", f"{b2} spBLEU", "spBLEU diff. [95 % CI]"],
                             [[r.pair, r.benchmark, r.sentences, r.identical]
                              + [x for m in ("chrF", "spBLEU") for x in (
                                  num(scores[(r.benchmark, r.pair)][par.of][m]), num(scores[(r.benchmark, r.pair)][b2][m]),
                                  num_interval(getattr(r, m)["delta"], getattr(r, m)["delta_ci"]))] for r in par.pairs]
                             + [["mean over pairs", "", par.sentences, par.identical]
                                + [x for m in ("chrF", "spBLEU") for x in (
                                    "", "", num_interval(par.mean[m].difference, par.mean[m].ci))]])
    return table_map


def _pair_tables(summary: Summary) -> dict[str, Table]:
    """Per compared variant: its kept pairs, most losing first, then the pairs the base-spBLEU filter dropped (their
    scores shown, never hidden: ``kept`` says why they enter no average)."""
    table_map, bar = {}, summary.thresholds.bleu_filter
    for v in summary.comparisons:
        b = summary.base_of(v)
        ranked = sorted(summary.kept_pairs, key=lambda p: p.rel[v]["spBLEU"] or 0) + sorted(
            (p for p in summary.pairs if not p.kept), key=lambda p: -p.scores[b]["spBLEU"])
        table_map[f"pairs_{v}"] = (["pair", "benchmark", "tier", f"{b} spBLEU", f"{v} spBLEU", "rel. % [95 % CI]", "p", "sig. (BH)",
                            f"{b} chrF", f"{v} chrF", "rel. chrF % [95 % CI]", f"{b} empty", f"{v} empty", "kept"],
                           [[f"{p.src}-{p.tgt}", p.benchmark, p.tier["thesis"],
                             num(p.scores[b]["spBLEU"]), num(p.scores[v]["spBLEU"]),
                             num_interval(p.rel[v]["spBLEU"], _rel_ci(p, v, "spBLEU")),
                             num(d.p if (d := p.intervals.get(v, {}).get("spBLEU")) else None, 3),
                             f"{MARK.get(sig := p.significance.get(v, {}).get('spBLEU', ''), '')} {sig}".strip() or "–",
                             num(p.scores[b]["chrF"]), num(p.scores[v]["chrF"]),
                             num_interval(p.rel[v]["chrF"], _rel_ci(p, v, "chrF")),
                             p.empty_outputs.get(b, "–"), p.empty_outputs.get(v, "–"),
                             "yes" if p.kept else f"no: base spBLEU < {bar}"]
                            for p in ranked])
    return table_map


def _family_tables(summary: Summary) -> dict[str, Table]:
    """Per family: each point's average scores and relative differences with their intervals."""
    return {f"family_{name}": ([F.axis, "variant", "avg spBLEU [95 % CI]", "avg chrF [95 % CI]",
                                "rel. spBLEU % [95 % CI]", "rel. chrF % [95 % CI]"],
                               [[p.value, p.variant, num_interval(p.spBLEU, p.spBLEU_ci), num_interval(p.chrF, p.chrF_ci),
                                 num_interval(p.rel_spBLEU, p.rel_spBLEU_ci, 1) if p.rel_spBLEU_ci else "–",
                                 num_interval(p.rel_chrF, p.rel_chrF_ci, 1) if p.rel_chrF_ci else "–"]
                                for p in F.points])
            for name, F in summary.families.items()}


def _rel_ci(p, v: str, m: str):
    """A pair's paired-bootstrap interval of a variant's relative difference on a metric; None where it has none."""
    d = p.intervals.get(v, {}).get(m)
    return d.rel_ci if d else None


def method_of(summary: Summary, v: str) -> str:
    """A variant's compression method, read from its artefacts: a sparse artefact is pruning, an int8 one (or a
    nominal size below 1 without sparsity: bitsandbytes) quantisation; another model (a student): its own."""
    size = summary.size_of(v)
    if size.get("base_parameters"):  # a model of its own size (sweep.run.model_sizes)
        return "other model"
    pruned, quantised = "sparse_bytes" in size, "int8_bytes" in size or ("sparse_bytes" not in size
                                                                         and (size.get("nominal_ratio") or 1) < 1)
    if pruned and quantised:
        return "pruning + quantisation"
    return "pruning" if pruned else "quantisation" if quantised else "other model"


def most_affected(summary: Summary, k: int = MOST_AFFECTED) -> list[dict]:
    """The cross-method table: each compared variant's ``k`` kept pairs of lowest relative spBLEU, and for every
    pair in any of those lists the methods under which it is among the most affected; pairs most affected under
    more methods first, then by their mean rank."""
    comps, kept = summary.comparisons, summary.kept_pairs
    ranks: dict[str, dict[str, int]] = {}
    for v in comps:
        order = sorted(kept, key=lambda p: (p.rel[v]["spBLEU"] is None, p.rel[v]["spBLEU"] or 0))
        for r, p in enumerate(order[:k], 1):
            ranks.setdefault(f"{p.src}-{p.tgt}", {})[v] = r
    by_pair = {f"{p.src}-{p.tgt}": p for p in kept}
    rows = [{"pair": pair, "tier": by_pair[pair].tier.get("thesis"), "ranks": r,
             "methods": sorted({method_of(summary, v) for v in r})} for pair, r in ranks.items()]
    return sorted(rows, key=lambda x: (-len(x["methods"]), sum(x["ranks"].values()) / len(x["ranks"]), x["pair"]))


def _most_affected_table(summary: Summary) -> dict[str, Table]:
    comps = summary.comparisons
    methods = {method_of(summary, v) for v in comps} - {"other model"}
    if len(comps) < 2 or len(methods) < 2:
        return {}
    by_pair = {f"{p.src}-{p.tgt}": p for p in summary.pairs}
    rows = []
    for x in most_affected(summary):
        p = by_pair[x["pair"]]
        rows.append([x["pair"], x["tier"] or "–", " & ".join(x["methods"])]
                    + [f"{num_interval(p.rel[v]['spBLEU'], _rel_ci(p, v, 'spBLEU'), 1)}"
                       + (f" (#{x['ranks'][v]})" if v in x["ranks"] else "") for v in comps])
    return {"most_affected": (["pair", "tier", "most affected under"]
                              + [f"{v} ({method_of(summary, v)}): rel. spBLEU % [95 % CI] (rank)" for v in comps], rows)}


TABLES = (_variants_table, _pair_scores_table, _tier_tables, _delta_tables, _gender_tables, _mt_geneval_tables, _word_sense_table,
          _dibimt_table, _deploy_table,
          _group_tables, _signals_table, _lid_table, _parity_tables, _pair_tables, _family_tables, _most_affected_table,
          _movement_tables, _attention_texts)


def _speedup(vs: dict | None, own: float | None, base: float | None) -> str:
    """A speed-up cell: the interleaved comparison's (``eval.speed`` rule 2) with its interval, "no measurable
    difference" where the interval covers 1; a record of one timing each gives no ratio."""
    if vs:
        ci = f"[{vs['speedup_ci95'][0]:.2f}, {vs['speedup_ci95'][1]:.2f}]"
        return f"{vs['speedup']:.2f}× {ci}" if vs["measurable"] else f"no measurable difference ({vs['speedup']:.2f}× {ci})"
    return "–" if own is None or not base else "one timing each: no ratio"


def _deploy_speeds(sp: dict, b1, bb, env: dict) -> list[str]:
    """The speed cells of a deployment row; "–" throughout for a variant with no timed form (fake-quantised)."""
    if sp.get("sentences_per_s") is None:
        return ["–"] * 5 + ["not timed: no runtime here executes its form"]
    batched = sp.get("batched") or {}
    bt = batched.get("sentences_per_s")
    rounds = (sp.get("vs_base") or {}).get("rounds") or sp.get("rounds")
    base_row = b1 and sp.get("vs_base") is None and sp.get("rounds")
    return [num(sp["sentences_per_s"]), num(sp["tokens_per_s"], 1),
            "1.00× (the base)" if base_row else _speedup(sp.get("vs_base"), sp["sentences_per_s"], b1),
            num(bt), "1.00× (the base)" if base_row else _speedup(batched.get("vs_base"), bt, bb),
            f"{sp['sentences']} × {sp['benchmark']} {sp['pair']} (batched: {batched.get('sentences', '–')} "
            f"in batches of {batched.get('batch_size', '–')})"
            + (f", median of {sp.get('timings', rounds)} timings"
               + (" (alone and interleaved with each variant's)" if base_row else " interleaved with the base's")
               if rounds else ", one timing")
            + f", {sp['threads']} thread(s), load {sp['loadavg'][0]}–{sp['loadavg'][1]}, {env.get('model', '?')} "
            f"[{' '.join(env.get('flags', [])) or 'no AVX2'}]"]


def _model_name(path: str) -> str:
    p = Path(path)
    return f"{p.parent.name}/{p.name}" if p.name == "model" else p.name


def _disk_mib(summary: Summary, v: str) -> str:
    """A dense model's files in MiB; for a compressed variant its artefact ratio."""
    size = summary.size_of(v)
    return f"{size['dense_bytes'] / 2**20:.1f}" if size.get("dense_bytes") else _disk(size)


def _disk(size: dict) -> str:
    """The artefact actually stored: its bytes and their ratio to the source checkpoint's (older runs: to the dense
    file written beside it)."""
    src = size.get("source_bytes")
    for k in ("int8", "sparse"):
        if f"{k}_bytes" in size:
            b = size[f"{k}_bytes"]
            return f"{b / 2**20:.1f} MiB {k}, {b / src:.3f}× the source" if src else f"{size[f'{k}_ratio']:.3f}× ({k})"
    if src and size.get("dense_bytes"):
        return f"{size['dense_bytes'] / 2**20:.1f} MiB dense, {size['dense_bytes'] / src:.3f}× the source"
    return "1.000× (dense)" if size else "–"
