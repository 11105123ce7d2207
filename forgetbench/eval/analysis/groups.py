"""Pair groups as the SMaLL-100 study's table with head-to-head contrasts, and the backend parity check (docs/METHOD.md
§3.6)."""

from __future__ import annotations

from dataclasses import dataclass

from forgetbench.eval.analysis.core import Difference, PairResult, RunData, _mean_difference
from forgetbench.eval.languages import PAIR_GROUPS, pair_group
from forgetbench.stats import mean


@dataclass
class PairGroup:
    """A group of kept pairs (VL2VL … H2H, low, all): sizes, each variant's mean scores, each contrast."""
    pairs: int
    sentences: int
    scores: dict  # variant -> metric -> mean corpus score
    contrasts: dict[str, dict[str, Difference]]  # "a vs b" -> metric -> a − b


@dataclass
class ParityRow:
    pair: str
    benchmark: str
    sentences: int
    identical: int
    chrF: dict
    spBLEU: dict


@dataclass
class BackendParity:
    """One other backend's base series against the base: per pair and the mean over pairs."""
    of: str
    pairs: list[ParityRow]
    mean: dict[str, Difference]
    identical: int
    sentences: int


def pair_groups(run: RunData, pairs: list[PairResult]) -> dict[str, dict[str, PairGroup]]:
    """Per tier view: the kept pairs grouped by (source tier, target tier) as the SMaLL-100 study's table
    (``VL2VL`` … ``H2H``), plus ``low`` (pairs whose tier is Very-Low or Low) and ``all``. Each group: the
    mean corpus chrF and spBLEU of every variant, and for every contrast (a, b) the mean difference a − b
    with its stratified paired-bootstrap interval (each pair's sentences resampled within the pair)."""
    kept = [p for p in pairs if p.kept]
    out: dict = {}
    for vw in run.views:
        groups: dict[str, list[PairResult]] = {}
        for p in kept:
            groups.setdefault(pair_group(p.src_tier[vw.name], p.tgt_tier[vw.name]), []).append(p)
        order = [g for g in PAIR_GROUPS if g in groups]
        groups["low"] = [p for p in kept if p.tier[vw.name] in ("Very-Low", "Low")]
        groups["all"] = kept
        out[vw.name] = {}
        for g in [*order, "low", "all"]:
            ps = groups[g]
            if not ps:
                continue
            out[vw.name][g] = PairGroup(
                len(ps), sum(p.n for p in ps),
                {v: {m: mean(p.scores[v][m] for p in ps) for m in ("chrF", "spBLEU")} for v in run.variants},
                {f"{a} vs {b}": {m: _mean_difference(run, ps, f"{a}|{b}", m) for m in ("chrF", "spBLEU")}
                 for a, b in run.contrasts})
    return out


def backend_parity(run: RunData, pairs: list[PairResult]) -> dict[str, BackendParity]:
    """Per base series of another backend (``base@torch`` …): per pair (every pair, kept or not) its chrF and
    spBLEU minus the base's on the same sentences, with the paired-bootstrap interval and the count of identical
    hypotheses; and the mean over pairs with its stratified interval. A difference here is the backend's, never
    forgetting: each variant is compared with the base of its own backend."""
    out = {}
    for b2 in run.base_series[1:]:
        compared = [p for p in pairs if b2 in p.parity]
        rows = [ParityRow(f"{p.src}-{p.tgt}", p.benchmark, p.n, p.parity[b2]["identical"], p.parity[b2]["chrF"].to_dict(),
                          p.parity[b2]["spBLEU"].to_dict()) for p in compared]
        out[b2] = BackendParity(run.base, rows, {m: _mean_difference(run, compared, f"{b2}|{run.base}", m)
                                                 for m in ("chrF", "spBLEU")},
                                sum(r.identical for r in rows), sum(r.sentences for r in rows))
    return out
