"""The per-language fairness report: report.html (self-contained), report.md, CSVs, summary.json.

Every number in the HTML comes from ``summary.json`` (the same dict), and every table carries the
signatures (model hashes, data hashes, SPM hash, metric settings). Model text is HTML-escaped.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import math
from pathlib import Path

from forgetbench.eval.findings import comparisons
from forgetbench.eval.languages import PAIR_GROUPS, TIERS, language
from forgetbench.io import atomic_write_json, atomic_write_text
from forgetbench.report.sections import MOST_AFFECTED, render_html, render_markdown, sections


def _f(x, nd=2, pct=False):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "undefined" if pct else "–"
    return f"{x:.{nd}f}{' %' if pct else ''}"


def _ci(ci, nd=2) -> str:
    """An interval as text: ``[lo, hi]``."""
    if not ci or ci[0] is None:
        return "[–]"
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def _fci(x, ci, nd=2) -> str:
    """A value with its 95 % interval."""
    return _f(x, nd) if ci is None else f"{_f(x, nd)} {_ci(ci, nd)}"


MARK = {"worse": "▼", "better": "▲", "n.s.": ""}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def figures(S: dict) -> dict[str, str]:
    """The report's figures as base64 PNG: the scatter of relative differences against resources, per-tier bars
    per tier view, and the ΔchrF histograms by tier."""
    import matplotlib

    matplotlib.use("Agg")
    return _scatter(S) | _tier_bars(S) | _delta_histograms(S) | _family_figures(S) | _attention_figures(S)


def _attention_figures(S: dict) -> dict[str, str]:
    """Per variant: its example losers and winners, one row each, base and compressed cross-attention side by side
    (source pieces across, each model's output pieces down; the study's figures 5.6–5.8)."""
    import matplotlib.pyplot as plt

    out = {}
    for v, rec in (S.get("attention_maps") or {}).items():
        rows = [(subset, x) for subset in ("losers", "winners") for x in rec.get(subset, [])]
        if not rows:
            continue
        h = sum(max(2.0, 0.18 * max(len(x["base_map"]["output"]), len(x["compressed_map"]["output"]))) for _, x in rows)
        fig, axes = plt.subplots(len(rows), 2, figsize=(11, h + 0.6 * len(rows)), squeeze=False)
        base = (S.get("bases") or {}).get(v, S["base"])
        for r, (subset, x) in enumerate(rows):
            for c, (who, m) in enumerate(((base, x["base_map"]), (v, x["compressed_map"]))):
                ax = axes[r][c]
                ax.imshow(m["alpha"], aspect="auto", cmap="viridis", vmin=0, vmax=1)
                ax.set_xticks(range(len(m["source"])), m["source"], rotation=90, fontsize=6)
                ax.set_yticks(range(len(m["output"])), m["output"], fontsize=6)
                ax.set_title(f"{subset[:-1]} {x['pair']} #{x['idx']} (ΔchrF {x['delta_chrF']:+.1f}): {who}", fontsize=8)
        fig.tight_layout()
        out[f"attention_{v}"] = _png(fig)
    return out


def _yerr(points: list[dict], key: str) -> list[list[float]]:
    """Error bars (below, above) of ``points[key]`` from ``points[key_ci]``; 0 where there is no interval."""
    lo, hi = [], []
    for p in points:
        v, ci = p.get(key), p.get(f"{key}_ci") or [None, None]
        lo.append(max(0.0, v - ci[0]) if v is not None and ci[0] is not None else 0.0)
        hi.append(max(0.0, ci[1] - v) if v is not None and ci[1] is not None else 0.0)
    return [lo, hi]


def _family_figures(S: dict) -> dict[str, str]:
    """Per family of variants (``eval.families``): a ladder (numeric axis) as average spBLEU and chrF per value with
    their intervals, the knee marked (the study's figure 5.2); a comparison (the pruning groupings, figure 5.9) as
    bars of the mean relative differences with their intervals."""
    import matplotlib.pyplot as plt

    out = {}
    for name, F in (S.get("families") or {}).items():
        pts = F["points"]
        if not pts:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.0))
        for ax, m in zip(axes, ("spBLEU", "chrF"), strict=True):
            if F["numeric"]:
                xs = [100 * p["value"] if 0 < max(q["value"] for q in pts) <= 1 else p["value"] for p in pts]
                ax.errorbar(xs, [p[m] for p in pts], yerr=_yerr(pts, m), marker="o", ms=3, capsize=2, lw=1)
                knee = (F.get("knee") or {}).get("value")
                if knee is not None:
                    ax.axvline(100 * knee if knee <= 1 else knee, color="grey", ls="--", lw=0.8, label="knee")
                    ax.legend(fontsize=7)
                ax.set_xlabel(f"{F['axis']} (%)" if max(q["value"] for q in pts) <= 1 else F["axis"])
                ax.set_ylabel(f"avg {m}, {len(F['pairs'])} pairs (95 % CI)")
            else:
                rel = [p for p in pts if p.get(f"rel_{m}") is not None]
                ax.bar(range(len(rel)), [p[f"rel_{m}"] for p in rel], yerr=_yerr(rel, f"rel_{m}"), capsize=2)
                ax.set_xticks(range(len(rel)), [str(p["value"]) for p in rel], fontsize=8)
                ax.axhline(0, color="grey", lw=0.8)
                ax.set_ylabel(f"mean rel. {m} diff. % (95 % CI)")
            ax.set_title(f"{name}: {m}", fontsize=9)
        fig.tight_layout()
        out[f"family_{name}"] = _png(fig)
    return out


def _scatter(S: dict) -> dict[str, str]:
    """Relative spBLEU difference against the bitext of the pair's poorer language (thesis figure 5.3)."""
    import matplotlib.pyplot as plt

    comps, kept, out = comparisons(S), [p for p in S["pairs"] if p["kept"]], {}
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    drawn = 0
    for v in comps:
        # a relative difference is undefined where the base scores 0 (e.g. a model whose outputs are all empty)
        pts = [(min(language(p["src"]).bitext_m, language(p["tgt"]).bitext_m), p["rel"][v]["spBLEU"]) for p in kept
               if p["rel"][v]["spBLEU"] is not None and math.isfinite(p["rel"][v]["spBLEU"])]
        drawn += len(pts)
        ax.scatter([x for x, _ in pts], [y for _, y in pts], s=14, alpha=0.7, label=v)
    ax.axhline(0, color="grey", lw=0.8)
    if drawn:  # no point to draw: an empty linear axis (a log axis of no data fails)
        ax.set_xscale("log")
    ax.set_xlabel("bitext with English of the pair's poorer language (M pairs, thesis table)")
    ax.set_ylabel("relative spBLEU difference (%)")
    if comps and kept:
        ax.legend(fontsize=8)
    out["scatter"] = _png(fig)
    return out


def _tier_bars(S: dict) -> dict[str, str]:
    """Mean relative spBLEU difference per pair tier with its interval, one figure per tier view (figure 5.4)."""
    import matplotlib.pyplot as plt

    comps, out = comparisons(S), {}
    for view, tiers in S["tiers"].items():
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        w = 0.8 / max(1, len(comps))
        for k, v in enumerate(comps):
            cells = [tiers["tier"][t] for t in TIERS]
            vals = [c[v]["spBLEU"] if c["pairs"] and c[v]["spBLEU"] is not None else 0 for c in cells]
            cis = [c[v].get("spBLEU_ci") if c["pairs"] else None for c in cells]
            lo = [max(0.0, val - ci[0]) if ci and ci[0] is not None else 0 for val, ci in zip(vals, cis, strict=True)]
            hi = [max(0.0, ci[1] - val) if ci and ci[1] is not None else 0 for val, ci in zip(vals, cis, strict=True)]
            ax.bar([i + k * w for i in range(len(TIERS))], vals, width=w, label=v, yerr=[lo, hi], capsize=2,
                   error_kw={"elinewidth": 0.8})
        ax.set_xticks([i + 0.4 - w / 2 for i in range(len(TIERS))],
                      [f"{t}\n({tiers['tier'][t]['pairs']} pairs)" for t in TIERS], fontsize=8)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_ylabel("mean relative spBLEU diff (%) ± 95 % CI")
        ax.set_title(f"by pair tier ({view} tiers)", fontsize=9)
        if comps:
            ax.legend(fontsize=8)
        out[f"tiers_{view}"] = _png(fig)
    return out


def _delta_histograms(S: dict) -> dict[str, str]:
    """ΔchrF per sentence by tier, one panel per compared variant (figure 5.5)."""
    import matplotlib.pyplot as plt
    import numpy as np

    comps, out = comparisons(S), {}
    if comps:
        fig, axes = plt.subplots(1, len(comps), figsize=(3.2 * len(comps), 3.0), squeeze=False)
        for ax, v in zip(axes[0], comps, strict=True):
            every = [d for t in TIERS for d in S["delta"][v]["deltas_by_tier"].get(t, [])]
            edges = np.histogram_bin_edges(every, bins=30) if every else 30  # shared by every tier
            for t in TIERS:
                ds = S["delta"][v]["deltas_by_tier"].get(t, [])
                if ds:  # outlines, so that no tier hides another
                    ax.hist(ds, bins=edges, histtype="step", linewidth=1.4, density=True, label=f"{t} ({len(ds)})")
            ax.set_ylabel("density")
            ax.set_title(v, fontsize=9)
            ax.set_xlabel("ΔchrF per sentence")
            if every:
                ax.legend(fontsize=7)
        out["delta_hist"] = _png(fig)
    return out


def _table(headers: list[str], rows: list[list], cls: str = "") -> str:
    h = "".join(f"<th>{html.escape(str(x))}</th>" for x in headers)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>'


Table = tuple[list[str], list[list]]


def tables(S: dict) -> dict[str, Table]:
    """Every table of the report as (headers, rows) — shared by HTML, Markdown and CSV; one builder per table
    (``TABLES``), each giving the tables its summary section has (none where the summary lacks it)."""
    T: dict[str, Table] = {}
    for build in TABLES:
        T |= build(S)
    return T


def _variants_table(S: dict) -> dict[str, Table]:
    base, bases, backends = S["base"], S.get("bases") or {}, S.get("backends") or {}
    return {"variants": (["variant", "backend", "compared with", "nominal size", "disk (real artefact)", "avg spBLEU",
                          "avg chrF", "rel. spBLEU % [95 % CI]", "rel. chrF % [95 % CI]", "pairs improved",
                          "pairs sig. worse / better (spBLEU)"],
                         [[r["variant"], backends.get(r["variant"], "torch"),
                           bases.get(r["variant"], "–" if r["variant"] == base else base), _f(r["size"].get("nominal_ratio")),
                           _disk(r["size"]), _f(r["spBLEU"]), _f(r["chrF"]), _fci(r.get("rel_spBLEU"), r.get("rel_spBLEU_ci")),
                           _fci(r.get("rel_chrF"), r.get("rel_chrF_ci")), r.get("improved_pairs", "–"),
                           (f"{r['significantly']['spBLEU']['worse']} / {r['significantly']['spBLEU']['better']}"
                            if r.get("significantly") else "–")] for r in S["variant_table"]])}


def csv_name(table: str) -> str:
    """A table's CSV file name: a head-to-head key ``a|b`` becomes ``a_vs_b`` (no shell-special character)."""
    return table.replace("|", "_vs_")


def _pair_scores_table(S: dict) -> dict[str, Table]:
    """Every pair's corpus scores and empty outputs for every series, kept by the filter or not: always shown."""
    bar, series = S["thresholds"]["bleu_filter"], S["variants"]
    return {"pair_scores": (["pair", "benchmark", "tier", "kept"]
                            + [f"{v} {c}" for v in series for c in ("spBLEU", "chrF", "empty")],
                            [[f"{p['src']}-{p['tgt']}", p["benchmark"], p["tier"]["thesis"],
                              "yes" if p["kept"] else f"no (base spBLEU < {bar})"]
                             + [x for v in series for x in (_f(p["scores"][v]["spBLEU"]), _f(p["scores"][v]["chrF"]),
                                                            p.get("empty_outputs", {}).get(v, "–"))]
                             for p in S["pairs"]])}


def _tier_tables(S: dict) -> dict[str, Table]:
    comps, T = comparisons(S), {}
    for view, tiers in S["tiers"].items():
        for axis in ("tier", "src_tier", "tgt_tier"):
            T[f"{axis}_{view}"] = ([axis.replace("_", " "), "pairs"] + [f"{v} rel. spBLEU % [95 % CI]" for v in comps]
                                   + [f"{v} rel. chrF % [95 % CI]" for v in comps],
                                   [[t, tiers[axis][t]["pairs"]]
                                    + [_fci(tiers[axis][t][v]["spBLEU"], tiers[axis][t][v].get("spBLEU_ci")) for v in comps]
                                    + [_fci(tiers[axis][t][v]["chrF"], tiers[axis][t][v].get("chrF_ci")) for v in comps]
                                    for t in TIERS])
    return T


def _delta_tables(S: dict) -> dict[str, Table]:
    """ΔchrF losers and winners, off-target rates, λ."""
    comps, D, OT, H = comparisons(S), S["delta"], S["off_target"], S["hallucination"]
    return {
        "delta": (["variant", "sentences", "losers", "losers % [95 % CI]", "winners", "winners % [95 % CI]"],
                  [[v, D[v]["sentences"], D[v]["losers"], _fci(D[v]["losers_pct"], D[v].get("losers_pct_ci"), 1),
                    D[v]["winners"], _fci(D[v]["winners_pct"], D[v].get("winners_pct_ci"), 1)] for v in comps]),
        "off_target": (["variant", "losers: base", "losers: compressed", "losers: change pp [95 % CI]", "n (losers)",
                        "overall: base", "overall: compressed", "overall: change pp [95 % CI]"],
                       [[v, _f(OT[v]["losers"]["base"]["off_target_pct"], pct=True),
                         _f(OT[v]["losers"]["compressed"]["off_target_pct"], pct=True),
                         _ci(OT[v].get("losers_change_ci"), 1), OT[v]["losers"]["base"]["n"],
                         _f(OT[v]["overall"]["base"]["off_target_pct"], pct=True),
                         _f(OT[v]["overall"]["compressed"]["off_target_pct"], pct=True),
                         _ci(OT[v].get("overall_change_ci"), 1)] for v in comps]),
        "hallucination": (["variant", "λ losers [95 % CI]", "λ winners [95 % CI]", "λ all [95 % CI]",
                           "median per-sentence ratio (losers)", "n losers (on-target)", "losers left out: off-target",
                           "n winners (on-target)", "winners left out: off-target"],
                          [[v] + [_fci(H[v][k]["lambda"], H[v][k].get("lambda_ci"), 3) for k in ("losers", "winners", "all")]
                           + [_f(H[v]["losers"]["per_sentence"]["median"]), H[v]["losers"]["n"],
                              H[v]["losers"].get("off_target", 0), H[v]["winners"]["n"], H[v]["winners"].get("off_target", 0)]
                           for v in comps]),
        "findings": (["claim", "variant", "outcome (95 %)", "numbers"],
                     [[f["claim"], f["variant"], f["outcome"], f["numbers"]] for f in S.get("findings", [])])}


def _gender_tables(S: dict) -> dict[str, Table]:
    bias, T = S.get("bias") or {}, {}
    if bias.get("gender"):
        T["gender"] = (["variant", "accuracy [95 % CI]", "F1 male", "F1 female", "ΔG", "ΔS", "ψ [95 % CI]", "ψ* [95 % CI]",
                        "ψ* change [95 % CI]", "rel. ψ %", "rel. accuracy %"],
                       [[v, _fci(g["average"]["accuracy"], g.get("ci", {}).get("accuracy"), 3), _f(g["average"]["f1_male"], 3),
                         _f(g["average"]["f1_female"], 3), _f(g["average"]["delta_g"], 3), _f(g["average"]["delta_s"], 3),
                         _fci(g["average"]["psi"], g.get("ci", {}).get("psi"), 3),
                         _fci(g["average"]["psi_star"], g.get("ci", {}).get("psi_star"), 3),
                         _ci(g.get("change_ci", {}).get("psi_star"), 3) if "change_ci" in g else "–",
                         _f(g.get("relative_to_base", {}).get("psi")),
                         _f(g.get("relative_to_base", {}).get("accuracy"))] for v, g in bias["gender"].items()])
        T["gender_languages"] = (["variant", "language", "n", "accuracy", "F1 male", "F1 female", "ψ", "ψ*"],
                                 [[v, lang, d["n"], _f(d["accuracy"], 3), _f(d["f1_male"], 3), _f(d["f1_female"], 3),
                                   _f(d["psi"], 3), _f(d["psi_star"], 3)]
                                  for v, g in bias["gender"].items() for lang, d in g["languages"].items()])
    if bias.get("aligner_comparison"):
        ac = bias["aligner_comparison"]
        T["aligners"] = (["variant", "aligner", "accuracy", "ψ", "ψ*"],
                         [[v, a, _f(ac[v][a]["accuracy"], 3), _f(ac[v][a]["psi"], 3), _f(ac[v][a]["psi_star"], 3)]
                          for v in ac if isinstance(ac[v], dict) and "fast_align" in ac[v]
                          for a in ("cross_attention", "fast_align") if a in ac[v]])
    return T


def _word_sense_table(S: dict) -> dict[str, Table]:
    ws = (S.get("bias") or {}).get("word_sense")
    if not ws:
        return {}
    return {"word_sense": (["pair", "variant", "n", "accuracy [95 % CI]", "accuracy change [95 % CI]", "wrong-sense rate",
                            "miss rate", "rel. accuracy %"],
                           [[pair, v, d["n"], _fci(d["accuracy"], d.get("accuracy_ci"), 3),
                             _ci(d.get("accuracy_change_ci"), 3) if "accuracy_change_ci" in d else "–",
                             _f(d["wrong_rate"], 3), _f(d["miss_rate"], 3),
                             _f(d.get("relative_accuracy"))] for pair, res in ws.items() for v, d in res.items()])}


def _movement_tables(S: dict) -> dict[str, Table]:
    """Per (a, b) asked for: a's sentences by category (rows) against b's (columns); then the loser→winner ones."""
    T = {}
    for key, M in (S.get("movement") or {}).items():
        cats = ("loser", "neither", "winner")
        T[f"movement_{key}"] = ([f"{M['a']} \\ {M['b']}", *cats, "sentences"],
                                [[x, *(M["counts"][x][y] for y in cats), sum(M["counts"][x].values())] for x in cats])
        T[f"moves_{key}"] = (["pair", "sentence", f"ΔchrF {M['a']}", f"ΔchrF {M['b']}"],
                             [[m["pair"], m["idx"], _f(m["delta_a"]), _f(m["delta_b"])] for m in M["loser_to_winner"]])
    return T


def _attention_texts(S: dict) -> dict[str, Table]:
    """The texts of each variant's mapped examples (the figure's rows, in order)."""
    T = {}
    for v, rec in (S.get("attention_maps") or {}).items():
        b = (S.get("bases") or {}).get(v, S["base"])
        T[f"attention_{v}"] = (["example", "pair", "ΔchrF", "source", b, v],
                               [[subset[:-1], x["pair"], _f(x["delta_chrF"]), x["source"], x["base"], x["compressed"]]
                                for subset in ("losers", "winners") for x in rec.get(subset, [])])
    return T


def _dibimt_table(S: dict) -> dict[str, Table]:
    """DiBiMT per language and variant: accuracy, SFII, SPDI, MFS, MFS⁺ with intervals, and SFII's and MFS's changes
    from the base (lower SFII / SPDI / MFS is less biased)."""
    dib = (S.get("bias") or {}).get("dibimt")
    if not dib:
        return {}
    ms = ("accuracy", "SFII", "SPDI", "MFS", "MFS+")
    return {"dibimt": (["language", "variant", "items", "judged"] + [f"{m} [95 % CI]" for m in ms]
                       + ["SFII change [95 % CI]", "MFS change [95 % CI]"],
                       [[lang, v, d["n"], d["good"] + d["bad"]] + [_fci(d[m], d.get(f"{m}_ci"), 3) for m in ms]
                        + [_ci(d.get(f"{m}_change_ci"), 3) if f"{m}_change_ci" in d else "–" for m in ("SFII", "MFS")]
                        for lang, res in dib.items() for v, d in res.items()])}


def _deploy_table(S: dict) -> dict[str, Table]:
    if not S.get("speed"):
        return {}
    sp0 = S["speed"].get(S["base"], {})
    b1, bb = sp0.get("sentences_per_s"), (sp0.get("batched") or {}).get("sentences_per_s")
    env = (S.get("run") or {}).get("environment", {}).get("cpu", {})
    return {"deploy": (["variant", "model", "deployable form", "disk MiB", "batch-1 sentences/s", "batch-1 tokens/s",
                        "batch-1 speed-up vs base", "batched sentences/s", "batched speed-up vs base", "measured on"],
                       [[v, _model_name(S.get("variant_models", {}).get(v, S["model"])), sp.get("form", "torch fp32"),
                         f"{sp['disk_bytes'] / 2**20:.1f}" if sp.get("disk_bytes") else _disk_mib(S, v),
                         *_deploy_speeds(sp, b1, bb, env)]
                        for v, sp in S["speed"].items()])}


def _group_tables(S: dict) -> dict[str, Table]:
    T = {}
    for view, groups in (S.get("pair_groups") or {}).items():
        if not any(c["contrasts"] for c in groups.values()) and len(S["variants"]) < 2:
            continue
        names = list(next(iter(groups.values()))["contrasts"]) if groups else []
        T[f"groups_{view}"] = (["pair group", "pairs", "sentences"] + [f"{v} chrF" for v in S["variants"]]
                               + [f"{v} spBLEU" for v in S["variants"]]
                               + [f"{c}: chrF diff. [95 % CI]" for c in names]
                               + [f"{c}: spBLEU diff. [95 % CI]" for c in names],
                               [[g, c["pairs"], c["sentences"]] + [_f(c["scores"][v]["chrF"]) for v in S["variants"]]
                                + [_f(c["scores"][v]["spBLEU"]) for v in S["variants"]]
                                + [_fci(c["contrasts"][n]["chrF"]["difference"], c["contrasts"][n]["chrF"]["ci"]) for n in names]
                                + [_fci(c["contrasts"][n]["spBLEU"]["difference"], c["contrasts"][n]["spBLEU"]["ci"])
                                   for n in names]
                                for g, c in groups.items()])
    return T


def _signals_table(S: dict) -> dict[str, Table]:
    sig = S.get("distillation_signals") or {}
    if not sig:
        return {}
    groups = [g for g in PAIR_GROUPS if any(g in s["last"]["groups"] for s in sig.values())]
    return {"signals": (["pair group"] + [f"{v}: KL(teacher‖student) start → end" for v in sig]
                        + [f"{v}: CE start → end" for v in sig],
                        [[g] + [f"{_f(s['first']['groups'].get(g, {}).get('kl'), 3)} → {_f(s['last']['groups'].get(g, {}).get('kl'), 3)}"
                                for s in sig.values()]
                         + [f"{_f(s['first']['groups'].get(g, {}).get('ce'), 3)} → {_f(s['last']['groups'].get(g, {}).get('ce'), 3)}"
                            for s in sig.values()] for g in groups])}


def _lid_table(S: dict) -> dict[str, Table]:
    return {"lid": (["language", "code", "identifier"], [[c["name"], c["lang"], c["identifier"]] for c in S["lid_coverage"]])}


def _parity_tables(S: dict) -> dict[str, Table]:
    T = {}
    scores = {(p["benchmark"], f"{p['src']}-{p['tgt']}"): p["scores"] for p in S["pairs"]}
    for b2, par in (S.get("backend_parity") or {}).items():
        T[f"parity_{b2}"] = (["pair", "benchmark", "sentences", "identical hypotheses", f"{par['of']} chrF", f"{b2} chrF",
                              "chrF diff. [95 % CI]", f"{par['of']} spBLEU", f"{b2} spBLEU", "spBLEU diff. [95 % CI]"],
                             [[r["pair"], r["benchmark"], r["sentences"], r["identical"]]
                              + [x for m in ("chrF", "spBLEU") for x in (
                                  _f(scores[(r["benchmark"], r["pair"])][par["of"]][m]),
                                  _f(scores[(r["benchmark"], r["pair"])][b2][m]),
                                  _fci(r[m]["delta"], r[m]["delta_ci"]))] for r in par["pairs"]]
                             + [["mean over pairs", "", par["sentences"], par["identical"]]
                                + [x for m in ("chrF", "spBLEU") for x in (
                                    "", "", _fci(par["mean"][m]["difference"], par["mean"][m]["ci"]))]])
    return T


def _pair_tables(S: dict) -> dict[str, Table]:
    """Per compared variant: its kept pairs, most losing first, then the pairs the base-spBLEU filter dropped (their
    scores shown, never hidden: ``kept`` says why they enter no average)."""
    T, bases = {}, S.get("bases") or {}
    bar = S["thresholds"]["bleu_filter"]
    for v in comparisons(S):
        b = bases.get(v, S["base"])
        ranked = sorted((p for p in S["pairs"] if p["kept"]), key=lambda p: p["rel"][v]["spBLEU"] or 0) + sorted(
            (p for p in S["pairs"] if not p["kept"]), key=lambda p: -p["scores"][b]["spBLEU"])
        T[f"pairs_{v}"] = (["pair", "benchmark", "tier", f"{b} spBLEU", f"{v} spBLEU", "rel. % [95 % CI]", "p", "sig. (BH)",
                            f"{b} chrF", f"{v} chrF", "rel. chrF % [95 % CI]", f"{b} empty", f"{v} empty", "kept"],
                           [[f"{p['src']}-{p['tgt']}", p["benchmark"], p["tier"]["thesis"],
                             _f(p["scores"][b]["spBLEU"]), _f(p["scores"][v]["spBLEU"]),
                             _fci(p["rel"][v]["spBLEU"], p.get("intervals", {}).get(v, {}).get("spBLEU", {}).get("rel_ci")),
                             _f(p.get("intervals", {}).get(v, {}).get("spBLEU", {}).get("p"), 3),
                             f"{MARK.get(sig := p.get('significance', {}).get(v, {}).get('spBLEU', ''), '')} {sig}".strip() or "–",
                             _f(p["scores"][b]["chrF"]), _f(p["scores"][v]["chrF"]),
                             _fci(p["rel"][v]["chrF"], p.get("intervals", {}).get(v, {}).get("chrF", {}).get("rel_ci")),
                             p.get("empty_outputs", {}).get(b, "–"), p.get("empty_outputs", {}).get(v, "–"),
                             "yes" if p["kept"] else f"no: base spBLEU < {bar}"]
                            for p in ranked])
    return T


def _family_tables(S: dict) -> dict[str, Table]:
    """Per family: each point's average scores and relative differences with their intervals."""
    return {f"family_{name}": ([F["axis"], "variant", "avg spBLEU [95 % CI]", "avg chrF [95 % CI]",
                                "rel. spBLEU % [95 % CI]", "rel. chrF % [95 % CI]"],
                               [[p["value"], p["variant"], _fci(p["spBLEU"], p["spBLEU_ci"]), _fci(p["chrF"], p["chrF_ci"]),
                                 _fci(p.get("rel_spBLEU"), p.get("rel_spBLEU_ci"), 1) if p.get("rel_spBLEU_ci") else "–",
                                 _fci(p.get("rel_chrF"), p.get("rel_chrF_ci"), 1) if p.get("rel_chrF_ci") else "–"]
                                for p in F["points"]])
            for name, F in (S.get("families") or {}).items()}


def method_of(S: dict, v: str) -> str:
    """A variant's compression method, read from its artefacts: a sparse artefact is pruning, an int8 one (or a
    nominal size below 1 without sparsity: bitsandbytes) quantisation; another model (a student): its own."""
    size = next((r["size"] for r in S["variant_table"] if r["variant"] == v), {})
    if size.get("base_parameters"):  # a model of its own size (sweep.run.model_sizes)
        return "other model"
    pruned, quantised = "sparse_bytes" in size, "int8_bytes" in size or ("sparse_bytes" not in size
                                                                         and (size.get("nominal_ratio") or 1) < 1)
    if pruned and quantised:
        return "pruning + quantisation"
    return "pruning" if pruned else "quantisation" if quantised else "other model"


def most_affected(S: dict, k: int = MOST_AFFECTED) -> list[dict]:
    """The cross-method table: each compared variant's ``k`` kept pairs of lowest relative spBLEU, and for every
    pair in any of those lists the methods under which it is among the most affected; pairs most affected under
    more methods first, then by their mean rank."""
    comps, kept = comparisons(S), [p for p in S["pairs"] if p["kept"]]
    ranks: dict[str, dict[str, int]] = {}
    for v in comps:
        order = sorted(kept, key=lambda p: (p["rel"][v]["spBLEU"] is None, p["rel"][v]["spBLEU"] or 0))
        for r, p in enumerate(order[:k], 1):
            ranks.setdefault(f"{p['src']}-{p['tgt']}", {})[v] = r
    by_pair = {f"{p['src']}-{p['tgt']}": p for p in kept}
    rows = [{"pair": pair, "tier": by_pair[pair]["tier"].get("thesis"), "ranks": r,
             "methods": sorted({method_of(S, v) for v in r})} for pair, r in ranks.items()]
    return sorted(rows, key=lambda x: (-len(x["methods"]), sum(x["ranks"].values()) / len(x["ranks"]), x["pair"]))


def _most_affected_table(S: dict) -> dict[str, Table]:
    comps = comparisons(S)
    methods = {method_of(S, v) for v in comps} - {"other model"}
    if len(comps) < 2 or len(methods) < 2:
        return {}
    by_pair = {f"{p['src']}-{p['tgt']}": p for p in S["pairs"]}
    rows = []
    for x in most_affected(S):
        p = by_pair[x["pair"]]
        rows.append([x["pair"], x["tier"] or "–", " & ".join(x["methods"])]
                    + [f"{_fci(p['rel'][v]['spBLEU'], p['intervals'][v]['spBLEU'].get('rel_ci'), 1)}"
                       + (f" (#{x['ranks'][v]})" if v in x["ranks"] else "") for v in comps])
    return {"most_affected": (["pair", "tier", "most affected under"]
                              + [f"{v} ({method_of(S, v)}): rel. spBLEU % [95 % CI] (rank)" for v in comps], rows)}


TABLES = (_variants_table, _pair_scores_table, _tier_tables, _delta_tables, _gender_tables, _word_sense_table, _dibimt_table, _deploy_table,
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
    return [_f(sp["sentences_per_s"]), _f(sp["tokens_per_s"], 1),
            "1.00× (the base)" if base_row else _speedup(sp.get("vs_base"), sp["sentences_per_s"], b1),
            _f(bt), "1.00× (the base)" if base_row else _speedup(batched.get("vs_base"), bt, bb),
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


def _disk_mib(S: dict, v: str) -> str:
    """A dense model's files in MiB; for a compressed variant its artefact ratio."""
    size = next((r["size"] for r in S["variant_table"] if r["variant"] == v), {})
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


def _sections(S: dict, T: dict) -> list:
    comps = comparisons(S)
    return sections(S, T, lambda v: _examples_html(S, v), lambda: _languages_html(S, comps),
                    lambda: _aligners_html(S))


def overview_notes(S: dict) -> list[str]:
    """What the first paragraph must say before any table: empty outputs per series, and a filter that kept no
    pair (with the numbers and the key to change)."""
    notes, pairs = [], S["pairs"]
    if S.get("quick_look"):
        notes.append(f"A quick look (--sentences {S['quick_look']}): at most {S['quick_look']} sentences per pair, "
                     "bias benchmark and speed timing; intervals this wide say little. Run without --sentences (a "
                     "new --out) for the study's numbers.")
    n = sum(p["n"] for p in pairs)
    empty = {v: sum(p.get("empty_outputs", {}).get(v, 0) for p in pairs) for v in S["variants"]}
    if any(empty.values()):
        worst = {v: max(pairs, key=lambda p, v=v: p.get("empty_outputs", {}).get(v, 0)) for v in empty if empty[v]}
        notes.append("Empty outputs: " + "; ".join(
            f"{v} {empty[v]} of {n} (most in {worst[v]['src']}-{worst[v]['tgt']}: "
            f"{worst[v]['empty_outputs'][v]} of {worst[v]['n']})" for v in worst)
            + " — scored as empty strings; per pair in the pairs tables' empty columns.")
    kept = [p for p in pairs if p["kept"]]
    if pairs and not kept:
        base = S["base"]
        top = max(p["scores"][base]["spBLEU"] for p in pairs)
        notes.append(f"No pair passed the filter: every pair's base spBLEU is below analysis.bleu_filter = "
                     f"{S['thresholds']['bleu_filter']} (the highest is {top:.2f}), so averages, Findings and figures "
                     "are empty; the pairs tables list every pair's scores. Lower analysis.bleu_filter in the config "
                     "(0 keeps every pair) and run the command again: the stored translations are reused.")
    return notes


def markdown(S: dict, T: dict) -> str:
    parts = [f"# forgetbench report: {S['name']}", "",
             f"Base `{S['base']}`; {len([p for p in S['pairs'] if p['kept']])} of {len(S['pairs'])} pairs kept "
             f"(base spBLEU ≥ {S['thresholds']['bleu_filter']}); ΔchrF threshold ±{S['thresholds']['delta']}.",
             *(f"\n**{x}**" for x in overview_notes(S)), ""]
    return "\n".join(parts + render_markdown(_sections(S, T), T))


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
.ex td,.ex th,.findings td,.findings th{text-align:left;max-width:420px;overflow-wrap:anywhere;vertical-align:top}
.ex td:nth-child(-n+2),.ex th:nth-child(-n+2){white-space:nowrap;overflow-wrap:normal}
.supported{color:#060}.contradicted{color:#a00}.inconclusive{color:#666}code,pre{background:#f6f6f6;font-size:12px}pre{padding:.6em;overflow-x:auto}
img{max-width:100%}.lang{display:inline-block;vertical-align:top;margin:0 1.2em 1em 0}"""


def html_report(S: dict, T: dict, figs: dict[str, str]) -> str:
    e = html.escape
    comps = comparisons(S)
    head = [f"<!doctype html><html><head><meta charset='utf-8'><title>forgetbench: {e(S['name'])}</title>",
            f"<style>{CSS}</style></head><body>", f"<h1>Who pays for compression? — {e(S['name'])}</h1>",
            f"<p>Base <b>{e(S['base'])}</b> vs {', '.join(e(v) for v in comps)}. "
            f"{len([p for p in S['pairs'] if p['kept']])} of {len(S['pairs'])} pairs kept (base spBLEU ≥ "
            f"{S['thresholds']['bleu_filter']}); ΔchrF losers &lt; −{S['thresholds']['delta']}, winners &gt; "
            f"+{S['thresholds']['delta']}; {_times(S['run'])}; {S['run']['threads']} thread(s); "
            f"{e(_hardware(S['run']))}; intervals: paired "
            f"bootstrap, {S['thresholds'].get('resamples', '–')} resamples, seed {S['thresholds'].get('seed', '–')}; "
            "▼/▲ = significantly worse/better (Benjamini–Hochberg, q = "
            f"{S['thresholds'].get('fdr', 0.05)}).</p>", *(f"<p><b>{e(x)}</b></p>" for x in overview_notes(S))]
    return "\n".join(head + render_html(_sections(S, T), T, figs, _table, _findings_table) + ["</body></html>"])


def _examples_html(S: dict, v: str) -> str:
    """The most losing and winning sentences of a variant, model text escaped."""
    out = []
    for subset in ("losers", "winners"):
        rows = [[x["pair"], _f(x["delta_chrF"]), x["source"], x["reference"], x["base"], x["compressed"]]
                for x in S["examples"][v][subset]]
        out += [f"<h3>Example {subset} — {html.escape(v)}</h3>",
                _table(["pair", "ΔchrF", "source", "reference", (S.get("bases") or {}).get(v, S["base"]), v], rows, "ex")]
    return "\n".join(out)


def _languages_html(S: dict, comps: list[str]) -> str:
    """One card per language: its pairs as source and as target, per variant."""
    e, out = html.escape, []
    for L in S["languages"]:
        rows = []
        for role in ("as_source", "as_target"):
            r = L[role]
            rows.append([role.replace("_", " "), r["pairs"], _f(r["base_spBLEU"])]
                        + [f"{_f(r[v]['rel_spBLEU'])} / {_f(r[v]['losers_pct'], pct=True)}" for v in comps])
        out += [f"<div class='lang'><h3>{e(L['name'])} ({e(L['lang'])})</h3><p>tier {e(L['tier'])}, bitext "
                f"{L['bitext_m']} M, LID: {e(L['identifier'])}</p>",
                _table(["role", "pairs", "base spBLEU"] + [f"{v}: rel. % / losers" for v in comps], rows), "</div>"]
    return "\n".join(out)


def _aligners_html(S: dict) -> str:
    ac = S["bias"]["aligner_comparison"]
    return f"<p>Same gender read by both aligners for {_f(ac['same_gender_read_pct'], pct=True)} of {ac['items']} items.</p>"


def _hardware(run: dict) -> str:
    """Where the series ran (``models.hardware.describe`` per variant), beside the environment line: one entry per
    distinct placement, the variants after it where they differ."""
    hw = run.get("hardware") or {}
    if not hw:
        return "cpu float32"
    seen: dict[str, list[str]] = {}
    for v, d in hw.items():
        where = ", ".join(d.get("devices") or [d.get("device", "cpu")])
        gpus = sorted(set(d.get("gpus") or []))
        text = f"{where} {d.get('dtype', 'float32')}" + (f" ({', '.join(gpus)}, driver {d.get('driver')}, CUDA "
                                                        f"{d.get('cuda')})" if gpus else "")
        if d.get("direct_step"):
            text += f"; greedy step through forward: {d['direct_step']}"
        seen.setdefault(text, []).append(v)
    if len(seen) == 1:
        return next(iter(seen))
    return "; ".join(f"{t} [{', '.join(vs)}]" for t, vs in seen.items())


def _times(run: dict) -> str:
    """The run's wall time per stage and for the whole command."""
    stages = run.get("stages") or {}
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in stages.items() if v is not None)
    total = run.get("command_seconds") or run.get("seconds")
    return f"total {_f(total, 0)} s" + (f" ({parts})" if parts else "")


def _findings_table(t) -> str:
    headers, rows = t
    h = "".join(f"<th>{html.escape(x)}</th>" for x in headers)
    b = "".join(f"<tr><td>{html.escape(r[0])}</td><td>{html.escape(r[1])}</td><td class='{html.escape(r[2])}'>"
                f"{html.escape(r[2])}</td><td>{html.escape(r[3])}</td></tr>" for r in rows)
    return f'<table class="findings"><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>'


def write_report(S: dict, out_dir: str | Path, started: float | None = None) -> Path:
    """Write the report folder as a whole: built in a temporary sibling and swapped in, so a killed write
    leaves the previous complete report (or none), never a half-updated one; a rerun rewrites it."""
    import time

    from forgetbench.io import atomic_directory

    t0 = time.perf_counter()
    T = tables(S)
    figs = figures(S)
    S["run"].setdefault("stages", {})["report"] = round(time.perf_counter() - t0, 1)
    if started is not None:  # the whole command, from its start to the report (its files are written next)
        S["run"]["command_seconds"] = round(time.perf_counter() - started, 1)
    with atomic_directory(out_dir, replace=True) as out:
        atomic_write_json(out / "summary.json", S)
        atomic_write_text(out / "report.md", markdown(S, T))
        atomic_write_text(out / "report.html", html_report(S, T, figs))
        for name, (headers, rows) in T.items():
            buf = io.StringIO()
            w = csv.writer(buf)
            w.writerow(headers)
            w.writerows(rows)
            atomic_write_text(out / f"{csv_name(name)}.csv", buf.getvalue())
    return Path(out_dir) / "report.html"
