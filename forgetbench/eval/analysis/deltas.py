"""ΔchrF per sentence: losers and winners, their shares with intervals, the most moving examples and the
movement between two variants (docs/METHOD.md §2.4)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.eval.analysis.core import RunData, SentenceDelta
from forgetbench.eval.languages import pair_tier
from forgetbench.stats import delta_class, pct


@dataclass
class DeltaGroups:
    """A variant's kept sentences and its losers and winners."""

    all: list[SentenceDelta] = field(default_factory=list)
    losers: list[SentenceDelta] = field(default_factory=list)
    winners: list[SentenceDelta] = field(default_factory=list)


def delta_groups(run: RunData, sentences: list[SentenceDelta]) -> dict[str, DeltaGroups]:
    groups = {v: DeltaGroups() for v in run.comps}
    for s in sentences:
        g = groups[s.variant]
        g.all.append(s)
        c = delta_class(s.delta, run.thresholds.delta)
        if c != "neither":
            getattr(g, c + "s").append(s)
    return groups


@dataclass
class DeltaResult:
    sentences: int
    losers: int
    winners: int
    losers_pct: float | None
    winners_pct: float | None
    deltas_by_tier: dict[str, list[float]]  # thesis tier of the pair -> ΔchrF (rounded to 3 places), for histograms
    losers_pct_ci: bs.Interval | None = None
    winners_pct_ci: bs.Interval | None = None


def delta_summary(run: RunData, groups: dict[str, DeltaGroups]) -> dict[str, DeltaResult]:
    out = {}
    for v, g in groups.items():
        by_tier: dict[str, list[float]] = {}
        for s in g.all:
            by_tier.setdefault(pair_tier(s.key[1], s.key[2], run.views[0].tiers), []).append(round(s.delta, 3))
        items = [(s.key, s.idx) for s in g.all]
        c = [delta_class(s.delta, run.thresholds.delta) for s in g.all]
        n, lose, win = run.item_sums(items, np.array([x == "loser" for x in c], float),
                                     np.array([x == "winner" for x in c], float))
        with np.errstate(invalid="ignore", divide="ignore"):
            out[v] = DeltaResult(len(g.all), len(g.losers), len(g.winners), pct(len(g.losers), len(g.all)),
                                 pct(len(g.winners), len(g.all)), by_tier, bs.percentile_interval(100 * lose / n),
                                 bs.percentile_interval(100 * win / n))
    return out


MOVES = ("loser", "neither", "winner")


@dataclass
class Movement:
    """How variant ``a``'s losers and winners fare under ``b`` (the study: which sentences move from loser to winner
    between 30 % and 45 %): the sentences by category under ``a`` (rows) and ``b`` (columns), and the loser→winner
    ones, most moving first."""

    a: str
    b: str
    counts: dict[str, dict[str, int]]
    loser_to_winner: list[dict] = field(default_factory=list)


def movement(run: RunData, sentences: list[SentenceDelta], a: str, b: str, n: int = 5) -> Movement:
    """``Movement`` over the analysed sentences both variants have; a category is ``stats.delta_class``: ΔchrF
    < −delta (loser), > +delta (winner) or neither, as ``delta_groups``."""
    da = {(s.key, s.idx): s.delta for s in sentences if s.variant == a}
    db = {(s.key, s.idx): s.delta for s in sentences if s.variant == b}

    def cat(d):
        return delta_class(d, run.thresholds.delta)

    counts = {x: dict.fromkeys(MOVES, 0) for x in MOVES}
    moves = []
    for k in sorted(set(da) & set(db)):
        counts[cat(da[k])][cat(db[k])] += 1
        if cat(da[k]) == "loser" and cat(db[k]) == "winner":
            moves.append({"pair": f"{k[0][1]}-{k[0][2]}", "benchmark": k[0][0], "idx": k[1], "delta_a": da[k],
                          "delta_b": db[k]})
    moves.sort(key=lambda m: (m["delta_a"] - m["delta_b"], m["pair"], m["idx"]))
    return Movement(a, b, counts, moves[:n])


@dataclass
class Example:
    pair: str
    benchmark: str
    idx: int
    delta_chrF: float
    source: str
    reference: str
    base: str
    compressed: str


def examples(run: RunData, groups: dict[str, DeltaGroups], n: int = 5) -> dict[str, dict[str, list[Example]]]:
    lines = {(j.benchmark.name, j.src, j.tgt): j.lines() for j in run.jobs}
    out = {}
    for v, g in groups.items():
        out[v] = {}
        for subset, rev in (("losers", False), ("winners", True)):
            items = sorted(getattr(g, subset), key=lambda s: s.delta, reverse=rev)[:n]
            out[v][subset] = [Example(f"{s.key[1]}-{s.key[2]}", s.key[0], s.idx, s.delta, lines[s.key][0][s.idx],
                                      lines[s.key][1][s.idx], run.hyps[s.key][run.base_of(v)][s.idx][0],
                                      run.hyps[s.key][v][s.idx][0]) for s in items]
    return out
