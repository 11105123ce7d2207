"""Every benchmark and script run as a user runs it, on tiny inputs (seconds): exit 0 and the numbers or files it
promises. Their full-size runs are what docs/BENCHMARKS.md and the model cards record."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .conftest import REPO, python


def _run(*args, cwd=REPO, timeout: int = 300) -> str:
    """A script run as a user runs it; ``timeout`` is a hang's safety net, wide enough for a loaded host."""
    r = python(*args, cwd=cwd, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def ship_and_check(script: str, run, out, records: tuple[str, ...]) -> None:
    """Run ``scripts/<script>`` on a run folder: the shipped weights are the run model's rounded to fp16, the
    tokenizer and record files are copied byte for byte."""
    from safetensors.torch import load_file

    _run(REPO / "scripts" / script, run, out)
    a, b = load_file(str(run / "model" / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert a.keys() == b.keys() and all(b[k].dtype == torch.float16 and torch.equal(b[k], a[k].half()) for k in a)
    for f in ("vocab.json", "sentencepiece.bpe.model", "tokenizer_config.json", "training.json", *records):
        src = run / "model" / f if (run / "model" / f).is_file() else run / f
        assert (out / f).read_bytes() == src.read_bytes(), f


def _json(out: str) -> dict:
    return json.loads(out[out.index("{"): out.rindex("}") + 1])


def test_threshold_benchmark_prunes_exactly(tmp_path):
    r = _json(_run("-m", "benchmarks.threshold_525m", "--rows", "300", "--cols", "100", "--sparsity", "0.3"))
    assert (r["numel"], r["k"], r["zeros"], r["exact"]) == (30_000, 9_000, 9_000, True)


def test_batch1_speed_benchmark_times_every_model_on_the_same_sentences(tiny_dir, tmp_path):
    import shutil

    twin = shutil.copytree(tiny_dir, tmp_path / "twin")
    r = _json(_run("-m", "benchmarks.batch1_speed", tiny_dir, twin, "--sentences", "4", "--max-new-tokens", "4"))
    assert r["sentences"] == 4 and r["directions"] == ["en-de", "en-sw", "de-en", "sw-en"]
    a, b = (r["models"][str(m)] for m in (tiny_dir, twin))
    assert a["speedup_vs_first"] == 1.0 and a["tokens_per_sentence"] == b["tokens_per_sentence"]  # the same weights
    lo, hi = b["speedup_ci95"]
    assert b["sentences_per_s"] > 0 and lo <= b["speedup_vs_first"] <= hi


def test_batch1_speed_restricted_vocabulary_rows_count_the_frequent_tokens_and_compare_alike(tiny_dir, tmp_path):
    """``--vmap-frequent N``: the N most frequent target tokens of the corpus (ties by id; English from every file's
    source side), a restricted row per model compared with the first model restricted alike, its bound counting N
    output rows instead of the vocabulary."""
    from benchmarks.batch1_speed import frequent
    from forgetbench.models.load import load

    tok = load(tiny_dir, dtype="fp32", with_signature=False)[1]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "de.tsv").write_text("a b\tx y y\nb\ty z\n")
    (corpus / "fr.tsv").write_text("a\tq\n")
    ids = lambda texts: [i for x in tok(texts, add_special_tokens=False)["input_ids"] for i in x]  # noqa: E731
    counts = __import__("collections").Counter(ids(["x y y", "y z"]))
    want = sorted(counts, key=lambda i: (-counts[i], i))[:2]
    assert frequent(tok, corpus, "de", 2) == tok.convert_ids_to_tokens(want)
    en = __import__("collections").Counter(ids(["a b", "b", "a"]))
    assert frequent(tok, corpus, "en", 99) == tok.convert_ids_to_tokens(sorted(en, key=lambda i: (-en[i], i)))
    twin = __import__("shutil").copytree(tiny_dir, tmp_path / "twin")
    r = _json(_run("-m", "benchmarks.batch1_speed", tiny_dir, twin, "--sentences", "4", "--max-new-tokens", "4",
                   "--backend", "ctranslate2", "--compute-type", "fp32", "--vmap-frequent", "50"))
    rows = r["models"]
    a, b = rows[f"{tiny_dir} [top 50]"], rows[f"{twin} [top 50]"]
    assert a["speedup_vs_first"] == 1.0 and a["tokens_per_sentence"] == b["tokens_per_sentence"]
    cfg = json.loads((tiny_dir / "config.json").read_text())
    assert rows[str(tiny_dir)]["weights_per_generated_token"] - a["weights_per_generated_token"] == \
        (cfg["vocab_size"] - 50) * cfg["d_model"]
    assert all(0 <= v["chrf"] <= 100 and v["two_steps_ms_per_sentence"] > 0 for v in rows.values())


def test_a_generated_token_reads_the_decoder_but_its_cached_cross_attention_maps_and_the_output_projection():
    """The shipped teacher (d 256, FFN 1,024, 3 decoder layers, 8,111 pieces) and a 1-layer decoder, counted by hand:
    per layer 4 self-attention and 2 cross-attention maps of 256², 2 FFN maps of 256 × 1,024; the output projection."""
    import copy

    from benchmarks.batch1_speed import weights_per_generated_token
    from forgetbench.models.load import load

    teacher = load(REPO / "artifacts" / "teacher", dtype="fp32", with_signature=False)[0]
    layer = 6 * 256 * 256 + 2 * 256 * 1024
    assert weights_per_generated_token(teacher) == 3 * layer + 8111 * 256 == 4_828_928
    one = copy.deepcopy(teacher)
    del one.model.decoder.layers[1:]
    assert weights_per_generated_token(one) == layer + 8111 * 256 == 2_993_920


def test_backends_benchmark_times_every_path_and_checks_the_hypotheses(tiny_dir):
    r = _json(_run("-m", "benchmarks.backends", tiny_dir, "--pairs", "en-de", "--sentences", "4", "--repeats", "2",
                   "--max-new-tokens", "4", "--batch-size", "4"))
    paths = {"naive", "hf_batched", "sweep_torch", "ct2_fp32", "ct2_int8", "sweep_ct2_int8", "ptq_torch",
             "sweep_torch_unit"}
    assert set(r["seconds"]) == paths and all(v > 0 for v in r["sentences_per_s"].values())
    ident = r["identical_to_sweep_torch"]
    assert ident["naive"] == ident["hf_batched"] == ident["sweep_torch_unit"] == 4  # of 4 sentences


def test_distill_step_benchmark_times_three_step_kinds(tmp_path):
    from forgetbench.cli import main

    teacher = tmp_path / "t4"  # the student copies 4 encoder layers: a tiny teacher that has them
    assert main(["make-tiny", str(REPO / "data" / "calibration" / "ntrex128-calib.tsv"), "--out", str(teacher),
                 "--vocab", "1200", "--layers", "4"]) == 0
    r = _json(_run("-m", "benchmarks.distill_step", "--teacher", teacher, "--batches", "1", "--rounds", "1",
                   "--sentences", "2"))
    assert set(r["median_step_s"]) == {"ce", "cache", "online"} and 0 < sum(r["examples_per_batch"]) <= 28
    assert r["cache"]["top_k"] == 8 and r["cache"]["positions"] > 0


def test_stream_prune_benchmark_on_a_tiny_config(tiny_dir, tmp_path):
    r = _json(_run("-m", "benchmarks.stream_prune_1b2", "--config", tiny_dir, "--shard-mib", "1",
                   "--workdir", tmp_path / "w"))
    assert r["shards"] >= 1 and r["bytes_moved"] > r["checkpoint_bytes"] and 0 < r["bandwidth_ratio"]
    assert not (tmp_path / "w").exists()  # removed without --keep


def test_parser_vs_supar_needs_its_optional_extra_and_says_how():
    """SuPar is the benchmark's own optional dependency (``pip install -e ".[bench]"``), not the project's: its
    command line is checked; the comparison itself runs where the extra is installed."""
    out = _run("-m", "benchmarks.parser_vs_supar", "--help")
    assert "--ours" in out and "--treebank" in out


def test_make_calibration_alternates_directions_from_ntrex_lines(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import make_calibration as mc
    finally:
        sys.path.pop(0)
    n = mc.START + 2 * mc.PER_DIRECTION
    (tmp_path / "newstest2019-src.eng.txt").write_text("".join(f"en {i}\n" for i in range(n)))
    for code in mc.LANGS:
        (tmp_path / f"newstest2019-ref.{code}.txt").write_text("".join(f"{code} {i}\n" if i != mc.START + 3 else "\n"
                                                                      for i in range(n)))
    _run(REPO / "scripts" / "make_calibration.py", tmp_path, tmp_path / "c.tsv")
    rows = [ln.split("\t") for ln in (tmp_path / "c.tsv").read_text().splitlines()]
    assert len(rows) == len(mc.LANGS) * (2 * mc.PER_DIRECTION - 1)  # an empty line is skipped
    assert rows[0] == ["en", "de", f"en {mc.START}", f"deu {mc.START}"]
    assert rows[1] == ["de", "en", f"deu {mc.START + 1}", f"en {mc.START + 1}"]


@pytest.mark.shared_data
def test_make_calibration_rebuilds_the_shipped_calibration_set(tmp_path, shared_data):
    """The shipped calibration set is rebuilt from its source, NTREX-128 (a clone ships only the result)."""
    _run(REPO / "scripts" / "make_calibration.py", shared_data / "ntrex128", tmp_path / "c.tsv")
    assert (tmp_path / "c.tsv").read_bytes() == (REPO / "data" / "calibration" / "ntrex128-calib.tsv").read_bytes()


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "scripts").glob("*.sh")))
def test_shell_scripts_parse(script):
    r = subprocess.run(["bash", "-n", str(REPO / "scripts" / script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_model_and_student_cards_state_the_runs_numbers(tmp_path):
    """One small distill-eval run (the teacher as base) feeds both card scripts, each writing into a copy of its
    shipped model folder: the teacher card's per-language rows and the student card's batched speeds and group
    table are the run's numbers."""
    import shutil

    from forgetbench.cli import main
    from forgetbench.eval.store import Store

    art = REPO / "artifacts"
    teacher, student = shutil.copytree(art / "teacher", tmp_path / "teacher"), shutil.copytree(art / "student-kd",
                                                                                             tmp_path / "student-kd")
    cfg = tmp_path / "distill-eval.yaml"
    cfg.write_text(f"""name: distill-eval
model: {teacher}
variants: {{base: null, student-kd: {{model: {student}}}, student-nokd: {{model: {art / "student-nokd"}}}}}
contrasts: [[student-kd, student-nokd], [student-kd, base]]
benchmarks: [{{name: flores101, kind: flores101, path: {REPO / "data" / "flores101"}}}]
languages: [de, sw]
pairs: english-centric
sentences: 3
generation: {{num_beams: 1, max_new_tokens: 16, batch_size: 8}}
analysis: {{bleu_filter: 0}}
tiers: {{training: {{counts: {teacher / "training.json"}, thresholds: [1000, 10000, 30000]}}}}
""")
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    beam_cfg = tmp_path / "beam.yaml"  # the same sentences under beam search, base only
    beam_cfg.write_text("\n".join(line.replace("num_beams: 1", "num_beams: 2") for line in cfg.read_text().splitlines()
                                  if not line.startswith(("variants:", "contrasts:"))) + "\nvariants: {base: null}\n")
    beam = tmp_path / "beam"
    assert main(["sweep", str(beam_cfg), "--out", str(beam), "--quiet"]) == 0
    B = {(p["src"], p["tgt"]): p["scores"]["base"] for p in json.loads((beam / "report" / "summary.json").read_text())["pairs"]}
    (teacher / "README.md").unlink()
    _run(REPO / "scripts" / "model_card.py", teacher, run, beam)
    card = (teacher / "README.md").read_text()
    sc = {(p["src"], p["tgt"]): p["scores"]["base"] for p in S["pairs"]}
    row = " | ".join(f"{sc[k][m]:.1f}" for k in (("en", "de"), ("de", "en")) for m in ("chrF", "spBLEU"))
    assert f"| German | de | 49,147 | High | High | {row} |" in card and "| Russian | ru |" in card
    # greedy against beam: the group means are the two runs' corpus scores, each difference inside its interval
    assert f"| German | {' | '.join(f'{B[k][m]:.1f}' for k in (('en', 'de'), ('de', 'en')) for m in ('chrF', 'spBLEU'))} |" in card
    high = next(line for line in card.splitlines() if line.startswith("| High (thesis tier) | 2 |")).split(" | ")
    g, b = (sum(x[k]["chrF"] for k in (("en", "de"), ("de", "en"))) / 2 for x in (sc, B))
    assert (high[2], high[3]) == (f"{g:.2f}", f"{b:.2f}")
    lo, hi = (float(v) for v in high[4].split("[")[1].rstrip("]").split(", "))
    assert lo - 0.01 <= b - g <= hi + 0.01
    chars = []
    for r in (run, beam):
        st = Store(r / "store.sqlite")
        chars.append(sum(len(x["hyp"]) for s, t in (("en", "de"), ("de", "en"))
                         for x in st.translations("base", "flores101", s, t)))
        st.close()
    assert high[-1].rstrip(" |") == f"{chars[1] / chars[0]:.3f}"  # hypotheses' length, beam over greedy
    assert f"of 4 greedy, {sum(v['spBLEU'] >= 5 for v in B.values())} of 4 with beam 2" in card
    assert "## Cross-lingual embedding alignment" in card and "| Russian | Latin–Cyrillic |" in card
    speed = tmp_path / "speed.json"
    speed.write_text(_run("-m", "benchmarks.batch1_speed", teacher, student, art / "student-nokd", "--sentences", "4",
                          "--max-new-tokens", "8"))
    tj = json.loads((student / "training.json").read_text())  # as an early-stopped run of the long config records it
    tj["config"]["source"] = "configs/distill-kd-long.yaml"
    tj["config"]["train"] |= {"dev_every": 600, "dev_sentences": 50, "patience": 3, "min_delta": 0.05}
    tj["config"]["data"] |= {"sampling": "temperature", "temperature": 5.0}
    tj |= {"train_cpu_seconds": 9000.0, "cpu_from_step": 600}  # a run resumed from a checkpoint written before the count
    tj["early_stop"] = {"best": 25.33, "best_step": 8400, "stopped": "early stop: 3 measurements without improvement",
                        "scores": [[1200, 19.75], [8400, 25.33], [9000, 25.2]], "exported": "best"}
    (student / "training.json").write_text(json.dumps(tj))
    (student / "curves.png").write_bytes(b"png")
    _run(REPO / "scripts" / "student_card.py", student, "student-kd", "student-nokd", "600", speed, run)
    scard = (student / "README.md").read_text()
    assert "forgetbench distill configs/distill-kd-long.yaml --out runs/student-kd   # resumable" in scard
    assert ("every 600 steps after phase 1, stopped after 3 measurements without an improvement of 0.05: 3 "
            "measurements, best **25.33 at step 8,400**; the run ended by early stop: 3 measurements without "
            f"improvement at step {tj['steps']:,}; exported: the best step's weights") in scard
    assert "](curves.png)" in scard and (f"{tj['train_seconds'] / 3600:.2f} h of training on 1 CPU thread(s) × "
                                         f"{tj.get('processes', 1)} process(es) (2.50 CPU hours, counted from step "
                                         "600;") in scard
    assert (f"temperature sampling (T = 5.0: each direction's share ∝ corpus^(1/T), "
            f"{sum(v['quota'] for v in tj['quotas'].values()):,} examples in all)") in scard
    tim = S["run"]["timings_rank0"]
    rate = {v: f"{tim[v]['translated'] / tim[v]['translate_s']:.2f}" for v in ("student-kd", "base")}
    assert f"- speed, batched (batch 64, the sweep's translation pass): {rate['student-kd']} vs {rate['base']}" in scard
    assert ("; a generated token reads 2.99 M weights vs the teacher's 4.83 M, so a runtime without per-layer overhead "
            "is bound to 1.61× per token at batch 1") in scard
    assert "## Scores per pair group: flores101 (4 directions, 3 sentences each; config `distill-eval`)" in scard
    h2h = S["pair_groups"]["training"]["H2H"]
    assert f"| H2H | 2 | 6 | {h2h['scores']['base']['chrF']:.2f} | {h2h['scores']['student-kd']['chrF']:.2f} |" in scard
    # the twin not trained yet for these weights ("-"): the student against its teacher alone, the run's contrast
    _run(REPO / "scripts" / "student_card.py", student, "student-kd", "-", "600", speed, run)
    tcard = (student / "README.md").read_text()
    t_, k_ = h2h["scores"]["base"]["chrF"], h2h["scores"]["student-kd"]["chrF"]
    d_ = h2h["contrasts"]["student-kd vs base"]["chrF"]
    assert (f"| H2H | 2 | 6 | {t_:.2f} | {k_:.2f} | {100 * k_ / t_:.1f} % | {d_['difference']:.2f} "
            f"[{d_['ci'][0]:.2f}, {d_['ci'][1]:.2f}] |") in tcard
    assert "twin chrF" not in tcard and "The no-KD twin of these weights is not trained yet" in tcard
    # weights not measured yet (shipped when their run ends): the card says what measures what it lacks, no numbers
    _run(REPO / "scripts" / "student_card.py", student, "student-kd", "student-nokd", "600", "-")
    ucard = (student / "README.md").read_text()
    assert "- speed, batch 1: not measured for these weights yet (`python -m benchmarks.batch1_speed" in ucard
    assert "Not measured for these weights yet: `forgetbench sweep configs/distill-eval.yaml`" in ucard
    assert "| H2H | 2 | 6 |" not in ucard and "best **25.33 at step 8,400**" in ucard and "Metric signatures" not in ucard


def test_a_student_card_from_an_eval_run_without_the_twin_is_one_line_and_writes_nothing(tmp_path):
    import shutil

    student = shutil.copytree(REPO / "artifacts" / "student-kd", tmp_path / "student-kd")
    (tmp_path / "run" / "report").mkdir(parents=True)
    (tmp_path / "run" / "report" / "summary.json").write_text(json.dumps({"variants": ["teacher", "student-kd"]}))
    before = (student / "README.md").read_text()
    r = python(REPO / "scripts" / "student_card.py", student, "student-kd", "student-nokd", "600", "-", tmp_path / "run")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "its report has no variant student-nokd (it has teacher, student-kd)" in r.stderr
    assert (student / "README.md").read_text() == before


def test_graphmerge_study_of_identical_arms_finds_no_difference_and_the_losses_sacrebleu_gives(tmp_path):
    """The study's sweep and table stages on four copies of the shipped teacher: every GraphMerge − baseline figure and its
    interval are 0, and an arm's relative loss is the mean over directions of sacrebleu's corpus chrF loss."""
    import yaml
    from sacrebleu.metrics import CHRF

    from forgetbench.eval.store import Store

    out = tmp_path / "out"
    for run in ("baseline-s1", "baseline-s2", "graphmerge-s1", "graphmerge-s2"):
        (out / run).mkdir(parents=True)
        (out / run / "model").symlink_to(REPO / "artifacts" / "teacher")
    study = yaml.safe_load((REPO / "configs" / "graphmerge-study" / "study.yaml").read_text())
    arms = REPO / "configs" / "graphmerge-study"
    study |= {"arms": {a: str(arms / p) for a, p in study["arms"].items()}, "compressions": {"prune-45": "prune-45"},
              "tiers": study["tiers"] | {"counts": str(REPO / "artifacts" / "teacher" / "training.json")}}
    study["sweep"] |= {"languages": ["de", "sw"], "sentences": 3, "processes": 1,
                       "benchmarks": [{"name": "flores101", "kind": "flores101", "path": str(REPO / "data" / "flores101")}],
                       "generation": {"num_beams": 1, "max_new_tokens": 8, "batch_size": 4}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    # seed 1 alone first (its seed-2 runs still training), then both: seed 1's systems are not translated again
    for stage in ("sweep", "table"):
        _run(REPO / "scripts" / "graphmerge_study.py", tmp_path / "study.yaml", "--out", out, "--stage", stage,
             "--seeds", "1")
    one = json.loads((out / f"study-{study['steps']}-s1.json").read_text())
    assert one["settings"]["seeds"] == [1] and one["who_pays"]["chrF"]["prune-45"]["all"]["seeds"] == [0]
    assert set(one["models"]) == {"baseline-s1", "graphmerge-s1"}

    def seed1_rows():
        with sqlite3.connect(out / f"sweep-{study['steps']}" / "store.sqlite") as db:
            return db.execute("SELECT variant, src, tgt, idx, hyp, seconds FROM translations WHERE variant LIKE "
                              "'%-s1%' ORDER BY 1, 2, 3, 4").fetchall()

    before = seed1_rows()
    assert len(before) == 4 * 4 * 3  # 2 arms × (base, prune-45) × 4 directions × 3 sentences
    for stage in ("sweep", "table"):
        _run(REPO / "scripts" / "graphmerge_study.py", tmp_path / "study.yaml", "--out", out, "--stage", stage)
    assert seed1_rows() == before
    res = json.loads((out / f"study-{study['steps']}.json").read_text())
    figures = [row["delta"] for m in ("chrF", "spBLEU-local") for row in res["before"][m].values()]
    figures += [x for m in ("chrF", "spBLEU-local") for x in res["who_pays"][m]["prune-45"].values()]
    for x in figures:
        assert x["value"] == 0 and x["ci"] == [0, 0] and x["seeds"] == [0, 0], x
    assert set(res["before"]["chrF"]) == {"all", "tier High", "tier Very-Low", "script Latin", "into English",
                                          "out of English"}  # de High, sw Very-Low by the teacher's pair counts
    store, losses = Store(out / f"sweep-{study['steps']}" / "store.sqlite"), []
    for src, tgt in (("en", "de"), ("de", "en"), ("en", "sw"), ("sw", "en")):
        refs = (REPO / "data" / "flores101" / ("deu" if "de" in (src, tgt) else "swh")).with_suffix(".devtest")
        if tgt == "en":
            refs = REPO / "data" / "flores101" / "eng.devtest"
        refs = refs.read_text().splitlines()[:3]
        base, comp = ([r["hyp"] for r in store.translations(v, "flores101", src, tgt)]
                      for v in ("baseline-s1", "baseline-s1-prune-45"))
        b, c = (CHRF(beta=3).corpus_score(h, [refs]).score for h in (base, comp))  # the project's chrF (β = 3)
        losses.append((c - b) / b * 100)
    assert res["loss"]["chrF"]["prune-45"]["baseline"]["all"]["value"] == pytest.approx(sum(losses) / 4, abs=1e-3)


def test_graphmerge_study_trains_seed_by_seed_and_a_past_deadline_starts_no_run_nor_the_sweep(tmp_path, monkeypatch,
                                                                                              capsys):
    """With fewer jobs than runs the arms of seed 1 come before seed 2's; past ``$FORGETBENCH_STOP_AT`` the train
    stage starts nothing and says which runs stand where, and the sweep does not start on half-trained models."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("graphmerge_study", REPO / "scripts" / "graphmerge_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    cfg = study.load(REPO / "configs" / "graphmerge-study" / "study.yaml")
    out = tmp_path / "out"
    assert [f"{a}-s{s}" for (a, s), _ in study.training_order(cfg, out)] == [
        "baseline-s1", "graphmerge-s1", "baseline-s2", "graphmerge-s2"]
    (out / "graphmerge-s1" / "checkpoint").mkdir(parents=True)
    (out / "graphmerge-s1" / "checkpoint" / "state.json").write_text(json.dumps({"step": 250}))
    started = []
    monkeypatch.setattr(study.subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr(study.subprocess, "run", lambda *a, **k: started.append(a))
    monkeypatch.setenv("FORGETBENCH_STOP_AT", "1000")  # 1970
    assert study.stage_train(cfg, out) is False and started == []
    study.main([str(REPO / "configs" / "graphmerge-study" / "study.yaml"), "--out", str(out)])
    assert started == [] and not list(out.glob("sweep-*"))
    assert ("training stopped by the wall deadline before 2,000 steps (baseline-s1 at 0, graphmerge-s1 at 250, "
            "baseline-s2 at 0, graphmerge-s2 at 0): run the same command again to resume") in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:  # a seed the config lacks: one line, exit 2
        study.main([str(REPO / "configs" / "graphmerge-study" / "study.yaml"), "--out", str(out), "--seeds", "3"])
    assert e.value.code == 2 and "has seeds [1, 2]; give some of those" in capsys.readouterr().err


def test_udprlm_study_end_to_end_on_a_tiny_treebank(tmp_path):
    """The UD-PrLM study script on one tiny treebank, tiny encoders and one-epoch parsers: every stage runs and the
    table holds each comparison with its interval; compressions contrast each model with the MLM-only parser's."""
    data = tmp_path / "ud" / "UD_Wolof-WTB"
    data.mkdir(parents=True)
    for split, n in (("train", 40), ("dev", 8), ("test", 8)):
        src = (REPO / "data" / "ud" / "UD_Wolof-WTB" / f"wo_wtb-ud-{split}.conllu").read_text().split("\n\n")
        (data / f"wo_wtb-ud-{split}.conllu").write_text("\n\n".join(src[:n]) + "\n\n")
    configs = tmp_path / "configs"
    configs.mkdir()
    for v in ("mlm", "usl-mlm", "usi-mlm", "ud-prlm"):
        (configs / f"{v}.yaml").write_text(
            f"data: {{shared: '', treebanks: [{data}], raw_languages: [en], max_pieces: 64}}\n"
            "spm: {vocab_size: 300}\n"
            f"model: {{variant: {v}, d_model: 16, layers: 2, heads: 2, ffn: 32, dropout: 0.1, head_mlp: 8, dep_mlp: 4}}\n"
            "objective: {joint_steps: 2, p: 0.5}\ntrain: {seed: 1, max_tokens: 600, lr: 0.001, warmup: 2, steps: 4}\n")
    out = tmp_path / "run"
    text = _run(REPO / "scripts" / "udprlm_study.py", "--out", out, "--treebanks", "wo_wtb", "--configs", configs,
                "--data", tmp_path / "ud", "--max-steps", "6", "--patience", "0",
                "--max-epochs", "1", "--recipes", "prune-45", "wanda-45-uniform", "ptq-int8", "--refine",
                "--variants", "mlm", "usl-mlm", "ud-prlm", "--modes", "tuned", "frozen", timeout=1200)
    res = json.loads((out / "study.json").read_text())["wo_wtb"]
    parsers = {f"{v}·{m}" for v in ("mlm", "usl-mlm", "ud-prlm") for m in ("tuned", "frozen")}
    refined = {"scratch", "mlm·tuned", "usl-mlm·tuned", "ud-prlm·tuned"}
    assert set(res["scores"]) == parsers | {"scratch"} | {f"{k}+rngtr" for k in refined} | {
        "usl-mlm USL head", "ud-prlm USL head"}
    assert set(res["gains"]) == {f"{k} − scratch" for k in parsers} | {
        f"ud-prlm·{m} − {v}·{m}" for m in ("tuned", "frozen") for v in ("mlm", "usl-mlm")} | {
        f"{k}+rngtr − {k}" for k in refined}
    refiner = json.loads((out / "parsers" / "wo_wtb" / "ud-prlm-tuned-rngtr" / "training.json").read_text())
    assert refiner["arch"] == "rngtr" and refiner["encoder"]["variant"] == "ud-prlm"  # on its encoder, from empty graphs
    frozen = json.loads((out / "parsers" / "wo_wtb" / "ud-prlm-frozen" / "training.json").read_text())
    assert frozen["encoder"]["mode"] == "beside" and frozen["encoder"]["lr_scale"] == 0
    for g in res["gains"].values():
        assert g["delta_ci"][0] <= g["delta"] + 1e-9 <= g["delta_ci"][1] + 2e-9
    S = json.loads((out / "compress" / "wo_wtb" / "summary.json").read_text())
    assert {(Path(c["reference"]).name, c["recipe"]) for c in S["contrasts"]} == {
        ("mlm-tuned", r) for r in ("prune-45", "wanda-45-uniform", "ptq-int8")}  # Wanda reaches every encoder's matrices
    assert "Who pays" in text and "ud-prlm·tuned − mlm·tuned" in text


def test_training_curves_reads_runs_and_marks_the_best_step(tmp_path):
    """scripts/training_curves.py: one panel per logged field, each run's best held-out measurement and its step
    (lower is better for losses), the early-stopping end where a run has one."""
    runs = []
    for name, dev in (("a", [3.0, 2.5, 2.7]), ("b", [3.2, 2.9, 2.8])):
        r = tmp_path / name
        (r / "checkpoint").mkdir(parents=True)
        rows = [{"step": 100 * (i + 1), "loss": 5.0 - i} for i in range(3)]
        rows += [{"step": 100 * (i + 1), "dev_score": -x, "dev_mlm_loss": x} for i, x in enumerate(dev)]
        (r / "train_log.jsonl").write_text("\n".join(json.dumps(x) for x in rows) + "\n")
        stopped = "early stop: no dev improvement" if name == "a" else None
        (r / "checkpoint" / "state.json").write_text(json.dumps({"early_stop": {"best_step": 200, "stopped": stopped}}))
        runs.append(r)
    text = _run(REPO / "scripts" / "training_curves.py", *runs, "--out", tmp_path / "fig" / "curves.png")
    assert (tmp_path / "fig" / "curves.png").stat().st_size > 1000
    md = (tmp_path / "fig" / "curves.md").read_text()
    assert md == text.strip() + "\n"
    rows = {line.split(" | ")[0].strip("| "): line for line in md.splitlines()[2:]}
    assert "| 2.5 (200) |" in rows["a"] and "| 2.8 (300) |" in rows["b"] and "| 3 (300) |" in rows["a"]  # loss 5, 4, 3
    assert rows["a"].endswith("early stop: no dev improvement |") and rows["b"].endswith("steps or budget |")


def test_training_curves_tells_each_step_of_a_resumed_log_once(tmp_path):
    """A log from before resumes trimmed it: steps 200–300 logged, the process killed after its checkpoint at 100,
    the resume logging 200–300 again. The discarded run's records do not count: the best dev is the resumed run's."""
    r = tmp_path / "run"
    r.mkdir()
    rows = [{"step": 100, "loss": 5.0}, {"step": 200, "loss": 4.0}, {"step": 200, "dev_score": 9.0},
            {"step": 300, "loss": 3.0},  # killed here; the checkpoint is at 100
            {"step": 200, "loss": 4.5}, {"step": 200, "dev_score": 7.0}, {"step": 300, "loss": 3.5}]
    (r / "train_log.jsonl").write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    text = _run(REPO / "scripts" / "training_curves.py", r, "--out", tmp_path / "curves.png")
    head, _, row = text.strip().splitlines()
    cells = dict(zip(head.split(" | "), row.split(" | "), strict=True))
    assert cells["dev_score (best, step)"] == "7 (200)" and cells["loss (last, step)"] == "3.5 (300)"


def test_training_curves_groups_a_distill_runs_dev_chrf_by_pair_group(tmp_path):
    """--groups: a distill run's dev chrF per direction becomes one field per pair group, the mean of its
    directions (groups from the run's quotas.json); the best measurement per group is reported."""
    r = tmp_path / "student"
    r.mkdir()
    (r / "quotas.json").write_text(json.dumps({"directions": {"en-de": {"group": "H2H"}, "de-en": {"group": "H2H"},
                                                              "en-sw": {"group": "H2VL"}}}))
    rows = [{"step": 100, "loss": 4.0, "ce": 4.0}, {"step": 700, "loss": 7.0, "ce": 3.5},  # phase 2 adds the KD term
            {"step": 1300, "loss": 6.5, "ce": 3.6},
            {"step": 600, "dev_score": 20.0, "dev_chrf": {"en-de": 30.0, "de-en": 20.0, "en-sw": 10.0}},
            {"step": 1200, "dev_score": 21.0, "dev_chrf": {"en-de": 31.0, "de-en": 22.0, "en-sw": 9.0}}]
    (r / "train_log.jsonl").write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    (r / "model").mkdir()
    (r / "model" / "training.json").write_text(json.dumps({"steps": 700, "stopped_by": "the wall deadline"}))
    text = _run(REPO / "scripts" / "training_curves.py", r, "--groups", "--out", tmp_path / "curves.png")
    head, _, row = text.strip().splitlines()
    cells = dict(zip(head.split(" | "), row.split(" | "), strict=True))
    assert cells["dev_chrF_H2H (best, step)"] == "26.5 (1,200)"  # (31 + 22) / 2 against (30 + 20) / 2
    assert cells["dev_chrF_H2VL (best, step)"] == "10 (600)"
    assert cells["loss (last, step)"] == "6.5 (1,300)" and cells["ce (best, step)"] == "3.5 (700)"
    assert cells["ended by |"] == "not finished (exported at step 700: the wall deadline) |"
    (r / "model" / "training.json").write_text(json.dumps({"steps": 1300, "stopped_by": "early stop: no improvement"}))
    row = _run(REPO / "scripts" / "training_curves.py", r, "--out", tmp_path / "c3.png").strip().splitlines()[-1]
    assert row.endswith("| early stop: no improvement |")
    assert "dev_chrF_H2H" not in _run(REPO / "scripts" / "training_curves.py", r, "--out", tmp_path / "c2.png")


def test_training_curves_gives_a_train_mt_runs_dev_chrf_mean_and_each_direction(tmp_path):
    """A train-mt run logs dev chrF per direction and no mean: the figure gets ``dev_chrF_mean`` (hand means) and,
    with --directions, one field per direction; a distill run's own ``dev_score`` is not doubled by a mean."""
    r = tmp_path / "baseline-s1"
    r.mkdir()
    rows = [{"step": 500, "loss": 6.5, "dev_chrf": {"de-en": 4.0, "en-uk": 2.0}},
            {"step": 1000, "loss": 5.5, "dev_chrf": {"de-en": 12.0, "en-uk": 4.0}},
            {"step": 1500, "loss": 5.3, "dev_chrf": {"de-en": 13.0, "en-uk": 1.0}}]
    (r / "train_log.jsonl").write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    head, _, row = _run(REPO / "scripts" / "training_curves.py", r, "--directions", "--out",
                        tmp_path / "c.png").strip().splitlines()
    cells = dict(zip(head.split(" | "), row.split(" | "), strict=True))
    assert cells["dev_chrF_mean (best, step)"] == "8 (1,000)"  # (12 + 4) / 2 against (13 + 1) / 2 = 7
    assert cells["dev_chrF_de-en (best, step)"] == "13 (1,500)" and cells["dev_chrF_en-uk (best, step)"] == "4 (1,000)"
    assert "dev_chrF_de-en" not in _run(REPO / "scripts" / "training_curves.py", r, "--out", tmp_path / "d.png")
    s = tmp_path / "student"
    s.mkdir()
    (s / "train_log.jsonl").write_text(json.dumps({"step": 600, "dev_score": 3.0, "dev_chrf": {"en-de": 3.0}}) + "\n")
    assert "dev_chrF_mean" not in _run(REPO / "scripts" / "training_curves.py", s, "--out", tmp_path / "e.png")


def test_gender_human_agreement_counts_the_annotators_genders(tmp_path):
    """scripts/gender_human_agreement.py on a four-row MT-Gender set: the annotation file's system is found by its
    sentences, and the agreement is the share of annotated rows whose reading names the annotator's gender."""
    rows = [("female", 1, "The developer argued with the designer because she did not like the design .", "developer"),
            ("male", 1, "The developer argued with the designer because he did not like the design .", "developer"),
            ("female", 1, "The mother called the nurse because she was ill .", "mother"),
            ("male", 1, "The doctor called the nurse because he was ill .", "doctor")]
    de = ["Die Entwicklerin stritt mit dem Designer , weil sie das Design nicht mochte .",
          "Der Entwickler stritt mit dem Designer , weil er das Design nicht mochte .",
          "Die Mutter rief die Pflegerin , weil sie krank war .",
          "Der Arzt rief den Pfleger , weil er krank war ."]
    data, clone = tmp_path / "mt_gender", tmp_path / "clone"
    data.mkdir()
    (data / "en.txt").write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    for system, hyps in (("aws", de), ("google", list(reversed(de)))):
        (clone / "translations" / system).mkdir(parents=True)
        (clone / "translations" / system / "en-de.txt").write_text(
            "".join(f"{r[2]} ||| {h}\n" for r, h in zip(rows, hyps, strict=True)))
    (clone / "data" / "human_annotations").mkdir(parents=True)
    ann = ["Index,Entity,Sentence,Find entity? [Y/N],Gender? [M/F/N],Comments",  # row 3 judged female: disagrees
           *(f'{i},x,"{de[i]}",Y,{g},' for i, g in ((0, "F"), (1, "M"), (2, "F"), (3, "F"))), "1,x,unjudged,,,"]
    (clone / "data" / "human_annotations" / "aws.de.in - de.in.csv").write_text("\n".join(ann) + "\n")
    out = tmp_path / "agree.json"
    printed = _run(REPO / "scripts" / "gender_human_agreement.py", clone, "--langs", "de", "--data", data,
                   "--out", out)
    res = json.loads(out.read_text())["results"][0]
    assert (res["system"], res["items"], res["agree"], res["agreement"]) == ("aws", 4, 3, 75.0)
    assert res["disagree"] == {"f->m": 1} and res["wrong"][0]["index"] == 3 and "de   75.0 %" in printed


def test_udprlm_study_reads_every_encoder_at_the_same_step_or_says_which_lacks_it(tmp_path):
    """``--at-step N`` with ``--encoders RUNS``: each variant's snapshot of step N; a variant without it is one line
    naming it and the steps it has."""
    import importlib.util
    import types

    spec = importlib.util.spec_from_file_location("udprlm_study", REPO / "scripts" / "udprlm_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    for v, steps in (("mlm", (10000, 15000)), ("ud-prlm", (10000, 15000)), ("usl-mlm", (5000, 10000))):
        for s in steps:
            snap = tmp_path / v / "snapshots" / f"step-{s:06d}"
            snap.mkdir(parents=True)
            (snap / "config.json").write_text("{}")
    a = types.SimpleNamespace(encoders=tmp_path, at_step=15000, variants=["mlm", "ud-prlm"])
    study.check_snapshots(a)
    assert study.encoder(a, tmp_path / "out", "ud-prlm") == tmp_path / "ud-prlm" / "snapshots" / "step-015000"
    a.variants = ["mlm", "usl-mlm", "ud-prlm"]
    with pytest.raises(SystemExit, match=r"no snapshot of step 15000 for usl-mlm \(has 5000, 10000\)"):
        study.check_snapshots(a)


def test_off_target_contrast_counts_the_placed_references_and_pairs_the_two_variants(tmp_path):
    """Sentences count where the reference is placed in the target language and both hypotheses were identified;
    shares and A − B by hand; the interval brackets the difference; a variant not in the run is one line, exit 2."""
    from forgetbench.eval.store import Store

    run = tmp_path / "run"
    st = Store(run / "store.sqlite")
    ref = [1, 1, 1, 1, 0, 1, None]  # idx 4: reference not placed; idx 6: no identifier
    a = [1, 0, 1, 1, 0, None, 1]  # idx 5: A's hypothesis unidentified
    b = [0, 0, 1, 0, 1, 1, 0]
    st.add_stats([(v, "flores101", "en", "sw", i, "on_target", None if x is None else float(x))
                  for v, xs in (("__ref__", ref), ("A", a), ("B", b)) for i, x in enumerate(xs)])
    st.db.close()
    r = _json(_run(REPO / "scripts" / "off_target_contrast.py", run, "A", "B"))["flores101"]["en-sw"]
    # idx 0-3 count: A off 0,1,0,0 -> 25 %; B off 1,1,0,1 -> 75 %
    assert (r["n"], r["A"], r["B"], r["difference_pp"]) == (4, 25.0, 75.0, -50.0)
    lo, hi = r["ci95"]
    assert -100 <= lo <= -50 <= hi <= 0
    bad = python(REPO / "scripts" / "off_target_contrast.py", run, "A", "C", cwd=REPO, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "C not in" in bad.stderr
