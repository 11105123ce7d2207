"""Every weight of every parser kind belongs to a compression unit (docs/METHOD.md §4), so ``prune`` and
``quantize`` reach the whole parser: the scratch biaffine parser (and with Dozat's regularisation), the parsers
reading an encoder of each pre-training variant (beside and instead of their own inputs), SynTr, RNGTr, G2GTr and
the tagger. A floating-point weight (a parameter of two or more dimensions, outside a normalisation) outside every
unit fails, unless ``EXCLUDED`` lists it with its reason."""

import re

import pytest
import torch

from forgetbench.compress import PruneConfig, prune
from forgetbench.compress.units import _is_norm, _storage_key, resolve_units
from forgetbench.parsing.layers.pretrained import EncoderConfig
from forgetbench.parsing.parsers import interface as parsers
from forgetbench.parsing.parsers.tagger import TaggerConfig, UposTagger

# name pattern -> why it is outside every unit (none today)
EXCLUDED: dict[str, str] = {}

DIMS = {"n_words": 30, "n_chars": 20, "n_tags": 6, "n_rels": 5}
SMALL = {"word_dim": 8, "char_dim": 4, "char_hidden": 8, "tag_dim": 4}


def _encoder(variant: str) -> dict:
    rels = {"mlm": 0}.get(variant, 3)
    return EncoderConfig(vocab_size=40, n_rels=rels, d_model=16, layers=2, heads=2, ffn=32, head_mlp=8, dep_mlp=4,
                         usi=variant != "usl-mlm", supervised=variant != "usi-mlm").to_dict()


def _kinds() -> dict:
    lstm = {"lstm_hidden": 8, "arc_mlp": 8, "rel_mlp": 4}
    tr = {"d_model": 16, "layers": 1, "heads": 2, "ffn": 32, "arc_mlp": 8, "rel_mlp": 4}
    kinds = {
        "biaffine": ("biaffine", DIMS | SMALL | lstm),
        "biaffine thesis regularisation": ("biaffine", DIMS | SMALL | lstm | {"lstm_layers": 3, "embed_dropout": 0.33,
                                                                              "recurrent_dropout": 0.33}),
        "syntr": ("syntr", DIMS | SMALL | tr),
        "rngtr": ("rngtr", DIMS | SMALL | tr | {"graph": "labelled"}),
        "g2gtr": ("g2gtr", DIMS | SMALL | {"d_model": 16, "layers": 1, "heads": 2, "ffn": 32, "mlp": 8}),
    }
    for v in ("mlm", "usl-mlm", "usi-mlm", "ud-prlm"):
        for mode in ("beside", "replace"):
            kinds[f"biaffine {mode} {v}"] = ("biaffine", DIMS | SMALL | lstm | {"pretrained": _encoder(v),
                                                                               "pretrained_mode": mode})
        kinds[f"syntr beside {v}"] = ("syntr", DIMS | SMALL | tr | {"pretrained": _encoder(v)})
    return kinds


KINDS = _kinds()


def _weights(model) -> dict[str, torch.nn.Parameter]:
    """The floating-point weights: parameters of two or more dimensions outside normalisation modules."""
    out = {}
    for mname, mod in model.named_modules():
        if _is_norm(mod):
            continue
        for pname, p in mod.named_parameters(recurse=False):
            if p.is_floating_point() and p.ndim >= 2:
                out[f"{mname}.{pname}" if mname else pname] = p
    return out


def _uncovered(model) -> list[str]:
    covered = {_storage_key(up.param) for u in resolve_units(model, model.forgetbench_units) for up in u.params}
    return [n for n, p in _weights(model).items() if _storage_key(p) not in covered
            and not any(re.fullmatch(pat, n) for pat in EXCLUDED)]


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_weight_of_every_parser_kind_is_in_a_compression_unit(kind):
    arch, cfg = KINDS[kind]
    torch.manual_seed(0)
    model = parsers.build(arch, cfg)
    assert _uncovered(model) == []


def test_the_tagger_is_covered_too():
    for extra in ({}, {"lstm_layers": 2, "recurrent_dropout": 0.5}):
        assert _uncovered(UposTagger(TaggerConfig(30, 20, 6, **extra))) == []


def test_prune_30_on_a_ud_prlm_parser_zeros_30_percent_of_every_covered_weight_usi_included():
    """The USI's per-label maps (3-D: magnitude over the unit, the rule of every weight) and its Linear are pruned
    with the rest: 30 % ± 0.5 % zeros over every covered weight, in every unit."""
    torch.manual_seed(0)
    arch, cfg = KINDS["biaffine beside ud-prlm"]
    model = parsers.build(arch, cfg)
    with torch.no_grad():  # a trained parser's weights: none zero before (the biaffine scorers start at zero)
        for p in model.parameters():
            p.normal_()
    usi = {n for n in _weights(model) if ".usi." in n}
    assert usi == {"words.encoder.usi.maps", "words.encoder.usi.linear.weight"}
    prune(model, PruneConfig(sparsity=0.3))
    weights = _weights(model)
    zeros = sum(int((p == 0).sum()) for p in weights.values())
    assert abs(zeros / sum(p.numel() for p in weights.values()) - 0.3) < 0.005
    for u in resolve_units(model, model.forgetbench_units):
        n = sum(up.param.numel() for up in u.params if up.param.ndim >= 2)
        z = sum(int((up.param == 0).sum()) for up in u.params if up.param.ndim >= 2)
        assert n == 0 or abs(z / n - 0.3) < 0.005 + 1 / n, u.name
    for n in usi:
        assert abs(float((weights[n] == 0).float().mean()) - 0.3) < 0.05, n


def test_ptq_reaches_the_usi_its_input_site_and_each_labels_map_per_output_channel(tmp_path):
    """PTQ on a UD-PrLM parser: an activation site on H^(L) where the USI's maps read it (calibrated like every
    linear input), the maps fake-quantised per (label, output channel) to at most 255 levels, the fused Linear's
    weight per output row; the int8 artefact holds the maps as int8 and loads back to the fake-quantised values."""
    from forgetbench.compress import QuantConfig, quantize
    from forgetbench.compress.artefacts import load_int8, save_int8

    torch.manual_seed(0)
    arch, cfg = KINDS["biaffine beside ud-prlm"]
    model = parsers.build(arch, cfg).eval()
    words, chars = torch.randint(2, 30, (3, 7)), torch.randint(2, 20, (3, 7, 4))
    tags, pieces = torch.randint(2, 6, (3, 7)), torch.randint(4, 40, (3, 7, 2))  # a word: two pieces
    usi = model.words.encoder.usi
    seen = []
    usi.input.register_forward_hook(lambda _m, a, _o: seen.append(a[0].shape))

    def calibrate(m):
        with torch.no_grad():
            m(words, (chars, pieces), tags)

    state = quantize(model, QuantConfig(), calibrate)
    assert seen and "words.encoder.usi.input.input" in state.activation_amax
    maps = usi.maps.detach()
    D, H, _ = maps.shape
    for k in range(D):
        for m in range(H):
            assert len(torch.unique(maps[k, :, m])) <= 255
    amax = state.weight_amax["words.encoder.usi.maps"]
    assert amax.shape == (D, 1, H)
    assert torch.allclose(amax, usi.maps.abs().amax(dim=1, keepdim=True))
    save_int8(model, state.weight_amax, tmp_path / "q.safetensors")
    sd = load_int8(tmp_path / "q.safetensors")
    assert torch.allclose(sd["words.encoder.usi.maps"], maps, atol=1e-6)
    assert torch.allclose(sd["words.encoder.usi.linear.weight"], usi.linear.weight, atol=1e-6)
