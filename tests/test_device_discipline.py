"""Device discipline without a GPU (``tests/device_harness.py``): the compress kernels run on tensors that say they
are on ``cuda:0`` and fail, as CUDA would, on a CPU tensor mixed in or a device-to-host conversion without
``.cpu()``."""

import torch

from forgetbench.compress.artefacts import load_sparse, save_int8, save_sparse
from forgetbench.compress.calibrators import HistogramCalibrator, MaxCalibrator
from forgetbench.compress.data_aware import lowest_over, wanda_mask

from .device_harness import DeviceMismatch, cuda, device_map_to_cuda, module_to_cuda, on_cuda


def _layer():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Linear(8, 4))
    with torch.no_grad():
        m[0].weight[:, :5] = 0
    return m


def test_the_harness_fails_as_cuda_would():
    a = cuda(torch.randn(3, 4))
    for bad in (lambda: a * torch.randn(4), lambda: a.numpy(), lambda: torch.zeros(3, 4).add_(a)):
        try:
            bad()
        except DeviceMismatch:
            continue
        raise AssertionError("the harness let a cross-device operation through")
    assert isinstance(a * torch.tensor(2.0), torch.Tensor) and (a * 2).device.type == "cuda"  # CPU scalars are fine
    assert a.cpu().device.type == "cpu" and float(a.sum()) == float(a.cpu().sum())


def test_histogram_calibrators_collect_cuda_activations():
    x = torch.randn(5000, generator=torch.Generator().manual_seed(0))
    for method in ("percentile", "mse", "entropy"):
        ref, dev = HistogramCalibrator(method), HistogramCalibrator(method)
        for chunk in x.split(1000):
            ref.collect(chunk)
            with on_cuda():
                dev.collect(cuda(chunk))
        assert torch.equal(dev.hist, ref.hist) and dev.compute_amax() == ref.compute_amax()
    m = MaxCalibrator()
    with on_cuda():
        m.collect(cuda(x))
    assert m.compute_amax() == float(x.abs().max())


def test_wanda_masks_cuda_weights_with_statistics_from_anywhere():
    w, norm = torch.randn(8, 16), torch.rand(16)
    ref = wanda_mask(w, norm, 0.5)
    with on_cuda():
        got = wanda_mask(cuda(w), norm, 0.5)  # the input norms as collected: on the CPU
        groups = lowest_over([cuda(w.abs()), cuda(w[:4].abs())], 20)
    assert torch.equal(got.cpu(), ref)
    assert [torch.equal(g.cpu(), r) for g, r in zip(groups, lowest_over([w.abs(), w[:4].abs()], 20), strict=True)] == [True, True]


def test_artefacts_are_written_from_a_cuda_model(tmp_path):
    m = _layer()
    ref = {k: v.clone() for k, v in m.state_dict().items()}
    module_to_cuda(m)
    with on_cuda():
        save_sparse(m, tmp_path / "s.safetensors")
        save_int8(m, {"0.weight": m[0].weight.detach().abs().amax(1)}, tmp_path / "q.safetensors")
    back = load_sparse(tmp_path / "s.safetensors")
    assert all(torch.equal(back[k], v) for k, v in ref.items())
    from forgetbench.compress.artefacts import load_int8

    q = load_int8(tmp_path / "q.safetensors")
    assert torch.allclose(q["0.weight"], ref["0.weight"], atol=float(ref["0.weight"].abs().max()) / 127)
    assert not torch.equal(q["0.weight"], ref["0.weight"]) and torch.equal(q["1.weight"], ref["1.weight"])


def test_greedy_decoding_of_a_cuda_model_gives_the_cpu_hypotheses(tiny_dir):
    """The decoding loop (the model's own forward: the direct step is CPU-only) with every weight on the GPU and
    inputs moved by ``models.hardware.input_device``: the same tokens as on the CPU, no tensor left behind."""
    from forgetbench.models.generation import translate
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)
    src = ["A short sentence.", "Another, somewhat longer sentence than the first one."]
    ref = translate(model, tok, src, "en", "de", max_new_tokens=10)
    module_to_cuda(model)
    with on_cuda():
        got = translate(model, tok, src, "en", "de", max_new_tokens=10)
    assert got == ref


def _two_gpu_map(model) -> dict[str, int]:
    """The inputs' GPU (0) holds the embeddings and the first encoder layer; the rest of the encoder ends on GPU 1,
    the decoder starts on GPU 1 and ends on GPU 0: every hand-over of the decoding loop crosses GPUs."""
    names = dict(model.named_modules())
    enc = [n for n in names if n.startswith("model.encoder.layers.") and n.count(".") == 3]
    dec = [n for n in names if n.startswith("model.decoder.layers.") and n.count(".") == 3]
    dmap = {"model.shared": 0, "model.encoder.embed_tokens": 0, "model.decoder.embed_tokens": 0, "lm_head": 0,
            "model.encoder.embed_positions": 0, enc[0]: 0}
    dmap |= dict.fromkeys(enc[1:], 1) | {"model.encoder.layer_norm": 1, "model.decoder.embed_positions": 1}
    dmap |= {dec[0]: 1} | dict.fromkeys(dec[1:], 0) | {"model.decoder.layer_norm": 0}
    return {k: v for k, v in dmap.items() if k in names}


def test_greedy_decoding_over_a_two_gpu_map_gives_the_cpu_hypotheses(tiny_dir):
    """H4: a device map whose encoder ends on another GPU than the inputs (accelerate's hooks move each module's
    inputs, not the encoder's states the loop keeps): the same tokens as on the CPU, through the model's own
    forward and through ``generate`` for beam search."""
    from forgetbench.models.generation import translate
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)
    src = ["A short sentence.", "Another, somewhat longer sentence than the first one.", "Third."] * 4
    ref = translate(model, tok, src, "en", "de", max_new_tokens=10)
    ref_beam = translate(model, tok, src[:3], "en", "de", num_beams=2, max_new_tokens=6)
    with on_cuda():
        device_map_to_cuda(model, _two_gpu_map(model))
        assert model.model.encoder.layers[-1].fc1.weight.device == torch.device("cuda:1")
        got = translate(model, tok, src, "en", "de", max_new_tokens=10)
        got_beam = translate(model, tok, src[:3], "en", "de", num_beams=2, max_new_tokens=6)
    assert got == ref and got_beam == ref_beam


def test_data_aware_pruning_of_cuda_models_keeps_its_statistics_on_the_gpu(tiny_dir, tmp_path, monkeypatch):
    """H3 and the statistics' device: Wanda and SparseGPT on a model on one GPU (layer by layer) and on a two-GPU map
    (whole-model forwards, accelerate's hooks) prune exactly as on the CPU, every statistic accumulated on its
    weight's GPU (never copied to the host)."""
    import json

    from forgetbench.compress import data_aware_prune as dap
    from forgetbench.compress.apply import apply_recipe
    from forgetbench.compress.calibration import Seq2SeqCalibration
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.models.load import load

    from .conftest import CALIB

    seen = []
    add = dap._Inputs.add
    monkeypatch.setattr(dap._Inputs, "add", lambda self, x, keep: (add(self, x, keep), seen.append(self.stat.device)))
    for method in ("wanda", "sparsegpt"):
        p = tmp_path / f"{method}.yaml"
        p.write_text(json.dumps({"name": method, "steps": [{"prune": {
            "method": method, "sparsity": 0.5, "calibration": {"data": str(CALIB), "max_sentences": 8}}}]}))
        recipe = load_recipe(str(p))
        weights = {}
        for where in ("cpu", "gpu", "two-gpu"):
            model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)
            seen.clear()
            if where == "cpu":
                rep, _ = apply_recipe(model, recipe, Seq2SeqCalibration(tok))
            else:
                with on_cuda():
                    module_to_cuda(model) if where == "gpu" else device_map_to_cuda(model, _two_gpu_map(model))
                    rep, _ = apply_recipe(model, recipe, Seq2SeqCalibration(tok))
                assert seen and all(d.type == "cuda" for d in seen), (method, where, set(seen))
                assert {d.index for d in seen} == ({0} if where == "gpu" else {0, 1})
                assert model.model.encoder.layers[1].fc1.weight.device.type == "cuda"
            assert rep["steps"][0]["prune"]["calibrated_by"] == ("whole-model forwards" if where == "two-gpu" else "layers")
            weights[where] = {k: v.cpu() for k, v in model.state_dict().items()}
        for where in ("gpu", "two-gpu"):
            for k, v in weights["cpu"].items():
                assert torch.equal(weights[where][k] == 0, v == 0), (method, where, k)
                assert torch.allclose(weights[where][k], v, atol=1e-6, rtol=0), (method, where, k)


def test_per_channel_sites_and_smoothquant_calibrate_cuda_activations(tiny_dir):
    """The outlier-aware int8 paths (docs/METHOD.md §1.2) on a model whose weights sit on the GPU: per-channel ranges
    collected to the CPU, SmoothQuant's statistics gathered there and its factors folded where the norm is; the same
    ranges and folded weights as on the CPU. (Quantised forwards are not run here: a quantiser's own ops run with
    torch functions disabled, which the harness's pretend tensors do not survive; ``tests/test_cuda.py`` runs them.)"""
    import copy

    from forgetbench.compress import QuantConfig, quantize
    from forgetbench.compress.calibration import seq2seq_calibration
    from forgetbench.compress.smooth import SmoothConfig, smooth
    from forgetbench.models.load import load

    from .conftest import calib_rows

    model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)
    forwards = seq2seq_calibration(tok, calib_rows()[:4], batch_size=1)
    cfg = QuantConfig(calibrator="max", granularity={"residual": "channel"},
                      sites={"linear_input": True, "linear_weight": False, "attn_qk": True, "attn_pv": True,
                             "residual": True})
    ref_model = copy.deepcopy(model)
    smooth(ref_model, SmoothConfig(0.5), forwards)
    ref_state = quantize(ref_model, cfg, forwards)
    ref_state.remove()
    module_to_cuda(model)
    with on_cuda():
        smooth(model, SmoothConfig(0.5), forwards)
        state = quantize(model, cfg, forwards)
        state.remove()
    assert state.activation_amax.keys() == ref_state.activation_amax.keys()
    assert all(torch.equal(torch.as_tensor(state.activation_amax[k]), torch.as_tensor(v))
               for k, v in ref_state.activation_amax.items())
    assert any(isinstance(v, torch.Tensor) for v in state.activation_amax.values())
    ref_sd = ref_model.state_dict()
    assert all(torch.equal(v.cpu(), ref_sd[k]) for k, v in model.state_dict().items())
