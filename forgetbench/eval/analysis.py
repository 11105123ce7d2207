"""The analyses of "what did compression forget" (docs/METHOD.md §2), from a run store.

One function per section of the report, each returning a typed result that serialises
(``to_dict``) to the keys of ``summary.json``:

- ``pair_results``: corpus chrF3 / spBLEU per pair and variant, relative differences, the
  baseline-spBLEU filter, tiers per view; and the per-sentence ΔchrF of the kept pairs.
- ``variant_table``: size and mean score per variant (thesis table 5.2).
- ``tier_tables``: mean relative difference per pair / source / target tier, per tier view.
- ``delta_summary``: ΔchrF losers (Δ < −delta) and winners (Δ > +delta).
- ``off_target``: off-target rate of base and variant on the losers and overall.
- ``lid_coverage``: which identifier covers each language ("undefined" where none does).
- ``hallucination``: cross-attention λ on losers / winners / all, ratio of subset means.
- ``examples``: the most losing and most winning sentences.
- ``languages``: each language as source and as target.
- ``pair_groups``: every variant's mean scores per (source tier, target tier) group, VL2VL … H2H as the
  SMaLL-100 study's table, and head-to-head contrasts between named variants (a distilled student vs
  its no-KD twin) with stratified intervals.

Every difference carries its paired bootstrap 95 % interval (``eval.bootstrap``): per pair (with a
p-value, Benjamini–Hochberg across the kept pairs for "significantly worse / better"), per tier and
per variant (stratified: each pair's sentences resampled within the pair), and for the ΔchrF shares,
off-target rates and λ (the same per-pair resamples). ``Thresholds.resamples`` / ``seed`` set them.

Every comparison between a compressed variant and the base uses the sentences both have.
Thresholds (configurable; defaults from docs/METHOD.md): baseline-spBLEU pair filter ≥ 12, ΔchrF
losers < −0.5 and winners > +0.5 chrF points, languages with two scripts excluded from the Δ
analysis. Means, relative changes and percentages are ``forgetbench.stats``'.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, fields, is_dataclass

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.eval import lid
from forgetbench.eval.languages import PAIR_GROUPS, TIERS, TWO_SCRIPT, language, pair_group, pair_tier
from forgetbench.eval.metrics import CHRF3, SpBLEU, chrf_signature
from forgetbench.eval.sentence_stats import REF
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job
from forgetbench.stats import delta_class, mean, pct, rel

Key = tuple[str, str, str]  # (benchmark, src, tgt)


def plain(x):
    """Dataclasses (with their own ``to_dict`` where they have one), dicts and lists → JSON-ready values."""
    if hasattr(x, "to_dict"):
        return x.to_dict()
    if is_dataclass(x):
        return {f.metadata.get("key", f.name): plain(getattr(x, f.name)) for f in fields(x)}
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


@dataclass
class Thresholds:
    bleu_filter: float = 12.0
    delta: float = 0.5
    exclude_two_script: bool = True
    resamples: int = bs.RESAMPLES  # paired bootstrap resamples for every interval
    seed: int = bs.SEED
    fdr: float = 0.05  # Benjamini-Hochberg false discovery rate for "significantly worse / better" pairs


@dataclass
class TierView:
    name: str
    tiers: dict[str, str] | None = None  # None = thesis table


@dataclass
class RunData:
    """What every section reads, loaded from the store once."""

    jobs: list[Job]
    base: str
    variants: list[str]
    thresholds: Thresholds
    views: list[TierView]
    hyps: dict[Key, dict[str, dict[int, tuple[str, float]]]]  # key -> variant -> idx -> (hypothesis, sentence chrF)
    on_target: dict[tuple, float | None]
    xattn_var: dict[tuple, float | None]
    variant_info: dict[str, dict]
    weights: dict[Key, np.ndarray] = field(default_factory=dict)  # per pair: [R, n] draws of its common sentences
    columns: dict[Key, dict[int, int]] = field(default_factory=dict)  # per pair: sentence idx -> column
    contrasts: list[tuple[str, str]] = field(default_factory=list)  # (a, b): a − b per pair group
    contrast_samples: dict = field(default_factory=dict)  # (pair, "a|b", metric) -> (observed a − b, [R] resampled)
    bases: dict[str, str] = field(default_factory=dict)  # variant -> the base series it is compared with (default base)
    parity: list[str] = field(default_factory=list)  # the base translated by other backends (``base@torch`` …)
    score_samples: dict = field(default_factory=dict)  # (pair, series, metric) -> [R] its corpus score per resample

    @property
    def base_series(self) -> list[str]:
        """The base and the base translated by other backends (``eval.backends`` rule 2), base first."""
        return [self.base, *self.parity]

    @property
    def comps(self) -> list[str]:
        return [v for v in self.variants if v not in self.base_series]

    def base_of(self, variant: str) -> str:
        return self.bases.get(variant, self.base)

    @classmethod
    def load(cls, store: Store, jobs: list[Job], base: str, variants: list[str], thresholds: Thresholds,
             views: list[TierView]) -> RunData:
        hyps: dict = {}
        limits = {(j.benchmark.name, j.src, j.tgt): j.limit for j in jobs}  # a job reads its sentences alone
        for v in variants:
            for r in store.translations(v):
                if (lim := limits.get((r["benchmark"], r["src"], r["tgt"]))) is not None and r["idx"] >= lim:
                    continue
                hyps.setdefault((r["benchmark"], r["src"], r["tgt"]), {}).setdefault(v, {})[r["idx"]] = (r["hyp"], r["chrf"])
        return cls(jobs, base, variants, thresholds, views, hyps, store.stats("on_target"), store.stats("xattn_var"),
                   store.variants())

    def item_sums(self, items: list[tuple[Key, int]], *values: np.ndarray) -> list[np.ndarray]:
        """Resampled sums Σ_r w·value over ``items`` (stratified: each pair's own resamples) for each value
        array (aligned with ``items``); the first result is the resampled item count Σ_r w."""
        R = self.thresholds.resamples
        out = [np.zeros(R) for _ in range(len(values) + 1)]
        by_key: dict[Key, list[int]] = {}
        for k, (key, _) in enumerate(items):
            by_key.setdefault(key, []).append(k)
        for key, ks in by_key.items():
            W = self.weights[key][:, [self.columns[key][items[k][1]] for k in ks]]
            out[0] += W.sum(1)
            for j, v in enumerate(values):
                out[j + 1] += W @ v[ks]
        return out


@dataclass(frozen=True)
class SentenceDelta:
    variant: str
    key: Key
    idx: int
    delta: float  # chrF_variant − chrF_base


@dataclass
class PairResult:
    benchmark: str
    src: str
    tgt: str
    n: int
    tier: dict[str, str]  # view -> tier of the pair
    src_tier: dict[str, str]
    tgt_tier: dict[str, str]
    scores: dict[str, dict[str, float]]  # variant -> {"chrF", "spBLEU"}
    rel: dict[str, dict[str, float | None]]  # compressed variant -> relative difference (%) per metric
    kept: bool  # base spBLEU >= the filter
    two_script_excluded: bool
    intervals: dict[str, dict[str, bs.PairDifference]] = field(default_factory=dict)  # variant -> metric -> difference
    parity: dict[str, dict] = field(default_factory=dict)  # other base series -> metric -> difference vs the base
    significance: dict[str, dict[str, str]] = field(default_factory=dict)  # worse / better / n.s. (BH over kept pairs)
    empty_outputs: dict[str, int] = field(default_factory=dict)  # variant -> hypotheses that are empty (or blank)


RelSamples = dict[tuple[Key, str, str], np.ndarray]  # (pair, variant, metric) -> resampled relative differences


def is_two_script_excluded(job, th: Thresholds) -> bool:
    return th.exclude_two_script and (job.src in TWO_SCRIPT or job.tgt in TWO_SCRIPT)


def sentences_analysed(job, base_hyps: dict[int, str], spbleu: SpBLEU, th: Thresholds) -> bool:
    """Whether a pair's sentences enter the per-sentence analyses (ΔchrF groups, λ): the base's corpus spBLEU on
    them, computed as ``pair_results`` computes it (summed sentence statistics, index order), passes the filter
    and the pair is not excluded as two-script. ``base_hyps``: idx -> the base's hypothesis, every sentence of the
    job (its callers read them with ``below=job.limit``)."""
    if is_two_script_excluded(job, th) or not base_hyps:
        return False
    refs, order = job.lines()[1], sorted(base_hyps)
    stats = bs.sentence_stats(spbleu.bleu, spbleu.segment([base_hyps[i] for i in order]),
                              spbleu.segment([refs[i] for i in order]))
    return bs.corpus_score(spbleu.bleu, stats.sum(0)) >= th.bleu_filter


def score_stats(spbleu: SpBLEU, hyps: list[str], refs: list[str], seg_refs: list[str]) -> dict[str, np.ndarray]:
    """Per-sentence sufficient statistics of chrF3 and spBLEU (``seg_refs``: ``refs`` segmented once by the caller,
    who compares several systems on them)."""
    return {"chrF": bs.sentence_stats(CHRF3, hyps, refs),
            "spBLEU": bs.sentence_stats(spbleu.bleu, spbleu.segment(hyps), seg_refs)}


def pair_results(run: RunData, spbleu: SpBLEU) -> tuple[list[PairResult], list[SentenceDelta], RelSamples]:
    th, base, variants = run.thresholds, run.base, run.variants
    pairs, sentences, samples = [], [], {}
    metrics = {"chrF": CHRF3, "spBLEU": spbleu.bleu}
    for k_job, job in enumerate(run.jobs):
        key = (job.benchmark.name, job.src, job.tgt)
        rows = run.hyps.get(key, {})
        if base not in rows:
            continue
        srcs, refs = job.lines()
        common = sorted(set.intersection(*(set(rows.get(v, {})) for v in variants)))
        if not common:
            continue
        rs = [refs[i] for i in common]
        seg_refs = spbleu.segment(rs)
        stats = {v: score_stats(spbleu, [rows[v][i][0] for i in common], rs, seg_refs) for v in variants}
        scores = {v: {m: bs.corpus_score(metrics[m], stats[v][m].sum(0)) for m in metrics} for v in variants}
        run.weights[key] = bs.counts(len(common), th.resamples, [th.seed, k_job])
        run.columns[key] = {i: c for c, i in enumerate(common)}
        resampled: dict = {}  # (series, metric) -> its corpus score in every resample: computed once per pair

        def rs(v, m, _w=run.weights[key], _stats=stats, _memo=resampled):
            if (v, m) not in _memo:
                _memo[(v, m)] = bs.scores_from(metrics[m], _w @ _stats[v][m])
            return _memo[(v, m)]

        for v in variants:
            run.score_samples[(key, v, "chrF")], run.score_samples[(key, v, "spBLEU")] = rs(v, "chrF"), rs(v, "spBLEU")
        intervals = {}
        for v in run.comps:
            b = run.base_of(v)
            intervals[v] = {}
            for m in metrics:
                intervals[v][m], samples[(key, v, m)] = bs.paired_difference(scores[b][m], scores[v][m], rs(b, m),
                                                                             rs(v, m))
        parity = {}
        for b2 in run.base_series[1:]:  # the same model by another backend: backend drift, never forgetting
            parity[b2] = {"identical": sum(rows[base][i][0] == rows[b2][i][0] for i in common)}
            for m in metrics:
                parity[b2][m] = bs.paired_difference(scores[base][m], scores[b2][m], rs(base, m), rs(b2, m))[0]
        for a, b in [*run.contrasts, *((b2, base) for b2 in run.base_series[1:])]:  # parity's mean: a contrast too
            for m in metrics:
                run.contrast_samples[(key, f"{a}|{b}", m)] = (scores[a][m] - scores[b][m], rs(a, m) - rs(b, m))
        two_script = is_two_script_excluded(job, th)
        p = PairResult(key[0], job.src, job.tgt, len(common),
                       {vw.name: pair_tier(job.src, job.tgt, vw.tiers) for vw in run.views},
                       {vw.name: (vw.tiers or {}).get(job.src) or language(job.src).tier for vw in run.views},
                       {vw.name: (vw.tiers or {}).get(job.tgt) or language(job.tgt).tier for vw in run.views},
                       scores, {v: {m: rel(scores[v][m], scores[run.base_of(v)][m]) for m in ("chrF", "spBLEU")}
                                for v in run.comps},
                       scores[base]["spBLEU"] >= th.bleu_filter, two_script, intervals, parity)
        p.empty_outputs = {v: sum(not rows[v][i][0].strip() for i in common) for v in variants}
        pairs.append(p)
        if p.kept and not two_script:
            sentences += [SentenceDelta(v, key, i, rows[v][i][1] - rows[run.base_of(v)][i][1]) for v in run.comps
                          for i in common]
    mark_significance(run, pairs)
    return pairs, sentences, samples


def mark_significance(run: RunData, pairs: list[PairResult]) -> None:
    """Per variant and metric, Benjamini–Hochberg over the kept pairs' p-values: "worse" / "better" where the
    difference is significant at the run's false discovery rate, "n.s." elsewhere."""
    kept = [p for p in pairs if p.kept]
    for v in run.comps:
        for m in ("chrF", "spBLEU"):
            reject, _ = bs.benjamini_hochberg([p.intervals[v][m].p for p in kept], run.thresholds.fdr)
            for p, r in zip(kept, reject, strict=True):
                d = p.intervals[v][m].delta
                p.significance.setdefault(v, {})[m] = ("worse" if d < 0 else "better") if r and d != 0 else "n.s."


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


@dataclass
class Difference:
    """A mean difference over pairs (a − b, or low − high) with its stratified paired-bootstrap interval."""
    difference: float | None
    ci: list


@dataclass
class TierContrast:
    """Low-resource pairs' mean relative difference minus the High pairs' (None where a side has no pair)."""
    low_pairs: int
    high_pairs: int
    difference: float | None
    ci: list


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


@dataclass
class Analysis:
    base: str
    variants: list[str]
    thresholds: Thresholds
    signatures: dict
    pairs: list[PairResult] = field(default_factory=list)
    tiers: dict = field(default_factory=dict)
    variant_table: list[VariantRow] = field(default_factory=list)
    delta: dict[str, DeltaResult] = field(default_factory=dict)
    off_target: dict[str, OffTargetResult] = field(default_factory=dict)
    lid_coverage: list[LidCoverage] = field(default_factory=list)
    hallucination: dict[str, dict[str, LambdaResult]] = field(default_factory=dict)
    examples: dict[str, dict[str, list[Example]]] = field(default_factory=dict)
    languages: list[LanguageResult] = field(default_factory=list)
    tier_contrasts: dict[str, dict[str, dict[str, TierContrast]]] = field(default_factory=dict)  # view, variant, metric
    pair_groups: dict[str, dict[str, PairGroup]] = field(default_factory=dict)  # view -> group (VL2VL … H2H, low, all)
    bases: dict = field(default_factory=dict)  # variant -> the base series it is compared with (its backend's)
    backend_parity: dict[str, BackendParity] = field(default_factory=dict)  # other base series -> vs the base
    families: dict = field(default_factory=dict)  # template -> eval.families.FamilyResult (only where a sweep has one)
    movement: dict = field(default_factory=dict)  # "a|b" -> Movement (only where a sweep asks for it)

    def to_dict(self) -> dict:
        optional = ("families", "movement")  # present only where a sweep has them
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)
                if f.name not in optional or getattr(self, f.name)}


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


def _mean_difference(run: RunData, ps: list[PairResult], key: str, m: str) -> Difference:
    """The mean over ``ps`` of a contrast's per-pair differences, with the stratified interval."""
    obs = [run.contrast_samples[((p.benchmark, p.src, p.tgt), key, m)] for p in ps]
    return Difference(mean(o[0] for o in obs), bs.group_mean([o[1] for o in obs]).to_dict())


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


def signatures(run: RunData, spbleu: SpBLEU) -> dict:
    """Metric signatures, the SPM hash, every variant's model hash and every benchmark file pair's hash."""
    return {"chrF": chrf_signature(), "spBLEU": spbleu.signature(), "spm_sha256": spbleu.sha256,
            "models": {v: run.variant_info.get(v, {}).get("model_sha256") for v in run.variants},
            "data": {f"{j.benchmark.name}:{j.src}-{j.tgt}": j.benchmark.sha256(j.src, j.tgt) for j in run.jobs}}


def analyse(store: Store, jobs: list[Job], base: str, variants: list[str], spbleu: SpBLEU,
            thresholds: Thresholds | None = None, tier_views: list[TierView] | None = None,
            n_examples: int = 5, contrasts: list[tuple[str, str]] | None = None,
            bases: dict[str, str] | None = None, parity: list[str] | None = None, families: dict | None = None,
            movements: list[tuple[str, str]] | None = None) -> Analysis:
    """``parity``: the base translated by other backends (series names in ``variants``), each compared with
    ``base`` in ``backend_parity``; ``bases``: variant -> base series where it is not ``base`` (a variant
    translated by another backend is compared with the base translated by that backend)."""
    run = RunData.load(store, jobs, base, variants, thresholds or Thresholds(), tier_views or [TierView("thesis")])
    run.contrasts = list(contrasts or [])
    run.parity = list(parity or [])
    run.bases = {v: b for v, b in (bases or {}).items() if b != base and v not in run.parity}
    pairs, sentences, samples = pair_results(run, spbleu)
    groups = delta_groups(run, sentences)
    A = Analysis(base, variants, run.thresholds, signatures(run, spbleu), pairs, tier_tables(run, pairs, samples),
                 variant_table(run, pairs, samples), delta_summary(run, groups), off_target(run, groups),
                 lid_coverage(pairs), hallucination(run, groups), examples(run, groups, n_examples),
                 languages(run, pairs, groups))
    A.tier_contrasts = tier_contrasts(run, pairs, samples)
    A.pair_groups = pair_groups(run, pairs)
    A.bases = {v: run.base_of(v) for v in run.comps}
    A.backend_parity = backend_parity(run, pairs)
    A.movement = {f"{a}|{b}": movement(run, sentences, a, b) for a, b in movements or []}
    if families:
        from forgetbench.eval.families import family_results

        A.families = family_results(run, pairs, samples, families)
    return A
