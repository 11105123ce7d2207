"""What only a GPU can check: the greedy step, fake-quantised PTQ, device maps, bitsandbytes and a sweep on CUDA.
Every test is skipped, with the reason, where torch sees no CUDA GPU (``pytest -rs`` lists them)."""

import json
import sqlite3

import pytest
import torch

from forgetbench.cli import main

from .conftest import REPO

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU: these tests run where torch sees one")
TEACHER = REPO / "artifacts" / "teacher"
FLORES = REPO / "data" / "flores101"


def _placed(**hw):
    from forgetbench.models.hardware import Hardware, place

    return place(Hardware(**hw), "test")


def _sources(n=16, pair=("sw", "en")):
    from forgetbench.eval.benchmarks import open_benchmark

    return open_benchmark("flores101", "flores101", FLORES).pair(*pair)[0][:n]


def test_the_teacher_on_cuda_translates_as_on_the_cpu_for_most_sentences():
    """fp32 on the GPU: other kernels, so a few greedy paths may part; most hypotheses must be the CPU's."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.models.generation import translate

    cpu, tok = load_model_dir(TEACHER)
    gpu, _ = load_model_dir(TEACHER, placement=_placed(device="cuda"))
    assert next(gpu.parameters()).is_cuda
    src = _sources(32)
    a, b = translate(cpu, tok, src, "sw", "en"), translate(gpu, tok, src, "sw", "en")
    assert sum(x == y for x, y in zip(a, b, strict=True)) >= 28


def test_the_direct_step_on_cuda_is_not_taken_and_says_why():
    """``decoder_step`` rule 1: on a GPU the forward step is used; this measures whether the direct step's logits
    would be the forward's there (printed, for the record), without asserting what the GPU's kernels do."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.models.decoder_step import DirectStep, HFStep, direct_unsupported
    from forgetbench.models.generation import encode_by_length, encode_sources

    model, tok = load_model_dir(TEACHER, placement=_placed(device="cuda"))
    assert "weights off the CPU" in direct_unsupported(model)
    enc = {k: v.cuda() for k, v in encode_sources(tok, _sources(16), "sw", "en").items()}
    with torch.no_grad():
        hidden = encode_by_length(model.get_encoder(), enc["input_ids"], enc["attention_mask"])
        a, b = HFStep(model, hidden, enc["attention_mask"]), DirectStep(model, hidden, enc["attention_mask"], 8)
        tokens = torch.full((hidden.shape[0],), model.config.decoder_start_token_id, device="cuda")
        equal = []
        for _ in range(8):
            la, lb = a(tokens), b(tokens)
            equal.append(torch.equal(la, lb))
            assert torch.allclose(la, lb, atol=1e-3)
            tokens = la.argmax(-1)
    print(f"direct step bit-equal to forward on {torch.cuda.get_device_name(0)}: {equal}")


def test_ptq_calibrated_on_cuda_gives_the_cpu_ranges_and_hypotheses(tmp_path):
    """The int8 recipe calibrated on the GPU: its activation ranges are the CPU calibration's (histograms counted
    on the GPU and summed on the host; other kernels move a few values by float rounding), its weight artefact
    dequantises like the CPU's, and the GPU model translates as the CPU-calibrated one for most sentences."""
    from forgetbench.compress.artefacts import load_int8
    from forgetbench.compress.pipeline import load_compressed
    from forgetbench.models.generation import translate

    cpu_out, gpu_out = tmp_path / "cpu", tmp_path / "gpu"
    assert main(["compress", str(TEACHER), "--recipe", "ptq-int8", "--out", str(cpu_out), "--quiet"]) == 0
    assert main(["compress", str(TEACHER), "--recipe", "ptq-int8", "--out", str(gpu_out), "--device", "cuda",
                 "--quiet"]) == 0
    assert json.loads((gpu_out / "compression.json").read_text())["hardware"]["device"] == "cuda:0"
    a = json.loads((cpu_out / "quantization.json").read_text())["activation_amax"]
    b = json.loads((gpu_out / "quantization.json").read_text())["activation_amax"]
    assert a.keys() == b.keys()
    # a site's range is a number (per tensor) or a vector (per channel): every entry within 1e-3 of the CPU's
    def near(x, y):
        x, y = torch.as_tensor(x, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
        return x.shape == y.shape and bool(((x - y).abs() <= 1e-3 * x.abs().clamp_min(1e-6)).all())

    close = sum(near(a[k], b[k]) for k in a)
    assert close >= 0.95 * len(a), f"{close} of {len(a)} sites within 1e-3"
    qa, qb = load_int8(cpu_out / "model.int8.safetensors"), load_int8(gpu_out / "model.int8.safetensors")
    assert all(torch.allclose(qa[k], qb[k], atol=1e-6) for k in qa)
    cpu_model, tok, _ = load_compressed(cpu_out)
    gpu_model, _, qstate = load_compressed(gpu_out, placement=_placed(device="cuda"))
    assert qstate is not None and next(gpu_model.parameters()).is_cuda
    src = _sources(16)
    same = sum(x == y for x, y in zip(translate(cpu_model, tok, src, "sw", "en"),
                                      translate(gpu_model, tok, src, "sw", "en"), strict=True))
    assert same >= 12, f"{same} of 16 hypotheses as the CPU-calibrated model's"


def test_pruning_on_cuda_gives_the_cpu_mask(tmp_path):
    """Magnitude pruning ranks fp32 magnitudes; on the GPU the same weights get the same zeros."""
    from safetensors.torch import load_file

    a, b = tmp_path / "cpu", tmp_path / "gpu"
    assert main(["compress", str(TEACHER), "--recipe", "prune-30", "--out", str(a), "--quiet"]) == 0
    assert main(["compress", str(TEACHER), "--recipe", "prune-30", "--out", str(b), "--device", "cuda", "--quiet"]) == 0
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert all(torch.equal(wa[k] == 0, wb[k] == 0) for k in wa)


def test_a_device_map_over_the_gpu_and_the_cpu_translates_as_the_gpu_alone(tmp_path):
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.models.generation import translate

    gpu, tok = load_model_dir(TEACHER, placement=_placed(device="cuda"))
    mapped, _ = load_model_dir(TEACHER, placement=_placed(device="cuda", device_map="auto",
                                                          max_memory={0: 12 << 20, "cpu": 1 << 30}))
    assert {"cpu"} < set(map(str, mapped.hf_device_map.values())) | {"cpu"} and 0 in mapped.hf_device_map.values()
    src = _sources(16)
    assert translate(mapped, tok, src, "sw", "en") == translate(gpu, tok, src, "sw", "en")


@pytest.mark.parametrize("recipe", ["llm-int8", "nf4"])
def test_bitsandbytes_variants_load_quantised_and_translate(recipe):
    pytest.importorskip("bitsandbytes", reason="bitsandbytes is not installed: pip install -e \".[gpu]\"")
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.models.generation import translate

    q = load_recipe(recipe).load_quantisation
    model, tok = load_model_dir(TEACHER, placement=_placed(device="cuda"), quantisation=q)
    plain, _ = load_model_dir(TEACHER, placement=_placed(device="cuda"))
    assert model.get_memory_footprint() < 0.6 * plain.get_memory_footprint()
    hyps = translate(model, tok, _sources(8), "sw", "en")
    assert sum(bool(h.strip()) for h in hyps) >= 6


def test_a_sweep_on_cuda_records_where_it_ran(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"""name: c
model: {TEACHER}
variants: {{base: null, prune-30: prune-30, ptq-int8: ptq-int8}}
benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]
pairs: [en-de, de-en]
sentences: 16
generation: {{max_new_tokens: 32, batch_size: auto}}
analysis: {{bleu_filter: 0}}
hardware: {{device: cuda, dtype: bfloat16}}
""")
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    S = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    rec = S["run"]["hardware"]["base"]
    assert rec["device"] == "cuda:0" and rec["dtype"] == "bfloat16" and rec["gpus"] == [torch.cuda.get_device_name(0)]
    assert rec["direct_step"].startswith("weights off the CPU") and S["run"]["generation"]["batch_size"] == 512
    con = sqlite3.connect(tmp_path / "run" / "store.sqlite")
    assert con.execute("SELECT COUNT(*) FROM translations").fetchone()[0] == 3 * 32
