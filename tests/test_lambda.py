"""λ (docs/METHOD.md §2.6) on the study's subset: on-target losers and winners only, the off-target ones left out
and counted, checked by hand on sentences with known identifier flags and known attention variances."""

import numpy as np
import pytest

from forgetbench.eval import bootstrap as bs
from forgetbench.eval.analysis import DeltaGroups, RunData, SentenceDelta, Thresholds, hallucination

KEY = ("b", "en", "de")
#          idx:    0    1    2    3    4    5    6
VAR_BASE = [1.0, 2.0, 4.0, 1.0, 3.0, 5.0, 2.0]
VAR_COMP = [2.0, 9.0, 6.0, 3.0, 1.0, 1.0, 2.0]
ON_BASE = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, None]  # 5: the base went off-target; 6: language not covered
ON_COMP = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, None]  # 1 and 4: the compressed model went off-target


def _run():
    run = RunData([], "base", ["base", "v"], Thresholds(resamples=300, seed=7), [], {}, {}, {}, {})
    for i in range(7):
        run.xattn_var[("base", *KEY, i)], run.xattn_var[("v", *KEY, i)] = VAR_BASE[i], VAR_COMP[i]
        run.on_target[("base", *KEY, i)], run.on_target[("v", *KEY, i)] = ON_BASE[i], ON_COMP[i]
    run.weights = {KEY: bs.counts(7, 300, 7)}
    run.columns = {KEY: {i: i for i in range(7)}}
    return run


def test_lambda_is_the_ratio_of_means_over_on_target_sentences_only():
    losers = [SentenceDelta("v", KEY, i, -3.0) for i in (0, 1, 2, 5, 6)]
    winners = [SentenceDelta("v", KEY, i, 2.0) for i in (3, 4)]
    H = hallucination(_run(), {"v": DeltaGroups(losers + winners, losers, winners)})["v"]
    # losers: 1 (compressed off-target) and 5 (base off-target) left out; 6 kept, its language undetermined
    kept = [0, 2, 6]
    assert H["losers"].n == 3 and H["losers"].off_target == 2 and H["losers"].undetermined == 1
    assert H["losers"].lambda_ == pytest.approx(np.mean([VAR_COMP[i] for i in kept]) / np.mean([VAR_BASE[i] for i in kept]))
    assert H["losers"].lambda_ == pytest.approx((2 + 6 + 2) / (1 + 4 + 2))  # 10/7; with the off-target ones: 20/14
    ratios = sorted(VAR_COMP[i] / VAR_BASE[i] for i in kept)
    assert H["losers"].per_sentence["median"] == pytest.approx(ratios[1])
    lo, hi = H["losers"].lambda_ci.low, H["losers"].lambda_ci.high
    assert lo <= H["losers"].lambda_ <= hi
    # winners: 4 left out (compressed off-target): λ is sentence 3's alone
    assert (H["winners"].n, H["winners"].off_target, H["winners"].lambda_) == (1, 1, pytest.approx(3.0))
    assert H["all"].n == 4 and H["all"].off_target == 3
    assert H["all"].lambda_ == pytest.approx((2 + 6 + 3 + 2) / (1 + 4 + 1 + 2))


def test_the_layout_rule_each_sentence_teacher_forced_alone_whatever_its_batch(tiny):
    """docs/METHOD.md §2.9, the layout rule: every teacher-forced pass (λ, the gender aligner) runs one sentence
    with no padding, and a translation that keeps encoder states for it encodes each source alone; so a sentence's
    attention is the same bits passed with others or alone, on a fresh encoding or on states kept by translations
    of other batch widths (as in an inline or a separate λ pass, any process count, a resumed run). Asserted on
    the calls themselves (any host), then on the values."""
    import torch

    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.eval.hallucination import cross_attention, cross_attention_variance
    from forgetbench.models.generation import translate_rows

    from .conftest import FLORES

    model, tok = tiny
    srcs = open_benchmark("flores101", "flores101", FLORES).pair("en", "de")[0][:10]  # 12 to 60 source tokens
    rows = [(x, "en", "de") for x in srcs]
    calls = []

    def seen(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        if ids is not None:
            calls.append((ids.shape[0], mask is None or bool(mask.all())))

    model.get_encoder().register_forward_pre_hook(seen, with_kwargs=True)
    kept_4, kept_10 = {}, {}
    hyps = translate_rows(model, tok, rows, 1, 12, states=kept_4, width=4)
    assert len(calls) == len(rows) and all(c == (1, True) for c in calls)  # each kept source encoded alone
    translate_rows(model, tok, rows, 1, 12, states=kept_10, width=10)
    model.get_decoder().register_forward_pre_hook(seen, with_kwargs=True)
    calls.clear()
    together = cross_attention_variance(model, tok, srcs, hyps, "en", "de")
    assert len(calls) == 2 * len(rows) and all(c == (1, True) for c in calls)  # encoder and decoder: one, unpadded
    alone = [cross_attention_variance(model, tok, [s], [h], "en", "de")[0] for s, h in zip(srcs, hyps, strict=True)]
    on_4 = cross_attention_variance(model, tok, srcs, hyps, "en", "de", states=[kept_4[r] for r in rows])
    on_10 = cross_attention_variance(model, tok, srcs[::-1], hyps[::-1], "en", "de",
                                     states=[kept_10[r] for r in rows[::-1]])[::-1]
    assert together == alone == on_4 == on_10
    assert all(torch.equal(kept_4[r], kept_10[r]) for r in rows)
    # states wanted for some rows only (``keep``): those alone are encoded alone and kept, the same bits
    some: dict = {}
    calls.clear()
    translate_rows(model, tok, rows, 1, 12, states=some, width=4, keep=lambda r: r in rows[::3])
    assert set(some) == set(rows[::3]) and all(torch.equal(some[r], kept_4[r]) for r in rows[::3])
    a, b = cross_attention(model, tok, srcs[:3], hyps[:3], "en", "de"), cross_attention(model, tok, srcs[2:3], hyps[2:3],
                                                                                         "en", "de")
    assert torch.equal(a[2][0], b[0][0]) and a[2][1:] == b[0][1:]
