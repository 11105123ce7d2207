"""The study's claims as tests on a run (docs/METHOD.md §2.11): each finding is *supported*, *contradicted* or
*inconclusive* at 95 %, decided by the paired bootstrap intervals of the summary, never by eyeballing.

| claim | statistic (interval) | supported | contradicted |
|---|---|---|---|
| the average drop is small (30 % pruning, int8) | mean rel. spBLEU over kept pairs | interval inside ±SMALL % | interval outside ±SMALL % |
| low-resource pairs lose most | mean rel. spBLEU of Very-Low+Low pairs − High pairs (thesis tiers) | interval < 0 | interval > 0 |
| some pairs improve | pairs significantly better (BH, q = 0.05) | ≥ 1 pair | every kept pair significantly worse |
| off-target rises on losing sentences | off-target % on losers, variant − base | interval > 0 | interval < 0 |
| λ > 1 on losers | λ on the losers | interval > 1 | interval < 1 |
| λ < 1 on winners | λ on the winners | interval < 1 | interval > 1 |
| gender bias ψ* rises | ψ*, variant − base | interval > 0 | interval < 0 |
| the male skew ψ rises (MT-Gender; the languages where it rises: the feminine side pays) | ψ, variant − base, language average; per language the same | interval > 0 | interval < 0 |
| a has more gender bias than b (ψ*; a configured contrast whose b is not the base: KD against its twin, a compressed student against its float self) | ψ*, a − b, language average; per language the same | interval > 0 | interval < 0 |
| feminine accuracy falls more than masculine (MT-GenEval) | gap (masculine − feminine counterfactual accuracy), variant − base, averaged over languages | interval > 0 | interval < 0 |
| per-language calibration reduces the low-resource loss (data-aware pruning) | spBLEU of the low-resource pairs (Very-Low+Low, thesis tiers), this calibration − English-only calibration of the same method, sparsity, scope and embeddings (a configured contrast, either order) | interval > 0 | interval < 0 |

Anything else is inconclusive. **Decision:** "small" is |relative change| ≤ 10 % (``SMALL``); the study
reports −6.6 % (30 %) and −0.6 % (int8) on M2M-100 12B.
"""

from __future__ import annotations

from forgetbench.eval.summary import Finding, Summary
from forgetbench.stats import SMALL


def _small_claim_applies(variant: str) -> bool:
    """The study claims a small average drop for 30 % pruning and int8 only."""
    return variant.startswith("prune-30") or "int8" in variant


def _outcome(ci, supported, contradicted) -> str:
    lo, hi = ci if ci else (None, None)
    if lo is None or hi is None:
        return "inconclusive"
    if supported(lo, hi):
        return "supported"
    if contradicted(lo, hi):
        return "contradicted"
    return "inconclusive"


def _fmt(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}"


def _ci(ci, nd=2):
    return "[–]" if not ci or ci[0] is None else f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def findings(summary: Summary, small: float = SMALL) -> list[Finding]:
    """The claims tested on a summary; one finding per claim and variant."""
    rows = {r.variant: r for r in summary.variant_table}
    out: list[Finding] = []

    def add(claim, variant, outcome, numbers):
        out.append(Finding(claim, variant, outcome, numbers))

    for v in summary.comparisons:
        r = rows[v]
        if _small_claim_applies(v):
            ci = r.rel_spBLEU_ci
            add(f"the average drop is small (|rel. spBLEU| ≤ {small:g} %)", v,
                _outcome(ci, lambda lo, hi: lo >= -small and hi <= small, lambda lo, hi: hi < -small or lo > small),
                f"mean rel. spBLEU {_fmt(r.rel_spBLEU)} % {_ci(ci)} over {r.pairs} pairs")
        c = summary.tier_contrasts.get("thesis", {}).get(v, {}).get("spBLEU")
        if c:
            add("low-resource pairs lose most", v,
                _outcome(c.ci, lambda lo, hi: hi < 0, lambda lo, hi: lo > 0),
                f"Very-Low+Low minus High rel. spBLEU {_fmt(c.difference)} pp {_ci(c.ci)} "
                f"({c.low_pairs} vs {c.high_pairs} pairs)")
        sig = (r.significantly or {}).get("spBLEU", {})
        better, worse = sig.get("better", 0), sig.get("worse", 0)
        outcome = "supported" if better else ("contradicted" if worse == r.pairs and r.pairs else "inconclusive")
        add("some pairs improve", v, outcome, f"{better} of {r.pairs} pairs significantly better, {worse} worse "
                                              f"(spBLEU, paired bootstrap, Benjamini–Hochberg q = 0.05); "
                                              f"{r.improved_pairs} better in the point estimate")
        off = summary.off_target[v]
        ci = off.losers_change_ci
        lb, lc = off.losers.base.off_target_pct, off.losers.compressed.off_target_pct
        add("off-target rises on losing sentences", v, _outcome(ci, lambda lo, hi: lo > 0, lambda lo, hi: hi < 0),
            f"{_fmt(lb, 1)} → {_fmt(lc, 1)} % on {off.losers.base.n} losers; change {_ci(ci, 1)} pp")
        lam = summary.hallucination[v]
        for subset, word in (("losers", ">"), ("winners", "<")):
            ci = lam[subset].lambda_ci
            sup = (lambda lo, hi: lo > 1) if word == ">" else (lambda lo, hi: hi < 1)
            con = (lambda lo, hi: hi < 1) if word == ">" else (lambda lo, hi: lo > 1)
            add(f"λ {word} 1 on {subset}", v, _outcome(ci, sup, con),
                f"λ = {_fmt(lam[subset].lambda_, 3)} {_ci(ci, 3)} over {lam[subset].n} on-target sentences "
                f"({lam[subset].off_target} off-target left out)")
        g = summary.bias.gender.get(v) if summary.bias else None
        if g and g.change_ci:
            ci = g.change_ci.get("psi_star")
            b = summary.bias.gender[summary.base].average["psi_star"]
            add("gender bias ψ* rises", v, _outcome(ci, lambda lo, hi: lo > 0, lambda lo, hi: hi < 0),
                f"ψ* {_fmt(b, 3)} → {_fmt(g.average['psi_star'], 3)}; change {_ci(ci, 3)}")
        if g and g.change_ci and g.change_ci.get("psi"):
            ci = g.change_ci["psi"]
            b = summary.bias.gender[summary.base].average["psi"]
            add("the male skew ψ rises (MT-Gender)", v, _outcome(ci, lambda lo, hi: lo > 0, lambda lo, hi: hi < 0),
                f"ψ {_fmt(b, 3)} → {_fmt(g.average['psi'], 3)}; change {_ci(ci, 3)}"
                + _languages(g.languages, "psi_change_ci"))
        mg = summary.bias.mt_geneval if summary.bias else None
        a = mg.average.get(v, {}) if mg else {}
        if "gap_change_ci" in a:
            ci, b = a["gap_change_ci"], mg.average[summary.base_of(v)]
            langs = [x for x, res in mg.languages.items()
                     if ((res.get(v, {}).get("gap_change_ci") or [None])[0] or 0) > 0]
            add("feminine accuracy falls more than masculine (MT-GenEval)", v,
                _outcome(ci, lambda lo, hi: lo > 0, lambda lo, hi: hi < 0),
                f"feminine {_fmt(b.get('feminine'), 1)} → {_fmt(a.get('feminine'), 1)} %, masculine "
                f"{_fmt(b.get('masculine'), 1)} → {_fmt(a.get('masculine'), 1)} %; gap change {_ci(ci, 1)} pp over "
                f"{len(a['languages'])} languages" + (f"; significant in {', '.join(langs)}" if langs else ""))
    out += contrast_findings(summary)
    out += calibration_findings(summary)
    return out


def _languages(langs: dict, key: str) -> str:
    """"; rises in …, falls in …" from per-language change intervals (the ones that exclude 0)."""
    up = [x for x, d in sorted(langs.items()) if (d.get(key) or [None])[0] is not None and d[key][0] > 0]
    down = [x for x, d in sorted(langs.items()) if (d.get(key) or [None])[0] is not None and d[key][1] < 0]
    return (f"; rises in {', '.join(up)}" if up else "") + (f"; falls in {', '.join(down)}" if down else "") + (
        "" if up or down else "; no language's interval excludes 0")


def contrast_findings(summary: Summary) -> list[Finding]:
    """Each configured bias contrast whose b is not the base (KD against its twin, a compressed student against
    its float self): does a carry more gender bias (ψ*) than b; per language where the interval excludes 0."""
    out = []
    for name, c in ((summary.bias.contrasts or {}) if summary.bias else {}).items():
        a, b = name.split(" vs ", 1)
        d = (c.get("gender") or {}).get("psi_star")
        if b == summary.base or not d:
            continue
        per = {lang: {"ci": m["psi_star"].get("ci")} for lang, m in (c.get("gender_languages") or {}).items()
               if "psi_star" in m}
        out.append(Finding(f"{a} has more gender bias than {b} (ψ*)", a,
                           _outcome(d.get("ci"), lambda lo, hi: lo > 0, lambda lo, hi: hi < 0),
                           f"ψ* {a} − {b} {_fmt(d['difference'], 3)} {_ci(d.get('ci'), 3)}" + _languages(per, "ci")))
    return out


def calibration_findings(summary: Summary) -> list[Finding]:
    """Per data-aware variant calibrated per language (uniform, proportional, one language), against the
    English-only calibration of the same method and sparsity: the low-resource pairs' spBLEU difference, from the
    configured contrast (either order) of the thesis tiers' "low" pair group."""
    cal = summary.calibrations
    low = summary.pair_groups.get("thesis", {}).get("low")
    contrasts = low.contrasts if low else {}
    out = []
    for v, c in cal.items():
        if c["choice"] in ("english", "sample"):
            continue
        e = next((x for x, d in cal.items() if d["choice"] == "english" and all(
            d.get(k) == c.get(k) for k in ("method", "sparsity", "scope", "include_embeddings"))), None)
        if e is None:
            continue
        con, sign = contrasts.get(f"{v} vs {e}"), 1
        if con is None:
            con, sign = contrasts.get(f"{e} vs {v}"), -1
        d = (con or {}).get("spBLEU")
        ci = [sign * x for x in d.ci][:: sign] if d and d.ci and d.ci[0] is not None else None
        diff = None if d is None or d.difference is None else sign * d.difference
        numbers = (f"low-resource pairs ({low.pairs if low else '–'}): spBLEU {c['choice']} − english {_fmt(diff)} {_ci(ci)}"
                   if con else f"no contrast of {v} and {e} configured (contrasts: [[{v}, {e}]])")
        out.append(Finding(f"per-language calibration reduces the low-resource loss ({c['choice']})", v,
                           _outcome(ci, lambda lo, hi: lo > 0, lambda lo, hi: hi < 0), numbers))
    return out
