"""Evaluate any parser on a CoNLL-U file, and compare two parsers' LAS on the same sentences.

``evaluate_parser``: CoNLL 2018 UAS/LAS/CLAS (``parsing.metrics``) with the parser's own UPOS in
predicted-tag mode (+ UPOS accuracy), parsing speed (sentences/s, tagging excluded, the threads
set by the caller), and for RNGTr the per-iteration scores (the tree after t = 1..T iterations) and
how many iterations the sentences ran. ``las_gain``: LAS(b) − LAS(a) in points with its paired
bootstrap 95 % interval over sentences (the same resample for both parsers; words per sentence kept
as weights, so each resample's LAS is a corpus LAS).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.io import sha256_file
from forgetbench.models.hardware import resolve_device
from forgetbench.parsing.data.conll import read_conllu
from forgetbench.parsing.metrics import score, sentence_las_counts
from forgetbench.parsing.parsers import interface as parsers
from forgetbench.parsing.parsers.tagger import tag, upos_accuracy, with_tags

Pred = tuple[list[int], list[str]]


def parse_file(parser: parsers.Parser, data: str | Path, record: bool = False) -> dict:
    """Gold trees, the parser's predictions (and per-iteration trees with ``record``), UPOS used, parse seconds."""
    sents = read_conllu(data)
    pred_tags = tag(parser.tagger, parser.vocab, sents) if parser.tagger is not None else None
    tagged = with_tags(sents, pred_tags) if pred_tags else sents
    t0 = time.perf_counter()
    out = parser.parse(tagged, record=record and parser.architecture.refines)
    seconds = time.perf_counter() - t0
    preds, per_it, ran = out if isinstance(out, tuple) else (out, None, None)
    return {"gold": [(s.heads, s.deprels) for s in sents], "preds": preds, "per_iteration": per_it, "ran": ran,
            "tags": pred_tags, "sents": sents, "seconds": seconds}


def evaluate_parser(model_dir: str | Path, data: str | Path, initial: str | None = None,
                    iterations: int | None = None, device: str = "cpu") -> dict:
    parser = parsers.load(model_dir, initial=initial, iterations=iterations).to(resolve_device(device))
    r = parse_file(parser, data, record=True)
    s = score(r["gold"], r["preds"]).to_dict()
    s |= {"arch": parser.arch, "tags": "gold" if parser.tagger is None else "predicted", "data": str(data),
          "data_sha256": sha256_file(data), "sent_per_s": round(len(r["gold"]) / r["seconds"], 1)}
    if r["tags"] is not None:
        s["upos"] = upos_accuracy(r["sents"], r["tags"])
    if parser.architecture.refines:
        s["initial"] = "empty" if parser.initial is None else parser.initial.arch
        s["max_iterations"] = parser.iterations
        s["per_iteration"] = [{"iteration": t + 1, **{k: v for k, v in score(r["gold"], p).to_dict().items()
                                                      if k in ("uas", "las", "clas")}}
                              for t, p in enumerate(r["per_iteration"])]
        s["sentences_by_iterations_run"] = dict(sorted(Counter(r["ran"]).items()))
    return s


def corpus_las(counts: list[tuple[int, int]], weights: np.ndarray) -> tuple[float, np.ndarray]:
    """LAS from per-sentence (correct, words) counts and its value in each resample (rows of ``bs.counts``):
    a resample's LAS is a corpus LAS, words per sentence as weights."""
    c, n = (np.array(x, dtype=float) for x in zip(*counts, strict=True))
    return 100 * c.sum() / n.sum(), 100 * (weights @ c) / (weights @ n)


def las_gain(gold: list[Pred], a: list[Pred], b: list[Pred], resamples: int = bs.RESAMPLES, seed: int = bs.SEED) -> dict:
    """LAS(b) − LAS(a) in points on the same sentences, with the paired bootstrap 95 % interval and p-value."""
    w = bs.counts(len(gold), resamples, seed)
    (la, ra), (lb, rb) = corpus_las(sentence_las_counts(gold, a), w), corpus_las(sentence_las_counts(gold, b), w)
    return {"delta": lb - la, "delta_ci": bs.percentile_interval(rb - ra).to_dict(), "p": bs.paired_p(ra, rb, lb - la),
            "resamples": resamples, "seed": seed}
