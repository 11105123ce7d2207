"""Cross-attention λ on the on-target losers, winners and all sentences, with its paired interval (docs/METHOD.md
§2.6)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.eval.analysis.core import Key, RunData
from forgetbench.eval.analysis.deltas import DeltaGroups
from forgetbench.stats import mean


@dataclass
class LambdaResult:
    n: int
    var_base: float | None  # mean cross-attention variance of the base over the subset
    var_compressed: float | None
    lambda_: float | None = field(metadata={"key": "lambda"})  # var_compressed / var_base (ratio of subset means)
    per_sentence: dict[str, float | None] = field(default_factory=dict)  # median, p25, p75 of per-sentence ratios
    lambda_ci: bs.Interval | None = None
    missing: int = 0  # sentences of the subset without a variance (base or variant): the sweep stores λ only where read
    off_target: int = 0  # sentences left out: the base's or the variant's hypothesis identified as off-target
    undetermined: int = 0  # sentences kept whose target language the identifier does not cover (on-target unknown)


def on_target_items(run: RunData, variant: str, items: list[tuple[Key, int]]) -> tuple[list[tuple[Key, int]], int, int]:
    """λ's subset (docs/METHOD.md §2.6): the sentences whose base and variant hypotheses are both on target. A
    hypothesis identified as another language is a different failure (the off-target rate counts it), and its
    cross-attention says nothing about hallucination. Returns (kept, off-target left out, kept undetermined: a
    target language outside the identifier's labels, so not known to be off-target)."""
    kept, off, undetermined = [], 0, 0
    for key, i in items:
        hb, hc = run.on_target.get((run.base_of(variant), *key, i)), run.on_target.get((variant, *key, i))
        if (hb is not None and hb < 1) or (hc is not None and hc < 1):
            off += 1
            continue
        undetermined += hb is None or hc is None
        kept.append((key, i))
    return kept, off, undetermined


def hallucination(run: RunData, groups: dict[str, DeltaGroups]) -> dict[str, dict[str, LambdaResult]]:
    """λ = mean var_variant / mean var_base over the on-target sentences (``on_target_items``) of the losers, the
    winners and all kept sentences, with its paired interval and the per-sentence ratios' quartiles."""
    out = {}
    for v, g in groups.items():
        res = {}
        for subset in ("losers", "winners", "all"):
            items, off, undetermined = on_target_items(run, v, [(s.key, s.idx) for s in getattr(g, subset)])
            vb = [run.xattn_var.get((run.base_of(v), *k, i)) for k, i in items]
            vc = [run.xattn_var.get((v, *k, i)) for k, i in items]
            ok = [k for k, (b, c) in enumerate(zip(vb, vc, strict=True)) if b is not None and c is not None]
            both = [(vb[k], vc[k]) for k in ok]
            mb, mc = mean(b for b, _ in both), mean(c for _, c in both)
            ci = bs.Interval(None, None)
            if both:
                _, sb, sc = run.item_sums([items[k] for k in ok], np.array([b for b, _ in both]), np.array([c for _, c in both]))
                with np.errstate(invalid="ignore", divide="ignore"):
                    ci = bs.percentile_interval(sc / sb)
            ratios = sorted(c / b for b, c in both if b > 0)
            res[subset] = LambdaResult(len(both), mb, mc, (mc / mb) if mb else None,
                                       {"median": statistics.median(ratios) if ratios else None,
                                        "p25": ratios[len(ratios) // 4] if ratios else None,
                                        "p75": ratios[(3 * len(ratios)) // 4] if ratios else None}, ci,
                                       len(items) - len(both), off, undetermined)
        out[v] = res
    return out
