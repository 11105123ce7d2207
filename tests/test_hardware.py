"""The hardware block (models.hardware): CPU placements that must equal the plain load, device maps read from a
plan and honoured, bfloat16 end to end, bad settings refused in one line before any work, GPU division between
processes, out-of-memory halving, bitsandbytes refusals and dataset benchmarks."""

import json
import sqlite3
import types

import pytest
import torch
import yaml

from forgetbench.cli import main
from forgetbench.errors import ForgetbenchError
from forgetbench.models.hardware import (
    Hardware,
    parse_hardware,
    place,
    process_share,
    read_plan,
    with_overrides,
)

from .conftest import FLORES, REPO, flores_sweep

TEACHER = REPO / "artifacts" / "teacher"
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusals of a machine without CUDA")


def _config(tmp_path, model, name="hw", variants="{base: null}", extra="", sentences=8, pairs="[en-de, de-en]"):
    return flores_sweep(tmp_path / f"{name}.yaml", model, variants, pairs, sentences, 16, extra=extra)


def _hyps(run) -> dict:
    con = sqlite3.connect(run / "store.sqlite")
    try:
        return {(v, s, t, i): h for v, s, t, i, h in
                con.execute("SELECT variant, src, tgt, idx, hyp FROM translations")}
    finally:
        con.close()


def test_the_default_block_is_the_plain_cpu_load():
    hw = parse_hardware(None, "cfg")
    assert hw.is_default and hw == parse_hardware({"device": "cpu", "dtype": "float32"}, "cfg")
    p = place(hw, "cfg", count=0)
    assert p.load_kwargs() == {"dtype": "float32"} and p.device == "cpu" and p.gpus == ()


def test_device_auto_takes_cuda_where_there_is_one():
    assert place(Hardware(device="auto"), "cfg", count=0).device == "cpu"
    p = place(Hardware(device="auto"), "cfg", count=2)
    assert p.device == "cuda:0" and p.load_kwargs() == {"dtype": "float32", "device_map": {"": 0}}
    assert place(Hardware(device="cuda:1"), "cfg", count=2).load_kwargs()["device_map"] == {"": 1}


def test_processes_share_the_gpus_and_plans_are_read_within_the_share(tmp_path):
    assert [process_share(4, r, 2) for r in range(2)] == [(0, 1), (2, 3)]
    assert [process_share(4, r, 4) for r in range(4)] == [(0,), (1,), (2,), (3,)]
    with pytest.raises(ForgetbenchError, match="3 processes on this machine but 2 CUDA GPU"):
        process_share(2, 0, 3)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"device_map": {"model.shared": 0, "lm_head": 0, "model.encoder": 0,
                                               "model.decoder.embed_tokens": 0, "model.decoder": 1}}))
    hw = with_overrides(Hardware(device="cuda"), None, device_map=str(plan))
    p = place(hw, "cfg", rank=1, local_world=2, count=4)  # model parallel (2 GPUs) inside data parallel (2 processes)
    assert p.gpus == (2, 3) and p.device == "cuda:2"
    assert p.load_kwargs()["device_map"] == {"model.shared": 2, "lm_head": 2, "model.encoder": 2,
                                             "model.decoder.embed_tokens": 2, "model.decoder": 3}
    assert place(Hardware(device="cuda"), "cfg", rank=3, local_world=4, count=4).load_kwargs()["device_map"] == {"": 3}


@pytest.mark.parametrize("spec,match", [
    ({"device": "tpu"}, "unknown device 'tpu'"),
    ({"dtype": "int4"}, "unknown dtype 'int4'"),
    ({"device_map": "everywhere"}, "neither auto, balanced, sequential nor a plan file"),
    ({"max_memory": {"gpu0": "1GiB"}}, "use a GPU number, cpu or disk"),
    ({"max_memory": {"cpu": "lots"}}, "memory size 'lots'"),
    ({"devices": "cpu"}, r"unknown key\(s\) \['devices'\]"),
])
def test_bad_settings_are_named(spec, match):
    with pytest.raises(ForgetbenchError, match=match):
        parse_hardware(spec, "cfg: hardware")


def test_a_plan_that_splits_the_tied_matrices_is_refused(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"device_map": {"model.shared": 0, "model.encoder": 0, "model.decoder": 1, "lm_head": 1}}))
    with pytest.raises(ForgetbenchError, match=r"tied embedding/output matrices on different devices .*lm_head: 1"):
        read_plan(plan, "cfg")


def _refused(capsys, argv, out, match):
    capsys.readouterr()  # what came before
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("forgetbench: error: ") and match in err[0], err
    assert not out.exists()


@NO_CUDA
def test_cli_refuses_bad_hardware_in_one_line_and_writes_nothing(tmp_path, tiny_dir, capsys):
    cfg = _config(tmp_path, tiny_dir)
    out = tmp_path / "run"
    _refused(capsys, ["sweep", str(cfg), "--out", str(out), "--device", "tpu"], out, "--device: unknown device 'tpu'")
    _refused(capsys, ["sweep", str(cfg), "--out", str(out), "--device", "cuda"], out, "torch sees no CUDA GPU")
    _refused(capsys, ["sweep", str(cfg), "--out", str(out), "--max-memory", "cpu"], out, "use DEVICE=SIZE pairs")
    two_gpus = tmp_path / "plan2.json"
    two_gpus.write_text(json.dumps({"device_map": {"model.shared": 0, "lm_head": 0, "model.encoder": 0,
                                                   "model.decoder.embed_tokens": 0, "model.decoder": 1}}))
    _refused(capsys, ["sweep", str(cfg), "--out", str(out), "--device", "auto", "--device-map", str(two_gpus)], out,
             "places modules on GPU(s) [0, 1], but this machine has 0 CUDA GPU(s)")
    tied = tmp_path / "tied.json"
    tied.write_text(json.dumps({"device_map": {"model.shared": "cpu", "model.encoder": "cpu", "model.decoder": "cpu",
                                               "lm_head": "disk"}}))
    _refused(capsys, ["sweep", str(cfg), "--out", str(out), "--device-map", str(tied)], out, "different devices")
    disk = tmp_path / "disk.json"
    disk.write_text(json.dumps({"device_map": {"model.shared": "cpu", "lm_head": "cpu", "model.encoder": "cpu",
                                               "model.decoder.embed_tokens": "cpu", "model.decoder": "disk"}}))
    _refused(capsys, ["sweep", str(cfg), "--out", str(out), "--device-map", str(disk)], out, "no offload_folder")
    bnb = _config(tmp_path, tiny_dir, "bnb", "{base: null, int8: llm-int8}")
    _refused(capsys, ["sweep", str(bnb), "--out", str(out)], out, "bitsandbytes (LLM.int8 / NF4) runs on a CUDA GPU")
    _refused(capsys, ["compress", str(tiny_dir), "--recipe", "nf4", "--out", str(out)], out,
             "bitsandbytes quantises when a model is loaded")
    bad_block = _config(tmp_path, tiny_dir, "blk", extra="hardware: {device: cpu, dtype: double}")
    _refused(capsys, ["sweep", str(bad_block), "--out", str(out)], out, "hardware.dtype: unknown dtype 'double'")


def test_plan_from_plan_devices_is_read_and_honoured(tmp_path, tiny_dir, capsys):
    """``plan-devices --out`` writes the plan; ``device_map: PLAN.json`` loads every module where it says (here the
    CPU and, edited in, the decoder offloaded to disk), and the translations equal the plain load's."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.models.generation import translate

    plan = tmp_path / "plan.json"
    assert main(["plan-devices", str(tiny_dir), "--gpus", "1", "--gpu-memory", "1B", "--cpu-memory", "1GiB",
                 "--dtype", "fp32", "--out", str(plan)]) == 0
    assert json.loads(plan.read_text())["device_map"] == {"": "cpu"}  # no room on the GPU: the whole model on the CPU
    written = {"model.shared": "cpu", "lm_head": "cpu", "model.encoder": "cpu", "model.decoder.embed_tokens": "cpu",
               "model.decoder.embed_positions": "cpu", "model.decoder.layers": "disk", "model.decoder.layer_norm": "cpu"}
    plan.write_text(json.dumps({"device_map": written}))
    hw = parse_hardware({"device_map": "plan.json", "offload_folder": "off"}, "cfg", tmp_path)
    model, tok = load_model_dir(tiny_dir, placement=place(hw, "cfg", count=0))
    assert model.hf_device_map == written
    assert all(p.device.type == "meta" for n, p in model.named_parameters() if n.startswith("model.decoder.layers"))
    plain, _ = load_model_dir(tiny_dir)
    src = ["The cat sits on the mat.", "A new hospital opened in the city last year."]
    assert translate(model, tok, src, "en", "de", max_new_tokens=12) == translate(plain, tok, src, "en", "de",
                                                                                  max_new_tokens=12)


def test_teacher_offloaded_to_disk_translates_as_the_plain_cpu_load(tmp_path, capsys):
    """The acceptance check: the shipped teacher device-mapped over the CPU (12 MiB) and disk gives the same
    hypotheses, sentence by sentence, as the plain CPU load, and its run record says where it ran."""
    plain = _config(tmp_path, TEACHER, "plain")
    mapped = _config(tmp_path, TEACHER, "mapped", extra=f"hardware: {{device_map: auto, max_memory: {{cpu: 12MiB}}, "
                                                          f"offload_folder: {tmp_path / 'offload'}}}")
    assert main(["eval", str(plain), "--out", str(tmp_path / "x" / "y" / "a"), "--quiet"]) == 0  # parents made
    assert main(["eval", str(mapped), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    a, b = _hyps(tmp_path / "x" / "y" / "a"), _hyps(tmp_path / "b")
    assert len(a) == 16 and a == b
    run = json.loads((tmp_path / "b" / "report" / "summary.json").read_text())["run"]
    rec = run["hardware"]["base"]
    assert rec["devices"] == ["cpu", "disk"] and rec["dtype"] == "float32"
    assert rec["direct_step"].startswith("hooks or a replaced forward")
    plain_rec = json.loads((tmp_path / "x" / "y" / "a" / "report" / "summary.json").read_text())["run"]["hardware"]["base"]
    assert plain_rec["devices"] == ["cpu"] and plain_rec["direct_step"] is None
    assert "cpu, disk float32" in (tmp_path / "b" / "report" / "report.html").read_text()


def test_compressing_offloaded_weights_is_refused_before_any_write(tmp_path, capsys):
    out = tmp_path / "c"
    _refused(capsys, ["compress", str(TEACHER), "--recipe", "prune-30", "--out", str(out), "--device-map", "auto",
                      "--max-memory", "cpu=12MiB", "--offload-folder", str(tmp_path / "off"), "--quiet"], out,
             "weights are offloaded")


def test_bfloat16_on_cpu_runs_end_to_end_and_a_resume_in_float32_is_refused(tmp_path, tiny_dir, capsys):
    cfg = _config(tmp_path, tiny_dir, "bf", "{base: null, prune-30: prune-30}", "hardware: {dtype: bfloat16}")
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    assert {v: r["dtype"] for v, r in S["run"]["hardware"].items()} == {"base": "bfloat16", "prune-30": "bfloat16"}
    comp = json.loads((run / "variants" / "prune-30" / "compression.json").read_text())
    assert comp["hardware"]["dtype"] == "bfloat16" and abs(comp["steps"][0]["prune"]["overall"]["sparsity"] - 0.3) < 1e-3
    from safetensors import safe_open

    with safe_open(str(run / "variants" / "prune-30" / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
    hyps = _hyps(run)
    assert len(hyps) == 32 and sum(bool(h.strip()) for h in hyps.values()) >= 28
    before = dict(hyps)
    assert main(["sweep", str(cfg), "--out", str(run), "--dtype", "float32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "its series come from cpu bfloat16, the settings now say cpu float32" in err[0]
    assert _hyps(run) == before


def test_out_of_memory_halves_the_batch_and_keeps_every_sentence(tmp_path):
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.eval.store import Store
    from forgetbench.eval.translate import Job, run_variant

    class Tight:  # a translator whose device holds 3 rows at most
        name, calls = "torch", []

        def translate_rows(self, rows, num_beams, max_new_tokens):
            self.calls.append(len(rows))
            if len(rows) > 3:
                raise torch.OutOfMemoryError("CUDA out of memory (test)")
            return [f"h:{t[:10]}" for t, _, _ in rows]

    store = Store(tmp_path / "s.sqlite")
    job = Job(open_benchmark("flores101", "flores101", FLORES), "en", "de", 10)
    sizes = []
    assert run_variant(store, "v", Tight(), [job], batch_size=8, progress=False, halved=sizes.append) == 10
    assert sizes == [4, 2] and max(Tight.calls[2:]) == 2
    assert len(store.translations("v", "flores101", "en", "de")) == 10

    class Never(Tight):
        def translate_rows(self, rows, num_beams, max_new_tokens):
            raise torch.OutOfMemoryError("CUDA out of memory (test)")

    with pytest.raises(ForgetbenchError, match="out of device memory at batch size 1"):
        run_variant(store, "w", Never(), [job], batch_size=2, progress=False)
    store.close()


def test_batch_size_auto_starts_at_the_device_default(tmp_path, tiny_dir):
    from forgetbench.sweep.config import AUTO_BATCH, load_sweep

    cfg = _config(tmp_path, tiny_dir)
    raw = cfg.read_text().replace("batch_size: 4", "batch_size: auto")
    cfg.write_text(raw)
    assert load_sweep(cfg).generation.batch_size == AUTO_BATCH["cpu"] == 64


def test_a_dataset_saved_to_disk_is_a_benchmark_with_the_files_hypotheses(tmp_path, tiny_dir, capsys):
    datasets = pytest.importorskip("datasets", reason="the datasets package (pip install datasets)")
    from forgetbench.eval.benchmarks import open_benchmark

    fl = open_benchmark("fl", "flores101", FLORES)
    en, de = fl.pair("en", "de")
    datasets.DatasetDict({"devtest": datasets.Dataset.from_dict({"en": en[:8], "sentence_deu_Latn": de[:8]})}).save_to_disk(
        str(tmp_path / "ds"))
    files = _config(tmp_path, tiny_dir, "files")
    ds = _config(tmp_path, tiny_dir, "ds")
    ds.write_text(ds.read_text().replace(f"kind: flores101, path: {FLORES}", f"kind: dataset, path: {tmp_path / 'ds'}, "
                                                                             "split: devtest"))
    assert main(["eval", str(files), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["eval", str(ds), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    a, b = _hyps(tmp_path / "a"), _hyps(tmp_path / "b")
    assert len(a) == 16 and a == b
    nosplit = _config(tmp_path, tiny_dir, "nosplit")
    nosplit.write_text(ds.read_text().replace(", split: devtest", ""))
    _refused(capsys, ["eval", str(nosplit), "--out", str(tmp_path / "c")], tmp_path / "c",
             "holds splits ['devtest']; choose one with split")
    ru = _config(tmp_path, tiny_dir, "ru", pairs="[en-ru]")
    ru.write_text(ds.read_text().replace("pairs: [en-de, de-en]", "pairs: [en-ru]"))
    _refused(capsys, ["eval", str(ru), "--out", str(tmp_path / "c")], tmp_path / "c", "no column for Russian (ru)")


def test_the_sweep_config_documents_the_hardware_block():
    from forgetbench.sweep import config

    block = next(ln for ln in config.__doc__.splitlines() if ln.strip().startswith("hardware:"))
    spec = yaml.safe_load(block.split("#")[0])["hardware"]
    assert parse_hardware(spec, "doc").is_default


def test_gpu_placement_per_process_on_a_machine_of_gpus(monkeypatch, tmp_path):
    """H5–H8: ``cuda:N`` is GPU N of the process's share; ``device: cpu`` with a named map never spreads over
    GPUs; each process makes its GPU current; CTranslate2 runs on the process's GPU, not GPU 0."""
    import forgetbench.models.hardware as hw_mod
    from forgetbench.models import ct2
    from forgetbench.sweep.run import translator_for

    assert place(Hardware(device="cuda:1"), "cfg", rank=1, local_world=2, count=4).gpus == (3,)
    assert place(Hardware(device="cuda:1"), "cfg", count=4).gpus == (1,)  # alone: the machine's GPU 1
    with pytest.raises(ForgetbenchError, match="this process has 2 CUDA GPU"):
        place(Hardware(device="cuda:2"), "cfg", rank=0, local_world=2, count=4)
    cpu_map = place(Hardware(device="cpu", device_map="auto"), "cfg", count=2).load_kwargs()
    assert set(cpu_map["max_memory"]) == {"cpu"} and cpu_map["device_map"] == "auto"
    current = []
    monkeypatch.setattr(hw_mod.torch.cuda, "set_device", current.append)
    hw_mod.activate(place(Hardware(device="cuda"), "cfg", rank=2, local_world=4, count=4))
    hw_mod.activate(place(Hardware(), "cfg", count=4))  # the CPU: nothing
    assert current == [2]
    made = {}

    class Translator:
        def __init__(self, folder, **kw):
            made.update(kw)

    monkeypatch.setattr(ct2, "require", lambda: types.SimpleNamespace(Translator=Translator))
    tok = type("Tok", (), {"convert_ids_to_tokens": lambda self, ids: [str(i) for i in ids], "__len__": lambda self: 3})()
    cfg = types.SimpleNamespace(backend=types.SimpleNamespace(device="cuda", compute_type="int8"), threads=1)
    monkeypatch.setattr("forgetbench.sweep.variants.ct2_folder", lambda *a: tmp_path)
    translator_for(cfg, tmp_path, "base", "ctranslate2", None, tok, place(Hardware(device="cuda"), "cfg", rank=1,
                                                                            local_world=2, count=2))
    assert (made["device"], made["device_index"]) == ("cuda", 1)


def test_bitsandbytes_off_the_gpus_is_refused_before_any_work_and_its_arithmetic_recorded(tmp_path, tiny_dir,
                                                                                         monkeypatch):
    """B3: a placement that puts weights on the CPU or disk (a plan naming them, max_memory budgets for them, an
    offload folder) is refused for a bitsandbytes variant when the config is read, naming the variant; a named map
    that spills at load is one line there. B4: the record says what each variant computes in."""
    import importlib.metadata
    import importlib.util

    from forgetbench.compress import bnb
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.models import hardware, load
    from forgetbench.sweep.config import load_sweep as load_config
    from forgetbench.sweep.run import variant_arithmetic

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "bitsandbytes" else None)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.47.0")
    monkeypatch.setattr(hardware, "cuda_count", lambda: 2)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"device_map": {"model.shared": 0, "model.encoder": 0, "model.decoder.embed_tokens": 0,
                                               "model.decoder.embed_positions": 0, "model.decoder.layers": "cpu",
                                               "model.decoder.layer_norm": 0, "lm_head": 0}}))
    cases = {"device_map: auto, max_memory: {0: 1GB, 1: 1GB, cpu: 4GB}": "offloads to cpu",
             f"device_map: {plan}": "offloads to cpu",
             f"device_map: auto, max_memory: {{0: 1GB, 1: 1GB}}, offload_folder: {tmp_path / 'off'}": "offload_folder"}
    for i, (hw, why) in enumerate(cases.items()):
        cfg = _config(tmp_path, tiny_dir, f"bnb{i}", "{base: null, int8: llm-int8}",
                      extra=f"hardware: {{device: cuda, {hw}}}\n")
        with pytest.raises(ForgetbenchError, match=rf"variants.int8 \(llm-int8\): bitsandbytes keeps every quantised "
                                                   rf"weight on a GPU, and this placement \(.*{why}"):
            load_config(cfg)
    ok = _config(tmp_path, tiny_dir, "bnb-ok", "{base: null, int8: llm-int8}",
                 extra="hardware: {device: cuda, device_map: auto, max_memory: {0: 1GB, 1: 1GB}}\n")
    assert load_config(ok).variants["int8"].load_quantisation is not None

    def spill(*a, **k):
        raise ValueError("Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU RAM")

    import transformers

    monkeypatch.setattr(transformers.AutoModelForSeq2SeqLM, "from_pretrained", spill)
    with pytest.raises(ForgetbenchError, match="puts modules on the CPU or disk .* bitsandbytes keeps every quantised"):
        load.load(tiny_dir, with_signature=False)

    int8, nf4 = (load_recipe(n) for n in ("llm-int8", "nf4"))
    p = place(Hardware(device="cuda", dtype="bfloat16"), "cfg", count=1)
    assert variant_arithmetic(int8, p)["compute_dtype"] == "float16"
    assert variant_arithmetic(int8, p)["weights"] == "int8" and variant_arithmetic(int8, p)["unquantised_modules"] == "bfloat16"
    assert variant_arithmetic(nf4, p)["compute_dtype"] == nf4.load_quantisation.compute_dtype
    assert variant_arithmetic(None, None) == {"weights": "float32", "compute_dtype": "float32"}
    assert bnb.arithmetic(bnb.BnbConfig("nf4", compute_dtype="float16"), "float32")["compute_dtype"] == "float16"
