"""The analyses of "what did compression forget" (METHOD.md §2), from a run store.

Every comparison between a compressed variant and the base uses the sentences both have.
Thresholds (configurable; defaults from METHOD.md): baseline-spBLEU pair filter ≥ 12, ΔchrF
losers < −0.5 and winners > +0.5 chrF points, languages with two scripts excluded from the Δ
analysis.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from forgetbench.eval import lid
from forgetbench.eval.languages import TIERS, TWO_SCRIPT, language, pair_tier
from forgetbench.eval.metrics import SpBLEU, chrf_signature, corpus_chrf
from forgetbench.eval.sentence_stats import REF
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job


@dataclass
class Thresholds:
    bleu_filter: float = 12.0
    delta: float = 0.5
    exclude_two_script: bool = True


@dataclass
class TierView:
    name: str
    tiers: dict[str, str] | None = None  # None = thesis table


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def _rel(comp: float, base: float) -> float | None:
    return (comp - base) / base * 100 if base else None


def _pct(num: int, den: int) -> float | None:
    return 100.0 * num / den if den else None


@dataclass
class Analysis:
    base: str
    variants: list[str]
    thresholds: Thresholds
    signatures: dict
    pairs: list[dict] = field(default_factory=list)
    tiers: dict = field(default_factory=dict)
    variant_table: list[dict] = field(default_factory=list)
    delta: dict = field(default_factory=dict)
    off_target: dict = field(default_factory=dict)
    lid_coverage: list[dict] = field(default_factory=list)
    hallucination: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    languages: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def analyse(store: Store, jobs: list[Job], base: str, variants: list[str], spbleu: SpBLEU,
            thresholds: Thresholds | None = None, tier_views: list[TierView] | None = None,
            n_examples: int = 5) -> Analysis:
    th = thresholds or Thresholds()
    views = tier_views or [TierView("thesis")]
    comps = [v for v in variants if v != base]
    info = store.variants()
    sig = {"chrF": chrf_signature(), "spBLEU": spbleu.signature(), "spm_sha256": spbleu.sha256,
           "models": {v: info.get(v, {}).get("model_sha256") for v in variants},
           "data": {f"{j.benchmark.name}:{j.src}-{j.tgt}": j.benchmark.sha256(j.src, j.tgt) for j in jobs}}
    A = Analysis(base, variants, th, sig)
    on_target = store.stats("on_target")
    xvar = store.stats("xattn_var")

    by_key: dict[tuple, dict[str, dict[int, tuple[str, float]]]] = {}
    for v in variants:
        for r in store.translations(v):
            by_key.setdefault((r["benchmark"], r["src"], r["tgt"]), {}).setdefault(v, {})[r["idx"]] = (r["hyp"], r["chrf"])

    sentences = []  # per comp variant: (variant, key, idx, delta)
    for job in jobs:
        key = (job.benchmark.name, job.src, job.tgt)
        rows = by_key.get(key, {})
        if base not in rows:
            continue
        srcs, refs = job.lines()
        common = sorted(set.intersection(*(set(rows.get(v, {})) for v in variants)))
        if not common:
            continue
        scores = {}
        for v in variants:
            hyps = [rows[v][i][0] for i in common]
            rs = [refs[i] for i in common]
            scores[v] = {"chrF": corpus_chrf(hyps, rs), "spBLEU": spbleu.corpus(hyps, rs)}
        rec = {"benchmark": key[0], "src": job.src, "tgt": job.tgt, "n": len(common),
               "tier": {vw.name: pair_tier(job.src, job.tgt, vw.tiers) for vw in views},
               "src_tier": {vw.name: (vw.tiers or {}).get(job.src) or language(job.src).tier for vw in views},
               "tgt_tier": {vw.name: (vw.tiers or {}).get(job.tgt) or language(job.tgt).tier for vw in views},
               "scores": scores,
               "rel": {v: {m: _rel(scores[v][m], scores[base][m]) for m in ("chrF", "spBLEU")} for v in comps},
               "kept": scores[base]["spBLEU"] >= th.bleu_filter}
        A.pairs.append(rec)
        two_script = th.exclude_two_script and (job.src in TWO_SCRIPT or job.tgt in TWO_SCRIPT)
        if rec["kept"] and not two_script:
            for v in comps:
                for i in common:
                    sentences.append((v, key, i, rows[v][i][1] - rows[base][i][1]))
        rec["two_script_excluded"] = two_script

    kept = [p for p in A.pairs if p["kept"]]
    # size / score table per variant (thesis table 5.2)
    for v in variants:
        row = {"variant": v, "size": info.get(v, {}).get("sizes", {}),
               "chrF": _mean(p["scores"][v]["chrF"] for p in kept), "spBLEU": _mean(p["scores"][v]["spBLEU"] for p in kept),
               "pairs": len(kept)}
        if v != base:
            row["rel_chrF"] = _mean(p["rel"][v]["chrF"] for p in kept)
            row["rel_spBLEU"] = _mean(p["rel"][v]["spBLEU"] for p in kept)
            row["improved_pairs"] = sum(1 for p in kept if (p["rel"][v]["spBLEU"] or 0) > 0)
        A.variant_table.append(row)

    # tiers: mean relative spBLEU / chrF difference per pair / source / target tier, per view
    for vw in views:
        out = {}
        for axis in ("tier", "src_tier", "tgt_tier"):
            out[axis] = {}
            for t in TIERS:
                ps = [p for p in kept if p[axis][vw.name] == t]
                out[axis][t] = {"pairs": len(ps), **{v: {m: _mean(p["rel"][v][m] for p in ps) for m in ("chrF", "spBLEU")}
                                                     for v in comps}}
        A.tiers[vw.name] = out

    # ΔchrF losers / winners
    groups = defaultdict(lambda: {"losers": [], "winners": [], "all": []})
    for v, key, i, d in sentences:
        g = groups[v]
        g["all"].append((key, i, d))
        if d < -th.delta:
            g["losers"].append((key, i, d))
        elif d > th.delta:
            g["winners"].append((key, i, d))
    for v in comps:
        g = groups[v]
        hist_by_tier = defaultdict(list)
        for key, _, d in g["all"]:
            hist_by_tier[pair_tier(key[1], key[2], views[0].tiers)].append(round(d, 3))
        A.delta[v] = {"sentences": len(g["all"]), "losers": len(g["losers"]), "winners": len(g["winners"]),
                      "losers_pct": _pct(len(g["losers"]), len(g["all"])), "winners_pct": _pct(len(g["winners"]), len(g["all"])),
                      "deltas_by_tier": dict(hist_by_tier)}

    # off-target on losers and overall; "undefined" where no identifier covers the target language
    langs = sorted({p["tgt"] for p in A.pairs} | {p["src"] for p in A.pairs})
    A.lid_coverage = [{"lang": c, "name": language(c).name, "identifier": lid.coverage(c).identifier} for c in langs]

    def off_rate(variant, items):
        n = off = 0
        for key, i in items:
            ref_ok = on_target.get((REF, *key, i))
            hyp = on_target.get((variant, *key, i))
            if ref_ok is None or hyp is None or ref_ok < 1:
                continue  # undefined identifier, or the reference itself not identified as the gold language
            n += 1
            off += hyp < 1
        return {"n": n, "off_target_pct": _pct(off, n) if n else None}

    for v in comps:
        losers = [(k, i) for k, i, _ in groups[v]["losers"]]
        everything = [(k, i) for k, i, _ in groups[v]["all"]]
        A.off_target[v] = {"losers": {"base": off_rate(base, losers), "compressed": off_rate(v, losers)},
                           "overall": {"base": off_rate(base, everything), "compressed": off_rate(v, everything)},
                           "by_target": {}}
        for t in {k[2] for k, _ in everything}:
            items = [(k, i) for k, i in everything if k[2] == t]
            cov = lid.coverage(t).identifier
            A.off_target[v]["by_target"][t] = ({"identifier": cov, "base": off_rate(base, items), "compressed": off_rate(v, items)}
                                               if cov != "undefined" else {"identifier": "undefined"})

    # λ on losers and winners: ratio of subset means, and per-sentence ratios
    for v in comps:
        res = {}
        for subset in ("losers", "winners", "all"):
            items = [(k, i) for k, i, _ in groups[v][subset]]
            vb = [xvar.get((base, *k, i)) for k, i in items]
            vc = [xvar.get((v, *k, i)) for k, i in items]
            pairs_ok = [(b, c) for b, c in zip(vb, vc, strict=True) if b is not None and c is not None]
            mb, mc = _mean(b for b, _ in pairs_ok), _mean(c for _, c in pairs_ok)
            ratios = sorted(c / b for b, c in pairs_ok if b > 0)
            res[subset] = {"n": len(pairs_ok), "var_base": mb, "var_compressed": mc,
                           "lambda": (mc / mb) if mb else None,
                           "per_sentence": {"median": statistics.median(ratios) if ratios else None,
                                            "p25": ratios[len(ratios) // 4] if ratios else None,
                                            "p75": ratios[(3 * len(ratios)) // 4] if ratios else None}}
        A.hallucination[v] = res

    # examples: the most losing and most winning sentences
    ref_cache = {}
    for job in jobs:
        ref_cache[(job.benchmark.name, job.src, job.tgt)] = job.lines()
    for v in comps:
        ex = {}
        for subset, rev in (("losers", False), ("winners", True)):
            items = sorted(groups[v][subset], key=lambda x: x[2], reverse=rev)[:n_examples]
            ex[subset] = [{"pair": f"{k[1]}-{k[2]}", "benchmark": k[0], "idx": i, "delta_chrF": d,
                           "source": ref_cache[k][0][i], "reference": ref_cache[k][1][i],
                           "base": by_key[k][base][i][0], "compressed": by_key[k][v][i][0]} for k, i, d in items]
        A.examples[v] = ex

    # per language: as source and as target
    for c in langs:
        entry = {"lang": c, "name": language(c).name, "tier": language(c).tier, "bitext_m": language(c).bitext_m,
                 "identifier": lid.coverage(c).identifier, "as_source": {}, "as_target": {}}
        for role, axis in (("as_source", "src"), ("as_target", "tgt")):
            ps = [p for p in kept if p[axis] == c]
            entry[role]["pairs"] = len(ps)
            entry[role]["base_spBLEU"] = _mean(p["scores"][base]["spBLEU"] for p in ps)
            entry[role]["base_chrF"] = _mean(p["scores"][base]["chrF"] for p in ps)
            for v in comps:
                ls = sum(1 for k, _, _ in groups[v]["losers"] if k[1 if axis == "src" else 2] == c)
                al = sum(1 for k, _, _ in groups[v]["all"] if k[1 if axis == "src" else 2] == c)
                entry[role][v] = {"rel_spBLEU": _mean(p["rel"][v]["spBLEU"] for p in ps),
                                  "rel_chrF": _mean(p["rel"][v]["chrF"] for p in ps),
                                  "losers_pct": _pct(ls, al)}
        A.languages.append(entry)
    return A
