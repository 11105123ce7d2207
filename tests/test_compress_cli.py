import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from forgetbench.cli import main
from forgetbench.compress import apply_recipe
from forgetbench.compress.artefacts import load_int8, load_sparse
from forgetbench.compress.calibration import Seq2SeqCalibration
from forgetbench.compress.pipeline import load_compressed, load_model_dir
from forgetbench.compress.recipe import load_recipe

from .conftest import CALIB, REPO


def _logits(model, batch):
    with torch.no_grad():
        return model(**batch).logits


def test_output_files_have_the_umasks_mode(tiny_dir, tmp_path):
    """safetensors written through transformers come out 0600 (mkstemp); every output file gets the umask's mode."""
    import os

    old = os.umask(0o027)
    try:
        assert main(["compress", str(tiny_dir), "--recipe", "prune-30", "--out", str(tmp_path / "o"), "--quiet"]) == 0
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "o").iterdir()}
    assert "model.safetensors" in modes and set(modes.values()) == {0o640}, modes


@pytest.mark.parametrize("recipe", ["prune-30", "prune-45"])
def test_prune_round_trip_plain_transformers(tiny_dir, tmp_path, batch, recipe):
    out = tmp_path / "out"
    assert main(["compress", str(tiny_dir), "--recipe", recipe, "--out", str(out), "--quiet"]) == 0
    mem, tok = load_model_dir(tiny_dir)
    apply_recipe(mem, load_recipe(recipe), Seq2SeqCalibration(tok))
    plain = AutoModelForSeq2SeqLM.from_pretrained(str(out)).eval()  # plain transformers, default attention
    # two attention kernels (transformers' default SDPA, forgetbench's eager) over the same weights: equal to rounding
    assert torch.allclose(_logits(plain, batch), _logits(mem, batch), atol=1e-5, rtol=0)
    rep = json.loads((out / "compression.json").read_text())
    p = float(recipe.split("-")[1]) / 100
    assert rep["steps"][0]["prune"]["overall"]["sparsity"] == pytest.approx(p, abs=1e-4)
    assert {u["name"] for u in rep["steps"][0]["prune"]["units"]} >= {"embeddings", "decoder.layers.1"}
    assert len(rep["inputs_sha256"]["model.safetensors"]) == 64 and "recipe" in rep["inputs_sha256"]
    sparse = load_sparse(out / "model.sparse.safetensors")
    for k, v in plain.state_dict().items():
        if k in sparse:
            assert torch.equal(sparse[k], v), k
    assert rep["sizes"]["sparse_bytes"] < rep["sizes"]["dense_bytes"]
    assert rep["sizes"]["nominal_ratio"] == pytest.approx(1 - p)


def test_ptq_round_trip_and_int8_artefact(tiny_dir, tmp_path, batch):
    out = tmp_path / "ptq"
    assert main(["compress", str(tiny_dir), "--recipe", "ptq-int8", "--out", str(out), "--quiet"]) == 0
    mem, tok = load_model_dir(tiny_dir)
    # every site of the recipe, counted from the architecture: an input per Linear, both operands of Q·Kᵀ and of
    # softmax·V per attention block (encoder self, decoder self and cross), both operands of each residual add
    E, D = mem.config.encoder_layers, mem.config.decoder_layers
    blocks, adds = E + 2 * D, 2 * E + 3 * D
    sites = {"input": sum(isinstance(m, torch.nn.Linear) for m in mem.modules()), "qk": 2 * blocks, "pv": 2 * blocks,
             "residual": 2 * adds}
    apply_recipe(mem, load_recipe("ptq-int8"), Seq2SeqCalibration(tok))
    ref = _logits(mem, batch)
    for artefact in ("dense", "int8"):
        model, _, qstate = load_compressed(out, artefact)
        kinds = [next(k for k in sites if f".{k}" in n) for n in qstate.activation_amax]
        assert {k: kinds.count(k) for k in sites} == sites and len(kinds) == sum(sites.values())
        assert torch.equal(_logits(model, batch), ref), artefact
    # plain transformers loads the int8-rounded weights (activation ranges live in quantization.json)
    plain = AutoModelForSeq2SeqLM.from_pretrained(str(out)).eval()
    sd = load_int8(out / "model.int8.safetensors")
    for k, v in plain.state_dict().items():
        if k in sd:
            assert torch.equal(sd[k], v), k
    rep = json.loads((out / "compression.json").read_text())
    assert rep["sizes"]["int8"]["linear_ratio"] <= 0.27
    assert rep["sizes"]["int8_ratio"] < 0.3
    assert rep["steps"][0]["quantize"]["calibration"]["sentences"] == 256


BAD = {
    "unknown_step": "steps:\n  - distill: {alpha: 0.5}\n",
    "sparsity": "steps:\n  - prune: {sparsity: 1.2}\n",
    "no_calibration": "steps:\n  - quantize: {calibrator: mse}\n",
    "missing_calib_file": "steps:\n  - quantize: {calibration: {data: nowhere.tsv}}\n",
    "bad_key": "steps:\n  - prune: {sparsity: 0.3, sparsty: 0.2}\n",
    "bad_yaml": "steps: [prune: {sparsity: 0.3}\n",
    "calibrator": "steps:\n  - quantize: {calibrator: minmax, calibration: {data: CALIB}}\n",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_recipe_one_line_exit_2_nothing_written(tiny_dir, tmp_path, capsys, case):
    r = tmp_path / "bad.yaml"
    r.write_text(BAD[case].replace("CALIB", str(CALIB)))
    out = tmp_path / "out"
    assert main(["compress", str(tiny_dir), "--recipe", str(r), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("forgetbench: error: ") and str(r) in err[0]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_existing_output_is_never_overwritten(tiny_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["compress", str(tiny_dir), "--recipe", "prune-30", "--out", str(out)]) == 2
    assert "exists and is never overwritten" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_cli_exit_code_in_a_real_process(tiny_dir, tmp_path):
    p = subprocess.run([sys.executable, "-m", "forgetbench.cli", "compress", str(tiny_dir), "--recipe", "nope",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("forgetbench: error: recipe 'nope' not found")


def test_a_half_precision_source_stays_half_precision_where_that_is_lossless(tiny_dir, tmp_path):
    """Pruning keeps fp16 (zeros and source values are exact): dense and sparse files no larger than the source,
    the same weights as the in-memory pruning; a method whose values are not exact in fp16 (fake-quantised PTQ)
    stays fp32, and says why."""
    from forgetbench.compress.pipeline import load_compressed

    half = tmp_path / "half"
    m = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir)).half()
    m.save_pretrained(str(half))
    for f in tiny_dir.iterdir():
        if f.suffix in (".model", ".json") and f.name not in ("config.json", "generation_config.json"):
            (half / f.name).write_bytes(f.read_bytes())
    assert main(["compress", str(half), "--recipe", "prune-30", "--out", str(tmp_path / "p"), "--quiet"]) == 0
    rep = json.loads((tmp_path / "p" / "compression.json").read_text())
    assert rep["stored_dtype"]["dtype"] == "float16"
    src = (half / "model.safetensors").stat().st_size
    assert rep["sizes"]["source_bytes"] == src and rep["sizes"]["dense_bytes"] <= src and rep["sizes"]["sparse_bytes"] <= src
    mem, tok = load_model_dir(half)
    apply_recipe(mem, load_recipe("prune-30"), Seq2SeqCalibration(tok))
    back, _, _ = load_compressed(tmp_path / "p")
    for k, v in mem.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    sparse = load_sparse(tmp_path / "p" / "model.sparse.safetensors")
    assert all(t.dtype == torch.float16 for t in sparse.values() if t.is_floating_point())
    assert main(["compress", str(half), "--recipe", "ptq-int8", "--out", str(tmp_path / "q"), "--quiet"]) == 0
    q = json.loads((tmp_path / "q" / "compression.json").read_text())["stored_dtype"]
    assert q == {"dtype": "float32", "why": "the method's values are not exact in the source's float16"}


def test_compress_diagnose_writes_the_diagnosis_and_refuses_a_recipe_without_quantize(tiny_dir, tmp_path, capsys):
    """``--diagnose``: diagnosis.md and the step's diagnosis in compression.json, the written model the same as without
    it; a recipe with nothing to diagnose is refused in one line, nothing written."""
    out, plain = tmp_path / "d", tmp_path / "p"
    assert main(["compress", str(tiny_dir), "--recipe", "ptq-int8", "--out", str(out), "--diagnose"]) == 0
    assert "diagnosis (teacher-forced top-1 agreement" in capsys.readouterr().err
    md = (out / "diagnosis.md").read_text()
    assert "| residual |" in md and "| all |" in md and "SNR dB" in md
    diag = json.loads((out / "compression.json").read_text())["steps"][0]["diagnosis"]
    assert set(diag["kinds"]) == {"linear_input", "linear_weight", "attn_qk", "attn_pv", "residual", "all"}
    assert any(r["granularity"] == "channel" for r in diag["sites"].values())
    assert main(["compress", str(tiny_dir), "--recipe", "ptq-int8", "--out", str(plain), "--quiet"]) == 0
    assert (out / "model.safetensors").read_bytes() == (plain / "model.safetensors").read_bytes()
    assert (out / "quantization.json").read_text() == (plain / "quantization.json").read_text()
    capsys.readouterr()
    assert main(["compress", str(tiny_dir), "--recipe", "prune-30", "--out", str(tmp_path / "x"), "--diagnose"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no quantize step" in err[0] and not (tmp_path / "x").exists()
