"""Mean relative differences per pair, source and target tier, and the low-minus-high contrast (docs/METHOD.md §2.2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.eval.analysis.core import PairResult, RelSamples, RunData
from forgetbench.eval.analysis.variants import group_interval
from forgetbench.eval.languages import TIERS
from forgetbench.stats import mean


@dataclass
class TierCell:
    pairs: int
    by_variant: dict[str, dict[str, float | None]]  # variant -> mean relative difference per metric

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, **self.by_variant}


def tier_tables(run: RunData, pairs: list[PairResult], samples: RelSamples) -> dict[str, dict[str, dict[str, TierCell]]]:
    """view -> axis (tier, src_tier, tgt_tier) -> tier -> cell, over the kept pairs; each mean with its
    stratified interval (``<metric>_ci``)."""
    kept = [p for p in pairs if p.kept]
    out = {}
    for vw in run.views:
        out[vw.name] = {}
        for axis in ("tier", "src_tier", "tgt_tier"):
            out[vw.name][axis] = {}
            for t in TIERS:
                ps = [p for p in kept if getattr(p, axis)[vw.name] == t]
                out[vw.name][axis][t] = TierCell(len(ps), {v: {m: mean(p.rel[v][m] for p in ps) for m in ("chrF", "spBLEU")}
                                                           | {f"{m}_ci": group_interval(samples, ps, v, m).to_dict()
                                                              for m in ("chrF", "spBLEU")} for v in run.comps})
    return out


@dataclass
class TierContrast:
    """Low-resource pairs' mean relative difference minus the High pairs' (None where a side has no pair)."""
    low_pairs: int
    high_pairs: int
    difference: float | None
    ci: list


def tier_contrasts(run: RunData, pairs: list[PairResult], samples: RelSamples) -> dict[str, dict[str, dict[str, TierContrast]]]:
    """Per tier view, variant and metric: mean relative difference of the low-resource pairs (Very-Low and Low)
    minus that of the High pairs, with its stratified interval — the test of "low-resource pairs lose most"."""
    kept = [p for p in pairs if p.kept]
    out: dict = {}
    for vw in run.views:
        low = [p for p in kept if p.tier[vw.name] in ("Very-Low", "Low")]
        high = [p for p in kept if p.tier[vw.name] == "High"]
        out[vw.name] = {}
        for v in run.comps:
            out[vw.name][v] = {}
            for m in ("chrF", "spBLEU"):
                if not low or not high:
                    out[vw.name][v][m] = TierContrast(len(low), len(high), None, [None, None])
                    continue
                lo = bs.nanmean(np.vstack([samples[((p.benchmark, p.src, p.tgt), v, m)] for p in low]), axis=0)
                hi = bs.nanmean(np.vstack([samples[((p.benchmark, p.src, p.tgt), v, m)] for p in high]), axis=0)
                ml, mh = mean(p.rel[v][m] for p in low), mean(p.rel[v][m] for p in high)
                out[vw.name][v][m] = TierContrast(len(low), len(high), None if ml is None or mh is None else ml - mh,
                                                  bs.percentile_interval(lo - hi).to_dict())
    return out
