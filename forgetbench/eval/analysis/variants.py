"""Size and mean score per variant with stratified intervals (the thesis's table 5.2; docs/METHOD.md §2.3)."""

from __future__ import annotations

from dataclasses import dataclass

from forgetbench.eval import bootstrap as bs
from forgetbench.eval.analysis.core import PairResult, RelSamples, RunData
from forgetbench.stats import mean


@dataclass
class VariantRow:
    variant: str
    size: dict
    chrF: float | None
    spBLEU: float | None
    pairs: int
    rel_chrF: float | None = None  # the rest only for compressed variants
    rel_spBLEU: float | None = None
    improved_pairs: int | None = None
    rel_chrF_ci: bs.Interval | None = None
    rel_spBLEU_ci: bs.Interval | None = None
    significantly: dict | None = None  # metric -> {"worse": n, "better": n} pairs (BH)

    def to_dict(self) -> dict:
        d = {"variant": self.variant, "size": self.size, "chrF": self.chrF, "spBLEU": self.spBLEU, "pairs": self.pairs}
        if self.improved_pairs is not None:
            d |= {"rel_chrF": self.rel_chrF, "rel_spBLEU": self.rel_spBLEU, "improved_pairs": self.improved_pairs,
                  "rel_chrF_ci": self.rel_chrF_ci.to_dict(), "rel_spBLEU_ci": self.rel_spBLEU_ci.to_dict(),
                  "significantly": self.significantly}
        return d


def group_interval(samples: RelSamples, pairs: list[PairResult], v: str, m: str) -> bs.Interval:
    """Stratified interval of the mean relative difference over ``pairs``."""
    return bs.group_mean([samples[((p.benchmark, p.src, p.tgt), v, m)] for p in pairs])


def variant_table(run: RunData, pairs: list[PairResult], samples: RelSamples) -> list[VariantRow]:
    kept = [p for p in pairs if p.kept]
    out = []
    for v in run.variants:
        row = VariantRow(v, run.variant_info.get(v, {}).get("sizes", {}), mean(p.scores[v]["chrF"] for p in kept),
                         mean(p.scores[v]["spBLEU"] for p in kept), len(kept))
        if v in run.comps:
            row.rel_chrF = mean(p.rel[v]["chrF"] for p in kept)
            row.rel_spBLEU = mean(p.rel[v]["spBLEU"] for p in kept)
            row.improved_pairs = sum(1 for p in kept if (p.rel[v]["spBLEU"] or 0) > 0)
            row.rel_chrF_ci = group_interval(samples, kept, v, "chrF")
            row.rel_spBLEU_ci = group_interval(samples, kept, v, "spBLEU")
            row.significantly = {m: {s: sum(1 for p in kept if p.significance[v][m] == s) for s in ("worse", "better")}
                                 for m in ("chrF", "spBLEU")}
        out.append(row)
    return out
