"""The report's figures (matplotlib, embedded as PNG): per-pair scatter, tier bars, ΔchrF histograms, family curves and
example attention maps, each from the summary."""

from __future__ import annotations

import base64
import io
import math

from forgetbench.eval.languages import TIERS, language
from forgetbench.eval.summary import Summary


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def figures(summary: Summary) -> dict[str, str]:
    """The report's figures as base64 PNG: the scatter of relative differences against resources, per-tier bars
    per tier view, and the ΔchrF histograms by tier."""
    import matplotlib

    matplotlib.use("Agg")
    return (_scatter(summary) | _tier_bars(summary) | _delta_histograms(summary) | _family_figures(summary) | _attention_figures(summary)
            | _mt_geneval_figure(summary))


def _attention_figures(summary: Summary) -> dict[str, str]:
    """Per variant: its example losers and winners, one row each, base and compressed cross-attention side by side
    (source pieces across, each model's output pieces down; the study's figures 5.6–5.8)."""
    import matplotlib.pyplot as plt

    out = {}
    for v, rec in summary.attention_maps.items():
        rows = [(subset, x) for subset in ("losers", "winners") for x in rec.get(subset, [])]
        if not rows:
            continue
        h = sum(max(2.0, 0.18 * max(len(x["base_map"]["output"]), len(x["compressed_map"]["output"]))) for _, x in rows)
        fig, axes = plt.subplots(len(rows), 2, figsize=(11, h + 0.6 * len(rows)), squeeze=False)
        base = summary.base_of(v)
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


def _yerr(points: list, key: str) -> list[list[float]]:
    """Error bars (below, above) of each point's ``key`` from its ``key_ci``; 0 where there is no interval."""
    lo, hi = [], []
    for p in points:
        v, ci = getattr(p, key), getattr(p, f"{key}_ci") or [None, None]
        lo.append(max(0.0, v - ci[0]) if v is not None and ci[0] is not None else 0.0)
        hi.append(max(0.0, ci[1] - v) if v is not None and ci[1] is not None else 0.0)
    return [lo, hi]


def _family_figures(summary: Summary) -> dict[str, str]:
    """Per family of variants (``eval.families``): a ladder (numeric axis) as average spBLEU and chrF per value with
    their intervals, the knee marked (the study's figure 5.2); a comparison (the pruning groupings, figure 5.9) as
    bars of the mean relative differences with their intervals."""
    import matplotlib.pyplot as plt

    out = {}
    for name, F in summary.families.items():
        pts = F.points
        if not pts:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.0))
        for ax, m in zip(axes, ("spBLEU", "chrF"), strict=True):
            if F.numeric:
                xs = [100 * p.value if 0 < max(q.value for q in pts) <= 1 else p.value for p in pts]
                ax.errorbar(xs, [getattr(p, m) for p in pts], yerr=_yerr(pts, m), marker="o", ms=3, capsize=2, lw=1)
                knee = (F.knee or {}).get("value")
                if knee is not None:
                    ax.axvline(100 * knee if knee <= 1 else knee, color="grey", ls="--", lw=0.8, label="knee")
                    ax.legend(fontsize=7)
                ax.set_xlabel(f"{F.axis} (%)" if max(q.value for q in pts) <= 1 else F.axis)
                ax.set_ylabel(f"avg {m}, {len(F.pairs)} pairs (95 % CI)")
            else:
                rel = [p for p in pts if getattr(p, f"rel_{m}") is not None]
                ax.bar(range(len(rel)), [getattr(p, f"rel_{m}") for p in rel], yerr=_yerr(rel, f"rel_{m}"), capsize=2)
                ax.set_xticks(range(len(rel)), [str(p.value) for p in rel], fontsize=8)
                ax.axhline(0, color="grey", lw=0.8)
                ax.set_ylabel(f"mean rel. {m} diff. % (95 % CI)")
            ax.set_title(f"{name}: {m}", fontsize=9)
        fig.tight_layout()
        out[f"family_{name}"] = _png(fig)
    return out


def _scatter(summary: Summary) -> dict[str, str]:
    """Relative spBLEU difference against the bitext of the pair's poorer language (thesis figure 5.3)."""
    import matplotlib.pyplot as plt

    comps, kept, out = summary.comparisons, summary.kept_pairs, {}
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    drawn = 0
    for v in comps:
        # a relative difference is undefined where the base scores 0 (e.g. a model whose outputs are all empty)
        pts = [(min(language(p.src).bitext_m, language(p.tgt).bitext_m), p.rel[v]["spBLEU"]) for p in kept
               if p.rel[v]["spBLEU"] is not None and math.isfinite(p.rel[v]["spBLEU"])]
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


def _mt_geneval_figure(summary: Summary) -> dict[str, str]:
    """MT-GenEval's counterfactual accuracy per language, feminine and masculine side by side for each variant, with
    their 95 % intervals."""
    import matplotlib.pyplot as plt

    mg = summary.bias.mt_geneval if summary.bias else None
    langs = [x for x in (mg.languages if mg else {}) if any("feminine" in d for d in mg.languages[x].values())]
    if not langs:
        return {}
    variants = list(mg.average)
    fig, ax = plt.subplots(figsize=(max(6.4, 1.1 * len(langs) * len(variants) / 2), 3.2))
    w = 0.8 / (2 * len(variants))
    for k, (v, g) in enumerate((v, g) for v in variants for g in ("feminine", "masculine")):
        ds = [mg.languages[x].get(v, {}) for x in langs]
        vals = [d.get(g) or 0 for d in ds]
        cis = [d.get(f"{g}_ci") or [None, None] for d in ds]
        err = [[max(0.0, val - ci[0]) if ci[0] is not None else 0 for val, ci in zip(vals, cis, strict=True)],
               [max(0.0, ci[1] - val) if ci[1] is not None else 0 for val, ci in zip(vals, cis, strict=True)]]
        ax.bar([i + k * w for i in range(len(langs))], vals, width=w, yerr=err, capsize=2, label=f"{v} {g}",
               hatch="//" if g == "feminine" else None, error_kw={"elinewidth": 0.8})
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(langs))], langs)
    ax.set_ylabel("counterfactual accuracy (%) ± 95 % CI")
    ax.set_ylim(0, 105)
    ax.set_title(f"MT-GenEval, en→xx ({mg.settings.get('sentences') or 'all'} pairs per language)", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return {"mt_geneval": _png(fig)}


def _tier_bars(summary: Summary) -> dict[str, str]:
    """Mean relative spBLEU difference per pair tier with its interval, one figure per tier view (figure 5.4)."""
    import matplotlib.pyplot as plt

    comps, out = summary.comparisons, {}
    for view, tiers in summary.tiers.items():
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        w = 0.8 / max(1, len(comps))
        for k, v in enumerate(comps):
            cells = [tiers["tier"][t] for t in TIERS]
            vals = [c.by_variant[v]["spBLEU"] if c.pairs and c.by_variant[v]["spBLEU"] is not None else 0 for c in cells]
            cis = [c.by_variant[v].get("spBLEU_ci") if c.pairs else None for c in cells]
            lo = [max(0.0, val - ci[0]) if ci and ci[0] is not None else 0 for val, ci in zip(vals, cis, strict=True)]
            hi = [max(0.0, ci[1] - val) if ci and ci[1] is not None else 0 for val, ci in zip(vals, cis, strict=True)]
            ax.bar([i + k * w for i in range(len(TIERS))], vals, width=w, label=v, yerr=[lo, hi], capsize=2,
                   error_kw={"elinewidth": 0.8})
        ax.set_xticks([i + 0.4 - w / 2 for i in range(len(TIERS))],
                      [f"{t}\n({tiers['tier'][t].pairs} pairs)" for t in TIERS], fontsize=8)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_ylabel("mean relative spBLEU diff (%) ± 95 % CI")
        ax.set_title(f"by pair tier ({view} tiers)", fontsize=9)
        if comps:
            ax.legend(fontsize=8)
        out[f"tiers_{view}"] = _png(fig)
    return out


def _delta_histograms(summary: Summary) -> dict[str, str]:
    """ΔchrF per sentence by tier, one panel per compared variant (figure 5.5)."""
    import matplotlib.pyplot as plt
    import numpy as np

    comps, out = summary.comparisons, {}
    if comps:
        fig, axes = plt.subplots(1, len(comps), figsize=(3.2 * len(comps), 3.0), squeeze=False)
        for ax, v in zip(axes[0], comps, strict=True):
            every = [d for t in TIERS for d in summary.delta[v].deltas_by_tier.get(t, [])]
            edges = np.histogram_bin_edges(every, bins=30) if every else 30  # shared by every tier
            for t in TIERS:
                ds = summary.delta[v].deltas_by_tier.get(t, [])
                if ds:  # outlines, so that no tier hides another
                    ax.hist(ds, bins=edges, histtype="step", linewidth=1.4, density=True, label=f"{t} ({len(ds)})")
            ax.set_ylabel("density")
            ax.set_title(v, fontsize=9)
            ax.set_xlabel("ΔchrF per sentence")
            if every:
                ax.legend(fontsize=7)
        out["delta_hist"] = _png(fig)
    return out
