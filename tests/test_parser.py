import random
import re

import torch

from forgetbench.compress import PruneConfig, QuantConfig, prune, quantize
from forgetbench.parsing.data.batching import batchify
from forgetbench.parsing.data.conll import read_conllu
from forgetbench.parsing.train import evaluate, load_parser, predict_file, train


def _toy_treebank(path, n, seed):
    """A deterministic toy language: DET ADJ* NOUN VERB DET NOUN, heads by rule (learnable)."""
    rng = random.Random(seed)
    lines = []
    for s in range(n):
        adjs = rng.randint(0, 2)
        toks = [("the", "DET", 2 + adjs, "det")] + [(rng.choice(["big", "red", "old"]), "ADJ", 2 + adjs, "amod")
                                                     for _ in range(adjs)]
        subj = 2 + adjs
        verb = subj + 1
        toks += [(rng.choice(["dog", "cat", "man"]), "NOUN", verb, "nsubj"), (rng.choice(["sees", "eats"]), "VERB", 0, "root"),
                 ("a", "DET", verb + 2, "det"), (rng.choice(["fish", "bone", "ball"]), "NOUN", verb, "obj")]
        lines.append(f"# sent_id = {s}")
        lines += [f"{i}\t{f}\t{f}\t{t}\t_\t_\t{h}\t{r}\t_\t_" for i, (f, t, h, r) in enumerate(toks, 1)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_parser_learns_a_toy_language_saves_loads_and_compresses(tmp_path):
    tr = _toy_treebank(tmp_path / "train.conllu", 120, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 30, 1)
    info = train(tr, dv, tmp_path / "model", minutes=60, max_epochs=15, max_tokens=100, progress=False, lstm_hidden=32,
                 arc_mlp=32, rel_mlp=16, word_dim=16, char_dim=8, char_hidden=16, tag_dim=8)
    assert info["dev"]["las"] > 90.0, info["history"]
    model, vocab = load_parser(tmp_path / "model")
    sents = read_conllu(dv)
    s0 = evaluate(model, vocab, sents)
    assert s0.las == info["dev"]["las"] and s0.invalid_trees == 0
    predict_file(tmp_path / "model", dv, tmp_path / "pred.conllu")
    assert [s.heads for s in read_conllu(tmp_path / "pred.conllu")] != []
    # data-aware pruning through the one recipe runner, calibrated on CoNLL-U sentences: Wanda's exact count per
    # output row of every linear map, the other weights (LSTMs, biaffine) by magnitude per unit
    from forgetbench.compress.apply import apply_recipe
    from forgetbench.compress.recipe import parse_recipe
    from forgetbench.parsing.compress_eval import ConlluCalibration

    wanda, _ = load_parser(tmp_path / "model")
    recipe = parse_recipe({"name": "wanda-50", "steps": [{"prune": {"method": "wanda", "sparsity": 0.5, "calibration": {
        "data": str(dv), "max_sentences": 20}}}]})
    rep, _ = apply_recipe(wanda, recipe, ConlluCalibration(vocab))
    assert rep["steps"][0]["prune"]["calibration"]["sentences"] == 20
    linears = [(n, m) for n, m in wanda.named_modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(((m.weight == 0).sum(1) == m.in_features // 2).all() for _, m in linears)
    assert all(abs(u["zeros"] / u["numel"] - 0.5) < 0.01 for u in rep["steps"][0]["prune"]["units"])
    assert evaluate(wanda, vocab, sents).invalid_trees == 0
    # the same compression hooks work on the parser: its units are declared
    rep = prune(model, PruneConfig(0.3))
    assert [u.name for u in rep.units] == ["embeddings", "char_encoder", "encoder.lstm", "mlp", "biaffine"]
    b = batchify(sents[:8], vocab)
    st = quantize(model, QuantConfig(calibrator="max"), calibrate=lambda m: m(b["words"], b["chars"], b["tags"]))
    lstm_w = [f"{m}.{k}{r}" for m, n in (("char_lstm", 1), ("lstm", 2)) for i in range(n) for k in
              (f"weight_ih_l{i}", f"weight_hh_l{i}") for r in ("", "_reverse")]
    assert sorted(st.weight_amax) == sorted(lstm_w + ["mlp.arc_dep.linear.weight", "mlp.arc_head.linear.weight",
                                                      "mlp.rel_dep.linear.weight", "mlp.rel_head.linear.weight"])
    # LSTM matrices sit on the int8 grid of their own row (gate unit) scale
    w = model.lstm.weight_hh_l1_reverse.detach()
    steps = w / (st.weight_amax["lstm.weight_hh_l1_reverse"][:, None] / 127)
    assert torch.allclose(steps, steps.round(), atol=1e-3) and steps.abs().max() <= 127.001
    # the LSTMs' inputs (a PackedSequence for both) are activation sites, and are quantised
    assert {"lstm.input", "char_lstm.input"} <= set(st.activation_amax)
    seen = []
    h = model.lstm.register_forward_pre_hook(lambda m, a: seen.append(a[0].data.clone()), prepend=False)
    model(b["words"], b["chars"], b["tags"])
    h.remove()
    grid = seen[0] / (st.activation_amax["lstm.input"] / 127)
    assert torch.allclose(grid, grid.round(), atol=1e-3)
    # pruned and fake-quantised, the parser still parses the toy language (100 LAS measured; its training is
    # deterministic, bounded by epochs)
    after = evaluate(model, vocab, sents)
    assert after.invalid_trees == 0 and after.las > 90, after


def test_predicted_tag_mode_trains_its_own_tagger_and_ignores_file_tags(tmp_path):
    import json

    from forgetbench.parsing.parsers.tagger import accuracy, load_tagger

    tr = _toy_treebank(tmp_path / "train.conllu", 120, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 30, 1)
    kw = dict(max_epochs=15, max_tokens=100, progress=False, lstm_hidden=32, arc_mlp=32, rel_mlp=16, word_dim=16,
              char_dim=8, char_hidden=16, tag_dim=8)
    # epoch budgets (the time budgets are too large to bind): the same run on any host
    info = train(tr, dv, tmp_path / "m", minutes=60, tags="predicted", tagger_minutes=10, tagger_epochs=5, jackknife=2,
                 **kw)
    assert info["tags"] == "predicted" and info["jackknife_folds"] == 2 and not (tmp_path / "m" / "_jackknife").exists()
    assert info["tagger_dev_upos"] > 90 and info["train_upos_jackknifed"] > 80
    model, vocab = load_parser(tmp_path / "m")
    tagger = load_tagger(tmp_path / "m")
    sents = read_conllu(dv)
    assert accuracy(tagger, vocab, sents) == json.loads((tmp_path / "m" / "tagger" / "training.json").read_text())["dev_upos"]
    good = evaluate(model, vocab, sents, tagger)
    assert good.las == info["dev"]["las"] and good.las > 85
    # a test file with nonsense UPOS: the predicted-tag parser does not read them
    bad = tmp_path / "badtags.conllu"
    bad.write_text("\n".join("\t".join(c[:3] + ["X"] + c[4:]) if len(c := ln.split("\t")) == 10 else ln
                              for ln in dv.read_text().splitlines()) + "\n")
    assert evaluate(model, vocab, read_conllu(bad), tagger).las == good.las
    assert load_tagger(tmp_path) is None


def test_parse_cli(tmp_path, capsys):
    from forgetbench.cli import main

    tr = _toy_treebank(tmp_path / "train.conllu", 40, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 10, 1)
    assert main(["parse", "train", "--train", str(tr), "--dev", str(dv), "--out", str(tmp_path / "a" / "m"), "--max-steps",
                 "4", "--eval-every", "2", "--tags", "gold", "--quiet"]) == 0  # missing parents are created (mkdir -p)
    out = capsys.readouterr().out
    assert re.search(r"; step [24] of 4, epoch \d+ of \d+, \d+s; stopped by max_steps: 4 steps\)", out), out
    assert main(["parse", "eval", str(tmp_path / "a" / "m"), str(dv)]) == 0
    assert '"las"' in capsys.readouterr().out
    assert main(["parse", "eval", str(tmp_path / "nope"), str(dv)]) == 2
    train = ["parse", "train", "--train", str(tr), "--dev", str(dv), "--out", str(tmp_path / "m2"), "--quiet"]
    for bad, says in [
            # taggers would eat the whole budget in epochs: refused before any work, nothing written
            (["--max-epochs", "2", "--minutes", "2", "--tagger-epochs", "5", "--tagger-minutes", "1", "--jackknife", "4"],
             "(folds + 1) x --tagger-minutes < --minutes"),
            (["--tagger-minutes", "1"], "--tagger-minutes bounds a tagger budget in epochs"),  # never silently dropped
            (["--fold-minutes", "1"], "--fold-minutes bounds k-fold parsers trained by epochs"),
            (["--patience", "-1"], "patience must be a whole number of steps >= 0")]:
        capsys.readouterr()
        assert main(train + bad) == 2, bad
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
        assert not (tmp_path / "m2").exists()


def test_parse_compress_report(tmp_path):
    from forgetbench.cli import main

    tr = _toy_treebank(tmp_path / "train.conllu", 60, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 12, 1)
    for name in ("a", "b", "c"):
        train(tr, dv, tmp_path / name, minutes=60, max_epochs=2, max_tokens=200, progress=False, lstm_hidden=16,
              arc_mlp=16, rel_mlp=8, word_dim=8, char_dim=4, char_hidden=8, tag_dim=4)
    args = ["parse", "compress", "--models", *(str(tmp_path / n) for n in "abc"), "--test", *[str(dv)] * 3,
            "--dev", *[str(dv)] * 3, "--out", str(tmp_path / "rep")]
    assert main(args) == 0
    import json

    S = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert len(S["treebanks"]) == 3 and set(S["treebanks"][0]["variants"]) == {"prune-30", "prune-45", "ptq-int8"}
    assert (tmp_path / "rep" / "report.html").is_file() and (tmp_path / "rep" / "parse_compression.csv").is_file()
    v = S["treebanks"][0]["variants"]
    assert v["ptq-int8"]["sizes"]["nominal_ratio"] == 0.25 and v["ptq-int8"]["sizes"]["int8_ratio"] < 0.5  # embeddings + biaffine stay fp32
    assert v["prune-45"]["sizes"]["nominal_ratio"] == 0.55 and v["prune-45"]["sizes"]["sparse"]["sparse_tensors"] > 0
    assert "real artefact (vs fp32)" in (tmp_path / "rep" / "report.md").read_text()
    # the treebank column names the test file, the model column the parser's folder
    assert (tmp_path / "rep" / "parse_compression.csv").read_text().splitlines()[1].startswith("dev,a,gold,base,")
    # every LAS change with its paired bootstrap interval
    for d in v.values():
        lo, hi = d["rel_las_ci"]
        assert lo <= d["rel_las"] + 1e-9 and d["rel_las"] <= hi + 1e-9 and 0 < d["las_p"] <= 1
        assert d["losers_pct_ci"][0] <= d["losers_pct"] + 1e-9
        # per relation class: the words of every class add up to the test words, each change inside its interval
        rc = d["relation_classes"]
        assert sum(x["words"] for x in rc.values()) == d["words"]
        assert all(x["delta_ci"][0] - 1e-9 <= x["delta"] <= x["delta_ci"][1] + 1e-9 for x in rc.values())
    assert "LAS per relation class" in (tmp_path / "rep" / "report.md").read_text()
    assert (tmp_path / "rep" / "parse_relation_classes.csv").is_file()


def test_parse_predict_scored_by_the_official_conll2018_scorer_equals_parse_eval(tmp_path, capsys):
    """The CoNLL 2018 / IWPT 2020 evaluation script (``udtools.udeval``, UFAL's official scorer) on `parse predict`'s
    output gives the UPOS, UAS and LAS that `parse eval` reports: the output carries the model's predictions only."""
    import json

    from udtools import udeval  # a declared test dependency: a broken install fails here, never skips

    from forgetbench.cli import main

    tr = _toy_treebank(tmp_path / "train.conllu", 60, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 12, 1)
    assert main(["parse", "train", "--train", str(tr), "--dev", str(dv), "--out", str(tmp_path / "m"), "--minutes", "30",
                 "--tagger-minutes", "5", "--max-epochs", "4", "--tagger-epochs", "3", "--jackknife", "2",
                 "--quiet"]) == 0  # predicted tags (the default); epoch budgets: the same run on any host
    capsys.readouterr()
    assert main(["parse", "eval", str(tmp_path / "m"), str(dv)]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert main(["parse", "predict", str(tmp_path / "m"), str(dv), "--out", str(tmp_path / "pred.conllu"), "--quiet"]) == 0
    kinds = {k: 0 for k in ("no_gapping", "no_shared_parents_in_coordination", "no_shared_dependents_in_coordination",
                            "no_control", "no_external_arguments_of_relative_clauses", "no_case_info", "no_empty_nodes",
                            "multiple_roots_okay")}
    gold = udeval.load_conllu_file(str(dv), kinds)
    system = udeval.load_conllu_file(str(tmp_path / "pred.conllu"), kinds)
    official = udeval.evaluate(gold, system)
    assert ours["tags"] == "predicted" and 0 < ours["upos"] <= 100
    for ours_key, theirs in (("uas", "UAS"), ("las", "LAS"), ("clas", "CLAS"), ("upos", "UPOS")):
        assert abs(100 * official[theirs].f1 - ours[ours_key]) < 1e-9, (ours_key, official[theirs].f1, ours[ours_key])
    assert official["Lemmas"].f1 == 0  # the gold lemmas are not copied into the output


def test_parse_train_options_are_one_config_by_name():
    """Every `parse train` option lands in ``ParseTrainConfig`` under its own name; network options only when
    given; ``train_parser`` resolves the per-architecture time budget and the refiner's graphs."""
    from dataclasses import fields

    from forgetbench.cli import build_parser
    from forgetbench.parsing.train import MODEL_OPTIONS, ParseTrainConfig

    args = build_parser().parse_args(["parse", "train", "--train", "t.conllu", "--out", "o", "--arch", "rngtr",
                                      "--initial", "b", "--no-relation-norm", "--tagger-epochs", "3"])
    cfg = ParseTrainConfig.from_options(args, threads=2)
    assert (cfg.train, cfg.out, cfg.arch, cfg.initial, cfg.tagger_epochs, cfg.threads) == ("t.conllu", "o", "rngtr",
                                                                                            "b", 3, 2)
    assert cfg.model == {"relation_norm": False} and cfg.minutes is None and cfg.refiner_graphs is None
    options = {a.dest for a in build_parser()._subparsers._group_actions[0].choices["parse"]._subparsers
               ._group_actions[0].choices["train"]._actions} - {"help", "quiet", "debug"}
    assert options == {f.name for f in fields(ParseTrainConfig)} - {"model"} | set(MODEL_OPTIONS)


def test_the_parse_report_writes_a_base_las_of_zero(tmp_path):
    """A parser that gets no word right has no relative LAS change: the report says – instead of failing."""
    from forgetbench.report.parsing import write_parse_report

    v = {"las": 0.8, "uas": 5.0, "clas": 0.0, "rel_las": None, "rel_las_ci": [None, None], "las_p": 1.0,
         "losers_pct": 0.0, "losers_pct_ci": [0.0, 0.0], "sizes": {}, "sent_per_s": 10.0, "worst": []}
    S = {"recipes": ["prune-45"], "threads": 1, "contrasts": [],
         "treebanks": [{"model": "m", "base": {"las": 0.0, "uas": 3.0, "clas": 0.0, "sent_per_s": 9.0},
                        "variants": {"prune-45": v}}]}
    write_parse_report(S, tmp_path / "rep")
    row = (tmp_path / "rep" / "parse_compression.csv").read_text().splitlines()[2]
    assert row.startswith("m,m,gold,prune-45,0.80,") and ",– ," in row  # no test file kept: the model's name


def test_a_step_budget_trains_byte_identical_weights_on_an_idle_and_a_loaded_host(tmp_path):
    """``parse train``'s budget in steps reads no clock: the same command, once alone and once beside two busy
    processes, writes the same bytes (parser and tagger), stops at the same step for the same reason."""
    import subprocess
    import sys

    from forgetbench.cli import main

    tr = _toy_treebank(tmp_path / "train.conllu", 60, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 15, 1)
    args = ["parse", "train", "--train", str(tr), "--dev", str(dv), "--max-steps", "24", "--patience", "8",
            "--eval-every", "4", "--tagger-max-steps", "6", "--jackknife", "2", "--quiet", "--threads", "1"]
    assert main([*args, "--out", str(tmp_path / "idle")]) == 0
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        assert main([*args, "--out", str(tmp_path / "loaded")]) == 0
    finally:
        for p in busy:
            p.kill()
            p.wait()
    for f in ("model.safetensors", "tagger/model.safetensors"):
        assert (tmp_path / "idle" / f).read_bytes() == (tmp_path / "loaded" / f).read_bytes(), f
    import json

    a, b = (json.loads((tmp_path / d / "training.json").read_text()) for d in ("idle", "loaded"))
    assert a["budget"] == {"steps": {"max_steps": 24, "patience": 8, "eval_every": 4}, "safety_minutes": None}
    assert (a["steps"], a["best_step"], a["stopped_by"]) == (b["steps"], b["best_step"], b["stopped_by"])
    assert a["steps"] <= 24 and a["best_step"] % 4 == 0 and a["tagger_steps"] <= 6
    assert [h["step"] for h in a["history"]] == list(range(4, a["steps"] + 1, 4))
