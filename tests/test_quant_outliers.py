"""Activation outliers: per-channel and per-token scales, SmoothQuant, the per-site diagnosis, and calibration on
real tokens of the model's languages (docs/METHOD.md §1.2)."""

import copy
import json
import math

import pytest
import torch

from forgetbench.compress import QuantConfig, attach, quantize
from forgetbench.compress.calibration import Seq2SeqCalibration, choose, seq2seq_calibration
from forgetbench.compress.calibrators import ChannelMaxCalibrator, MaxCalibrator
from forgetbench.compress.diagnosis import SiteStats, diagnose, markdown
from forgetbench.compress.ptq import QuantState
from forgetbench.compress.quantizer import fake_quant
from forgetbench.compress.recipe import load_recipe, parse_recipe
from forgetbench.compress.sites import ActQuantizer
from forgetbench.compress.smooth import SmoothConfig, factors, fold, smooth, smoothing_pairs
from forgetbench.errors import ForgetbenchError

from .conftest import REPO, calib_rows

CALIB = REPO / "data" / "calibration" / "ntrex128-calib.tsv"


def _outlier_tensor():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 32, 16, generator=g)  # (batch, tokens, channels): |x| up to ~4
    x[..., 3] *= 300.0  # one outlier channel, as the encoder's residual stream carries at </s>
    return x


def _site(granularity, x):
    cal = ChannelMaxCalibrator() if granularity == "channel" else MaxCalibrator()
    q = ActQuantizer("l.residual.0.0", "residual", cal, granularity)
    if granularity != "token":
        cal.collect(x)
        q.amax = cal.compute_amax()
    q.mode = "quant"
    return q


def test_per_channel_scales_keep_an_outlier_channel_from_the_others_and_per_tensor_does_not():
    x = _outlier_tensor()
    others = [c for c in range(16) if c != 3]
    for granularity in ("channel", "token", "tensor"):
        err = (_site(granularity, x)(x) - x).abs()[..., others]
        if granularity == "channel":  # at most half a step of each channel's own range: max|x_c| / 254
            bound = x[..., others].abs().amax(dim=(0, 1)) / 254 * (1 + 1e-6)
            assert (err.amax(dim=(0, 1)) <= bound).all()
            assert float(err.max()) < 0.02
        elif granularity == "tensor":  # one step of ≈ 9: every ordinary value rounds to zero
            assert float(err.max()) > 1.0
            assert float((_site("tensor", x)(x)[..., others] == 0).float().mean()) > 0.95
    # per token the outlier channel still sets each token's step (≈ 1200 / 127 / 2 at worst): nothing kept below it
    tok = (_site("token", x)(x) - x).abs()[..., others]
    assert float(tok.max()) <= float(x.abs().amax(-1).max()) / 254 * (1 + 1e-6)


def test_per_channel_scale_equals_fake_quant_with_the_channel_max():
    x = _outlier_tensor()
    amax = x.abs().reshape(-1, 16).amax(0)
    assert torch.equal(_site("channel", x)(x), fake_quant(x, amax, axis=-1))
    token = x.abs().amax(-1, keepdim=True)
    assert torch.equal(_site("token", x)(x), torch.div(x, token / 127).round().clamp(-127, 127) * (token / 127))


def test_granularity_is_checked():
    with pytest.raises(ForgetbenchError, match="attention operands are quantised per tensor"):
        QuantConfig(granularity={"attn_qk": "channel"})
    with pytest.raises(ForgetbenchError, match="choose one of tensor, channel, token"):
        QuantConfig(granularity={"residual": "group"})
    with pytest.raises(ForgetbenchError, match="weights are always per output channel"):
        QuantConfig(granularity={"linear_weight": "tensor"})
    assert not QuantConfig(sites={"residual": True, "linear_input": False, "attn_qk": False, "attn_pv": False,
                                  "linear_weight": True}, granularity={"residual": "token"}).needs_calibration


def test_per_channel_residual_ranges_are_vectors_saved_and_restored_exactly(tiny, batch):
    model, tok = tiny
    reference = copy.deepcopy(model)
    cfg = QuantConfig(calibrator="max", granularity={"residual": "channel", "linear_input": "token"})
    st = quantize(model, cfg, seq2seq_calibration(tok, calib_rows()[:8], batch_size=1))
    d = model.config.d_model
    res = {k: v for k, v in st.activation_amax.items() if ".residual." in k}
    assert res and all(isinstance(v, torch.Tensor) and v.shape == (d,) for v in res.values())
    assert not any(k.endswith(".input") for k in st.activation_amax)  # per token: nothing calibrated
    with torch.no_grad():
        out = model(**batch).logits
    saved = json.loads(json.dumps(st.to_dict()))
    assert saved["format"] == "forgetbench-quant-v2"
    st.remove()
    restored = attach(model, QuantState.from_dict(saved))
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, out)
    restored.remove()
    # a v1 state (every range a float) still loads
    v1 = {"format": "forgetbench-quant-v1", "config": {"calibrator": "max"}, "activation_amax": {"a.input": 2.0}}
    assert QuantState.from_dict(v1).config.granularity == {}
    del reference


def test_smoothquant_factors_are_the_papers_formula_by_hand():
    x = torch.tensor([4.0, 0.25, 9.0, 0.0])
    w = torch.tensor([1.0, 0.5, 0.01, 2.0])
    s = factors(x, w, 0.5)
    by_hand = [math.sqrt(4.0) / math.sqrt(1.0), math.sqrt(0.25) / math.sqrt(0.5), 3.0 / 0.1, 1e-5]
    assert s.tolist() == pytest.approx(by_hand, rel=1e-6)
    assert factors(x, w, 1.0).tolist() == pytest.approx([4.0, 0.25, 9.0, 1e-5])


def test_smoothquant_folded_norm_and_weights_give_the_same_product():
    g = torch.Generator().manual_seed(1)
    norm = torch.nn.LayerNorm(8)
    lins = [torch.nn.Linear(8, 5), torch.nn.Linear(8, 3)]
    with torch.no_grad():
        norm.weight.copy_(torch.rand(8, generator=g) + 0.5)
        norm.bias.copy_(torch.randn(8, generator=g))
    x = torch.randn(6, 8, generator=g)
    before = [lin(norm(x)) for lin in lins]
    s = torch.rand(8, generator=g) * 20 + 0.05
    smoothed = norm(x) / s
    fold(norm, lins, s)
    assert torch.allclose(norm(x), smoothed, rtol=1e-5, atol=1e-6)  # X' = X diag(s)^-1
    for lin, b in zip(lins, before, strict=True):
        assert torch.allclose(lin(norm(x)), b, rtol=1e-5, atol=1e-5)  # X' W'^T = X W^T


def test_smoothquant_on_a_model_keeps_its_function_and_flattens_the_norm_outputs(tiny, batch):
    model, tok = tiny
    with torch.no_grad():
        ref = model(**batch).logits
    pairs = smoothing_pairs(model)
    cfg = model.config
    assert len(pairs) == 2 * cfg.encoder_layers + 3 * cfg.decoder_layers
    rep = smooth(model, SmoothConfig(alpha=0.5), seq2seq_calibration(tok, calib_rows()[:8], batch_size=1))
    with torch.no_grad():
        assert torch.allclose(model(**batch).logits, ref, rtol=1e-5, atol=1e-5)
    assert rep["norms"] == len(pairs)


def test_smooth_step_refuses_a_model_without_pre_norm_layers():
    from forgetbench.compress.apply import apply_recipe

    recipe = parse_recipe({"steps": [{"smooth": {"alpha": 0.5, "calibration": {"data": str(CALIB)}}}]})
    with pytest.raises(ForgetbenchError, match="SmoothQuant cannot fold"):
        apply_recipe(torch.nn.Sequential(torch.nn.Linear(4, 4)), recipe, Seq2SeqCalibration(object()))
    with pytest.raises(ForgetbenchError, match="alpha must be a number in"):
        parse_recipe({"steps": [{"smooth": {"alpha": 1.5, "calibration": {"data": str(CALIB)}}}]})
    with pytest.raises(ForgetbenchError, match="smooth needs calibration data"):
        parse_recipe({"steps": [{"smooth": {"alpha": 0.5}}]})


def test_site_stats_snr_and_zero_share_equal_hand_values():
    x = torch.tensor([0.0, 0.003, 0.25, -1.0])
    xq = fake_quant(x, 1.0)  # step 1/127: 0.003 -> 0, 0.25 -> 32/127, -1 -> -1
    assert xq.tolist() == pytest.approx([0.0, 0.0, 32 / 127, -1.0])
    s = SiteStats()
    s.add(x, xq)
    noise = 0.003 ** 2 + (0.25 - 32 / 127) ** 2
    signal = 0.003 ** 2 + 0.25 ** 2 + 1.0
    d = s.to_dict()
    assert d["snr_db"] == pytest.approx(10 * math.log10(signal / noise), rel=1e-6)  # x is float32
    assert d["zero_share"] == pytest.approx(1 / 3)  # of the three nonzero values, one rounds to zero
    assert d["observed"] == 1.0


def test_diagnosis_measures_every_site_and_each_kind_alone(tiny):
    model, tok = tiny
    reference = copy.deepcopy(model)
    forwards = seq2seq_calibration(tok, calib_rows()[:6], batch_size=1)
    cfg = QuantConfig(calibrator="max", granularity={"residual": "channel"})
    st = quantize(model, cfg, forwards)
    before = {k: v.clone() for k, v in reference.state_dict().items()}
    diag = diagnose(reference, st, forwards)
    assert all(torch.equal(v, reference.state_dict()[k]) for k, v in before.items())  # the reference is untouched
    sites = diag["sites"]
    assert set(st.activation_amax) <= set(sites) and set(st.weight_amax) <= set(sites)
    for name, r in sites.items():
        assert 0 <= r["zero_share"] <= 1 and r["values"] > 0
        if r["granularity"] == "tensor" and r["kind"] != "linear_weight":
            assert r["amax"] == st.activation_amax[name]
            assert r["observed"] == pytest.approx(r["amax"])  # max calibration: the range is the largest |x| seen
    assert set(diag["kinds"]) == {"linear_input", "linear_weight", "attn_qk", "attn_pv", "residual", "all"}
    for r in diag["kinds"].values():
        assert r["kl"] >= 0 and 0 <= r["top1_agreement"] <= 1 and r["tokens"] > 0
    assert "| residual |" in markdown(diag)


def _encoder_tokens(tok, spec, model):
    seen = []
    h = model.model.encoder.layers[0].register_forward_pre_hook(lambda _m, args: seen.append(args[0].shape[:2]))
    run, _ = Seq2SeqCalibration(tok).forwards(spec)
    run(model)
    h.remove()
    return sum(b * t for b, t in seen)


def test_quantisation_calibration_sees_real_tokens_only(tiny, tmp_path):
    """Every position reaching a site is a real token of a calibration sentence: no padded position (each sentence
    runs alone); a batch_size asking otherwise is refused in the recipe."""
    model, tok = tiny
    recipe = parse_recipe({"steps": [{"quantize": {"calibration": {"data": str(CALIB), "max_sentences": 24}}}]})
    spec = recipe.steps[0].calibration
    rows = Seq2SeqCalibration(tok).rows(spec)
    real = 0
    for r in rows:
        tok.src_lang = r[0]
        real += len(tok(r[2], truncation=True, max_length=spec.max_length)["input_ids"])
    assert _encoder_tokens(tok, spec, model) == real
    with pytest.raises(ForgetbenchError, match="calibrates each sentence alone"):
        parse_recipe({"steps": [{"quantize": {"calibration": {"data": str(CALIB), "batch_size": 16}}}]})


def test_calibration_sample_is_drawn_from_the_models_languages():
    rows = calib_rows()
    spec = load_recipe("ptq-int8").steps[0].calibration
    trained = {"de", "fr", "sw"}
    got = choose(rows, spec, trained)
    assert len(got) == min(spec.max_sentences, sum({r[0], r[1]} <= trained | {"en"} for r in rows))
    assert all({r[0], r[1]} <= trained | {"en"} for r in got)
    assert choose(rows, spec, None) == __import__("random").Random(spec.seed).sample(rows, spec.max_sentences)
    with pytest.raises(ForgetbenchError, match="no row is in the model's training languages"):
        choose(rows, spec, {"xx"})


def test_shipped_int8_recipes_contrast_the_residual_scale():
    assert load_recipe("ptq-int8").steps[0].config.granularity == {"residual": "channel"}
    assert load_recipe("ptq-int8-tensor").steps[0].config.granularity == {}
    sq = load_recipe("ptq-int8-smoothquant")
    assert [s.kind for s in sq.steps] == ["smooth", "quantize"]
    assert sq.steps[0].calibration == sq.steps[1].calibration


def test_a_per_channel_site_without_a_channel_axis_keeps_a_per_tensor_range():
    """Attention scores a block adds to (4 axes) and a last axis that changes size (a sequence axis) are no channel
    axis: the site takes the step's per-tensor calibrator's range; a per-channel range meeting another width is
    refused in one line."""
    scores = torch.randn(2, 4, 7, 7)
    cal = ChannelMaxCalibrator(MaxCalibrator())
    cal.collect(scores)
    assert cal.compute_amax() == float(scores.abs().max())
    cal = ChannelMaxCalibrator(MaxCalibrator())
    cal.collect(torch.randn(3, 5, 9))
    cal.collect(torch.randn(3, 5, 11))
    assert isinstance(cal.compute_amax(), float)
    cal = ChannelMaxCalibrator(MaxCalibrator())
    cal.collect(torch.ones(3, 5, 9))
    q = ActQuantizer("b.residual.0.0", "residual", None, "channel")
    q.amax, q.mode = cal.compute_amax(), "quant"
    assert q.amax.shape == (9,)
    with pytest.raises(ForgetbenchError, match="not the calibrated channel axis"):
        q(torch.ones(3, 5, 10))
