"""Distillation: sampler quotas, the KD loss by hand, the cached top-k + tail estimator (unbiased) against top-k
alone (biased), students copied from a teacher, the SMaLL-100 format through the tokenizer, exact resume after
kill -9, two processes vs one, bad input, and a student through the sweep like any model."""

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from forgetbench.cli import main
from forgetbench.distill.loss import LearnedAlpha, kd_cached, kd_online, kd_topk_only, teacher_targets
from forgetbench.distill.sampling import plan, quotas, realise
from forgetbench.distill.student import build_student, layer_indices

from .conftest import REPO, calib_rows, free_port, run_killed
from .test_scripts_smoke import ship_and_check

# ---------------------------------------------------------------- sampling

def test_uniform_quotas_repeat_small_corpora_and_subsample_large_ones():
    sizes = {"en-sw": 7, "en-de": 50_000, "en-hi": 300}
    d, r, rec = plan(sizes, "uniform", 1000, 5.0, seed=3)
    assert {k: v["quota"] for k, v in rec.items()} == dict.fromkeys(sizes, 1000)
    sw = r[d == 0]
    counts = np.bincount(sw, minlength=7)
    assert counts.sum() == 1000 and counts.max() - counts.min() <= 1  # 142 whole repeats + 6 drawn once more
    de = r[d == 1]
    assert len(np.unique(de)) == 1000 and de.max() < 50_000  # subsampled without replacement
    assert rec["en-sw"]["unique"] == 7 and rec["en-de"]["unique"] == 1000 and rec["en-hi"]["unique"] == 300
    # a direction's draw does not depend on the others' sizes
    d2, r2, _ = plan({"en-sw": 7, "en-de": 10, "en-hi": 300}, "uniform", 1000, 5.0, seed=3)
    assert np.array_equal(r2[d2 == 0], sw)


def test_temperature_quotas_follow_size_to_the_power_one_over_t():
    sizes = {"a": 100, "b": 10_000, "c": 1_000_000}
    for T in (1.0, 5.0, 1e9):
        q = quotas(sizes, "temperature", 500, T)
        assert sum(q.values()) == 1500
        w = np.array([100, 10_000, 1_000_000]) ** (1 / T)
        expect = w / w.sum() * 1500
        assert all(abs(q[k] - e) < 1 for k, e in zip("abc", expect, strict=True))
    assert quotas(sizes, "temperature", 500, 1.0) == {"a": 0, "b": 15, "c": 1485}  # proportional
    assert quotas(sizes, "temperature", 500, 5.0) == {"a": 153, "b": 383, "c": 964}  # 1500 · n^0.2 / Σ n^0.2
    assert quotas(sizes, "temperature", 500, 1e9) == {"a": 500, "b": 500, "c": 500}  # → uniform


def test_realise_is_whole_repeats_plus_a_subsample():
    r = realise(4, 10, np.random.default_rng(0))
    assert sorted(np.bincount(r).tolist()) == [2, 2, 3, 3]


# ---------------------------------------------------------------- losses

def test_kd_loss_equals_a_hand_computation():
    s, t, T = [1.0, 2.0, 0.0], [0.0, 1.0, 3.0], 2.0
    q = [math.exp(x / T) / sum(math.exp(y / T) for y in t) for x in t]
    logp = [x / T - math.log(sum(math.exp(y / T) for y in s)) for x in s]
    ce = -sum(qi * lp for qi, lp in zip(q, logp, strict=True))
    kl = sum(qi * (math.log(qi) - lp) for qi, lp in zip(q, logp, strict=True))
    got_ce, got_kl = kd_online(torch.tensor([s]), torch.tensor([t]), T)
    assert got_ce.item() == pytest.approx(ce, rel=1e-6) and got_kl.item() == pytest.approx(kl, rel=1e-5)
    assert ce == pytest.approx(1.37892, abs=1e-4)  # q = (.14025, .23122, .62853), log p = (−1.18026, −.68026, −1.68026)


def test_cached_top_k_plus_tail_is_unbiased_and_top_k_alone_is_not():
    g = torch.Generator().manual_seed(0)
    V, k, m, T = 40, 3, 4, 1.0
    t_logits = torch.randn(1, V, generator=g) * 1.5  # a flat-ish teacher: ~60 % of its mass outside the top 3
    s_logits = torch.randn(1, V, generator=g)
    online, _ = kd_online(s_logits, t_logits, T)
    draws = 20_000
    tt = teacher_targets(t_logits.expand(draws, V), T, k, m, torch.Generator().manual_seed(1))
    assert float(tt["tail_mass"][0]) > 0.4
    est, _ = kd_cached(s_logits.expand(draws, V), tt, T)
    se = float(est.std()) / math.sqrt(draws)
    assert abs(float(est.mean()) - online.item()) < 4 * se  # unbiased: the mean of the estimates is the online loss
    biased = kd_topk_only(s_logits, {n: v[:1] for n, v in tt.items()}, T)[0].item()  # deterministic: same top k
    assert abs(biased - online.item()) > 50 * se  # top-k alone misses it by far more than the noise
    # with all mass in the top k the estimate is exact and the tail weight is 0
    peaked = torch.full((1, V), -30.0)
    peaked[0, :3] = torch.tensor([3.0, 2.0, 1.0])
    t2 = teacher_targets(peaked, T, k, m, torch.Generator().manual_seed(2))
    assert float(kd_cached(s_logits, t2, T)[0]) == pytest.approx(float(kd_online(s_logits, peaked, T)[0]), rel=1e-4)


def test_learned_alpha_goes_to_one_over_the_kd_loss_where_a_bare_alpha_collapses():
    kd = torch.tensor(4.0)
    la = LearnedAlpha(1.0)
    opt = torch.optim.SGD(la.parameters(), lr=0.1)
    bare = torch.nn.Parameter(torch.tensor(1.0))
    opt_b = torch.optim.SGD([bare], lr=0.1)
    for _ in range(500):
        opt.zero_grad()
        la(kd).backward()
        opt.step()
        opt_b.zero_grad()
        (bare * kd).backward()
        opt_b.step()
    assert la.alpha == pytest.approx(0.25, rel=1e-3)
    assert bare.item() < -100  # the loss only falls by lowering α: it runs away below zero


# ---------------------------------------------------------------- students

def test_a_student_with_every_layer_copied_gives_the_teachers_logits(tiny):
    teacher, tok = tiny
    student = build_student(teacher, 2, 2, "first", "m2m").eval()
    ids = torch.tensor([[tok.get_lang_id("en"), 50, 60, 70, 2]])
    dec = torch.tensor([[2, tok.get_lang_id("de"), 80, 90]])
    with torch.no_grad():
        a = teacher(input_ids=ids, decoder_input_ids=dec).logits
        b = student(input_ids=ids, decoder_input_ids=dec).logits
    assert torch.equal(a, b)
    shallow = build_student(teacher, 2, 1, "first", "small100")
    assert torch.equal(shallow.model.decoder.layers[0].fc1.weight, teacher.model.decoder.layers[0].fc1.weight)
    assert shallow.config.decoder_layers == 1 and shallow.config.forgetbench_small100
    assert layer_indices(12, 3, "strided") == [0, 6, 11] and layer_indices(12, 3, "first") == [0, 1, 2]


def test_small100_inputs_round_trip_through_the_tokenizer(tiny_dir):
    from forgetbench.distill.data import encode_batch, encoder_of
    from forgetbench.models.tokenizers import load_tokenizer

    tok = load_tokenizer(tiny_dir, small100=True)
    src, tgt = "The doctor asked the nurse to help her.", "Der Arzt bat die Krankenschwester."
    enc = encoder_of(tok)
    lang_id = {c: tok.get_lang_id(c) for c in ("en", "de")}
    b = encode_batch([("en", "de", enc(src), enc(tgt))], lang_id, small100=True)
    tok.tgt_lang = "de"
    tok.src_lang = "en"
    ref = tok(src, text_target=tgt)
    assert b["input_ids"][0].tolist() == ref["input_ids"]  # __de__ tokens </s>: the target code on the encoder side
    assert b["input_ids"][0, 0].item() == lang_id["de"]
    assert b["labels"][0].tolist() == ref["labels"]  # tokens </s>, no language code
    assert tok.decode(b["input_ids"][0], skip_special_tokens=True) == src
    assert tok.decode(b["labels"][0], skip_special_tokens=True) == tgt
    m2m = encode_batch([("en", "de", enc(src), enc(tgt))], lang_id, small100=False)
    assert m2m["input_ids"][0, 0].item() == lang_id["en"] and m2m["labels"][0, 0].item() == lang_id["de"]
    assert int(b["content_start"]) == 0 and int(m2m["content_start"]) == 1


# ---------------------------------------------------------------- runs on a toy corpus

def toy_setup(w: Path, tiny_dir, source="cache", steps=8, extra_train="", languages=("de", "sw"), kd_extra="",
              bf16="false") -> Path:
    """A toy distillation config; float32 unless ``bf16`` says otherwise, so its numbers hold on any host."""
    rows = calib_rows()
    w.mkdir(parents=True, exist_ok=True)
    for lang, n in (("de", 40), ("sw", 5)):
        pairs = [(r[2], r[3]) if r[0] == "en" else (r[3], r[2]) for r in rows if lang in (r[0], r[1])]
        (w / f"{lang}.tsv").write_text("".join(f"{pairs[i % len(pairs)][0]} {i}\t{pairs[i % len(pairs)][1]} {i}\n"
                                               for i in range(n)))
    cfg = w / f"{source}.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        name: toy-{source}
        teacher: {{path: {tiny_dir}}}
        student: {{encoder_layers: 2, decoder_layers: 1}}
        data: {{corpora: {{de: de.tsv, sw: sw.tsv}}, languages: [{', '.join(languages)}], budget: 20, dev_per_language: 2,
                tiers: [10, 20, 30]}}
        kd: {{source: {source}, top_k: 4, tail_samples: 4{kd_extra}}}
        train: {{max_tokens: 512, warmup: 5, phase1_steps: 3, steps: {steps}, log_every: 2, signal_every: 4,
                 signal_sentences: 2, bf16: {bf16}{extra_train}}}
        """))
    return cfg


def _weights(run: Path) -> dict:
    return load_file(str(run / "model" / "model.safetensors"))


def test_a_toy_run_writes_quotas_signals_cache_and_a_loadable_student(tiny_dir, tmp_path):
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill
    from forgetbench.models.load import load
    from forgetbench.models.tokenizers import Small100Tokenizer

    cfg = load_distill_config(toy_setup(tmp_path, tiny_dir))
    out = distill(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    q = json.loads((tmp_path / "run" / "quotas.json").read_text())
    assert q["directions"]["en-sw"] == {"corpus": 5, "quota": 20, "unique": 5, "repeats": 4.0, "group": "H2VL"}
    assert q["directions"]["de-en"]["group"] == "H2H" and q["examples"] == 80
    man = json.loads((tmp_path / "run" / "teacher-cache" / "cache.json").read_text())
    assert man["sample_examples"] == 5 + 5 + 20 + 20 and man["top_k"] == 4 and man["positions"] > 0
    # the cache holds exactly the examples of the KD steps' batches (steps 4-8), not the whole sample
    from forgetbench.distill.data import DistillData
    from forgetbench.models.tokenizers import load_tokenizer

    data = DistillData(cfg, tmp_path / "run" / "data", load_tokenizer(tiny_dir).get_lang_id, False)
    used = {int(u) for step in range(3, 8) for u in data.uid[data.batches(512, cfg.train.seed, 0)[step]]}
    assert man["examples"] == len(used) < man["sample_examples"]
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in log] == [1, 2, 2, 2] and log[0]["kd"] is None and log[-1]["kd"] > 0
    sig = [json.loads(x) for x in (tmp_path / "run" / "signals.jsonl").read_text().splitlines()]
    probe = [s for s in sig if s["split"] == "probe"]
    assert [s["step"] for s in probe] == [0, 4, 8] and {"H2H", "en-de", "de-en"} <= set(probe[-1]["groups"])
    train = [s for s in sig if s["split"] == "train" and s["phase"] == 2]
    assert all("kl" in g for s in train for g in s["groups"].values())
    model, tok, _ = load(out, with_signature=False)
    assert isinstance(tok, Small100Tokenizer) and model.config.decoder_layers == 1
    rec = json.loads((out / "training.json").read_text())
    assert rec["steps"] == 8 and rec["quotas"]["en-sw"]["quota"] == 20 and rec["cache"]["top_k"] == 4
    cpu = [r["cpu_s"] for r in log]  # the work's CPU time, beside the wall clock's
    assert cpu == sorted(cpu) and rec["train_cpu_seconds"] >= cpu[-1] > 0 and rec["cpu_from_step"] == 0


def test_kill_9_and_resume_give_the_weights_of_an_uninterrupted_run(tiny_dir, tmp_path):
    cfg = toy_setup(tmp_path, tiny_dir, extra_train=", checkpoint_minutes: 0.0")
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    distill(load_distill_config(cfg), tmp_path / "full", progress=False, log=lambda *_: None)
    ship_and_check("ship_student.py", tmp_path / "full", tmp_path / "shipped",
                   ("signals.jsonl", "train_log.jsonl", "quotas.json"))
    killed = tmp_path / "killed"
    rc = run_killed(f"""
        import os, signal
        from forgetbench.distill import loop
        real = loop.save_checkpoint
        def killed(model, opt, state, ckpt):
            real(model, opt, state, ckpt)
            if state["step"] == 5:  # the step-5 checkpoint is in place; the run goes no further
                os.kill(os.getpid(), signal.SIGKILL)
        loop.save_checkpoint = killed
        from forgetbench.cli import main
        main(["distill", {str(cfg)!r}, "--out", {str(killed)!r}, "--quiet"])
    """, cwd=tmp_path)
    assert rc == -signal.SIGKILL and not (killed / "model").exists()
    assert json.loads((killed / "checkpoint" / "state.json").read_text())["step"] == 5
    logs = []
    distill(load_distill_config(cfg), killed, progress=False, log=logs.append)
    assert any("resumed from" in m for m in logs)
    a, b = _weights(tmp_path / "full"), _weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_two_processes_follow_the_loss_curve_of_one(tiny_dir, tmp_path):
    cfg = toy_setup(tmp_path, tiny_dir)
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    curves, tokens = {}, {}
    for n in (1, 2):
        out = tmp_path / "runs" / f"p{n}"  # missing parents are created (mkdir -p)
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(n),
               "--main_process_port", str(free_port()),
               "-m", "forgetbench.cli", "distill", str(cfg), "--out", str(out), "--quiet"] if n > 1 else \
              [sys.executable, "-m", "forgetbench.cli", "distill", str(cfg), "--out", str(out), "--quiet"]
        r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
        assert {x["processes"] for x in log} == {n}
        curves[n] = np.array([x["loss"] for x in log])
        tokens[n] = ([x["tokens"] for x in log], json.loads((out / "model" / "training.json").read_text())["tokens"])
    assert len(curves[1]) == len(curves[2]) == 4
    assert np.allclose(curves[1], curves[2], rtol=2e-3), (curves[1], curves[2])
    assert tokens[1] == tokens[2] and tokens[1][1] == tokens[1][0][-1] > 0  # every process's tokens, in log and record


# ---------------------------------------------------------------- bad input

def _other_model(tiny_dir, w: Path, vocab: int = 1100) -> Path:
    from forgetbench.models.tiny import build_tiny_m2m100

    d = w / f"other{vocab}"
    build_tiny_m2m100(d, [c for r in calib_rows() for c in r[2:]], spm_vocab=vocab, d_model=64, layers=2, heads=4,
                      ffn=128, seed=1)
    return d


def _edit(cfg: Path, old: str, new: str) -> Path:
    cfg.write_text(cfg.read_text().replace(old, new))
    return cfg


BAD = [
    ("unknown-language", lambda w, t: _edit(toy_setup(w, t), "languages: [de, sw]", "languages: [de, sw, qq]").parent and
     _edit(w / "cache.yaml", "corpora: {de: de.tsv, sw: sw.tsv}", "corpora: {de: de.tsv, sw: sw.tsv, qq: sw.tsv}"),
     "unknown language code(s) ['qq']"),
    ("unknown-language-shared", lambda w, t: _edit(toy_setup(w, t), "corpora: {de: de.tsv, sw: sw.tsv}",
                                                   f"shared: {w}, corpora: {{de: de.tsv, sw: sw.tsv}}").parent and
     _edit(w / "cache.yaml", "languages: [de, sw]", "languages: [de, sw, xx]"), "unknown language(s) ['xx']"),
    ("vocab-mismatch", lambda w, t: _edit(toy_setup(w, t), "student: {", f"student: {{init: {_other_model(t, w.parent)}, "),
     "its vocabulary differs from the teacher's"),
    ("k-larger-than-vocab", lambda w, t: _edit(toy_setup(w, t), "top_k: 4", "top_k: 5000"),
     "must stay below the vocabulary size"),
    ("unknown-sampling", lambda w, t: _edit(toy_setup(w, t), "budget: 20", "budget: 20, sampling: natural"),
     "data.sampling must be one of uniform, temperature"),
    ("phase1-after-steps", lambda w, t: _edit(toy_setup(w, t), "phase1_steps: 3", "phase1_steps: 30"),
     "train.phase1_steps 30 must be between 0 and train.steps"),
    ("unknown-dtype", lambda w, t: _edit(toy_setup(w, t), "name: toy-cache", "name: toy-cache\nhardware: {dtype: half}"),
     "hardware.dtype: unknown dtype 'half'"),
    ("two-teacher-maps", lambda w, t: _edit(toy_setup(w, t), f"teacher: {{path: {t}}}",
                                            f"teacher: {{path: {t}, device_map: auto}}\nhardware: {{device_map: auto}}"),
     "teacher.device_map and hardware.device_map both place the teacher"),
]
if not torch.cuda.is_available():
    BAD.append(("cuda-without-cuda", lambda w, t: _edit(toy_setup(w, t), "name: toy-cache",
                                                        "name: toy-cache\nhardware: {device: cuda}"),
                "torch sees no CUDA GPU"))


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_distill_input_exit_2_one_line_nothing_written(case, tiny_dir, tmp_path, capsys, monkeypatch):
    from .test_bad_input import _snapshot

    name, make, fragment = case
    w = tmp_path / "w"
    cfg = make(w, tiny_dir)
    monkeypatch.chdir(w)
    before = _snapshot(tmp_path)
    capsys.readouterr()
    rc = main(["distill", str(cfg), "--out", str(w / "run")])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and fragment in lines[0], (name, lines)
    assert _snapshot(tmp_path) == before and not (w / "run").exists()


def test_a_cache_made_by_another_teacher_or_data_is_refused_before_any_write(tiny_dir, tmp_path, capsys):
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    from .test_bad_input import _snapshot

    distill(load_distill_config(toy_setup(tmp_path, tiny_dir)), tmp_path / "a", progress=False, log=lambda *_: None)
    cache = tmp_path / "a" / "teacher-cache"
    other = _other_model(tiny_dir, tmp_path, vocab=1000)  # same SPM size, other weights
    cases = [(lambda c: _edit(c, f"path: {tiny_dir}", f"path: {other}"), "made by another teacher"),
             (lambda c: _edit(c, "budget: 20", "budget: 21"), "made by other data or sampling settings"),
             (lambda c: _edit(c, "top_k: 4", "top_k: 5"), "made by another top_k")]
    for i, (edit, fragment) in enumerate(cases):
        cfg = edit(toy_setup(tmp_path / f"c{i}", tiny_dir, kd_extra=f", cache: {cache}"))
        before = _snapshot(tmp_path)
        capsys.readouterr()
        rc = main(["distill", str(cfg), "--out", str(tmp_path / f"c{i}" / "run")])
        lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert rc == 2 and len(lines) == 1 and fragment in lines[0], lines
        assert _snapshot(tmp_path) == before
    # the same teacher and data reuse it: no second cache is built
    cfg = toy_setup(tmp_path / "ok", tiny_dir, kd_extra=f", cache: {cache}")
    distill(load_distill_config(cfg), tmp_path / "ok" / "run", progress=False, log=lambda *_: None)
    assert not (tmp_path / "ok" / "run" / "teacher-cache").exists()


# ---------------------------------------------------------------- a student through the sweep

def test_students_go_through_the_sweep_with_contrasts_speed_and_compression(tiny_dir, tmp_path):
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill
    from forgetbench.sweep import load_sweep, run_sweep

    kd = distill(load_distill_config(toy_setup(tmp_path, tiny_dir)), tmp_path / "kd", progress=False, log=lambda *_: None)
    nokd = distill(load_distill_config(toy_setup(tmp_path, tiny_dir, source="none")), tmp_path / "nokd", progress=False,
                   log=lambda *_: None)
    (tmp_path / "counts.json").write_text(json.dumps({"corpus": {"train": {"de": 34, "sw": 5}}}))
    (tmp_path / "sweep.yaml").write_text(textwrap.dedent(f"""\
        name: students
        model: {tiny_dir}
        variants: {{teacher: null, kd: {{model: {kd}}}, nokd: {{model: {nokd}}}, kd-p30: {{model: {kd}, recipe: prune-30}}}}
        contrasts: [[kd, nokd]]
        speed: {{sentences: 2}}
        benchmarks: [{{name: flores101, kind: flores101, path: {REPO / 'data' / 'flores101'}}}]
        languages: [de, sw]
        sentences: 4
        generation: {{num_beams: 1, max_new_tokens: 8, batch_size: 8}}
        analysis: {{bleu_filter: 0, resamples: 100}}
        tiers: {{training: {{counts: counts.json, thresholds: [10, 20, 30]}}}}
        bias:
          mt_gender: {{path: {REPO / 'data' / 'mt_gender'}, languages: [de], sentences: 4,
                      aligner_context: {REPO / 'data' / 'flores101'}}}
          mucow: {{path: {REPO / 'data' / 'mucow'}, pairs: [en-de], sentences: 3}}
          mt_geneval: {{path: {REPO / 'data' / 'mt_geneval'}, languages: [de], sentences: 2}}
        """))
    cfg = load_sweep(tmp_path / "sweep.yaml")
    summary = run_sweep(cfg, tmp_path / "sw", progress=False)
    S = summary.to_dict()  # as summary.json holds it
    assert S["base"] == "teacher" and set(S["speed"]) == {"teacher", "kd", "nokd", "kd-p30"}
    assert all(v["sentences"] == 2 and v["sentences_per_s"] > 0 for v in S["speed"].values())
    # speed-ups from rounds interleaved with the base (eval.speed rule 2), each with its interval; the students
    # are smaller than their teacher and say so
    assert S["speed"]["teacher"]["rounds"] == 1 and "vs_base" not in S["speed"]["teacher"]
    assert S["speed"]["teacher"]["timings"] == 1 + 3 * 5  # one alone (its record) and those beside each variant
    for v in ("kd", "nokd", "kd-p30"):
        vs = S["speed"][v]["vs_base"]
        assert vs["rounds"] == 5 and len(vs["seconds"]) == len(vs["base_seconds"]) == 5
        assert vs["speedup_ci95"][0] <= vs["speedup"] <= vs["speedup_ci95"][1] and S["speed"][v]["batched"]["vs_base"]
    sizes = {r["variant"]: r["size"] for r in S["variant_table"]}
    assert sizes["kd"]["nominal_ratio"] == pytest.approx(sizes["kd"]["parameters"] / sizes["kd"]["base_parameters"])
    assert sizes["kd"]["nominal_ratio"] < 1 and sizes["teacher"]["nominal_ratio"] == 1.0
    g = S["pair_groups"]["training"]
    assert set(g) == {"H2H", "H2VL", "VL2H", "low", "all"} and g["all"]["pairs"] == 4
    c = g["low"]["contrasts"]["kd vs nokd"]["chrF"]
    assert c["difference"] == pytest.approx(g["low"]["scores"]["kd"]["chrF"] - g["low"]["scores"]["nokd"]["chrF"])
    assert c["ci"][0] <= c["difference"] <= c["ci"][1]
    comp = json.loads((tmp_path / "sw" / "variants" / "kd-p30" / "compression.json").read_text())
    assert Path(comp["model_dir"]) == Path(kd).resolve()  # the student, pruned by the same recipe
    from forgetbench.report.build import write_report

    write_report(summary, tmp_path / "sw" / "report")
    md = (tmp_path / "sw" / "report" / "report.md").read_text()
    assert "## Deployment: size and speed of each variant's deployable form" in md and "kd vs nokd: chrF diff." in md
    assert all(v["form"] == "ctranslate2 int8" for v in S["speed"].values())
    assert set(S["distillation_signals"]) == {"kd", "nokd", "kd-p30"}  # the students' probes, read at sweep time
    assert "## Distillation signal per pair group" in md
    # who pays for distillation beyond chrF: the students' SMaLL-100 inputs (target code on the encoder side) read by
    # both gender aligners, word sense and MT-GenEval beside the teacher's, each with its change from the teacher
    b = S["bias"]
    assert set(b["gender"]) == set(b["word_sense"]["en-de"]) == set(b["mt_geneval"]["average"]) == set(S["speed"])
    assert all(b["gender"][v]["languages"]["de"]["n"] == 4 and b["gender"][v]["change_ci"] for v in ("kd", "nokd"))
    assert b["aligner_comparison"]["items"] == 4 * 4 and "fast_align" in b["aligner_comparison"]["kd"]
    assert b["mt_geneval"]["languages"]["de"]["nokd"]["pairs"] == 2 and "gap_change_ci" in b["mt_geneval"]["average"]["kd"]
    assert "## Gender accuracy on human references (MT-GenEval)" in md and "## Gender bias (MT-Gender)" in md
    c = b["contrasts"]["kd vs nokd"]  # KD − twin on every benchmark, paired, with intervals
    acc = c["gender"]["accuracy"]  # (ψ, ψ* are undefined where a random model reads no gender right)
    assert acc["difference"] == pytest.approx(b["gender"]["kd"]["average"]["accuracy"]
                                              - b["gender"]["nokd"]["average"]["accuracy"])
    assert acc["ci"][0] <= acc["difference"] <= acc["ci"][1] and set(c["gender_languages"]) == {"de"}
    assert set(c["word_sense"]) == {"en-de"} and set(c["mt_geneval"]) >= {"feminine", "masculine", "gap"}
    assert c["mt_geneval"]["gap"]["difference"] == pytest.approx(b["mt_geneval"]["average"]["kd"]["gap"]
                                                                  - b["mt_geneval"]["average"]["nokd"]["gap"])
    assert "psi_star_change_ci" in b["gender"]["kd"]["languages"]["de"]
    assert "## Bias benchmarks, series against series" in md


def test_online_kd_matches_the_cached_estimate_and_learned_alpha_moves(tiny_dir, tmp_path):
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    logs = {}
    for name, source, extra in (("cache", "cache", ""), ("online", "online", ""), ("learned", "cache", ", alpha_mode: learned")):
        cfg = load_distill_config(toy_setup(tmp_path / name, tiny_dir, source=source, kd_extra=extra))
        out = distill(cfg, tmp_path / name / "run", progress=False, log=lambda *_: None)
        logs[name] = [json.loads(x) for x in (tmp_path / name / "run" / "train_log.jsonl").read_text().splitlines()]
        if name == "learned":
            assert json.loads((out / "training.json").read_text())["alpha"] != 1.0
    assert not (tmp_path / "online" / "run" / "teacher-cache").exists()
    # phase 1 is identical, so at the first KD step both see the same student: the estimate is close to the exact value
    assert logs["cache"][1]["kd"] == pytest.approx(logs["online"][1]["kd"], rel=0.02)
    assert logs["cache"][1]["kl"] == pytest.approx(logs["online"][1]["kl"], abs=0.02)
    assert logs["learned"][-1]["alpha"] != 1.0 and logs["learned"][1]["ce"] == logs["cache"][1]["ce"]


def test_a_bfloat16_hardware_block_trains_with_bf16_autocast_and_its_own_fingerprint(tiny_dir, tmp_path):
    """``hardware: {dtype: bfloat16}`` on the CPU: the teacher in bf16, the student's forwards in bf16 autocast
    (``train.bf16``), and a fingerprint of its own (a bf16 run never resumes an fp32 checkpoint)."""
    from forgetbench.distill.config import fingerprint, load_distill_config
    from forgetbench.distill.run import distill

    cfg = toy_setup(tmp_path, tiny_dir, steps=4)
    plain = load_distill_config(cfg)
    on_cpu = load_distill_config(_edit(cfg, "name: toy-cache", "name: toy-cache\nhardware: {device: cpu}"))
    bf = load_distill_config(_edit(cfg, "{device: cpu}", "{device: cpu, dtype: bfloat16}"))
    assert bf.hardware.dtype == "bfloat16" and fingerprint(bf) != fingerprint(plain) == fingerprint(on_cpu)
    out = distill(bf, tmp_path / "run", progress=False, log=lambda *_: None)
    assert bf.train.bf16
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert log and all(math.isfinite(r["loss"]) for r in log)
    assert (out / "model.safetensors").is_file()


def test_bf16_auto_follows_the_cpus_amx_decides_before_the_fingerprint_and_is_recorded(tiny_dir, tmp_path,
                                                                                     monkeypatch):
    """``train.bf16: auto`` (the default) is train-mt's rule: bfloat16 autocast on a CPU with AMX, float32 without
    (mocked flags); the decision replaces ``auto`` before the fingerprint (a run resumes only in the arithmetic it
    ran) and goes to ``training.json``; ``hardware.dtype: bfloat16`` wins; a bad value is one line."""
    import forgetbench.env as env
    from forgetbench.distill.config import fingerprint, load_distill_config
    from forgetbench.distill.run import cpu_arithmetic, distill
    from forgetbench.errors import ForgetbenchError

    def flags(*f):
        monkeypatch.setattr(env, "cpu", lambda: {"model": "test", "cores": 2, "flags": list(f)})

    path = _edit(toy_setup(tmp_path, tiny_dir, steps=4, bf16="auto"), ", bf16: auto", "")
    assert load_distill_config(path).train.bf16 == "auto"  # the default
    flags("avx2", "avx512f", "amx_bf16")
    assert cpu_arithmetic(load_distill_config(path), cuda=False).record() == {
        "device": "cpu", "autocast": "bfloat16", "why": "auto: bfloat16 autocast on a CPU with AMX"}
    assert cpu_arithmetic(load_distill_config(path), cuda=True) is None  # accelerate's mixed precision there
    flags("avx2")
    cfg = load_distill_config(path)
    out = distill(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    rec = json.loads((out / "training.json").read_text())
    assert cfg.train.bf16 is False and rec["arithmetic"]["autocast"] == "none (float32)"
    assert "without AMX" in rec["arithmetic"]["why"]
    fp32 = tmp_path / "fp32.yaml"
    fp32.write_text(path.read_text().replace("signal_sentences: 2", "signal_sentences: 2, bf16: false"))
    assert rec["fingerprint"] == fingerprint(load_distill_config(fp32))
    bf = load_distill_config(_edit(path, "name: toy-cache", "name: toy-cache\nhardware: {device: cpu, dtype: bfloat16}"))
    assert cpu_arithmetic(bf, cuda=False).reason == "hardware.dtype: bfloat16" and cpu_arithmetic(bf, cuda=False).bf16
    with pytest.raises(ForgetbenchError, match="train.bf16: 'sometimes'; choose auto, true or false"):
        load_distill_config(_edit(path, "signal_sentences: 2", "signal_sentences: 2, bf16: sometimes"))


def test_a_datasets_folder_is_a_corpus_giving_the_ids_of_its_tsv(tiny_dir, tmp_path):
    """``data.corpora.de: DIR`` (a ``save_to_disk`` folder with en and de columns) gives the same filtered,
    deduplicated, split and encoded ids as the TSV it was made from."""
    datasets = pytest.importorskip("datasets", reason="the datasets package (pip install datasets)")
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.data import prepare_data
    from forgetbench.errors import ForgetbenchError
    from forgetbench.models.load import load

    cfg = toy_setup(tmp_path, tiny_dir)
    rows = [ln.split("\t") for ln in (tmp_path / "de.tsv").read_text().splitlines()]
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"en": [r[0] for r in rows], "de": [r[1] for r in rows]})}
                         ).save_to_disk(str(tmp_path / "de-ds"))
    ds_cfg = tmp_path / "ds.yaml"
    ds_cfg.write_text(cfg.read_text().replace("de: de.tsv", "de: de-ds"))
    _, tok, _ = load(tiny_dir, with_signature=False)
    a = prepare_data(load_distill_config(cfg), tok, tmp_path / "a", log=lambda *_: None)
    b = prepare_data(load_distill_config(ds_cfg), tok, tmp_path / "b", log=lambda *_: None)
    assert a["train_pairs"] == b["train_pairs"] and a["train_pairs"]["de"] > 0 and a["ids_sha256"] == b["ids_sha256"]
    ds_cfg.write_text(cfg.read_text().replace("de: de.tsv", "de: de-ds").replace("sw: sw.tsv", "sw: de-ds"))
    with pytest.raises(ForgetbenchError, match=r"no column for Swahili \(sw\)"):
        load_distill_config(ds_cfg)


def test_a_kd_run_that_never_reaches_kd_says_so_in_one_line(tiny_dir, tmp_path, capsys):
    from forgetbench.cli import main

    cfg = toy_setup(tmp_path / "w", tiny_dir, steps=8)  # phase1_steps 3
    assert main(["distill", str(cfg), "--out", str(tmp_path / "short"), "--steps", "3", "--quiet"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("forgetbench: warning: KD starts after train.phase1_steps = 3")
    assert "never reaches KD" in err[0]
    assert main(["distill", str(cfg), "--out", str(tmp_path / "long"), "--steps", "5", "--quiet"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_the_teacher_cache_grows_with_the_steps_and_its_entries_do_not_depend_on_the_build(tiny_dir, tmp_path, capsys):
    """distill.cache rules 1-2: a cache built for some examples and then extended holds the entries a cache built
    at once for all gives them (per-example draws); a given kd.cache lacking examples of a longer run is refused in
    one line before training; --steps 20 of a KD run computes targets for those 20 steps' examples only."""
    from forgetbench.distill.cache import TeacherCache, build_cache, cache_keys
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.data import DistillData
    from forgetbench.distill.run import distill
    from forgetbench.models.load import load

    cfg = load_distill_config(toy_setup(tmp_path, tiny_dir))
    distill(cfg, tmp_path / "short", progress=False, log=lambda *_: None)
    teacher, tok, _ = load(tiny_dir, with_signature=False)
    data = DistillData(cfg, tmp_path / "short" / "data", tok.get_lang_id, False)
    keys = cache_keys("t", "d", 1.0, 4, 4, teacher.config.vocab_size)
    some = data.kd_uids(512, cfg.train.seed, 3, 5)
    build_cache(tmp_path / "grown", keys, data, teacher, 1, 1024, progress=False, log=lambda *_: None, uids=some)
    man = build_cache(tmp_path / "grown", keys, data, teacher, 1, 1024, progress=False, log=lambda *_: None)
    once = build_cache(tmp_path / "once", keys, data, teacher, 1, 1024, progress=False, log=lambda *_: None)
    assert man["examples"] == once["examples"] == len(data.unique_keys) and len(man["shards"]) == 2
    a, b = TeacherCache(tmp_path / "grown", man), TeacherCache(tmp_path / "once", once)
    everyone = np.arange(len(data.unique_keys))
    x, y = a.lookup(everyone, 12), b.lookup(everyone, 12)
    assert all(torch.equal(x[k], y[k]) for k in ("top_ids", "tail_ids")), "draws depend on the build"
    assert all(torch.allclose(x[k], y[k], atol=1e-3) for k in ("top_q", "tail_logq", "tail_mass"))
    # a longer run with the short run's cache given: refused in one line, nothing written
    longer = toy_setup(tmp_path / "long", tiny_dir, steps=40, kd_extra=f", cache: {tmp_path / 'short' / 'teacher-cache'}")
    capsys.readouterr()
    rc = main(["distill", str(longer), "--out", str(tmp_path / "long" / "run"), "--quiet"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1 and "lacks" in err[0] and "leave kd.cache empty" in err[0], err
    assert not (tmp_path / "long" / "run" / "checkpoint").exists()


def test_the_cache_read_where_it_lies_gives_what_the_whole_cache_in_memory_gives(tiny_dir, tmp_path):
    """``TeacherCache`` holds only its index and reads each example's rows from its shard: for every example, in any
    order and at any cut C, the tensors (and so the top-k + tail KD loss) equal those of every shard read whole into
    memory and sliced by the offsets — the reading before it; its resident memory does not grow with the shards."""
    from safetensors.numpy import load_file as load_np

    from forgetbench.distill.cache import TeacherCache, build_cache, cache_keys
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.data import DistillData
    from forgetbench.distill.loss import kd_cached
    from forgetbench.distill.run import distill
    from forgetbench.models.load import load

    cfg = load_distill_config(toy_setup(tmp_path, tiny_dir))
    distill(cfg, tmp_path / "short", progress=False, log=lambda *_: None)
    teacher, tok, _ = load(tiny_dir, with_signature=False)
    data = DistillData(cfg, tmp_path / "short" / "data", tok.get_lang_id, False)
    keys = cache_keys("t", "d", 1.0, 4, 4, teacher.config.vocab_size)
    half = np.arange(len(data.unique_keys))[::2]
    build_cache(tmp_path / "c", keys, data, teacher, 1, 1024, progress=False, log=lambda *_: None, uids=half)
    man = build_cache(tmp_path / "c", keys, data, teacher, 1, 1024, progress=False, log=lambda *_: None)
    assert len(man["shards"]) == 2  # two shards, each example in one of them

    whole = {}  # the reference: every shard in memory, rows by (shard, offsets)
    for entry in man["shards"]:
        arr = load_np(str(tmp_path / "c" / entry["file"]))
        for r, u in enumerate(arr["uid"]):
            a, b = arr["off"][r], arr["off"][r + 1]
            whole[int(u)] = {k: arr[k][a:b] for k in TeacherCache.NAMES}
    cache = TeacherCache(tmp_path / "c", man)
    assert not hasattr(cache, "arrays")
    rng = np.random.default_rng(0)
    for C in (3, 12):
        uids = rng.permutation(len(data.unique_keys))[:9]
        got = cache.lookup(uids, C)
        for k in TeacherCache.NAMES:
            for r, u in enumerate(uids):
                ref = whole[int(u)][k][:C].astype(np.float64)
                assert np.array_equal(got[k][r, : len(ref)].double().numpy(), ref), (k, u)
                assert not got[k][r, len(ref):].any()
        student = torch.randn(len(uids), C, teacher.config.vocab_size)
        ref = {k: torch.stack([torch.from_numpy(np.pad(whole[int(u)][k][:C].astype(np.float64),
                                                       [(0, C - min(C, len(whole[int(u)][k])))]
                                                       + [(0, 0)] * (whole[int(u)][k].ndim - 1)))
                               for u in uids]) for k in TeacherCache.NAMES}
        ref = {k: v.long() if k.endswith("ids") else v.float() for k, v in ref.items()}
        for a, b in zip(kd_cached(student, got), kd_cached(student, ref), strict=True):
            assert torch.allclose(a, b)


def test_distillation_stops_early_on_dev_chrf_and_a_rerun_trains_no_further(tiny_dir, tmp_path):
    """``train.patience`` on a student: the mean dev chrF over directions every ``dev_every`` steps after phase 1;
    with a min_delta no change can pass, the first measurement stays the best, the run stops ``patience``
    measurements later, exports that step's weights, and the same command with more steps trains no further."""
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    extra = ", dev_every: 2, dev_sentences: 2, patience: 2, min_delta: 1000"
    cfg = load_distill_config(toy_setup(tmp_path, tiny_dir, steps=30, extra_train=extra))
    out = distill(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    rec = json.loads((out / "training.json").read_text())
    es = rec["early_stop"]
    assert rec["steps"] == 8 and rec["stopped_by"].startswith("early stop") and es["best_step"] == 4
    assert [s for s, _ in es["scores"]] == [4, 6, 8] and es["start"] == 3 and es["exported"] == "best"
    best, exported = load_file(str(tmp_path / "run" / "best" / "model.safetensors")), _weights(tmp_path / "run")
    assert all(torch.equal(best[k], exported[k]) for k in exported if k in best)
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    dev = [r for r in log if "dev_score" in r]
    # Swahili's 5 pairs leave it no dev pairs (a tenth of them, rounded down): German's directions only
    assert [r["step"] for r in dev] == [4, 6, 8] and set(dev[0]["dev_chrf"]) == {"en-de", "de-en"}
    assert dev[0]["dev_score"] == pytest.approx(sum(dev[0]["dev_chrf"].values()) / 2, abs=1e-3)
    again = load_distill_config(toy_setup(tmp_path, tiny_dir, steps=60, extra_train=extra))
    distill(again, tmp_path / "run", progress=False, log=lambda *_: None)
    assert json.loads((out / "training.json").read_text())["steps"] == 8


def test_a_direction_with_kd_alpha_zero_learns_from_the_references_alone(tiny_dir, tmp_path, capsys):
    """``kd.alpha_directions``: each direction's KD term weighted by α_d / α. With α_d = 0 for every direction the
    KD student trains the no-KD twin's weights exactly (same data, batches, dropout); with it for en-sw alone the
    step losses differ from the plain KD run's only on batches that hold en-sw rows. One α for all keeps the
    fingerprint of configs written before the key; a direction the run lacks is refused in one line."""
    from forgetbench.distill.config import fingerprint, load_distill_config
    from forgetbench.distill.run import distill

    every = ", alpha_directions: {en-de: 0.0, de-en: 0.0, en-sw: 0.0, sw-en: 0.0}"
    runs = {}
    for name, source, extra in (("twin", "none", ""), ("zero", "cache", every), ("plain", "cache", ""),
                                ("sw", "cache", ", alpha_directions: {en-sw: 0.0}")):
        cfg = load_distill_config(toy_setup(tmp_path / name, tiny_dir, source=source, kd_extra=extra))
        distill(cfg, tmp_path / name / "run", progress=False, log=lambda *_: None)
        runs[name] = cfg
    twin, zero = _weights(tmp_path / "twin" / "run"), _weights(tmp_path / "zero" / "run")
    assert all(torch.equal(twin[k], zero[k]) for k in twin)
    plain, sw = _weights(tmp_path / "plain" / "run"), _weights(tmp_path / "sw" / "run")
    assert any(not torch.equal(plain[k], sw[k]) for k in plain) and any(not torch.equal(zero[k], sw[k]) for k in sw)
    sw_fp = fingerprint(runs["sw"])
    one = load_distill_config(toy_setup(tmp_path / "sw", tiny_dir))  # the same folder, without the key
    empty = load_distill_config(toy_setup(tmp_path / "sw", tiny_dir, kd_extra=", alpha_directions: {}"))
    assert fingerprint(one) == fingerprint(empty) != sw_fp
    bad = toy_setup(tmp_path / "bad", tiny_dir, kd_extra=", alpha_directions: {en-fr: 0.0}")
    capsys.readouterr()
    assert main(["distill", str(bad), "--out", str(tmp_path / "bad" / "run"), "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "kd.alpha_directions: ['en-fr'] not among the run's directions" in err[-1]


def test_the_twin_trains_the_steps_the_early_stopped_kd_student_exported(tiny_dir, tmp_path, capsys):
    """``distill --steps-of KD_RUN``: the no-KD twin runs as many steps as the KD run's exported weights (its best
    step under early stopping), so both students have seen the same batches; a twin that would stop early itself,
    or a folder without a finished run, is refused in one line."""
    extra = ", dev_every: 2, dev_sentences: 2, patience: 2, min_delta: 1000"
    kd = toy_setup(tmp_path / "kd", tiny_dir, steps=30, extra_train=extra)
    assert main(["distill", str(kd), "--out", str(tmp_path / "kd" / "run"), "--quiet"]) == 0
    best = json.loads((tmp_path / "kd" / "run" / "model" / "training.json").read_text())["early_stop"]["best_step"]
    twin = toy_setup(tmp_path / "twin", tiny_dir, source="none", steps=30)
    assert main(["distill", str(twin), "--out", str(tmp_path / "twin" / "run"), "--steps-of",
                 str(tmp_path / "kd" / "run"), "--quiet"]) == 0
    assert json.loads((tmp_path / "twin" / "run" / "model" / "training.json").read_text())["steps"] == best == 4
    capsys.readouterr()
    early = toy_setup(tmp_path / "early", tiny_dir, source="none", steps=30, extra_train=extra)
    assert main(["distill", str(early), "--out", str(tmp_path / "early" / "run"), "--steps-of",
                 str(tmp_path / "kd" / "run"), "--quiet"]) == 2
    assert main(["distill", str(twin), "--out", str(tmp_path / "t2"), "--steps-of", str(tmp_path / "none"), "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("forgetbench")]
    assert len(err) == 2 and "set patience 0" in err[0] and "no model/training.json" in err[1]


def test_the_twin_refuses_a_kd_run_that_has_not_finished(tiny_dir, tmp_path, capsys, monkeypatch):
    """A KD run stopped by the wall deadline (or a stop signal) exports weights and its best step so far, but that
    step may still change when it resumes: ``--steps-of`` it is refused in one line, and accepted once it finishes."""
    import time

    extra = ", dev_every: 2, dev_sentences: 2, patience: 2, min_delta: 1000"
    kd = toy_setup(tmp_path / "kd", tiny_dir, steps=30, extra_train=extra)
    monkeypatch.setenv("FORGETBENCH_STOP_AT", str(int(time.time()) - 1))
    main(["distill", str(kd), "--out", str(tmp_path / "kd" / "run"), "--quiet"])
    rec = json.loads((tmp_path / "kd" / "run" / "model" / "training.json").read_text())
    assert rec["stopped_by"].startswith("the wall deadline") and rec["steps"] < 30
    monkeypatch.delenv("FORGETBENCH_STOP_AT")
    twin = toy_setup(tmp_path / "twin", tiny_dir, source="none", steps=30)
    capsys.readouterr()
    assert main(["distill", str(twin), "--out", str(tmp_path / "twin" / "run"), "--steps-of",
                 str(tmp_path / "kd" / "run"), "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "before finishing" in err[0] and "resume it" in err[0]
    assert not (tmp_path / "twin" / "run" / "model").exists()
    assert main(["distill", str(kd), "--out", str(tmp_path / "kd" / "run"), "--quiet"]) == 0  # resumed to its end
    assert main(["distill", str(twin), "--out", str(tmp_path / "twin" / "run"), "--steps-of",
                 str(tmp_path / "kd" / "run"), "--quiet"]) == 0


def test_a_reused_cache_may_be_named_from_the_home_folder(tiny_dir, tmp_path, monkeypatch):
    from forgetbench.distill.config import load_distill_config

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = load_distill_config(toy_setup(tmp_path / "c", tiny_dir, kd_extra=", cache: ~/runs/kd/teacher-cache"))
    assert cfg.kd.cache == str(tmp_path / "home" / "runs" / "kd" / "teacher-cache")


class _FakeAcc:
    """Process ``rank`` of two whose broadcast hands every process the main process's tensor."""

    num_processes, device = 2, "cpu"

    def __init__(self, rank: int, main_sent: list):
        self.is_main_process, self.sent = rank == 0, main_sent


def test_a_checkpoint_or_deadline_is_the_main_process_s_call_on_every_process(monkeypatch):
    """Two processes whose clocks straddle the checkpoint threshold must both checkpoint or both go on (one at the
    checkpoint's barrier and one in the next all-reduce would hang): each takes the main process's decision."""
    import accelerate.utils

    from forgetbench.distill import loop

    sent = []
    def broadcast(t, from_process=0):
        if not sent:
            sent.append(t.clone())  # the main process broadcasts first
        return sent[0].clone()
    monkeypatch.setattr(accelerate.utils, "broadcast", broadcast)
    assert loop._main_flags(_FakeAcc(0, sent), False, True) == (False, True)
    assert loop._main_flags(_FakeAcc(1, sent), True, False) == (False, True)  # its own clock said due: not taken
    sent.clear()
    assert loop._main_flags(_FakeAcc(0, sent), True, False) == (True, False)
    assert loop._main_flags(_FakeAcc(1, sent), False, False) == (True, False)


def test_the_corpus_configs_are_the_long_recipe_on_the_whole_corpus_and_differ_from_each_other_as_named():
    """configs/distill-*-corpus*.yaml: the long KD recipe with temperature sampling (T 5, a pass as large as the
    corpus read both ways) and a 37,800-step cap; the twin differs in kd.source and patience, the remedy in en-sw's α,
    the cache it reads and patience, the cooldown branch in its cooldown, steps, cache and patience."""
    import dataclasses
    from pathlib import Path

    from forgetbench.distill.config import load_distill_config

    configs = Path(__file__).resolve().parents[1] / "configs"
    long, kd, twin, remedy, cool = (dataclasses.asdict(load_distill_config(configs / f)) for f in
                                    ("distill-kd-long.yaml", "distill-kd-corpus.yaml", "distill-nokd-corpus.yaml",
                                     "distill-kd-corpus-ensw.yaml", "distill-kd-corpus-cooldown.yaml"))
    assert (kd["data"]["sampling"], kd["data"]["temperature"], kd["data"]["budget"], kd["train"]["steps"]) == \
        ("temperature", 5.0, 20966, 37800)
    assert twin["kd"]["source"] == "none" and twin["train"]["patience"] == remedy["train"]["patience"] == 0
    assert remedy["kd"]["alpha_directions"] == {"en-sw": 0.0}
    assert remedy["kd"]["cache"] == cool["kd"]["cache"] == \
        str(Path.home() / ".cache/forgetbench/student-kd-corpus/teacher-cache")
    assert (cool["train"]["cooldown"], cool["train"]["steps"], cool["train"]["patience"]) == (2400, 24000, 0)
    for d in (long, kd, twin, remedy, cool):
        d.pop("name"), d.pop("source"), d["kd"].pop("alpha_directions"), d["kd"].pop("cache")
        d["kd"].pop("source"), d["train"].pop("patience"), d["train"].pop("steps"), d["train"].pop("cooldown")
    assert kd == twin == remedy == cool
    for k in ("sampling", "temperature", "budget"):
        long["data"].pop(k), kd["data"].pop(k)
    assert long == kd


def test_the_shipped_en_sw_remedy_is_the_long_kd_run_but_for_that_direction_s_alpha():
    """configs/distill-kd-long-ensw.yaml against configs/distill-kd-long.yaml: the same teacher, student, data and
    training but its name, α 0 for en-sw, the KD run's cache read and a fixed number of steps (--steps-of)."""
    import dataclasses
    from pathlib import Path

    from forgetbench.distill.config import load_distill_config

    configs = Path(__file__).resolve().parents[1] / "configs"
    kd, remedy = (dataclasses.asdict(load_distill_config(configs / f)) for f in
                  ("distill-kd-long.yaml", "distill-kd-long-ensw.yaml"))
    assert remedy["kd"]["alpha_directions"] == {"en-sw": 0.0} and remedy["train"]["patience"] == 0
    assert remedy["kd"]["cache"] == str(Path.home() / ".cache/forgetbench/student-kd-long/teacher-cache")
    for d in (kd, remedy):
        d.pop("name"), d.pop("source"), d["kd"].pop("alpha_directions"), d["kd"].pop("cache"), d["train"].pop("patience")
    assert kd == remedy


def test_the_fingerprint_holds_the_teacher_and_corpora_by_content_not_place(tiny_dir, tmp_path):
    """A distill config moved beside copies of its teacher and corpora (another checkout, a lent GPU's machine) has
    the same fingerprint and cache data key, so its run folder resumes there; other teacher weights or another
    corpus change both; the path-holding fingerprint of before differs between the two places."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from forgetbench.distill.config import fingerprint, load_distill_config
    from forgetbench.distill.run import data_key

    here = toy_setup(tmp_path / "here", tiny_dir)
    shutil.copytree(tiny_dir, tmp_path / "teacher")
    there = toy_setup(tmp_path / "there", tmp_path / "teacher")
    a, b = load_distill_config(here), load_distill_config(there)
    assert fingerprint(a) == fingerprint(b) and data_key(a) == data_key(b)
    assert fingerprint(a, legacy=True) != fingerprint(b, legacy=True)
    w = load_file(str(tmp_path / "teacher" / "model.safetensors"))
    k = next(iter(w))
    save_file({**w, k: w[k] + 1e-3 * torch.ones_like(w[k])}, str(tmp_path / "teacher" / "model.safetensors"))
    assert fingerprint(load_distill_config(there)) != fingerprint(a)
    (tmp_path / "there" / "sw.tsv").write_text("a\tb\n" * 5)
    assert data_key(load_distill_config(there)) != data_key(a)


def _branch_source(tiny_dir, tmp_path, quiet):
    """A toy KD run to step 8 in ``tmp_path/a/run`` with a copy of its step-5 checkpoint in ``tmp_path/at5``: its
    config (5 steps) and teacher cache."""
    import shutil

    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    source = load_distill_config(toy_setup(tmp_path / "a", tiny_dir))
    source.train.steps = 5
    distill(source, tmp_path / "a" / "run", **quiet)
    shutil.copytree(tmp_path / "a" / "run" / "checkpoint", tmp_path / "at5")
    distill(load_distill_config(toy_setup(tmp_path / "a", tiny_dir)), tmp_path / "a" / "run", **quiet)  # on to 8
    return source, tmp_path / "a" / "run" / "teacher-cache"


def test_a_branch_continues_its_source_run_and_differs_only_where_its_alpha_does(tiny_dir, tmp_path):
    """``distill --branch-from CHECKPOINT``: a run whose config is the source's with ``kd.alpha_directions`` added
    starts from the source's step-5 checkpoint and trains the same batches on. With α of en→sw set to the global α
    it ends on the source run's weights bit for bit (the branch adds nothing of its own); with α 0 there it ends
    elsewhere; its record names the branch. A checkpoint of other settings, or a config without
    alpha_directions, is refused in one line."""

    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill
    from forgetbench.errors import ForgetbenchError

    quiet = {"progress": False, "log": lambda *_: None}
    source, cache = _branch_source(tiny_dir, tmp_path, quiet)
    for alpha, same in (("1.0", True), ("0.0", False)):
        cfg = load_distill_config(toy_setup(tmp_path / f"b{alpha}", tiny_dir,
                                            kd_extra=f", alpha_directions: {{en-sw: {alpha}}}, cache: {cache}"))
        out = distill(cfg, tmp_path / f"b{alpha}" / "run", branch_from=tmp_path / "at5", **quiet)
        a, b = _weights(tmp_path / "a" / "run"), _weights(out.parent)
        assert all(torch.equal(a[k], b[k]) for k in a) == same, alpha
        rec = json.loads((out / "training.json").read_text())
        assert rec["branched_from"]["step"] == 5 and rec["steps"] == 8
    other = load_distill_config(toy_setup(tmp_path / "c", tiny_dir, extra_train=", lr: 0.01",
                                          kd_extra=f", alpha_directions: {{en-sw: 0.0}}, cache: {cache}"))
    with pytest.raises(ForgetbenchError, match="a checkpoint of other settings"):
        distill(other, tmp_path / "c" / "run", branch_from=tmp_path / "at5", **quiet)
    with pytest.raises(ForgetbenchError, match="sets neither kd.alpha_directions nor train.cooldown"):
        distill(load_distill_config(toy_setup(tmp_path / "d", tiny_dir)), tmp_path / "d" / "run",
                branch_from=tmp_path / "at5", **quiet)


def test_the_cooled_schedule_is_inverse_sqrt_then_a_straight_line_to_one_cooldownth():
    from forgetbench.train.loop import cooled, inverse_sqrt

    assert [cooled(s, 1.0, 4, 12, 0) for s in range(1, 13)] == [inverse_sqrt(s, 1.0, 4) for s in range(1, 13)]
    r = inverse_sqrt(8, 1.0, 4)  # the rate at the cooldown's start, step 8 = 12 - 4: √(4/8)
    assert cooled(8, 1.0, 4, 12, 4) == pytest.approx(0.5 ** 0.5)
    assert [cooled(s, 1.0, 4, 12, 4) for s in (9, 10, 11, 12)] == pytest.approx([r, 0.75 * r, 0.5 * r, 0.25 * r])


def test_a_cooldown_branch_continues_its_source_with_the_rate_falling_to_the_last_step(tiny_dir, tmp_path):
    """``train.cooldown`` on a branch (METHOD §3.5): from the source's step-5 checkpoint, steps 6-8 at the rate of
    step 5 times 3/3, 2/3, 1/3, ending elsewhere than the source run; a cooldown starting before the branch's step
    is refused, and so is one with early stopping, in one line. Without the key the fingerprint is the one of
    configs written before it."""

    from forgetbench.distill.config import fingerprint, load_distill_config
    from forgetbench.distill.run import distill
    from forgetbench.errors import ForgetbenchError
    from forgetbench.train.loop import inverse_sqrt

    quiet = {"progress": False, "log": lambda *_: None}
    source, cache = _branch_source(tiny_dir, tmp_path, quiet)
    cfg = load_distill_config(toy_setup(tmp_path / "b", tiny_dir, extra_train=", cooldown: 3, log_every: 1",
                                        kd_extra=f", cache: {cache}"))
    out = distill(cfg, tmp_path / "b" / "run", branch_from=tmp_path / "at5", **quiet)
    logged = {r["step"]: r["lr"] for r in map(json.loads, (out.parent / "train_log.jsonl").read_text().splitlines())}
    r5 = inverse_sqrt(5, cfg.train.lr, cfg.train.warmup)
    assert [logged[s] for s in (6, 7, 8)] == pytest.approx([r5, r5 * 2 / 3, r5 / 3])
    a, b = _weights(tmp_path / "a" / "run"), _weights(out.parent)
    assert not all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((out / "training.json").read_text())["branched_from"]["step"] == 5
    early = load_distill_config(toy_setup(tmp_path / "c", tiny_dir, extra_train=", cooldown: 4",
                                          kd_extra=f", cache: {cache}"))
    with pytest.raises(ForgetbenchError, match="starts after step 4, before the checkpoint's step 5"):
        distill(early, tmp_path / "c" / "run", branch_from=tmp_path / "at5", **quiet)
    with pytest.raises(ForgetbenchError, match="train.cooldown 3 with train.patience 2"):
        load_distill_config(toy_setup(tmp_path / "d", tiny_dir, extra_train=", cooldown: 3, patience: 2, dev_every: 2"))
    plain = load_distill_config(toy_setup(tmp_path / "e", tiny_dir))
    assert fingerprint(plain) == fingerprint(source) and fingerprint(plain) != fingerprint(cfg)


def test_a_teacher_cache_keyed_where_its_sample_lay_is_still_read_and_a_foreign_key_refused(tiny_dir, tmp_path):
    """Caches written before held the sample folder's path in their data key: a run's own cache with that key (the
    same settings) is read on resume and extended, and another run given it reads it; a given cache of another
    data key is refused in one line."""
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import data_key, distill
    from forgetbench.errors import ForgetbenchError

    cfg = load_distill_config(toy_setup(tmp_path, tiny_dir, steps=6))
    distill(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    man_f = tmp_path / "run" / "teacher-cache" / "cache.json"
    man = json.loads(man_f.read_text())
    assert man["data_key"] == data_key(cfg) != data_key(cfg, legacy=True)
    for name in ("cache.json", "building.json"):
        f = tmp_path / "run" / "teacher-cache" / name
        f.write_text(json.dumps(json.loads(f.read_text()) | {"data_key": data_key(cfg, legacy=True)}))
    said: list[str] = []
    longer = load_distill_config(toy_setup(tmp_path, tiny_dir, steps=8))
    distill(longer, tmp_path / "run", progress=False, log=said.append)
    assert json.loads(man_f.read_text())["data_key"] == data_key(cfg, legacy=True)  # kept, extended in place
    building = man_f.with_name("building.json")
    building.write_text(json.dumps(json.loads(building.read_text()) | {"top_k": 3}))  # a cache of other settings:
    with pytest.raises(ForgetbenchError, match="teacher cache for other keys is being built here"):  # not mixed in
        distill(load_distill_config(toy_setup(tmp_path, tiny_dir, steps=10)), tmp_path / "run", progress=False,
                log=lambda *_: None)
    building.unlink()
    with pytest.raises(ForgetbenchError, match="holds a teacher cache for other keys"):
        distill(load_distill_config(toy_setup(tmp_path, tiny_dir, steps=10, kd_extra=", top_k: 3")),
                tmp_path / "run", progress=False, log=lambda *_: None)
    reader = toy_setup(tmp_path / "reader", tiny_dir, steps=8, kd_extra=f", cache: {man_f.parent}")
    distill(load_distill_config(reader), tmp_path / "reader" / "run", progress=False, log=lambda *_: None)
    man_f.write_text(json.dumps(json.loads(man_f.read_text()) | {"data_key": "0" * 16}))
    with pytest.raises(ForgetbenchError, match="made by other data or sampling settings"):
        distill(load_distill_config(reader), tmp_path / "reader" / "again", progress=False, log=lambda *_: None)


def test_the_thesis_protocol_beam_5_and_the_teacher_score_filter(tiny_dir, tmp_path, capsys):
    """A student evaluated with beam 5 gives what Hugging Face ``generate(num_beams=5)`` gives on its SMaLL-100
    inputs (the target code first on the encoder side, no forced BOS); the teacher-score filter keeps exactly the
    directions whose base spBLEU reaches it (the report recomputed with the threshold between two of them)."""
    import torch

    from forgetbench.cli import main
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill
    from forgetbench.eval.store import Store
    from forgetbench.models.load import load

    kd = distill(load_distill_config(toy_setup(tmp_path, tiny_dir)), tmp_path / "kd", progress=False, log=lambda *_: None)
    cfg = tmp_path / "beam5.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        name: beam5
        model: {tiny_dir}
        variants: {{teacher: null, kd: {{model: {kd}}}}}
        benchmarks: [{{name: flores101, kind: flores101, path: {REPO / 'data' / 'flores101'}}}]
        pairs: [en-de, en-sw, de-en, sw-en]
        sentences: 3
        generation: {{num_beams: 5, max_new_tokens: 8, batch_size: 8}}
        analysis: {{bleu_filter: 0, resamples: 50}}
        """))
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    model, tok, _ = load(str(kd))
    st = Store(run / "store.sqlite")
    iso = {"en": "eng", "sw": "swh"}
    for s, t in (("en", "de"), ("sw", "en")):
        rows = sorted(st.translations("kd", "flores101", s, t), key=lambda r: r["idx"])
        srcs = (REPO / "data" / "flores101" / f"{iso[s]}.devtest").read_text(encoding="utf-8").splitlines()[:3]
        tok.src_lang = tok.tgt_lang = t  # SMaLL-100: the source starts with the target's code
        enc = tok(srcs, return_tensors="pt", padding=True)
        assert enc["input_ids"][0, 0].item() == tok.get_lang_id(t)
        with torch.no_grad():
            out = model.generate(**enc, num_beams=5, do_sample=False, max_new_tokens=8)
        assert [r["hyp"] for r in rows] == [x.strip() for x in tok.batch_decode(out, skip_special_tokens=True)]
    st.close()
    S = json.loads((run / "report" / "summary.json").read_text())
    base = {(p["src"], p["tgt"]): p["scores"]["teacher"]["spBLEU"] for p in S["pairs"]}
    values = sorted(set(base.values()))
    assert len(values) >= 2 and all(p["kept"] for p in S["pairs"])
    threshold = (values[0] + values[1]) / 2
    filtered = tmp_path / "filtered.yaml"
    filtered.write_text(cfg.read_text().replace("bleu_filter: 0", f"bleu_filter: {threshold}"))
    assert main(["report", str(run), "--config", str(filtered)]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    assert {(p["src"], p["tgt"]) for p in S["pairs"] if p["kept"]} == {k for k, v in base.items() if v >= threshold}
    assert S["thresholds"]["bleu_filter"] == threshold


def test_refreshed_tail_draws_change_between_uses_and_survive_a_kill(tiny_dir, tmp_path):
    """kd.tail_draws R: R independent tail samples stored per position, an example's n-th use (its copies in the
    plan, then the epochs) reading draw n mod R — so a repeated example trains toward a new tail sample, and a
    killed and resumed run reads the same draws as an uninterrupted one (the same weights)."""
    from forgetbench.distill.cache import TeacherCache, check_manifest
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.data import DistillData
    from forgetbench.distill.run import distill
    from forgetbench.models.load import load

    cfg = toy_setup(tmp_path, tiny_dir, steps=44, kd_extra=", tail_draws: 3", extra_train=", checkpoint_minutes: 0.0")
    c = load_distill_config(cfg)
    full = distill(c, tmp_path / "full", progress=False, log=lambda *_: None).parent
    _, tok, _ = load(tiny_dir, with_signature=False)
    data = DistillData(c, full / "data", tok.get_lang_id, False)
    sw = np.flatnonzero(data.copies[data.uid] > 1)  # Swahili's 5 pairs fill a budget of 20: each used 4 times
    assert len(sw) and set(data.copy_rank[sw]) == {0, 1, 2, 3}
    i = sw[0]
    assert data.occurrence([i], 1)[0] == data.copies[data.uid[i]] + data.copy_rank[i] != data.occurrence([i], 0)[0]
    man = json.loads((full / "teacher-cache" / "cache.json").read_text())
    assert man["tail_draws"] == 3 and check_manifest(full / "teacher-cache", {k: man[k] for k in man})
    cache = TeacherCache(full / "teacher-cache", man)
    u = cache.holds(np.arange(len(data.unique_keys)))
    uid = np.flatnonzero(u)[:4]
    whole = cache.lookup(uid, 6)
    assert whole["tail_ids"].shape[-1] == 3 * 4  # R · m stored
    draws = [cache.lookup(uid, 6, np.full(len(uid), r), 4) for r in range(3)]
    for r in range(3):
        assert torch.equal(draws[r]["tail_ids"], whole["tail_ids"][..., 4 * r: 4 * (r + 1)])
        assert torch.equal(draws[r]["top_ids"], whole["top_ids"])
    assert not torch.equal(draws[0]["tail_ids"], draws[1]["tail_ids"])  # independent samples
    killed = tmp_path / "killed"
    rc = run_killed(f"""
        import os, signal
        from forgetbench.distill import loop
        real = loop.save_checkpoint
        def killed(model, opt, state, ckpt):
            real(model, opt, state, ckpt)
            if state["step"] == 41:  # in the second epoch (38 batches an epoch)
                os.kill(os.getpid(), signal.SIGKILL)
        loop.save_checkpoint = killed
        from forgetbench.cli import main
        main(["distill", {str(cfg)!r}, "--out", {str(killed)!r}, "--quiet"])
    """, cwd=tmp_path)
    assert rc == -signal.SIGKILL and json.loads((killed / "checkpoint" / "state.json").read_text())["epoch"] >= 1
    distill(load_distill_config(cfg), killed, progress=False, log=lambda *_: None)
    a, b = _weights(full), _weights(killed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_attention_dropout_is_a_training_setting_with_its_own_fingerprint(tiny_dir, tmp_path):
    """train.attention_dropout (the thesis: 0.1) reaches every attention module of the student and shapes the
    weights; at its default 0 the fingerprint is the one of configs written before the key (running runs resume)."""
    from forgetbench.distill.config import fingerprint, load_distill_config
    from forgetbench.distill.run import distill
    from forgetbench.errors import ForgetbenchError

    plain = toy_setup(tmp_path / "plain", tiny_dir, steps=6)
    att = toy_setup(tmp_path / "att", tiny_dir, steps=6, extra_train=", attention_dropout: 0.1")
    zero = toy_setup(tmp_path / "zero", tiny_dir, steps=6, extra_train=", attention_dropout: 0.0")
    cp, ca, cz = (load_distill_config(c) for c in (plain, att, zero))
    assert fingerprint(cp) == fingerprint(cz) != fingerprint(ca)
    a = distill(cp, tmp_path / "run-plain", progress=False, log=lambda *_: None).parent
    b = distill(ca, tmp_path / "run-att", progress=False, log=lambda *_: None).parent
    wa, wb = _weights(a), _weights(b)
    assert any(not torch.equal(wa[k], wb[k]) for k in wa)
    conf = json.loads((b / "model" / "config.json").read_text())
    assert conf["attention_dropout"] == 0.1 and conf["dropout"] == 0.1
    bad = toy_setup(tmp_path / "bad", tiny_dir, extra_train=", attention_dropout: 1.5")
    with pytest.raises(ForgetbenchError, match=r"train.attention_dropout must be in \[0, 1\), got 1.5"):
        load_distill_config(bad)
