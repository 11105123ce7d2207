import random

import torch

from forgetbench.compress import PruneConfig, QuantConfig, prune, quantize
from forgetbench.parsing.conll import read_conllu
from forgetbench.parsing.train import batchify, evaluate, load_parser, predict_file, train


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
    info = train(tr, dv, tmp_path / "model", minutes=0.5, max_epochs=15, max_tokens=100, progress=False, lstm_hidden=32,
                 arc_mlp=32, rel_mlp=16, word_dim=16, char_dim=8, char_hidden=16, tag_dim=8)
    assert info["dev"]["las"] > 90.0, info["history"]
    model, vocab = load_parser(tmp_path / "model")
    sents = read_conllu(dv)
    s0 = evaluate(model, vocab, sents)
    assert s0.las == info["dev"]["las"] and s0.invalid_trees == 0
    predict_file(tmp_path / "model", dv, tmp_path / "pred.conllu")
    assert [s.heads for s in read_conllu(tmp_path / "pred.conllu")] != []
    # the same compression hooks work on the parser: its units are declared
    rep = prune(model, PruneConfig(0.3))
    assert [u.name for u in rep.units] == ["embeddings", "char_encoder", "encoder.lstm", "mlp", "biaffine"]
    b = batchify(sents[:8], vocab)
    st = quantize(model, QuantConfig(calibrator="max"), calibrate=lambda m: m(b["words"], b["chars"], b["tags"]))
    assert sorted(st.weight_amax) == ["mlp.arc_dep.linear.weight", "mlp.arc_head.linear.weight",
                                      "mlp.rel_dep.linear.weight", "mlp.rel_head.linear.weight"]
    after = evaluate(model, vocab, sents)
    assert after.las <= 100.0 and torch.is_tensor(b["words"])


def test_parse_cli(tmp_path, capsys):
    from forgetbench.cli import main

    tr = _toy_treebank(tmp_path / "train.conllu", 40, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 10, 1)
    assert main(["parse", "train", "--train", str(tr), "--dev", str(dv), "--out", str(tmp_path / "m"), "--minutes", "0.05",
                 "--quiet"]) == 0
    assert main(["parse", "eval", str(tmp_path / "m"), str(dv)]) == 0
    assert '"las"' in capsys.readouterr().out
    assert main(["parse", "eval", str(tmp_path / "nope"), str(dv)]) == 2


def test_parse_compress_report(tmp_path):
    from forgetbench.cli import main

    tr = _toy_treebank(tmp_path / "train.conllu", 60, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 12, 1)
    for name in ("a", "b", "c"):
        train(tr, dv, tmp_path / name, minutes=0.05, max_epochs=2, max_tokens=200, progress=False, lstm_hidden=16,
              arc_mlp=16, rel_mlp=8, word_dim=8, char_dim=4, char_hidden=8, tag_dim=4)
    args = ["parse", "compress", "--models", *(str(tmp_path / n) for n in "abc"), "--test", *[str(dv)] * 3,
            "--dev", *[str(dv)] * 3, "--out", str(tmp_path / "rep")]
    assert main(args) == 0
    import json

    S = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert len(S["treebanks"]) == 3 and set(S["treebanks"][0]["variants"]) == {"prune-30", "prune-45", "ptq-int8"}
    assert (tmp_path / "rep" / "report.html").is_file() and (tmp_path / "rep" / "parse_compression.csv").is_file()
