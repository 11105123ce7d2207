import copy
import math
from collections import Counter

import numpy as np
import pytest
import torch

from forgetbench.compress import QuantConfig, attach, quantize
from forgetbench.compress.calibration import seq2seq_calibration
from forgetbench.compress.calibrators import HistogramCalibrator, MaxCalibrator, histc_counts, mse_amax
from forgetbench.compress.ptq import QuantState
from forgetbench.compress.quantizer import fake_quant, per_channel_amax
from forgetbench.compress.sites import SITE_KINDS
from forgetbench.errors import ForgetbenchError

from .conftest import calib_rows
from .toy_parser import ToyParser


def test_fake_quant_matches_hand_computation():
    x = torch.tensor([0.0, 0.3, -1.1, 2.0, 5.0, -7.0])
    s = 2.0 / 127
    # x/s = 0, 19.05, -69.85, 127, 317.5, -444.5 -> round, clamp to [-127, 127]
    expected = torch.tensor([0, 19, -70, 127, 127, -127], dtype=torch.float32) * s
    assert torch.allclose(fake_quant(x, 2.0), expected, atol=0, rtol=1e-6)


def test_per_channel_weight_quant_matches_hand_computation():
    w = torch.tensor([[0.5, -1.0, 0.25], [0.01, 0.02, -0.04]])
    amax = per_channel_amax(w, axis=0)
    assert torch.equal(amax, torch.tensor([1.0, 0.04]))
    q = fake_quant(w, amax, axis=0)
    exp0 = torch.round(torch.tensor([0.5, -1.0, 0.25]) * 127) / 127
    exp1 = torch.round(torch.tensor([0.01, 0.02, -0.04]) / (0.04 / 127)) * (0.04 / 127)
    assert torch.allclose(q, torch.stack([exp0, exp1]), rtol=1e-6, atol=0)
    assert fake_quant(torch.zeros(3), 0.0).eq(0).all()  # zero range: zeros stay zeros


def _sample_mse(x, amax):
    return float(((x - fake_quant(x, amax)) ** 2).mean())


def test_mse_calibrator_minimises_mse_on_known_distribution():
    torch.manual_seed(0)
    x = torch.distributions.Laplace(0.0, 1.0).sample((400_000,))
    cal = HistogramCalibrator("mse")
    for chunk in x.split(50_000):  # several batches, growing range
        cal.collect(chunk)
    amax = cal.compute_amax()
    grid = np.linspace(1.0, float(x.abs().max()), 400)
    errs = [_sample_mse(x, a) for a in grid]
    best = grid[int(np.argmin(errs))]
    assert amax < 0.9 * float(x.abs().max())  # clips the tail, unlike max (8-bit optimum for Laplace(1) ~ 9.9)
    assert _sample_mse(x, amax) <= 1.01 * min(errs)
    assert abs(amax - best) / best < 0.1


def test_histc_counts_equal_torch_histc_on_bin_edges_and_the_top():
    g = torch.Generator().manual_seed(0)
    for k in range(40):
        x = (torch.randn(int(torch.randint(1, 60_000, (1,), generator=g)), generator=g) * (k + 0.1)).abs()
        width = float(x.max()) / 2048
        nbins = 2048 + int(torch.randint(0, 600, (1,), generator=g))
        top = nbins * width
        x[:60] = torch.arange(60, dtype=torch.float32) * width  # exactly on edges, where rounding decides
        x[60:62] = top  # the closed last bin
        a = x.clamp(max=top)
        assert torch.equal(histc_counts(a, nbins, top).float(), torch.histc(a, bins=nbins, min=0.0, max=top))


def test_mse_amax_chunked_equals_the_one_candidate_loop():
    """The chunked search returns the loop's amax exactly (same values per candidate, first of equal minima),
    on histograms with long zero runs, equal counts (ties) and every start bin."""

    def loop(hist, edges, start_bin):
        centres = (edges[:-1] + edges[1:]) / 2
        best, best_amax = math.inf, float(centres[-1])
        for i in range(min(start_bin, len(centres) - 1), len(centres)):
            scale = 127 / centres[i]
            err = float((hist * (np.clip(np.round(centres * scale), -127, 127) / scale - centres) ** 2).sum())
            if err < best:
                best, best_amax = err, float(centres[i])
        return best_amax

    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(130, 2600))
        hist = rng.integers(0, 3, n).astype(np.float64)
        hist[: int(rng.integers(1, n))] += rng.integers(0, 500)
        edges = np.arange(n + 1) * rng.uniform(1e-4, 1e-2)
        start = int(rng.integers(1, 200))
        assert mse_amax(hist, edges, start, chunk=int(rng.integers(1, 300))) == loop(hist, edges, start)


def test_percentile_and_max_and_entropy_calibrators():
    x = torch.linspace(-1, 1, 100_001)
    mx = MaxCalibrator()
    mx.collect(x)
    assert mx.compute_amax() == 1.0
    pc = HistogramCalibrator("percentile", percentile=99.0)
    pc.collect(x)
    assert pc.compute_amax() == pytest.approx(0.99, abs=1e-3)
    # entropy clips a lone far outlier that max would keep
    y = torch.cat([torch.randn(200_000, generator=torch.Generator().manual_seed(1)), torch.tensor([40.0])])
    en = HistogramCalibrator("entropy")
    en.collect(y)
    a = en.compute_amax()
    assert 3.8 < a < 4.6  # the reference algorithm: 4.22 (a Q built from the clipped P gave 2.52)


def _calibration(tok, n=32):
    return seq2seq_calibration(tok, calib_rows()[:n], batch_size=8)


def _logits(model, batch):
    with torch.no_grad():
        return model(**batch).logits


def test_sites_cover_every_linear_attention_product_and_residual(tiny):
    model, tok = tiny
    st = quantize(model, QuantConfig(calibrator="max"), _calibration(tok))
    kinds = Counter(q.kind for q in st.registry.quantizers.values())
    cfg = model.config
    n_attn = cfg.encoder_layers + 2 * cfg.decoder_layers
    assert kinds["attn_qk"] == kinds["attn_pv"] == 2 * n_attn
    assert kinds["residual"] == 2 * (2 * cfg.encoder_layers + 3 * cfg.decoder_layers)
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert kinds["linear_input"] == n_linear
    assert len(st.weight_amax) == n_linear  # lm_head shares `shared`'s storage and is quantised once
    assert "model.encoder.layers.0.residual.1.0" in st.activation_amax
    assert "model.decoder.layers.1.encoder_attn.pv.0" in st.activation_amax


@pytest.mark.parametrize("off", SITE_KINDS)
def test_each_site_switch_leaves_its_tensors_untouched(tiny, off):
    model, tok = tiny
    w_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    sites = {k: k != off for k in SITE_KINDS}
    st = quantize(model, QuantConfig(calibrator="max", sites=sites), _calibration(tok, 16))
    assert not any(q.kind == off for q in st.registry.quantizers.values())
    assert {q.kind for q in st.registry.quantizers.values()} == set(SITE_KINDS) - {off, "linear_weight"}
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, w_before[n])]
    if off == "linear_weight":
        assert changed == []
    else:
        assert changed and all(n.endswith("weight") and "layer_norm" not in n for n in changed)


def test_a_calibrator_that_adds_tensors_while_collecting_adds_no_site(tiny, monkeypatch):
    """Residual sites are recorded by intercepting additions inside the layers: a calibrator's own additions run
    outside that recording, so the site list is the same as with a calibrator that adds nothing."""
    from forgetbench.compress import ptq

    class Adding(MaxCalibrator):
        def collect(self, x):
            self.total = x.detach().abs().sum() + getattr(self, "total", torch.zeros(()))  # an addition
            super().collect(x)

    model, tok = tiny
    plain = quantize(copy.deepcopy(model), QuantConfig(calibrator="max"), _calibration(tok, 8))
    monkeypatch.setattr(ptq.QuantConfig, "make_calibrator", lambda self: Adding())
    adding = quantize(copy.deepcopy(model), QuantConfig(calibrator="max"), _calibration(tok, 8))
    assert sorted(adding.activation_amax) == sorted(plain.activation_amax)
    assert adding.activation_amax == plain.activation_amax


def test_only_one_site_kind_changes_only_that_kind(tiny, batch):
    model, tok = tiny
    ref = _logits(copy.deepcopy(model), batch)
    sites = {k: k == "residual" for k in SITE_KINDS}
    st = quantize(model, QuantConfig(calibrator="max", sites=sites), _calibration(tok, 16))
    assert {q.kind for q in st.registry.quantizers.values()} == {"residual"}
    out = _logits(model, batch)
    assert not torch.equal(out, ref)
    st.remove()  # weights untouched (linear_weight off), so removing the sites restores fp32 exactly
    assert torch.equal(_logits(model, batch), ref)


def test_quantised_model_differs_but_stays_close(tiny, batch):
    model, tok = tiny
    ref = _logits(copy.deepcopy(model), batch)
    quantize(model, QuantConfig(calibrator="mse"), _calibration(tok))
    out = _logits(model, batch)
    assert not torch.equal(out, ref)
    cos = torch.nn.functional.cosine_similarity(out.flatten(), ref.flatten(), dim=0)
    assert cos > 0.95
    assert (out.argmax(-1) == ref.argmax(-1)).float().mean() > 0.8


def test_attention_sites_switch_sdpa_model_to_eager(tiny_dir):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir), attn_implementation="sdpa").eval()
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    st = quantize(model, QuantConfig(calibrator="max"), _calibration(tok, 8))
    assert model.config._attn_implementation == "eager"
    assert any(q.kind == "attn_qk" for q in st.registry.quantizers.values())


def test_generate_runs_quantised_with_kv_cache(tiny, batch):
    """Generation with the KV cache on the fake-quantised model gives, step by step, the logits of one full
    teacher-forced forward over the same tokens (cached keys and values are quantised as the full sequence's are),
    and they are not the fp32 model's."""
    model, tok = tiny
    enc = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}

    def forward(tokens):
        with torch.no_grad():
            return model(**enc, decoder_input_ids=tokens[:, :-1]).logits

    logits = {}
    for quantised in (False, True):
        if quantised:
            quantize(model, QuantConfig(calibrator="percentile"), _calibration(tok, 16))
        with torch.no_grad():
            out = model.generate(**enc, forced_bos_token_id=tok.get_lang_id("de"), max_new_tokens=6, do_sample=False,
                                 output_logits=True, return_dict_in_generate=True)
        stepped = torch.stack(out.logits, 1)  # [rows, 6 steps, vocab]: the logits each cached step computed
        assert stepped.shape[:2] == (4, 6) and out.sequences.shape == (4, 7)
        assert torch.allclose(stepped, forward(out.sequences), atol=1e-5)
        logits[quantised] = stepped
    assert (logits[True] - logits[False]).abs().max() > 1e-2  # 0.38 measured: the int8 grid moves the logits


def test_missing_calibration_is_an_error(tiny):
    model, _ = tiny
    with pytest.raises(ForgetbenchError, match="calibration"):
        quantize(model, QuantConfig())
    # weights only: no calibration needed
    quantize(model, QuantConfig(sites={k: k == "linear_weight" for k in SITE_KINDS}))


def test_state_round_trip_restores_identical_outputs(tiny, tiny_dir, batch):
    model, tok = tiny
    st = quantize(model, QuantConfig(calibrator="entropy"), _calibration(tok, 16))
    out = _logits(model, batch)
    from transformers import AutoModelForSeq2SeqLM

    fresh = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir), attn_implementation="eager").eval()
    fresh.load_state_dict(model.state_dict())
    attach(fresh, QuantState.from_dict(st.to_dict()))
    assert torch.equal(_logits(fresh, batch), out)


def test_same_quantize_call_on_non_mt_module():
    torch.manual_seed(0)
    m = ToyParser().eval()
    words = torch.randint(0, 60, (4, 7))
    ref = m(words)
    st = quantize(m, QuantConfig(calibrator="mse"), calibrate=lambda mod: [mod(torch.randint(0, 60, (4, 7))) for _ in range(4)])
    assert sorted(st.activation_amax) == ["lstm.input", "mlp.dep.input", "mlp.head.input"]
    assert sorted(st.weight_amax) == ["lstm.weight_hh_l0", "lstm.weight_hh_l0_reverse", "lstm.weight_ih_l0",
                                      "lstm.weight_ih_l0_reverse", "mlp.dep.weight", "mlp.head.weight"]
    out = m(words)
    assert not torch.equal(out, ref) and torch.allclose(out, ref, atol=0.05 * float(ref.detach().abs().max()))


def test_keys_and_values_quantised_at_the_projection_equal_the_matmul_operands(tiny, batch, monkeypatch):
    """Quantising K and V once at k_proj / v_proj gives the tokens and logits of quantising the matmul operands (the
    whole cache) at every step, and the elements quantised per decoding step stop growing with the length."""
    import copy

    from forgetbench.compress import sites
    from forgetbench.compress.ptq import attach
    from forgetbench.models.generation import greedy_generate

    model, tok = tiny
    state = quantize(model, QuantConfig(calibrator="max"), _calibration(tok, 8))
    state.remove()  # the weights stay quantised; the activation sites are attached again, one way each
    old, new = copy.deepcopy(model), copy.deepcopy(model)
    monkeypatch.setattr(sites, "QUANTISE_KV_AT_PROJECTION", False)
    attach(old, state)
    monkeypatch.setattr(sites, "QUANTISE_KV_AT_PROJECTION", True)
    new_state = attach(new, state)
    bos = tok.get_lang_id("de")
    a = greedy_generate(old, batch["input_ids"], batch["attention_mask"], bos, 12)
    b = greedy_generate(new, batch["input_ids"], batch["attention_mask"], bos, 12)
    assert a == b
    with torch.no_grad():
        assert torch.equal(old(**batch).logits, new(**batch).logits)
    seen = []  # elements through one decoder self-attention key site, per call
    q = new_state.registry.quantizers["model.decoder.layers.0.self_attn.qk.1"]
    call = type(q).__call__
    monkeypatch.setattr(type(q), "__call__", lambda self, x: (seen.append(x.numel()) if self is q else None) or call(self, x))
    ids = batch["input_ids"][:1]
    greedy_generate(new, ids, torch.ones_like(ids), bos, 12)
    assert len(seen) >= 3 and len(set(seen)) == 1  # one new key row per step, not the growing cache


def test_quantised_greedy_translation_equals_hf_generate(tiny, batch):
    """The fast greedy loop (finished rows dropped, keys and values quantised at the projection) gives HF's tokens."""
    from forgetbench.models.generation import greedy_generate

    model, tok = tiny
    quantize(model, QuantConfig(calibrator="max"), _calibration(tok, 8))
    bos = tok.get_lang_id("de")
    with torch.no_grad():
        ref = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], forced_bos_token_id=bos,
                             max_new_tokens=12, do_sample=False, num_beams=1)
    ours = greedy_generate(model, batch["input_ids"], batch["attention_mask"], bos, 12)
    assert tok.batch_decode(ref, skip_special_tokens=True) == tok.batch_decode(ours, skip_special_tokens=True)
