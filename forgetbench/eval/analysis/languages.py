"""Each language as source and as target: its pairs' scores and changes per variant."""

from __future__ import annotations

from dataclasses import dataclass

from forgetbench.eval import lid
from forgetbench.eval.analysis.core import PairResult, RunData
from forgetbench.eval.analysis.deltas import DeltaGroups
from forgetbench.eval.analysis.off_target import pair_languages
from forgetbench.eval.languages import language
from forgetbench.stats import mean, pct


@dataclass
class RoleResult:
    """A language as source or as target: kept pairs, base scores, and per variant rel. differences and losers."""

    pairs: int
    base_spBLEU: float | None
    base_chrF: float | None
    by_variant: dict[str, dict[str, float | None]]

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "base_spBLEU": self.base_spBLEU, "base_chrF": self.base_chrF, **self.by_variant}


@dataclass
class LanguageResult:
    lang: str
    name: str
    tier: str
    bitext_m: float
    identifier: str
    as_source: RoleResult
    as_target: RoleResult


def languages(run: RunData, pairs: list[PairResult], groups: dict[str, DeltaGroups]) -> list[LanguageResult]:
    kept = [p for p in pairs if p.kept]
    out = []
    for c in pair_languages(pairs):
        roles = {}
        for role, axis, pos in (("as_source", "src", 1), ("as_target", "tgt", 2)):
            ps = [p for p in kept if getattr(p, axis) == c]
            by_variant = {}
            for v in run.comps:
                losers = sum(1 for s in groups[v].losers if s.key[pos] == c)
                total = sum(1 for s in groups[v].all if s.key[pos] == c)
                by_variant[v] = {"rel_spBLEU": mean(p.rel[v]["spBLEU"] for p in ps), "rel_chrF": mean(p.rel[v]["chrF"] for p in ps),
                                 "losers_pct": pct(losers, total)}
            roles[role] = RoleResult(len(ps), mean(p.scores[run.base]["spBLEU"] for p in ps),
                                     mean(p.scores[run.base]["chrF"] for p in ps), by_variant)
        L = language(c)
        out.append(LanguageResult(c, L.name, L.tier, L.bitext_m, lid.coverage(c).identifier, **roles))
    return out
