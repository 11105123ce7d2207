"""Compress trained parsers with the MT recipes and report, per treebank, what was lost.

    forgetbench parse compress --models runs/parsers/en_lines runs/parsers/tr_imst ... \\
        --test data/ud/.../en_lines-ud-test.conllu ... --recipes prune-30 prune-45 ptq-int8 --out runs/parse-compress

For each treebank and recipe: LAS/UAS/CLAS before and after, relative LAS drop, the share of
sentences whose LAS fell (the parsing analogue of ΔchrF losers) and the most-losing sentences,
model size (nominal) and parsing speed (sentences/s, 1 thread). Recipes run through
``compress.apply_recipe`` with a ``ConlluCalibration``: PTQ calibrates on CoNLL-U sentences, the
recipe's own (``calibration: {data: FILE.conllu}``) or, with ``--dev``, the first 200 sentences of
the treebank's dev set; MT calibration data (a TSV) is refused before any work. The report files
(summary.json, report.md, report.html, parse_compression.csv) are written by ``report.parsing``.
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from forgetbench.compress import apply_recipe, check_recipe
from forgetbench.compress.pipeline import write_artefacts
from forgetbench.compress.recipe import Calibration, Recipe, load_recipe
from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bootstrap as bs
from forgetbench.io import sha256_file
from forgetbench.models.hardware import resolve_device
from forgetbench.parsing.data.batching import batches, batchify, moved
from forgetbench.parsing.data.conll import read_conllu
from forgetbench.parsing.evaluate import corpus_las
from forgetbench.parsing.layers.modules import subunits
from forgetbench.parsing.metrics import class_las_counts, score, sentence_las, sentence_las_counts
from forgetbench.parsing.parsers import interface as parsers
from forgetbench.parsing.parsers.tagger import tag, with_tags
from forgetbench.parsing.saving import save_module_dir
from forgetbench.stats import pct, rel

DEV_CALIBRATION_SENTENCES = 200


def _forward(model, bs, b) -> None:
    model(b["words"], subunits(model, b), b["tags"])


class ConlluCalibration:
    """The parsers' calibration source for ``compress.apply_recipe``: the first ``max_sentences``
    sentences of a CoNLL-U file (tagged by the parser's own tagger in predicted-tag mode), run through
    the network in batches of at most 3000 tokens by ``feed(model, sentences, batch)`` — a forward pass
    by default; ``parsers.Parser.calibration_feed`` gives each network the inputs it sees when parsing
    (an RNGTr refiner its initial graphs and iterations, G2GTr its greedy transition steps)."""

    def __init__(self, vocab, tagger=None, feed=_forward):
        self.vocab, self.tagger, self.feed = vocab, tagger, feed

    def check(self, spec: Calibration | None) -> str | None:
        if spec is None:
            return "no calibration data: add calibration: {data: FILE.conllu} to the step or pass --dev FILE.conllu"
        if spec.data.suffix != ".conllu":
            return (f"parsers calibrate on CoNLL-U sentences, not {spec.data.name}: give calibration: {{data: FILE.conllu}} "
                    "in the recipe, or --dev FILE.conllu")
        return None

    def forwards(self, spec: Calibration):
        sents = read_conllu(spec.data)[: spec.max_sentences]
        if self.tagger is not None:
            sents = with_tags(sents, tag(self.tagger, self.vocab, sents))
        data = [(bs, batchify(bs, self.vocab)) for bs in batches(sents, 3000, shuffle=False)]  # on the host

        def run(model):
            device = next(model.parameters()).device  # each batch moved to the network's device as it is fed
            with torch.no_grad():
                for bs, b in data:
                    self.feed(model, bs, moved(b, device))

        return run, {"data": str(spec.data), "sha256": sha256_file(spec.data), "sentences": len(sents)}


def with_calibration(recipe: Recipe, data: Path, max_sentences: int = DEV_CALIBRATION_SENTENCES) -> Recipe:
    """``recipe`` with every activation-quantising step calibrated on ``data`` instead of its own data."""
    steps = tuple(dataclasses.replace(s, calibration=Calibration(Path(data).resolve(), max_sentences))
                  if getattr(s.config, "needs_calibration", False) else s for s in recipe.steps)
    return dataclasses.replace(recipe, steps=steps)


def variant_sizes(networks: dict, recipe, qstates: dict, steps: dict | None = None) -> dict:
    """Real on-disk sizes of the compressed parser's networks (dense fp32, int8, sparse), written to a scratch
    folder; bytes summed over the networks (an RNGTr is its refiner + its initial parser), per network kept."""
    per = {}
    with tempfile.TemporaryDirectory() as d:
        for name, model in networks.items():
            sub = Path(d) / name
            save_module_dir(model, "forgetbench-network", model.cfg.to_dict(), sub)
            per[name] = write_artefacts(model, recipe, qstates[name], sub, (steps or {}).get(name))
    if len(per) == 1:
        return next(iter(per.values()))
    out = {k: sum(v[k] for v in per.values()) for k in ("dense_bytes", "int8_bytes", "sparse_bytes")
           if all(k in v for v in per.values())}
    for k in ("int8", "sparse"):
        if f"{k}_bytes" in out:
            out[f"{k}_ratio"] = out[f"{k}_bytes"] / out["dense_bytes"]
    return out | {"nominal_ratio": next(iter(per.values()))["nominal_ratio"], "networks": per}


def las_difference(base_counts, comp_counts, weights) -> dict:
    """Paired bootstrap of LAS over sentences (the same resample for both parsers): interval and p-value of the
    relative LAS change, and the interval of the share of sentences losing LAS."""
    (b, las_b), (c, las_c) = corpus_las(base_counts, weights), corpus_las(comp_counts, weights)
    losing = np.array([cc < bc for (bc, _), (cc, _) in zip(base_counts, comp_counts, strict=True)], dtype=float)
    return {"rel_las_ci": bs.percentile_interval((las_c - las_b) / las_b * 100).to_dict(),
            "las_p": bs.paired_p(las_b, las_c, c - b),
            "losers_pct_ci": bs.percentile_interval(100 * bs.resample_mean(losing, weights)).to_dict()}


def class_changes(gold, base_preds, comp_preds, weights) -> dict:
    """Per relation class (``metrics.RELATION_CLASSES``, by the gold relation): LAS of the base and the variant on
    the words of that class, and the change in points with its paired bootstrap interval (sentences resampled as
    everywhere in this report)."""
    cb, cv = class_las_counts(gold, base_preds), class_las_counts(gold, comp_preds)
    out = {}
    for k in cb:
        words = sum(n for _, n in cb[k])
        if not words:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):  # a resample without words of the class: NaN, left out
            (b, rb), (v, rv) = corpus_las(cb[k], weights), corpus_las(cv[k], weights)
        out[k] = {"words": words, "las_base": b, "las": v, "delta": v - b,
                  "delta_ci": bs.percentile_interval(rv - rb).to_dict()}
    return out


def forgetting_contrast(ref: dict, other: dict, weights: np.ndarray) -> dict:
    """(LAS change of ``other`` under a recipe) − (LAS change of ``ref`` under it), in points, on the same test
    sentences and the same resamples: negative = ``other`` forgets more. Each dict: base / variant counts."""
    def change(c):
        (b, rb), (v, rv) = corpus_las(c["base"], weights), corpus_las(c["variant"], weights)
        return v - b, rv - rb

    (d_ref, r_ref), (d_oth, r_oth) = change(ref), change(other)
    return {"delta": d_oth - d_ref, "delta_ci": bs.percentile_interval(r_oth - r_ref).to_dict(),
            "las_change": {"reference": d_ref, "other": d_oth}}


def run(models: list[str], tests: list[str], devs: list[str] | None, recipes: list[str], threads: int = 1,
        n_examples: int = 5, resamples: int = bs.RESAMPLES, seed: int = bs.SEED, device: str = "cpu") -> dict:
    """The parser compression summary (``report.parsing.write_parse_report`` renders it); every LAS change with its
    paired bootstrap 95 % interval (sentences resampled, ``resamples`` times, ``seed``; the same resamples for
    every model of one test file). Any architecture (``parsers.load``); a recipe applies to every network of the
    parser (an RNGTr's refiner and its initial parser), each calibrated on the inputs it sees when parsing. When
    several models share a test file, ``contrasts`` says which forgets more: each model's LAS change minus the
    first model's, per recipe, with its paired interval. ``device`` (cpu, cuda, cuda:N, auto): where every parser
    is calibrated, compressed and parses (decoding on the host); its speeds are that device's."""
    if len(models) != len(tests) or (devs and len(devs) != len(models)):
        raise ForgetbenchError("give one --test (and, if any, one --dev) file per --models folder, in the same order")
    recs = [load_recipe(r) for r in recipes]
    per_tb = [[with_calibration(r, Path(d)) for r in recs] for d in devs] if devs else [recs] * len(models)
    for tb_recipes in per_tb:  # refuse what a parser cannot do before loading anything
        for r in tb_recipes:
            check_recipe(r, ConlluCalibration(vocab=None))
    device = resolve_device(device)
    torch.set_num_threads(threads)
    summary = {"recipes": recipes, "treebanks": [], "contrasts": [], "threads": threads, "device": device,
               "environment": environment(),
               "bootstrap": {"resamples": resamples, "seed": seed}}
    test_index = {t: k for k, t in enumerate(dict.fromkeys(str(Path(t).resolve()) for t in tests))}
    kept: dict[int, list[tuple[str, dict]]] = {}
    for mdir, tfile, tb_recipes in zip(models, tests, per_tb, strict=True):
        base = parsers.load(mdir).to(device)
        tagger, vocab = base.tagger, base.vocab  # predicted-tag parsers: the tagger stays uncompressed, tags once
        sents = read_conllu(tfile)
        gold = [(s.heads, s.deprels) for s in sents]
        if tagger is not None:
            sents = with_tags(sents, tag(tagger, vocab, sents))
        t0 = time.perf_counter()
        pb = base.parse(sents)
        base_speed = len(sents) / (time.perf_counter() - t0)
        sb = score(gold, pb)
        las_b = sentence_las(gold, pb)
        counts_b = sentence_las_counts(gold, pb)
        k_test = test_index[str(Path(tfile).resolve())]
        weights = bs.counts(len(sents), resamples, [seed, k_test])
        tb = {"model": str(mdir), "arch": base.arch, "test": str(tfile), "sentences": len(sents),
              "tags": "gold" if tagger is None else "predicted", "base": sb.to_dict() | {"sent_per_s": base_speed},
              "variants": {}}
        counts = {}
        for rec in tb_recipes:
            name = rec.name
            p = copy.deepcopy(base)
            nets, qstates, steps = p.networks(), {}, {}
            for net_name, net in nets.items():
                rep, qstates[net_name] = apply_recipe(net, rec, ConlluCalibration(vocab, tagger, base.calibration_feed(net_name)))
                steps[net_name] = rep["steps"]
            sizes = variant_sizes(nets, rec, qstates, steps)
            t0 = time.perf_counter()
            pv = p.parse(sents)
            speed = len(sents) / (time.perf_counter() - t0)
            sv = score(gold, pv)
            las_v = sentence_las(gold, pv)
            deltas = [b - a for a, b in zip(las_b, las_v, strict=True)]
            worst = sorted(range(len(sents)), key=lambda i: deltas[i])[:n_examples]
            tb["variants"][name] = sv.to_dict() | {
                "sent_per_s": speed, "rel_las": rel(sv.las, sb.las), "sizes": sizes,
                "losers_pct": pct(sum(d < 0 for d in deltas), len(deltas)),
                "winners_pct": pct(sum(d > 0 for d in deltas), len(deltas)),
                "worst": [{"sentence": " ".join(sents[i].forms), "las_base": las_b[i], "las": las_v[i]} for i in worst]}
            counts[name] = {"base": counts_b, "variant": sentence_las_counts(gold, pv)}
            tb["variants"][name] |= las_difference(counts_b, counts[name]["variant"], weights)
            tb["variants"][name]["relation_classes"] = class_changes(gold, pb, pv, weights)
        summary["treebanks"].append(tb)
        kept.setdefault(k_test, []).append((str(mdir), counts))
        if len(kept[k_test]) > 1:
            ref_dir, ref = kept[k_test][0]
            for rec in tb_recipes:
                if rec.name in ref:
                    summary["contrasts"].append({"test": str(tfile), "reference": ref_dir, "model": str(mdir),
                                                 "recipe": rec.name} | forgetting_contrast(ref[rec.name], counts[rec.name], weights))
    return summary
