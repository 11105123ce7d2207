"""The commands no other test runs to success: ``recipes``, ``make-tiny``, ``plan-devices``, ``train-mt`` (its dev
chrF and its time budget), and the DiBiMT reader."""

import json
import types

import pytest
import sacrebleu
import torch
import yaml

from forgetbench.cli import main
from forgetbench.errors import ForgetbenchError

from .conftest import CALIB, REPO, python
from .test_scripts_smoke import ship_and_check
from .test_train_mt import _shared


def test_recipes_lists_every_shipped_recipe_with_its_steps(capsys):
    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    shipped = sorted((REPO / "configs" / "recipes").glob("*.yaml"), key=lambda p: p.stem)
    assert [ln.split()[0] for ln in lines] == [p.stem for p in shipped]
    for ln, p in zip(lines, shipped, strict=True):
        raw = yaml.safe_load(p.read_text())
        steps = " -> ".join(next(iter(s)) for s in raw["steps"])
        assert ln.split(maxsplit=1)[1].startswith(steps + " ") and ln.endswith(raw["description"])
    assert main(["recipes", "--kinds"]) == 0
    kinds = capsys.readouterr().out.splitlines()[len(shipped):]
    assert [ln.split()[0] for ln in kinds] == ["prune", "smooth", "quantize", "bitsandbytes"]
    assert "options: calibration, include_embeddings, method, n_m, scope, sparsity" in kinds[0]


def test_make_tiny_builds_a_loadable_model_of_the_asked_size(tmp_path, capsys):
    from forgetbench.models.generation import translate
    from forgetbench.models.load import load

    args = ["--vocab", "1200", "--d-model", "32", "--layers", "1", "--seed", "3"]
    out = tmp_path / "m" / "n" / "tiny"  # missing parents are created (mkdir -p)
    assert main(["make-tiny", str(CALIB), "--out", str(out), *args]) == 0
    model, tok, _ = load(out, dtype="fp32", with_signature=False)
    c = model.config
    assert (c.d_model, c.encoder_layers, c.decoder_layers) == (32, 1, 1)
    assert tok.sp_model.get_piece_size() == 1200 and tok.get_lang_id("de") < c.vocab_size
    assert len(translate(model, tok, ["A short sentence."], "en", "de", max_new_tokens=4)) == 1
    again = tmp_path / "again"  # the seed decides the weights
    assert main(["make-tiny", str(CALIB), "--out", str(again), *args]) == 0
    assert (out / "model.safetensors").read_bytes() == (again / "model.safetensors").read_bytes()
    capsys.readouterr()
    # fewer pieces than the text has characters: one line, exit 2, nothing written
    assert main(["make-tiny", str(CALIB), "--out", str(tmp_path / "small"), "--vocab", "300"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "vocabulary size 300 is smaller than the" in err and "make-tiny --vocab" in err
    assert not (tmp_path / "small").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["again", "m"]


def test_plan_devices_places_every_module_within_each_gpus_memory(tmp_path, capsys):
    assert main(["plan-devices", "m2m100_1.2B", "--gpus", "2", "--gpu-memory", "2GiB", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["gpus"] == 2 and 1.2e9 < r["parameters"] < 1.3e9
    assert set(map(str, r["device_map"].values())) == {"0", "1"}  # 2.5 GB of bf16 weights need both GPUs
    assert all(b <= 2 * 2**30 for b in r["bytes_per_device"].values())
    assert sum(r["bytes_per_device"].values()) == pytest.approx(2 * r["parameters"], rel=0.01)
    assert len(set(map(str, r["tied_devices"].values()))) == 1  # shared / embed_tokens / lm_head together
    assert main(["plan-devices", "m2m100_1.2B", "--gpus", "2", "--gpu-memory", "2GiB"]) == 0
    text = capsys.readouterr().out
    assert "1.24 B parameters" in text and "device 0:" in text and "device 1:" in text and "WARNING" not in text
    assert main(["plan-devices", str(REPO / "artifacts" / "teacher"), "--gpus", "1", "--gpu-memory", "1GiB",
                 "--json"]) == 0
    t = json.loads(capsys.readouterr().out)
    assert set(map(str, t["device_map"].values())) == {"0"} and t["parameters"] < 1e8


def _train_config(tmp_path, **train):
    cfg = {"data": {"shared": str(tmp_path / "shared"), "languages": ["de", "fr"], "dev_per_language": 3},
           "spm": {"vocab_size": 300, "sample_per_language": 1000},
           "model": {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "heads": 2, "ffn": 64},
           "train": {"seed": 3, "max_tokens": 600, "warmup": 10, "steps": 100, "checkpoint_minutes": 60,
                     "dev_every": 100, "dev_sentences": 3, "dev_directions": ["de-en", "en-fr"], "threads": 1} | train}
    p = tmp_path / "train.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_train_mt_logs_the_dev_chrf_of_its_model(tmp_path, capsys):
    """The CLI trains to its step budget; the dev chrF logged at step 100 is sacrebleu's chrF3 of the exported
    model's greedy translations of the first dev pairs (recomputed with Hugging Face ``generate``)."""
    from transformers import M2M100ForConditionalGeneration, M2M100Tokenizer

    _shared(tmp_path / "shared")
    out = tmp_path / "a" / "b" / "run"  # missing parents are created (mkdir -p)
    assert main(["train-mt", str(_train_config(tmp_path)), "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr() == (f"model: {out / 'model'}\n", "")  # --quiet: the result path only
    info = json.loads((out / "model" / "training.json").read_text())
    assert info["stopped_by"] == "steps" and info["steps"] == 100
    assert info["arithmetic"]["device"] == "cpu" and info["arithmetic"]["why"]  # the chosen arithmetic, and why
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [100] and set(log[0]["dev_chrf"]) == {"de-en", "en-fr"}
    other = tmp_path / "every30"  # an interval that is not a multiple of 100: measured where it says, own records
    assert main(["train-mt", str(_train_config(tmp_path, dev_every=30)), "--out", str(other), "--quiet"]) == 0
    rows = [json.loads(x) for x in (other / "train_log.jsonl").read_text().splitlines()]
    assert [(r["step"], "dev_chrf" in r, "loss" in r) for r in rows] == \
        [(30, True, False), (60, True, False), (90, True, False), (100, False, True)]
    model = M2M100ForConditionalGeneration.from_pretrained(str(out / "model")).eval()
    tok = M2M100Tokenizer.from_pretrained(str(out / "model"))
    dev = json.loads((out / "dev.json").read_text())
    for d, logged in log[0]["dev_chrf"].items():
        s, t = d.split("-")
        pairs = dev["de" if "de" in (s, t) else "fr"][:3]
        srcs, refs = ([e for e, _ in pairs], [x for _, x in pairs]) if s == "en" else ([x for _, x in pairs],
                                                                                        [e for e, _ in pairs])
        tok.src_lang = s
        with torch.no_grad():
            ids = model.generate(**tok(srcs, return_tensors="pt", padding=True), forced_bos_token_id=tok.get_lang_id(t),
                                 num_beams=1, do_sample=False, max_new_tokens=96)
        hyps = [h.strip() for h in tok.batch_decode(ids, skip_special_tokens=True)]
        assert logged == round(sacrebleu.corpus_chrf(hyps, [refs], char_order=6, word_order=0, beta=3).score, 2), d
    ship_and_check("ship_teacher.py", out, tmp_path / "shipped", ("train_log.jsonl",))


def test_a_teacher_trained_in_two_segments_ships_with_both_records_and_one_log(tmp_path):
    """A run continued by a warm-started second run (another batch size) ships the second's weights, both
    segments' records, their summed steps and tokens, the epochs those tokens make of the prepared corpus, and one
    log whose records carry their segment and the tokens seen since the first segment began."""
    import numpy as np
    from safetensors.torch import load_file

    _shared(tmp_path / "shared")
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["train-mt", str(_train_config(tmp_path)), "--out", str(one), "--quiet"]) == 0
    cfg2 = _train_config(tmp_path, max_tokens=1200, lr=3e-4)
    assert main(["train-mt", str(cfg2), "--out", str(two), "--warm-start", str(one / "model"), "--quiet"]) == 0
    shipping = python(REPO / "scripts" / "ship_teacher.py", one, two, tmp_path / "shipped", timeout=300)
    assert shipping.returncode == 0, shipping.stderr
    shipped = tmp_path / "shipped"
    a, b = load_file(str(two / "model" / "model.safetensors")), load_file(str(shipped / "model.safetensors"))
    assert all(torch.equal(b[k], a[k].half()) for k in a)
    rec = json.loads((shipped / "training.json").read_text())
    r1, r2 = (json.loads((r / "model" / "training.json").read_text()) for r in (one, two))
    segs = rec["segments"]
    assert [(s["steps"], s["tokens"], s["max_tokens"], s["lr"]) for s in segs] == [
        (100, r1["tokens"], 600, 1e-3), (100, r2["tokens"], 1200, 3e-4)]
    assert segs[1]["warm_start"]["optimiser"] == "restarted" and segs[0]["warm_start"] is None
    z = np.load(one / "train.npz")
    per_epoch = sum(int((np.minimum(np.diff(z[k]), 126) + 2).sum()) for k in ("src_off", "tgt_off"))  # max_len 128
    tot = r1["tokens"] + r2["tokens"]
    assert rec["total"] == {"steps": 200, "tokens": tot, "train_seconds": round(r1["train_seconds"] + r2["train_seconds"], 1),
                            "epoch_tokens": per_epoch, "epochs_seen": round(tot / per_epoch, 2)}
    log = [json.loads(x) for x in (shipped / "train_log.jsonl").read_text().splitlines()]
    assert [(r["segment"], r["step"]) for r in log] == [(1, 100), (2, 100)]
    assert log[1]["tokens_total"] == r1["tokens"] + log[1]["tokens"]
    other = tmp_path / "other"
    (other / "model").mkdir(parents=True)
    (other / "model" / "training.json").write_text(json.dumps(r2 | {"spm_sha256": "0" * 64}))
    refused = python(REPO / "scripts" / "ship_teacher.py", one, other, tmp_path / "shipped2", timeout=300)
    assert refused.returncode != 0 and "not one training" in refused.stderr
    (two / "train_log.jsonl").rename(two / "log.moved")  # fails after the weights are written: nothing is shipped
    failed = python(REPO / "scripts" / "ship_teacher.py", one, two, tmp_path / "shipped3", timeout=300)
    assert failed.returncode != 0 and "train_log.jsonl" in failed.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if "shipped3" in p.name) == []


def test_train_mt_stops_at_its_time_budget_and_exports_the_model(tmp_path, monkeypatch):
    """A fake clock (10 s per reading) instead of a slow host: the run stops once the budget of 1 minute has
    passed, checkpoints that step and exports the model; a budget is a stop, not a failure."""
    from forgetbench.train import loop
    from forgetbench.train.mt import load_config, train

    _shared(tmp_path / "shared")
    now = [0.0]

    def clock():
        now[0] += 10.0
        return now[0]

    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=clock))
    cfg = load_config(_train_config(tmp_path, time_budget_minutes=1, dev_every=0))
    model_dir = train(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    info = json.loads((model_dir / "training.json").read_text())
    assert info["stopped_by"] == "time budget (1 min)" and 1 < info["steps"] < 100
    assert info["train_seconds"] > 60 and info["train_seconds"] - 20 <= 60  # the step that crossed the minute
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert state["step"] == info["steps"]


def test_dibimt_reader_and_scores_on_a_file_in_its_format(tmp_path):
    from forgetbench.eval.word_sense import dibimt_scores, read_dibimt

    items = [
        {"id": "a", "word": "bank", "gold": "bank%1", "senses": ["bank%2", "bank%1"], "good": ["Ufer"],
         "bad": {"Bank": "bank%2"}},
        {"id": "b", "word": "bat", "gold": "bat%1", "senses": ["bat%1", "bat%2", "bat%3"], "good": ["Fledermaus"],
         "bad": {"Schläger": "bat%2"}},
        {"id": "c", "word": "key", "gold": "key%2", "senses": ["key%1", "key%2"], "good": ["Taste"],
         "bad": {"Schlüssel": "key%1"}},
    ]
    f = tmp_path / "dibimt.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in items) + "\n\n")
    got = read_dibimt(f)
    assert [it.id for it in got] == ["a", "b", "c"] and [it.gold_index for it in got] == [2, 1, 2]
    hyps = ["Er saß am Ufer.", "Ein Tisch.", "Der Schlüssel klemmt."]  # good, miss, bad (the most frequent sense)
    s = dibimt_scores(got, hyps, "de")
    assert (s["n"], s["good"], s["bad"], s["miss"]) == (3, 1, 1, 1) and s["accuracy"] == 0.5
    assert s["SFII"] == 0.5  # gold index 2: one good, one bad; index 1: no judged item
    assert s["SPDI"] == 0.5 and s["MFS"] == 1.0 and s["MFS+"] == 1.0
    for text, msg in (('{"id": "a"', "dibimt.jsonl:1: not valid JSON"), ('["a"]', "expected a JSON object"),
                      ('{"id": "a", "word": "w"}', "dibimt.jsonl:1: missing key 'gold'")):
        f.write_text(text + "\n")
        with pytest.raises(ForgetbenchError, match=msg):
            read_dibimt(f)


def test_the_probes_numbers_are_arithmetic_on_its_timed_steps(tmp_path, capsys, monkeypatch):
    from forgetbench.train import probe as probe_mod

    f = probe_mod.figures([2.0, 1.0, 3.0], [100, 100, 100], epoch_tokens=36_000, hours=2.5)
    assert f["seconds_per_step"] == 2.0 and f["tokens_per_s"] == 50.0 and f["steps_per_hour"] == 1800.0
    assert f["hours_per_epoch"] == 0.2 and f["epochs_in_budget"] == 12.5
    # on a tiny model: the CLI times --steps steps after the warm-up and prints figures() of them
    seen = {}
    real = probe_mod.figures

    def spy(sec, tok, epoch, hours):
        seen.update(sec=sec, tok=tok, epoch=epoch)
        return real(sec, tok, epoch, hours)

    monkeypatch.setattr(probe_mod, "figures", spy)
    _shared(tmp_path / "shared")
    out = tmp_path / "probe"
    assert main(["train-mt", str(_train_config(tmp_path)), "--out", str(out), "--probe", "--steps", "3", "--hours",
                 "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert len(seen["sec"]) == 3 and all(t > 0 for t in seen["tok"])
    r = real(seen["sec"], seen["tok"], seen["epoch"], 1.0)
    assert f"{r['tokens_per_s']:,.0f} tokens/s" in text and f"an epoch is {seen['epoch']:,} tokens" in text
    assert f"1 h buy {r['epochs_in_budget']:.2f} epochs" in text
    assert not (out / "checkpoint").exists() and not (out / "model").exists()  # nothing trained or kept


def test_a_warm_start_takes_the_shipped_weights_and_restarts_the_optimiser(tmp_path, capsys):
    from safetensors.torch import load_file

    _shared(tmp_path / "shared")
    first = tmp_path / "first"
    assert main(["train-mt", str(_train_config(tmp_path, steps=4)), "--out", str(first), "--quiet"]) == 0
    # lr 0: the warm-started run's one step leaves the weights it started from, so they are the shipped ones
    cfg = _train_config(tmp_path, steps=1, lr=0.0)
    warm = tmp_path / "warm"
    assert main(["train-mt", str(cfg), "--out", str(warm), "--warm-start", str(first / "model")]) == 0
    err = capsys.readouterr().err
    assert f"warm start from {first / 'model'}" in err and "optimiser and schedule restarted" in err
    a, b = load_file(str(first / "model" / "model.safetensors")), load_file(str(warm / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    info = json.loads((warm / "model" / "training.json").read_text())
    assert info["warm_start"]["from"] == str(first / "model") and info["warm_start"]["optimiser"] == "restarted"
    assert info["steps"] == 1  # the schedule and step count start again
    # a folder that is no model: one line before any work
    assert main(["train-mt", str(cfg), "--out", str(tmp_path / "x"), "--warm-start", str(tmp_path)]) == 2
    assert "no model.safetensors there" in capsys.readouterr().err and not (tmp_path / "x").exists()


@pytest.mark.parametrize("command, config", [("train-mt", "configs/teacher.yaml"), ("distill", "configs/distill-kd.yaml"),
                                             ("pretrain-encoder", "configs/pretrain/mlm.yaml")])
def test_steps_below_one_is_one_line_for_every_training_command(command, config, tmp_path, capsys):
    """The training commands' one ``--steps`` override (``cli.common.override_steps``): 0 steps is refused in one
    line naming the command, before any work and without an output folder."""
    assert main([command, str(REPO / config), "--out", str(tmp_path / "out"), "--steps", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{command} --steps 0: must be a positive number of steps" in err
    assert not (tmp_path / "out").exists()
