"""Wanda and SparseGPT through the recipe runner on M2M-100-architecture models: exact counts per scope, ties
kept, calibration choices recorded and mattering, bad input refused in one line before any work."""

import json

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from forgetbench.cli import main
from forgetbench.compress.recipe import parse_recipe

from .conftest import CALIB, REPO


def _recipe(tmp_path, method, sparsity=0.45, **calib):
    spec = {"data": str(CALIB), "max_sentences": 64} | calib
    step = {"prune": {"method": method, "sparsity": sparsity, "calibration": spec}}
    p = tmp_path / f"{method}-{calib.get('choice', 'sample')}.yaml"
    p.write_text(json.dumps({"name": p.stem, "steps": [step]}))
    return p


@pytest.mark.parametrize("method", ["wanda", "sparsegpt"])
def test_counts_are_exact_per_scope_and_ties_kept(tmp_path, tiny_dir, method):
    from forgetbench.compress.pipeline import compress_dir, load_compressed
    from forgetbench.compress.recipe import load_recipe

    rep = compress_dir(tiny_dir, load_recipe(str(_recipe(tmp_path, method, 0.5))), tmp_path / "out", progress=False)
    model, _, _ = load_compressed(tmp_path / "out")
    assert model.model.shared.weight.data_ptr() == model.lm_head.weight.data_ptr()  # the tie kept
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name != "lm_head":
            z = (mod.weight == 0).sum(1) if method == "wanda" else (mod.weight == 0).sum()
            if method == "wanda":  # every output row: exactly half of its inputs
                assert (z == mod.in_features // 2).all(), name
            else:  # blocks of 128 columns (d_model 64: one block): exactly half
                assert int(z) == mod.weight.numel() // 2, name
    prune = rep["steps"][0]["prune"]
    assert abs(prune["overall"]["sparsity"] - 0.5) < 0.01 and prune["config"]["method"] == method
    assert prune["calibration"]["sentences"] == 64


def test_the_calibration_choice_is_recorded_and_changes_the_mask(tmp_path, tiny_dir):
    from forgetbench.compress.pipeline import compress_dir, load_compressed
    from forgetbench.compress.recipe import load_recipe

    masks = {}
    for choice in ("english", "uniform"):
        rep = compress_dir(tiny_dir, load_recipe(str(_recipe(tmp_path, "wanda", choice=choice))), tmp_path / choice,
                           progress=False)
        info = rep["steps"][0]["prune"]["calibration"]
        assert info["choice"] == choice and info["sentences"] == 64
        if choice == "english":
            assert all(d.startswith("en-") for d in info["directions"])
        else:  # as many rows per language (64 over 20 languages: 3 or 4 each)
            assert set(info["languages"].values()) <= {3, 4} and len(info["languages"]) == 20
        model, _, _ = load_compressed(tmp_path / choice)
        masks[choice] = model.model.encoder.layers[0].fc1.weight == 0
    assert not torch.equal(masks["english"], masks["uniform"])


def test_proportional_calibration_follows_the_training_counts(tmp_path):
    from forgetbench.compress.calibration import choose, read_calibration_tsv

    counts = tmp_path / "training.json"
    counts.write_text(json.dumps({"corpus": {"train": {"de": 600, "sw": 200, "fr": 200}}}))
    r = parse_recipe({"steps": [{"prune": {"method": "wanda", "sparsity": 0.3, "calibration": {
        "data": str(CALIB), "max_sentences": 20, "choice": "proportional", "counts": str(counts)}}}]})
    rows = choose(read_calibration_tsv(CALIB), r.steps[0].calibration)
    langs = [x[1] if x[0] == "en" else x[0] for x in rows]
    assert (langs.count("de"), langs.count("sw"), langs.count("fr"), len(rows)) == (12, 4, 4, 20)


@pytest.mark.parametrize("step,match", [
    ({"method": "obs", "sparsity": 0.3}, "unknown pruning method 'obs'"),
    ({"method": "wanda", "sparsity": 0.3}, "wanda pruning needs calibration data"),
    ({"method": "wanda", "n_m": [4, 4], "calibration": {"data": "CALIB"}}, "N must be smaller than M"),
    ({"method": "wanda", "sparsity": 0.3, "calibration": {"data": "CALIB", "choice": "random"}},
     "calibration.choice 'random' is unknown"),
    ({"method": "wanda", "sparsity": 0.3, "calibration": {"data": "CALIB", "choice": "language", "language": "sw"}},
     "has 32 rows with language sw, max_sentences asks 128"),
    ({"method": "wanda", "sparsity": 0.3, "calibration": {"data": "CALIB", "choice": "language", "language": "qq",
                                                           "max_sentences": 8}}, "has 0 rows with language qq"),
    ({"method": "magnitude", "sparsity": 0.3, "calibration": {"data": "CALIB"}}, "magnitude pruning reads no calibration"),
    ({"method": "wanda", "sparsity": 0.3, "scope": "global", "calibration": {"data": "CALIB"}},
     "pruning scope 'global' does not go with method wanda; choose one of row, module, layer, attn-ffn"),
    ({"method": "sparsegpt", "sparsity": 0.3, "scope": "layer", "calibration": {"data": "CALIB"}},
     "does not go with method sparsegpt; choose one of block"),
    ({"method": "wanda", "n_m": [2, 4], "scope": "layer", "calibration": {"data": "CALIB"}}, "n_m patterns are per output row"),
])
def test_bad_data_aware_input_is_one_line_and_writes_nothing(tmp_path, tiny_dir, capsys, step, match):
    if "calibration" in step:
        step["calibration"]["data"] = str(CALIB)
    r = tmp_path / "r.yaml"
    r.write_text(json.dumps({"name": "r", "steps": [{"prune": step}]}))
    capsys.readouterr()
    assert main(["compress", str(tiny_dir), "--recipe", str(r), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and match in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_language_the_model_lacks_is_refused(tmp_path, capsys):
    """The teacher was trained on 14 languages (its training.json); the calibration file has ja, zh, ha, tr, hu, pl too."""
    r = _recipe(tmp_path, "wanda", 0.3, choice="language", language="ja", max_sentences=8)
    capsys.readouterr()
    assert main(["compress", str(REPO / "artifacts" / "teacher"), "--recipe", str(r), "--out", str(tmp_path / "o"),
                 "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "calibration language 'ja' is not among the model's training languages" in err[0], err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("method", ["wanda", "sparsegpt"])
def test_streaming_equals_in_memory(tmp_path, tiny_dir, method):
    """Layer by layer from a half-precision checkpoint in several shards, with dropout in its config
    (compress.data_aware_layerwise), gives the in-memory weights (loaded in fp32, evaluation mode): the same masks, the
    same SparseGPT updates to the checkpoint's precision, the same report per unit."""
    from safetensors.torch import load_file
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from forgetbench.compress.pipeline import compress_dir
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.compress.streaming import stream_compress

    sharded = tmp_path / "sharded"
    half = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir)).half()
    half.config.dropout = half.config.attention_dropout = half.config.activation_dropout = 0.1
    half.save_pretrained(sharded, max_shard_size="80KB")
    AutoTokenizer.from_pretrained(str(tiny_dir)).save_pretrained(sharded)
    assert len(list(sharded.glob("*.safetensors"))) > 2
    recipe = load_recipe(str(_recipe(tmp_path, method, 0.5, max_sentences=32, batch_size=8, choice="uniform")))
    mem = compress_dir(sharded, recipe, tmp_path / "mem", progress=False)
    rep = stream_compress(sharded, recipe, tmp_path / "stream")
    a = {k: v for f in (tmp_path / "mem").glob("*.safetensors") for k, v in load_file(f).items()}
    b = {k: v for f in (tmp_path / "stream").glob("*.safetensors") for k, v in load_file(f).items()}
    common = set(a) & set(b)
    assert {k for k in a if k.endswith("fc1.weight")} <= common
    assert all(b[k].dtype == torch.float16 for k in common)  # written in the checkpoint's own dtype
    for k in common:
        assert torch.equal(a[k].half() == 0, b[k] == 0), k
        assert torch.equal(a[k].half(), b[k]), k  # computed in fp32 both ways: equal once rounded to fp16
    assert rep["mode"] == "streamed"
    assert rep["steps"][0]["prune"]["units"] == mem["steps"][0]["prune"]["units"]
    assert rep["steps"][0]["prune"]["calibration"] == mem["steps"][0]["prune"]["calibration"]


def test_a_unit_map_out_of_forward_order_is_refused_when_streamed(tmp_path, tiny_dir):
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.compress.streaming import stream_compress
    from forgetbench.compress.units import seq2seq_unit_map
    from forgetbench.errors import ForgetbenchError

    units = seq2seq_unit_map()
    units[1], units[2] = units[2], units[1]  # decoder layers before encoder layers
    recipe = load_recipe(str(_recipe(tmp_path, "wanda", 0.3, max_sentences=8)))
    with pytest.raises(ForgetbenchError, match="runs before a layer earlier in the unit map is pruned"):
        stream_compress(tiny_dir, recipe, tmp_path / "o", units=units)
    assert not (tmp_path / "o").exists()


def test_a_unit_not_called_whole_is_refused_when_streamed(tmp_path, tiny_dir):
    """A unit whose module the forward does not call (a module list it iterates) cannot be stood in for."""
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.compress.streaming import stream_compress
    from forgetbench.errors import ForgetbenchError

    units = [{"unit": "embeddings", "module": "model.shared"}, {"unit": "encoder", "module": "model.encoder.layers"},
             {"unit": "decoder", "module": "model.decoder.layers"}]
    recipe = load_recipe(str(_recipe(tmp_path, "wanda", 0.3, max_sentences=8)))
    with pytest.raises(ForgetbenchError, match="model.encoder.layers is not called whole"):
        stream_compress(tiny_dir, recipe, tmp_path / "o", units=units)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("scope", ["layer", "attn-ffn", "module"])
def test_wanda_over_a_layer_wise_group_prunes_exactly_its_count(tmp_path, tiny_dir, scope):
    """Wanda's comparison over a unit, its attention and FFN parts, or each matrix: exactly ⌊p·n⌉ of the group's
    weights, the lowest |W|·‖X‖ (rows no longer equal: the count is the group's, not each row's)."""
    from forgetbench.compress.pipeline import compress_dir, load_compressed
    from forgetbench.compress.recipe import load_recipe

    r = tmp_path / f"w-{scope}.yaml"
    r.write_text(json.dumps({"name": "w", "steps": [{"prune": {"method": "wanda", "sparsity": 0.45, "scope": scope,
                                                               "calibration": {"data": str(CALIB), "max_sentences": 16}}}]}))
    rep = compress_dir(tiny_dir, load_recipe(str(r)), tmp_path / "out", progress=False)
    model, _, _ = load_compressed(tmp_path / "out")
    layer = model.model.encoder.layers[0]
    parts = {"attention": [layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.out_proj],
             "ffn": [layer.fc1, layer.fc2]}
    groups = {"layer": [parts["attention"] + parts["ffn"]], "attn-ffn": list(parts.values()),
              "module": [[m] for ms in parts.values() for m in ms]}[scope]
    for g in groups:
        n = sum(m.weight.numel() for m in g)
        assert sum(int((m.weight == 0).sum()) for m in g) == int(0.45 * n + 0.5)
    rows = torch.cat([(m.weight == 0).sum(1) for m in parts["ffn"][:1]])
    assert rows.unique().numel() > 1  # not a per-row count
    assert rep["steps"][0]["prune"]["config"]["scope"] == scope


def test_lowest_over_a_group_breaks_ties_by_position():
    from forgetbench.compress.data_aware import lowest_over

    a, b = torch.tensor([[3.0, 1.0], [2.0, 1.0]]), torch.tensor([[1.0, 5.0]])
    ma, mb = lowest_over([a, b], 3)  # the three 1.0s: two in a, one in b
    assert ma.tolist() == [[False, True], [False, True]] and mb.tolist() == [[True, False]]
    ma, mb = lowest_over([a, b], 2)  # a tie at 1.0: the first two by position (both in a)
    assert ma.tolist() == [[False, True], [False, True]] and mb.tolist() == [[False, False]]


@pytest.mark.parametrize("method", ["wanda", "sparsegpt"])
def test_layer_by_layer_in_memory_equals_whole_model_forwards(tmp_path, tiny_dir, method):
    """In memory, a seq2seq model is calibrated layer by layer (each layer run twice); the whole-model forwards per
    unit (data_aware_prune, the path of declared unit maps and device maps) give the same weights."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from forgetbench.compress.apply import apply_recipe
    from forgetbench.compress.calibration import Seq2SeqCalibration
    from forgetbench.compress.data_aware_prune import data_aware_prune
    from forgetbench.compress.recipe import load_recipe

    recipe = load_recipe(str(_recipe(tmp_path, method, 0.5, max_sentences=32, batch_size=8, choice="uniform")))
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    cal = Seq2SeqCalibration(tok)

    def fresh():
        m = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir), attn_implementation="eager").eval()
        m.config.dropout = m.config.attention_dropout = 0.1  # evaluation mode keeps dropout off on both paths
        return m

    layerwise, whole = fresh(), fresh()
    rep, _ = apply_recipe(layerwise, recipe, cal)
    assert rep["steps"][0]["prune"]["calibrated_by"] == "layers"
    forwards, _ = cal.forwards(recipe.steps[0].calibration)
    ref = data_aware_prune(whole, recipe.steps[0].config, forwards).to_dict()
    assert rep["steps"][0]["prune"]["units"] == ref["units"]
    a, b = dict(layerwise.named_parameters()), dict(whole.named_parameters())
    for k in a:
        assert torch.equal(a[k] == 0, b[k] == 0), k
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=0), k
    assert layerwise.model.shared.weight.data_ptr() == layerwise.lm_head.weight.data_ptr()
    assert not layerwise.training and all(type(m).__name__ != "_StandIn" for m in layerwise.modules())


@pytest.mark.parametrize("method", ["wanda", "sparsegpt"])
def test_embeddings_stay_dense_unless_asked_and_the_nominal_size_counts_what_was_pruned(tmp_path, tiny_dir, method):
    """The papers' methods prune linear maps only: the tied embedding / output projection stays dense by default
    (its share of the weights then counts unpruned in the nominal size); ``include_embeddings: true`` prunes it by
    magnitude at the same sparsity."""
    from forgetbench.compress.pipeline import compress_dir, load_compressed
    from forgetbench.compress.recipe import load_recipe

    base = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir)).model.shared.weight
    out = {}
    for include in (None, True):
        p = _recipe(tmp_path, method, 0.5, max_sentences=16)
        if include:
            spec = json.loads(p.read_text())
            spec["steps"][0]["prune"]["include_embeddings"] = True
            p.write_text(json.dumps(spec))
        rep = compress_dir(tiny_dir, load_recipe(str(p)), tmp_path / f"out-{include}", progress=False)
        model, _, _ = load_compressed(tmp_path / f"out-{include}")
        out[include] = (rep, model.model.shared.weight)
    rep, emb = out[None]
    prune = rep["steps"][0]["prune"]
    assert torch.equal(emb, base) and prune["config"]["include_embeddings"] is False
    assert "embeddings" not in [u["name"] for u in prune["units"]]
    covered = prune["overall"]["numel"]
    assert prune["covered"] == pytest.approx(covered / prune["model_weights"])
    assert prune["model_weights"] == covered + base.numel() and prune["covered"] < 1
    assert rep["sizes"]["nominal_ratio"] == pytest.approx(1 - 0.5 * prune["covered"])
    rep, emb = out[True]
    prune = rep["steps"][0]["prune"]
    assert prune["config"]["include_embeddings"] is True and prune["covered"] == 1.0
    assert int((emb == 0).sum()) == emb.numel() // 2 and rep["sizes"]["nominal_ratio"] == pytest.approx(0.5)
