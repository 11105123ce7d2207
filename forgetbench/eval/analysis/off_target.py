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


def off_flags(on_target: dict[tuple, float | None], variants: tuple[str, ...], key: Key,
              idx: int) -> tuple[float, ...] | None:
    """The off-target rule for one sentence (METHOD §2.5): 1.0 per variant whose hypothesis the identifier does not
    place in the target language, else 0.0 — or None where the sentence does not count: the identifier is
    undefined for the language, its reference is not identified as the gold language, or a hypothesis is
    unidentified."""
    ref_ok = on_target.get((REF, *key, idx))
    hyps = [on_target.get((v, *key, idx)) for v in variants]
    if ref_ok is None or ref_ok < 1 or any(h is None for h in hyps):
        return None
    return tuple(float(h < 1) for h in hyps)


def off_target_change(run: RunData, variant: str, items: list[tuple[Key, int]]) -> bs.Interval:
    """Paired interval of (variant − base) off-target % over ``items`` (the same eligible sentences)."""
    keep, ob, oc = [], [], []
    for key, i in items:
        if (f := off_flags(run.on_target, (run.base_of(variant), variant), key, i)) is None:
            continue
        keep.append((key, i))
        ob.append(f[0])
        oc.append(f[1])
    if not keep:
        return bs.Interval(None, None)
    n, b, c = run.item_sums(keep, np.array(ob), np.array(oc))
    with np.errstate(invalid="ignore", divide="ignore"):
        return bs.percentile_interval(100 * (c - b) / n)


def off_target_rate(run: RunData, variant: str, items: list[tuple[Key, int]]) -> Rate:
    flags = [f[0] for key, i in items if (f := off_flags(run.on_target, (variant,), key, i)) is not None]
    return Rate(len(flags), pct(int(sum(flags)), len(flags)) if flags else None)


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
