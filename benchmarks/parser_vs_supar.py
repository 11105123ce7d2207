"""Parsing speed and LAS: forgetbench's biaffine parser vs SuPar's, trained here on the same treebank.

    pip install -e ".[bench]"         # SuPar 1.1.4 (MIT): benchmark-only, not needed by forgetbench
    python -m benchmarks.parser_vs_supar --ours runs/parsers/en_lines \\
        --treebank data/ud/UD_English-LinES --code en_lines --minutes 15 --out runs/parser-vs-supar.json

SuPar's ``BiaffineDependencyParser`` is built with sizes matching ours (2 × 200-unit BiLSTM layers,
arc MLP 300, label MLP 100, 100-d words, character LSTM, UPOS embedding, no pretrained embeddings)
and trained on the same training file for the same wall-clock budget as our parser's run (1
thread; SuPar evaluates dev and test after every epoch inside that budget, as it always does). Both
see the same UPOS at test time: when our parser uses predicted tags, SuPar's test file carries our
tagger's tags (SuPar itself trains on gold tags, its standard setting). Both decode non-projective
MST trees. Speed: test-set sentences per second, 1 thread, measured alternately in one process
(warm-up, then 3 rounds each, median). LAS of both by forgetbench's CoNLL 2018 scorer on gold trees.
"""

import argparse
import functools
import json
import statistics
import time
from pathlib import Path

import torch

from benchmarks.common import environment
from forgetbench.io import atomic_write_json
from forgetbench.parsing.data.conll import read_conllu
from forgetbench.parsing.metrics import score
from forgetbench.parsing.parsers.tagger import load_tagger, tag, with_tags
from forgetbench.parsing.train import load_parser, predict


def plain_conll(sents, path: Path, upos: list[list[str]] | None = None) -> None:
    """Syntactic words only (no comments, multi-word tokens or empty nodes): what SuPar 1.1.4 reads."""
    lines = []
    for k, s in enumerate(sents):
        tags = upos[k] if upos else s.upos
        for i, w in enumerate(s.words):
            lines.append("\t".join([str(w["id"]), w["form"], w["lemma"] or "_", tags[i], w["xpos"] or "_", "_",
                                    str(w["head"]), w["deprel"] or "_", "_", "_"]))
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class _Budget(Exception):
    pass


def train_supar(train: Path, dev: Path, test: Path, path: Path, minutes: float, seed: int):
    import supar.parsers.parser as sp
    from supar import BiaffineDependencyParser

    # SuPar 1.1.4 predates torch's weights_only default; the checkpoint is the one this run just wrote
    sp.torch.load = functools.partial(torch.load, weights_only=False)
    torch.manual_seed(seed)
    parser = BiaffineDependencyParser.build(
        str(path), build=True, feat=["tag", "char"], embed=None, train=str(train), n_embed=100, n_feat_embed=100,
        n_char_embed=50, n_char_hidden=100, n_lstm_hidden=200, n_lstm_layers=2, n_arc_mlp=300, n_rel_mlp=100,
        encoder="lstm", min_freq=2, fix_len=20, lr=2e-3, mu=0.9, nu=0.9, eps=1e-12, weight_decay=0, decay=0.75,
        decay_steps=5000, clip=5.0, seed=seed, threads=1, workers=0, device="cpu", local_rank=-1, checkpoint=False)
    t0 = time.perf_counter()
    inner = parser._train

    def timed_train(loader):  # stop at the first epoch boundary past the budget (the best model is on disk)
        if time.perf_counter() - t0 > minutes * 60:
            raise _Budget
        inner(loader)

    parser._train = timed_train
    try:
        parser.train(str(train), str(dev), str(test), epochs=1000, patience=1000, batch_size=5000, buckets=32,
                     update_steps=1, punct=True, tree=False, proj=False, partial=False, verbose=False)
    except _Budget:
        pass
    return time.perf_counter() - t0, sum(p.numel() for p in parser.model.parameters())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True, help="a parser folder from `forgetbench parse train`")
    ap.add_argument("--treebank", required=True)
    ap.add_argument("--code", required=True)
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--work", default="runs/supar")
    ap.add_argument("--out", default="runs/parser-vs-supar.json")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    tb, work = Path(a.treebank), Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    tr, dv, te = (read_conllu(tb / f"{a.code}-ud-{s}.conllu") for s in ("train", "dev", "test"))
    ours, vocab = load_parser(a.ours)
    tagger = load_tagger(a.ours)
    test_tags = tag(tagger, vocab, te) if tagger is not None else None
    dev_tags = tag(tagger, vocab, dv) if tagger is not None else None
    files = {k: work / f"{k}.conllx" for k in ("train", "dev", "test")}
    plain_conll(tr, files["train"])
    plain_conll(dv, files["dev"], dev_tags)
    plain_conll(te, files["test"], test_tags)

    model_path = work / "model.pt"
    train_s, supar_params = (None, None)
    if not model_path.is_file():
        train_s, supar_params = train_supar(files["train"], files["dev"], files["test"], model_path, a.minutes, a.seed)
    from supar import Parser

    sup = Parser.load(str(model_path))
    supar_params = sum(p.numel() for p in sup.model.parameters())
    te_ours = with_tags(te, test_tags) if test_tags else te
    gold = [(s.heads, s.deprels) for s in te]

    def run_ours():
        return predict(ours, vocab, te_ours)

    def run_supar():
        pred = sup.predict(str(files["test"]), pred=str(work / "pred.conllx"), tree=True, proj=False, prob=False,
                           batch_size=5000, buckets=8, verbose=False)
        return [([int(h) for h in s.values[6]], list(s.values[7])) for s in pred.sentences]

    p_ours, p_sup = run_ours(), run_supar()  # warm-up, and the predictions we score
    times = {"ours": [], "supar": []}
    for _ in range(3):
        for name, fn in (("ours", run_ours), ("supar", run_supar)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    n = len(te)
    tag_s = None
    if tagger is not None:
        t0 = time.perf_counter()
        tag(tagger, vocab, te)
        tag_s = time.perf_counter() - t0
    s_ours, s_sup = score(gold, p_ours), score(gold, p_sup)
    res = {
        "treebank": a.code, "test_sentences": n, "tags": "gold" if tagger is None else "predicted (forgetbench tagger, both)",
        "ours": {"las": s_ours.las, "uas": s_ours.uas,
                 "sent_per_s": n / statistics.median(times["ours"]), "seconds": times["ours"],
                 "params": sum(p.numel() for p in ours.parameters()),
                 "train_minutes": json.loads((Path(a.ours) / "training.json").read_text())["train_seconds"] / 60,
                 "tagger_sent_per_s": n / tag_s if tag_s else None},
        "supar": {"version": __import__("supar").__version__, "las": s_sup.las, "uas": s_sup.uas,
                  "sent_per_s": n / statistics.median(times["supar"]), "seconds": times["supar"], "params": supar_params,
                  "train_minutes": None if train_s is None else train_s / 60},
        "environment": environment(),
    }
    res["speed_ratio_ours_over_supar"] = res["ours"]["sent_per_s"] / res["supar"]["sent_per_s"]
    atomic_write_json(Path(a.out), res)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
