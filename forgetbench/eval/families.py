"""Families of variants made from one template (the sparsity ladder, the pruning groupings): each member's
average scores with intervals, and the ladder's knee (docs/METHOD.md §2.12).

Rules:

1. A point is a member (or the base, at axis value 0 on a numeric axis): its average corpus spBLEU and chrF over
   the kept pairs, with the stratified bootstrap interval of that average (each pair's own resamples, as every
   mean over pairs, ``bootstrap.group_mean``), and its mean relative difference from the base with its interval.
2. The knee of a numeric ladder: walking up the axis, the first member whose relative spBLEU interval lies wholly
   below −``KNEE_DROP`` % (a drop larger than the Findings' "small" bound, significantly) is where quality falls;
   the knee is the member before it — the largest whose drop is not significantly beyond that bound. Both are reported with their
   intervals; no member falling so: no knee within the ladder (said so); the first member falling: the knee is
   the base.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from forgetbench.eval import bootstrap as bs
from forgetbench.stats import SMALL, mean

KNEE_DROP = SMALL  # % mean relative spBLEU (rule 2)


@dataclass
class FamilyPoint:
    variant: str
    value: object
    spBLEU: float | None
    spBLEU_ci: bs.Interval
    chrF: float | None
    chrF_ci: bs.Interval
    rel_spBLEU: float | None = None
    rel_spBLEU_ci: bs.Interval | None = None
    rel_chrF: float | None = None
    rel_chrF_ci: bs.Interval | None = None


@dataclass
class FamilyResult:
    axis: str
    numeric: bool
    pairs: list[str]
    points: list[FamilyPoint] = field(default_factory=list)
    knee: dict | None = None  # numeric ladders: {"value", "variant", "rel_spBLEU", "rel_spBLEU_ci", "falls_at": {...}}


def _point(run, kept, samples, v: str, value) -> FamilyPoint:
    keys = [(p.benchmark, p.src, p.tgt) for p in kept]
    avg = {m: (mean(p.scores[v][m] for p in kept), bs.group_mean([run.score_samples[(k, v, m)] for k in keys]))
           for m in ("spBLEU", "chrF")}
    pt = FamilyPoint(v, value, avg["spBLEU"][0], avg["spBLEU"][1], avg["chrF"][0], avg["chrF"][1])
    if v in run.comps:
        for m in ("spBLEU", "chrF"):
            setattr(pt, f"rel_{m}", mean(p.rel[v][m] for p in kept))
            setattr(pt, f"rel_{m}_ci", bs.group_mean([samples[(k, v, m)] for k in keys]))
    return pt


def _rel(pt: FamilyPoint) -> str:
    ci = pt.rel_spBLEU_ci
    return f"{pt.rel_spBLEU:+.1f} % [{ci.low:.1f}, {ci.high:.1f}]"


def knee(points: list[FamilyPoint], axis: str = "sparsity") -> dict:
    """Rule 2 over ``points`` in ascending axis order (the base first), with its statement in words."""
    for prev, pt in zip(points, points[1:], strict=False):
        ci = pt.rel_spBLEU_ci
        if ci is not None and ci.high is not None and ci.high < -KNEE_DROP:
            kept = (f"{axis} {prev.value} ({prev.variant}) is the largest whose drop is not significantly beyond "
                    f"{KNEE_DROP:g} %: rel. spBLEU {_rel(prev)}"
                    if prev.rel_spBLEU_ci is not None else f"only the base ({axis} 0) keeps quality")
            return {"value": prev.value, "variant": prev.variant, "rel_spBLEU": prev.rel_spBLEU,
                    "rel_spBLEU_ci": prev.rel_spBLEU_ci.to_dict() if prev.rel_spBLEU_ci else None,
                    "falls_at": {"value": pt.value, "variant": pt.variant, "rel_spBLEU": pt.rel_spBLEU,
                                 "rel_spBLEU_ci": ci.to_dict()}, "drop_bound_pct": KNEE_DROP,
                    "statement": f"Knee: {kept}; at {axis} {pt.value} ({pt.variant}) the drop exceeds {KNEE_DROP:g} % "
                                 f"with its whole interval: rel. spBLEU {_rel(pt)}."}
    return {"value": None, "variant": None, "falls_at": None, "drop_bound_pct": KNEE_DROP,
            "statement": f"No knee within the ladder: no {axis} tested drops the mean relative spBLEU by more than "
                         f"{KNEE_DROP:g} % with its whole interval."}


def family_results(run, pairs, samples, families: dict) -> dict[str, FamilyResult]:
    """Per family (``sweep.config.Family``): its points (rule 1) in axis order and, on a numeric axis, its knee."""
    kept = [p for p in pairs if p.kept]
    out = {}
    for name, fam in families.items():
        res = FamilyResult(fam.axis, fam.numeric, [f"{p.src}-{p.tgt}" for p in kept])
        if not kept:
            out[name] = res
            continue
        members = sorted(fam.members.items(), key=lambda kv: kv[1]) if fam.numeric else list(fam.members.items())
        if fam.numeric:
            res.points.append(_point(run, kept, samples, run.base, 0))
        res.points += [_point(run, kept, samples, v, value) for v, value in members]
        if fam.numeric:
            res.knee = knee(res.points, fam.axis)
        out[name] = res
    return out

