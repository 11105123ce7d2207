"""Off-target rates of base and variant on the losers and overall, paired, and which identifier covers each
language (docs/METHOD.md §2.5)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.eval import lid
from forgetbench.eval.analysis.core import Key, PairResult, RunData, plain
from forgetbench.eval.analysis.deltas import DeltaGroups
from forgetbench.eval.languages import language
from forgetbench.eval.sentence_stats import REF
from forgetbench.stats import pct


@dataclass
class Rate:
    n: int  # sentences whose reference is identified as the gold language and whose hypothesis is identified
    off_target_pct: float | None


@dataclass
class RatePair:
    base: Rate
    compressed: Rate


@dataclass
class TargetRate:
    identifier: str
    base: Rate | None = None  # None where no identifier covers the target language
    compressed: Rate | None = None

    def to_dict(self) -> dict:
        if self.base is None:
            return {"identifier": self.identifier}
        return {"identifier": self.identifier, "base": plain(self.base), "compressed": plain(self.compressed)}


@dataclass
class OffTargetResult:
    losers: RatePair
    overall: RatePair
    by_target: dict[str, TargetRate]
    losers_change_ci: bs.Interval | None = None  # compressed − base off-target % on the losers (paired)
    overall_change_ci: bs.Interval | None = None


def off_target_change(run: RunData, variant: str, items: list[tuple[Key, int]]) -> bs.Interval:
    """Paired interval of (variant − base) off-target % over ``items`` (the same eligible sentences)."""
    keep, ob, oc = [], [], []
    for key, i in items:
        ref_ok, hb, hc = (run.on_target.get((x, *key, i)) for x in (REF, run.base_of(variant), variant))
        if ref_ok is None or ref_ok < 1 or hb is None or hc is None:
            continue
        keep.append((key, i))
        ob.append(float(hb < 1))
        oc.append(float(hc < 1))
    if not keep:
        return bs.Interval(None, None)
    n, b, c = run.item_sums(keep, np.array(ob), np.array(oc))
    with np.errstate(invalid="ignore", divide="ignore"):
        return bs.percentile_interval(100 * (c - b) / n)


def off_target_rate(run: RunData, variant: str, items: list[tuple[Key, int]]) -> Rate:
    n = off = 0
    for key, i in items:
        ref_ok = run.on_target.get((REF, *key, i))
        hyp = run.on_target.get((variant, *key, i))
        if ref_ok is None or hyp is None or ref_ok < 1:
            continue  # undefined identifier, or the reference itself not identified as the gold language
        n += 1
        off += hyp < 1
    return Rate(n, pct(off, n) if n else None)


def off_target(run: RunData, groups: dict[str, DeltaGroups]) -> dict[str, OffTargetResult]:
    out = {}
    for v, g in groups.items():
        losers = [(s.key, s.idx) for s in g.losers]
        everything = [(s.key, s.idx) for s in g.all]
        by_target = {}
        for t in sorted({k[2] for k, _ in everything}):  # a fixed order: summary.json byte for byte the same
            items = [(k, i) for k, i in everything if k[2] == t]
            cov = lid.coverage(t).identifier
            by_target[t] = (TargetRate(cov, off_target_rate(run, run.base_of(v), items), off_target_rate(run, v, items))
                            if cov != "undefined" else TargetRate("undefined"))
        b = run.base_of(v)
        out[v] = OffTargetResult(RatePair(off_target_rate(run, b, losers), off_target_rate(run, v, losers)),
                                 RatePair(off_target_rate(run, b, everything), off_target_rate(run, v, everything)),
                                 by_target, off_target_change(run, v, losers), off_target_change(run, v, everything))
    return out


@dataclass
class LidCoverage:
    lang: str
    name: str
    identifier: str


def pair_languages(pairs: list[PairResult]) -> list[str]:
    return sorted({p.tgt for p in pairs} | {p.src for p in pairs})


def lid_coverage(pairs: list[PairResult]) -> list[LidCoverage]:
    return [LidCoverage(c, language(c).name, lid.coverage(c).identifier) for c in pair_languages(pairs)]
