"""What every section reads: the run's data loaded once (``RunData``), the pairs' corpus scores, relative
differences and paired intervals (``pair_results``, docs/METHOD.md §2.2–2.3, §3.6), the thresholds, the signatures."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.eval.languages import TWO_SCRIPT, language, pair_tier
from forgetbench.eval.metrics import CHRF3, SpBLEU, chrf_signature
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job
from forgetbench.stats import mean, rel

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
class Difference:
    """A mean difference over pairs (a − b, or low − high) with its stratified paired-bootstrap interval."""
    difference: float | None
    ci: list


def _mean_difference(run: RunData, ps: list[PairResult], key: str, m: str) -> Difference:
    """The mean over ``ps`` of a contrast's per-pair differences, with the stratified interval."""
    obs = [run.contrast_samples[((p.benchmark, p.src, p.tgt), key, m)] for p in ps]
    return Difference(mean(o[0] for o in obs), bs.group_mean([o[1] for o in obs]).to_dict())


def signatures(run: RunData, spbleu: SpBLEU) -> dict:
    """Metric signatures, the SPM hash, every variant's model hash and every benchmark file pair's hash."""
    return {"chrF": chrf_signature(), "spBLEU": spbleu.signature(), "spm_sha256": spbleu.sha256,
            "models": {v: run.variant_info.get(v, {}).get("model_sha256") for v in run.variants},
            "data": {f"{j.benchmark.name}:{j.src}-{j.tgt}": j.benchmark.sha256(j.src, j.tgt) for j in run.jobs}}
