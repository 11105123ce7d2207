import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM

from forgetbench.cli import main
from forgetbench.compress import PruneConfig, prune
from forgetbench.compress.ptq import quantize_weights
from forgetbench.compress.recipe import parse_recipe
from forgetbench.compress.streaming import stream_compress
from forgetbench.errors import ForgetbenchError


def _all(d):
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out |= load_file(str(f))
    return out


@pytest.fixture
def sharded(tiny, tmp_path):
    model, _ = tiny
    d = tmp_path / "sharded"
    model.save_pretrained(d, max_shard_size="200KB")
    assert len(list(d.glob("*.safetensors"))) > 2
    return model, d


@pytest.mark.parametrize("scope", ["layer", "global"])
def test_streamed_prune_equals_in_memory(sharded, tmp_path, scope):
    model, d = sharded
    rep = stream_compress(d, parse_recipe({"steps": [{"prune": {"sparsity": 0.3, "scope": scope}}]}), tmp_path / "s")
    prune(model, PruneConfig(0.3, scope))
    ref = tmp_path / "m"
    model.save_pretrained(ref, max_shard_size="200KB")
    a, b = _all(tmp_path / "s"), _all(ref)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert rep["bytes_written"] == sum(t.numel() * t.element_size() for t in a.values())
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(str(tmp_path / "s"))
    assert torch.equal(reloaded.lm_head.weight, model.lm_head.weight)


def test_streamed_prune_then_weight_quant_equals_in_memory(sharded, tmp_path):
    model, d = sharded
    r = tmp_path / "p45w8.yaml"
    r.write_text("steps:\n  - prune: {sparsity: 0.45}\n  - quantize: {sites: {linear_input: false, linear_weight: true, "
                 "attn_qk: false, attn_pv: false, residual: false}}\n")
    assert main(["compress-stream", str(d), "--recipe", str(r), "--out", str(tmp_path / "s")]) == 0
    prune(model, PruneConfig(0.45))
    quantize_weights(model)
    ref = tmp_path / "m"
    model.save_pretrained(ref)
    a, b = _all(tmp_path / "s"), _all(ref)
    for k in b:
        assert torch.equal(a[k], b[k]), k


def test_activation_quantisation_is_refused_when_streaming(sharded, tmp_path):
    _, d = sharded
    recipe = parse_recipe({"steps": [{"quantize": {"calibrator": "max", "calibration": {"data": str(d / "config.json")}}}]})
    with pytest.raises(ForgetbenchError, match="cannot be streamed"):
        stream_compress(d, recipe, tmp_path / "s")
    assert not (tmp_path / "s").exists()
