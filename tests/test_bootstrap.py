"""Paired bootstrap intervals: agreement with sacrebleu's --paired-bs, coverage, Benjamini-Hochberg, stratified groups."""

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF

from forgetbench.eval import bootstrap as bs


def _systems(n=150, seed=0, better=0.0):
    """A reference set and two systems; ``better``: share of sentences where the second system is exactly right."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)]
    refs = [" ".join(rng.choice(words, rng.integers(6, 14))) for _ in range(n)]

    def noisy(r, p):
        toks = r.split()
        return " ".join(t if rng.random() > p else rng.choice(words) for t in toks)

    a = [noisy(r, 0.4) for r in refs]
    # the second system: the first one with a share of sentences made exactly right (better > 0), or with three
    # sentences re-noised (no real difference)
    b = [r if rng.random() < better else h for r, h in zip(refs, a, strict=True)] if better else \
        [noisy(r, 0.4) if k < 3 else h for k, (r, h) in enumerate(zip(refs, a, strict=True))]
    return refs, a, b


@pytest.mark.parametrize("better, expect_significant", [(0.25, True), (0.0, False)])
def test_pair_difference_agrees_with_sacrebleu_paired_bootstrap(better, expect_significant):
    from sacrebleu.significance import PairedTest

    refs, a, b = _systems(better=better)
    bleu = BLEU(tokenize="none", force=True)
    w = bs.counts(len(refs), 1000, 1)
    ours, _ = bs.paired_corpus(bleu, bs.sentence_stats(bleu, a, refs), bs.sentence_stats(bleu, b, refs), w)
    test = PairedTest([("baseline", a), ("system", b)], {"BLEU": BLEU(tokenize="none", force=True)}, references=[refs],
                      test_type="bs", n_samples=1000)
    _, scores = test()
    theirs = scores["BLEU"][1]
    # the same statistic on independent resamples: p-values agree within resampling noise (±0.05 absolute),
    # and the observed difference is sacrebleu's exactly
    assert ours.delta == pytest.approx(theirs.score - scores["BLEU"][0].score, abs=1e-9)
    assert abs(ours.p - theirs.p_value) < 0.05
    assert (ours.p < 0.05) is expect_significant and ours.delta_ci.excludes_zero() is expect_significant
    # our resampled system scores have sacrebleu's 95 % half-width for the system (within 25 %)
    sys_scores = bs.scores_from(bleu, w @ bs.sentence_stats(bleu, b, refs))
    lo, hi = np.percentile(sys_scores, [2.5, 97.5])
    assert (hi - lo) / 2 == pytest.approx(theirs.ci, rel=0.25)


def test_a_system_equal_to_its_base_is_never_significant():
    """sacrebleu's p-value for two identical systems is 1 / (R + 1): every resampled difference is 0 and none exceeds
    the observed 0. A zero observed difference is no evidence: ``paired_p`` gives 1, and the pair is "n.s."."""
    from sacrebleu.significance import PairedTest

    refs, a, _ = _systems()
    bleu = BLEU(tokenize="none", force=True)
    test = PairedTest([("baseline", a), ("system", list(a))], {"BLEU": BLEU(tokenize="none", force=True)},
                      references=[refs], test_type="bs", n_samples=1000)
    assert test()[1]["BLEU"][1].p_value == pytest.approx(1 / 1001)  # the degenerate case this departs from
    st = bs.sentence_stats(bleu, a, refs)
    same, _ = bs.paired_corpus(bleu, st, st.copy(), bs.counts(len(refs), 1000, 1))
    assert same.delta == 0 and same.p == 1.0
    assert bs.benjamini_hochberg([same.p] * 28, 0.05)[0] == [False] * 28


def test_chrf_resample_of_everything_is_the_corpus_score():
    refs, a, _ = _systems(n=40)
    chrf = CHRF(char_order=6, word_order=0, beta=3)
    st = bs.sentence_stats(chrf, a, refs)
    assert bs.scores_from(chrf, st.sum(0, keepdims=True))[0] == pytest.approx(chrf.corpus_score(a, [refs]).score, abs=1e-9)


@pytest.mark.parametrize("kwargs", [{"char_order": 6, "word_order": 0, "beta": 3}, {"word_order": 2},
                                    {"char_order": 6, "word_order": 0, "beta": 3, "eps_smoothing": True}])
def test_chrf_rows_equal_sacrebleu_on_every_resample(kwargs):
    """The vectorised chrF of resampled statistics is sacrebleu's _compute_f_score on each row, bit for bit,
    including rows with empty hypotheses and orders without matches."""
    refs, a, _ = _systems(n=60, seed=3)
    a = ["" if k % 7 == 0 else ("w1" if k % 11 == 0 else h) for k, h in enumerate(a)]
    chrf = CHRF(**kwargs)
    summed = bs.counts(len(refs), 300, 5) @ bs.sentence_stats(chrf, a, refs)
    summed[:3] = 0  # no statistics at all
    summed[3, 2::3] = 0  # no matches at any order
    assert bs.chrf_rows(chrf, summed).tolist() == [chrf._compute_f_score(list(row)) for row in summed]
    assert bs.scores_from(chrf, summed).tolist() == [chrf._compute_score_from_stats(row).score for row in summed]


def test_interval_coverage_with_a_known_difference():
    """About 95 % of 95 % intervals contain the true difference (300 synthetic paired samples)."""
    rng = np.random.default_rng(42)
    true_delta, n, hits, trials = -1.5, 120, 0, 300
    for t in range(trials):
        d = true_delta + rng.normal(0, 4, n)  # per-item paired differences with mean true_delta
        w = bs.counts(n, 1000, t)
        ci = bs.percentile_interval(bs.resample_mean(d, w))
        hits += ci.low <= true_delta <= ci.high
    assert 0.91 <= hits / trials <= 0.985


def test_benjamini_hochberg_on_a_known_list():
    p = [0.01, 0.04, 0.03, 0.005, 0.2]
    reject, adjusted = bs.benjamini_hochberg(p, 0.05)
    assert reject == [True, True, True, True, False]
    assert adjusted == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.2])
    reject, _ = bs.benjamini_hochberg([0.02, 0.03, 0.04], 0.05)  # all three pass at rank 3
    assert reject == [True, True, True]
    assert bs.benjamini_hochberg([0.3, 0.5], 0.05)[0] == [False, False] and bs.benjamini_hochberg([], 0.05) == ([], [])


def test_group_interval_is_a_stratified_resample():
    from forgetbench.eval.analysis import RunData, Thresholds

    th = Thresholds(resamples=500, seed=3)
    run = RunData([], "base", ["base", "v"], th, [], {}, {}, {}, {})
    ka, kb = ("b", "en", "de"), ("b", "en", "sw")
    run.weights = {ka: bs.counts(4, 500, [3, 0]), kb: bs.counts(3, 500, [3, 1])}
    run.columns = {ka: {10: 0, 11: 1, 12: 2, 13: 3}, kb: {5: 0, 6: 1, 7: 2}}
    items = [(ka, 10), (ka, 12), (kb, 7), (kb, 5)]
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    n, s = run.item_sums(items, vals)
    # each pair contributes its own resample counts only: pair sizes are fixed in every resample
    manual_n = run.weights[ka][:, [0, 2]].sum(1) + run.weights[kb][:, [2, 0]].sum(1)
    manual_s = run.weights[ka][:, [0, 2]] @ vals[:2] + run.weights[kb][:, [2, 0]] @ vals[2:]
    assert np.array_equal(n, manual_n) and np.allclose(s, manual_s)
    assert np.all(run.weights[ka].sum(1) == 4) and np.all(run.weights[kb].sum(1) == 3)
    # a group's interval: the mean over its pairs per resample
    sa, sb = np.linspace(-2, 0, 500), np.linspace(0, 4, 500)
    ci = bs.group_mean([sa, sb])
    assert ci.to_dict() == pytest.approx(list(np.percentile((sa + sb) / 2, [2.5, 97.5])))


def test_resampling_is_seeded():
    assert np.array_equal(bs.counts(50, 100, 7), bs.counts(50, 100, 7))
    assert not np.array_equal(bs.counts(50, 100, 7), bs.counts(50, 100, 8))


@pytest.mark.parametrize("metric", ["bleu", "spbleu", "chrf"])
def test_corpus_score_from_summed_statistics_is_sacrebleus_public_corpus_score(metric):
    """``corpus_score`` (sacrebleu's public ``compute_bleu``; chrF's formula elementwise) on the summed sentence
    statistics equals sacrebleu's public ``corpus_score`` of the same sentences, and the private formula it
    replaced, exactly (spBLEU as the sweep computes it: BLEU with no tokenizer over SentencePiece pieces)."""
    from sacrebleu.metrics import BLEU

    refs, a, _ = _systems(n=80, seed=7)
    m = {"bleu": BLEU(), "spbleu": BLEU(tokenize="none", force=True), "chrf": CHRF(word_order=0)}[metric]
    st = bs.sentence_stats(m, a, refs).sum(0)
    assert bs.corpus_score(m, st) == m.corpus_score(a, [refs]).score
    assert bs.corpus_score(m, st) == m._compute_score_from_stats(st).score
