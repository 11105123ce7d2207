import copy
import math

import pytest
import torch

from forgetbench.compress import PruneConfig, prune, resolve_units
from forgetbench.compress.prune import num_to_prune
from forgetbench.compress.threshold import kth_smallest_abs
from forgetbench.errors import ForgetbenchError

from .toy_parser import ToyParser


def _zeros(t):
    return int((t == 0).sum())


def test_rounding_is_half_up():
    assert num_to_prune(0.3, 10) == 3
    assert num_to_prune(0.25, 10) == 3  # 2.5 -> 3, not banker's 2
    assert num_to_prune(0.3, 9952) == round(2985.6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_kth_smallest_abs_matches_kthvalue_across_chunks(dtype):
    g = torch.Generator().manual_seed(0)
    ts = [torch.randn(37, 11, generator=g).to(dtype), torch.randn(1000, generator=g).to(dtype), torch.zeros(5, dtype=dtype)]
    flat = torch.cat([t.float().abs().reshape(-1) for t in ts])
    for k in (1, 5, 6, 300, 777, flat.numel()):
        assert kth_smallest_abs(ts, k, chunk=64) == float(flat.kthvalue(k).values)


def test_layer_scope_exact_counts_tied_views_and_untouched_biases(tiny):
    model, _ = tiny
    before = copy.deepcopy(model.state_dict())
    units = resolve_units(model)
    assert [u.name for u in units] == ["embeddings", "encoder.layers.0", "encoder.layers.1",
                                       "decoder.layers.0", "decoder.layers.1"]
    rep = prune(model, PruneConfig(sparsity=0.3, scope="layer"))
    for u, ur in zip(units, rep.units, strict=True):
        n = sum(p.numel for p in u.params)
        assert ur.numel == n
        assert sum(_zeros(p.param) for p in u.params) == math.floor(0.3 * n + 0.5)
    # the shared embedding's zeros are seen by every tied view
    shared = model.model.shared.weight
    for view in (model.model.encoder.embed_tokens.weight, model.model.decoder.embed_tokens.weight, model.lm_head.weight):
        assert torch.equal(view == 0, shared == 0)
    assert set(rep.units[0].tied["model.shared.weight"]) == {
        "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}
    # biases and LayerNorm untouched; every weight pruned only where it was small
    after = model.state_dict()
    for k, v in before.items():
        if k.endswith("bias") or "layer_norm" in k:
            assert torch.equal(v, after[k]), k
    assert rep.sparsity == pytest.approx(sum(u.zeros for u in rep.units) / sum(u.numel for u in rep.units))


def _reference_masks(tensors, p):
    flat = torch.cat([t.detach().abs().reshape(-1) for t in tensors])
    k = math.floor(p * flat.numel() + 0.5)
    order = torch.sort(flat, stable=True).indices  # ties by position, as documented
    mask = torch.zeros_like(flat, dtype=torch.bool)
    mask[order[:k]] = True
    out, s = [], 0
    for t in tensors:
        out.append(mask[s : s + t.numel()].reshape(t.shape))
        s += t.numel()
    return out


@pytest.mark.parametrize("scope", ["layer", "module", "attn-ffn", "global"])
def test_scopes_match_hand_computation(tiny, scope):
    model, _ = tiny
    ref_model = copy.deepcopy(model)
    units = resolve_units(ref_model)
    if scope == "layer":
        groups = [[p.param for p in u.params] for u in units]
    elif scope == "module":
        groups = [[p.param] for u in units for p in u.params]
    elif scope == "attn-ffn":
        groups = []
        for u in units:
            for g in dict.fromkeys(p.group for p in u.params):
                groups.append([p.param for p in u.params if p.group == g])
        assert {p.group for u in units[1:] for p in u.params} == {"attention", "ffn"}
    else:
        groups = [[p.param for u in units for p in u.params]]
    expected = {}
    for g in groups:
        for t, m in zip(g, _reference_masks(g, 0.45), strict=True):
            expected[t.data_ptr()] = m
    prune(model, PruneConfig(sparsity=0.45, scope=scope))
    for u in resolve_units(model):
        for p in u.params:
            ref = next(v for k, v in expected.items() if k == ref_model.get_parameter(p.name).data_ptr())
            assert torch.equal(p.param == 0, ref | (ref_model.get_parameter(p.name) == 0)), p.name


def test_ties_are_deterministic_and_exact():
    torch.manual_seed(0)
    m = ToyParser()
    with torch.no_grad():
        for p in m.parameters():
            p.fill_(0.5)  # every magnitude tied
    m2 = copy.deepcopy(m)
    r1 = prune(m, PruneConfig(sparsity=0.3))
    prune(m2, PruneConfig(sparsity=0.3))
    for u in r1.units:
        assert u.zeros == math.floor(0.3 * u.numel + 0.5)
    for a, b in zip(m.parameters(), m2.parameters(), strict=True):
        assert torch.equal(a, b)
    # ties go by position: the first k elements of the unit's first weight go first
    w = m.embed.weight.reshape(-1)
    k = r1.units[0].zeros
    assert torch.all(w[:k] == 0) and torch.all(w[k:] != 0)


def test_non_mt_module_with_declared_units():
    torch.manual_seed(0)
    m = ToyParser()
    rep = prune(m, PruneConfig(sparsity=0.3, scope="layer"))
    names = [u.name for u in rep.units]
    assert names == ["embeddings", "encoder", "mlp", "biaffine"]
    lstm_params = [n for n, p in m.lstm.named_parameters() if "weight" in n]
    assert rep.units[1].params == [f"lstm.{n}" for n in lstm_params]  # LSTM biases are not pruned
    assert all(u.zeros == math.floor(0.3 * u.numel + 0.5) for u in rep.units)
    assert torch.count_nonzero(m.mlp["norm"].weight) == 24  # LayerNorm never pruned
    rep2 = prune(copy.deepcopy(m), PruneConfig(sparsity=0.5, scope="attn-ffn"))
    assert {g.name for g in rep2.groups} >= {"mlp/dep", "mlp/head"}


def test_embeddings_can_be_excluded_with_their_tied_head(tiny):
    model, _ = tiny
    before = model.model.shared.weight.detach().clone()  # its padding row is zero from the start
    rep = prune(model, PruneConfig(sparsity=0.3, include_embeddings=False))
    assert "embeddings" not in [u.name for u in rep.units] and "lm_head" not in [u.name for u in rep.units]
    assert torch.equal(model.lm_head.weight, before)


@pytest.mark.parametrize("kw", [{"sparsity": 1.2}, {"sparsity": 1.0}, {"sparsity": -0.1}, {"sparsity": 0.3, "scope": "row"}])
def test_bad_prune_config(kw):
    with pytest.raises(ForgetbenchError):
        PruneConfig(**kw)


def test_meta_parameters_are_refused():
    with torch.device("meta"):
        m = ToyParser()
    with pytest.raises(ForgetbenchError, match="meta device"):
        prune(m, PruneConfig(sparsity=0.3))
