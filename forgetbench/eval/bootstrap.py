"""Paired bootstrap intervals and significance for every difference a report shows (docs/METHOD.md §2.10).

- **One pair** (``paired_corpus``): resample sentence indices with replacement — the same resample for the
  base and the variant (Koehn 2004) — and recompute corpus chrF / spBLEU from each sentence's sufficient
  statistics by sacrebleu's own formulas (``corpus_score``: BLEU's public ``compute_bleu``; chrF's operations
  elementwise, ``chrf_rows``). The 2.5th and 97.5th percentiles of the
  resampled absolute and relative differences are the 95 % interval; the p-value is sacrebleu's
  ``--paired-bs`` one: with Δ_r the resampled differences, (#{|Δ_r| − mean|Δ| > |Δ_obs|} + 1) / (R + 1).
- **A group of pairs** (``group_mean``): stratified — each pair's sentences are resampled within the pair
  (independently per pair), each pair's statistic is recomputed and the group statistic (the mean over
  its pairs) is taken per resample.
- **Per-sentence statistics** (``resample_mean``, ``resample_ratio``): shares of losers, off-target rates,
  λ ratios, gender accuracy and ψ, MuCoW accuracy, parser LAS: the same resampling over items.
- **Multiple comparisons** (``benjamini_hochberg``): pairs marked significantly worse or better control
  the false discovery rate at q = 0.05.

Resamples (default 1,000) and the seed are settings; every interval records both. The resampled sums
are one matrix product (counts of each index per resample × statistics), so the cost is R small score
computations per metric and pair.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import CHRF

RESAMPLES = 1000
SEED = 12345  # sacrebleu's default SACREBLEU_SEED
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None

    def to_dict(self) -> list:
        return [self.low, self.high]

    def __iter__(self):  # lo, hi = interval; as the [low, high] summary.json holds
        return iter((self.low, self.high))

    def __getitem__(self, i: int) -> float | None:
        return (self.low, self.high)[i]

    def excludes_zero(self) -> bool:
        return self.low is not None and (self.low > 0 or self.high < 0)


@dataclass
class PairDifference:
    """A variant vs the base on one metric of one pair."""

    delta: float  # variant − base, corpus level
    delta_ci: Interval
    rel: float | None  # (variant − base) / |base| · 100
    rel_ci: Interval
    p: float  # paired bootstrap, two-sided

    def to_dict(self) -> dict:
        return {"delta": self.delta, "delta_ci": self.delta_ci.to_dict(), "rel": self.rel,
                "rel_ci": self.rel_ci.to_dict(), "p": self.p}


def counts(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """[R, n]: how often each of ``n`` items is drawn in each resample (draws with replacement)."""
    return tally(np.random.default_rng(seed).integers(0, n, size=(resamples, n)), n)


def tally(idx: np.ndarray, n: int) -> np.ndarray:
    """[R, n] counts from [R, k] drawn indices in [0, n)."""
    r = idx.shape[0]
    flat = (np.arange(r)[:, None] * n + idx).ravel()
    return np.bincount(flat, minlength=r * n).reshape(r, n).astype(np.float64)


def percentile_interval(samples: np.ndarray, level: float = LEVEL) -> Interval:
    s = samples[np.isfinite(samples)]
    if len(s) == 0:
        return Interval(None, None)
    a = (1 - level) / 2 * 100
    lo, hi = np.percentile(s, [a, 100 - a])
    return Interval(float(lo), float(hi))


def sentence_stats(metric, hyps: Sequence[str], refs: Sequence[str]) -> np.ndarray:
    """Per-sentence sufficient statistics of a sacrebleu metric (rows: sentences)."""
    return np.asarray(metric._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=np.float64)


def corpus_score(metric, summed: np.ndarray) -> float:
    """The corpus score of summed sufficient statistics, by sacrebleu's public formula: BLEU's ``compute_bleu`` on
    the statistics as sacrebleu lays them out (hypothesis and reference lengths, correct n-grams, total n-grams),
    with the metric's smoothing and order; chrF by ``chrf_rows`` (its operations, elementwise: equal to sacrebleu's
    score, tested). The statistics themselves come from ``sentence_stats``, sacrebleu's extraction, which it does
    not expose publicly."""
    if isinstance(metric, CHRF):
        return float(chrf_rows(metric, np.asarray(summed, dtype=np.float64)[None])[0])
    n = metric.max_ngram_order
    return metric.compute_bleu(correct=summed[2 : 2 + n], total=summed[2 + n :], sys_len=int(summed[0]),
                               ref_len=int(summed[1]), smooth_method=metric.smooth_method,
                               smooth_value=metric.smooth_value, effective_order=metric.effective_order,
                               max_ngram_order=n).score


def scores_from(metric, summed: np.ndarray) -> np.ndarray:
    """Corpus scores of each row of summed statistics, by sacrebleu's own formula (chrF: the same formula on
    all rows at once, ``chrf_rows``)."""
    if isinstance(metric, CHRF):
        return chrf_rows(metric, summed)
    return np.array([corpus_score(metric, row) for row in summed])


def chrf_rows(metric: CHRF, summed: np.ndarray) -> np.ndarray:
    """``CHRF._compute_f_score`` (sacrebleu 2.x) of every row of ``summed`` [R, 3 · order]: the same float64
    operations in the same order, elementwise, so every row equals sacrebleu's score exactly (tested); 1,000
    resamples in ~1 ms instead of ~30."""
    eps, factor, rows = 1e-16, metric.beta ** 2, summed.shape[0]
    score, avg_prec, avg_rec = np.zeros(rows), np.zeros(rows), np.zeros(rows)
    effective = np.zeros(rows, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(metric.order):
            n_hyp, n_ref, n_match = summed[:, 3 * i], summed[:, 3 * i + 1], summed[:, 3 * i + 2]
            prec = np.where(n_hyp > 0, n_match / n_hyp, eps)
            rec = np.where(n_ref > 0, n_match / n_ref, eps)
            denom = factor * prec + rec
            score = score + np.where(denom > 0, (1 + factor) * prec * rec / denom, eps)
            both = (n_hyp > 0) & (n_ref > 0)
            avg_prec = np.where(both, avg_prec + prec, avg_prec)
            avg_rec = np.where(both, avg_rec + rec, avg_rec)
            effective += both
        if metric.eps_smoothing:
            return 100 * score / metric.order
        avg_prec = np.where(effective == 0, 0.0, avg_prec / effective)
        avg_rec = np.where(effective == 0, 0.0, avg_rec / effective)
        f = (1 + factor) * avg_prec * avg_rec
        f = f / ((factor * avg_prec) + avg_rec)
        return np.where(avg_prec + avg_rec != 0, 100 * f, 0.0)


def paired_p(base_scores: np.ndarray, comp_scores: np.ndarray, observed: float) -> float:
    """sacrebleu's paired bootstrap p-value (Moses' bootstrap-hypothesis-difference-significance), except that a zero
    observed difference gives 1: sacrebleu gives two identical systems 1 / (R + 1), as every centred resampled
    difference is 0 and none exceeds 0, which would count a variant that changed nothing as significant."""
    if observed == 0:
        return 1.0
    diffs = np.abs(comp_scores - base_scores)
    null = diffs - diffs.mean()
    return float((np.sum(null > abs(observed)) + 1) / (len(null) + 1))


def paired_corpus(metric, base_stats: np.ndarray, comp_stats: np.ndarray, weights: np.ndarray) -> tuple[PairDifference, np.ndarray]:
    """The difference of one metric between two systems on the same sentences; ``weights`` from ``counts``.
    Also returns the resampled relative differences (for group statistics)."""
    b, c = corpus_score(metric, base_stats.sum(0)), corpus_score(metric, comp_stats.sum(0))
    return paired_difference(b, c, scores_from(metric, weights @ base_stats), scores_from(metric, weights @ comp_stats))


def paired_difference(b: float, c: float, rb: np.ndarray, rc: np.ndarray) -> tuple[PairDifference, np.ndarray]:
    """``paired_corpus`` from the corpus scores ``b``, ``c`` and their resampled scores ``rb``, ``rc`` (for callers
    that resample each system once and compare it several times)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rel_samples = np.where(rb != 0, (rc - rb) / np.abs(rb) * 100, np.nan)
    rel = (c - b) / abs(b) * 100 if b else None
    return PairDifference(c - b, percentile_interval(rc - rb), rel, percentile_interval(rel_samples),
                          paired_p(rb, rc, c - b)), rel_samples


def nanmean(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """Mean ignoring NaN; all-NaN slices give NaN without numpy's warning."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=axis)


def group_mean(per_pair_samples: list[np.ndarray], level: float = LEVEL) -> Interval:
    """Interval of a group's mean from stratified resamples: row r of each pair's samples is that pair's
    statistic in resample r (each pair resampled within itself); the group statistic is their mean."""
    if not per_pair_samples:
        return Interval(None, None)
    m = nanmean(np.vstack(per_pair_samples), axis=0) if len(per_pair_samples) > 1 else per_pair_samples[0]
    return percentile_interval(m, level)


def resample_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Resampled means of per-item values (NaN items are left out)."""
    ok = np.isfinite(values)
    num = weights[:, ok] @ values[ok]
    den = weights[:, ok].sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def resample_ratio(num: np.ndarray, den: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Resampled ratios of sums, Σ num / Σ den (for λ: mean variance of the variant over that of the base)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ num) / (weights @ den)


def resample_statistic(items: Sequence, statistic: Callable[[list], float | None], resamples: int = RESAMPLES,
                       seed: int = SEED) -> Interval:
    """Interval of any statistic of a list of items (gender ψ, ψ*, accuracy …) by plain resampling."""
    if not items:
        return Interval(None, None)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(items), size=(resamples, len(items)))
    vals = np.array([np.nan if (v := statistic([items[i] for i in row])) is None else v for row in idx], dtype=float)
    return percentile_interval(vals)


def benjamini_hochberg(pvalues: Sequence[float], q: float = 0.05) -> tuple[list[bool], list[float]]:
    """Which hypotheses are rejected at false discovery rate ``q``, and the BH-adjusted p-values."""
    p = np.asarray(pvalues, dtype=float)
    n = len(p)
    if n == 0:
        return [], []
    order = np.argsort(p, kind="stable")
    ranked = p[order] * n / np.arange(1, n + 1)
    adjusted_sorted = np.minimum.accumulate(ranked[::-1])[::-1].clip(max=1.0)
    adjusted = np.empty(n)
    adjusted[order] = adjusted_sorted
    passing = np.nonzero(p[order] <= q * np.arange(1, n + 1) / n)[0]
    reject = np.zeros(n, dtype=bool)
    if len(passing):
        reject[order[: passing.max() + 1]] = True
    return reject.tolist(), adjusted.tolist()
