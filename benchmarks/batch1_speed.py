"""Batch-1 greedy decoding speed of several models, interleaved sentence by sentence (same sentences, same load).

    python -m benchmarks.batch1_speed artifacts/teacher artifacts/student-kd artifacts/student-nokd [--sentences 60]
        [--backend torch|ctranslate2] [--compute-type int8] [--vmap-frequent 600]

Sources: the first N FLORES-101 devtest sentences of en→de, en→sw, de→en, sw→en (a quarter each); every
model translates sentence i before any model translates sentence i+1, so a change of load hits all alike.
Prints sentences/s, generated tokens/s and the speed-up over the first model with its paired bootstrap 95 %
interval (1,000 resamples of the sentences, ratio of summed times), with the environment, as JSON; and each
model's weights read per generated token (``weights_per_generated_token``) with the first model's count over it,
the per-token speed-up a runtime without per-layer overhead is bound to at batch 1.
``--backend ctranslate2``: each model's deployable form (``models.ct2`` conversion at ``--compute-type``, in a
temporary folder), timed the same way; disk size is then the converted model's.
``--vmap-frequent N`` (CTranslate2): each model is timed a second time with its output layer restricted to the N
most frequent tokens of the target language (``models.ct2.restricted``; counted on the target sides of
``data/corpus-sample``, English on every file's source side): a ceiling on what a lexical shortlist of that size
can buy, not a usable translator (frequency alone keeps no source word's translation); its speed-up and bound are
over the first model restricted alike. Every row carries the
chrF3 of its hypotheses against the FLORES references, so the quality side of each speed stays in view, and the time
of the same sentence stopped after two decoding steps (``two_steps_ms_per_sentence``, timed right after it; its
share of the full time, ``two_steps_share``): the encoder's pass and the per-sentence work a shallower decoder
cannot save.
"""

import argparse
import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import environment
from forgetbench.eval import bootstrap as bs
from forgetbench.eval.backends import TorchTranslator
from forgetbench.eval.languages import language
from forgetbench.eval.metrics import CHRF3, chrf_signature
from forgetbench.models import ct2
from forgetbench.models.load import load

DIRECTIONS = [("en", "de"), ("en", "sw"), ("de", "en"), ("sw", "en")]


def weights_per_generated_token(model) -> int:
    """Weights one greedy step reads at batch 1 (each used once: its multiply-adds too): every decoder layer's
    linear maps but the cross-attention's key and value maps (computed once per sentence from the encoder's output
    and cached), and the output projection. Decoding one token at a time is a matrix-vector product per map, bound
    by reading these weights, so the ratio of two models' counts is the speed-up an overhead-free runtime gives
    per generated token; the encoder runs once per sentence over all its tokens at once."""
    dec = model.get_decoder()
    n = sum(m.weight.numel() for name, m in dec.named_modules() if isinstance(m, torch.nn.Linear)
            and not name.endswith(("encoder_attn.k_proj", "encoder_attn.v_proj")))
    return n + model.get_output_embeddings().weight.numel()


_COUNTS: dict[tuple, Counter] = {}  # (corpus, language, vocabulary) -> token counts: models sharing a SPM count once


def frequent(tok, corpus: str, lang: str, n: int) -> list[str]:
    """The ``n`` most frequent tokens of ``lang``'s side of the TSV bitexts in ``corpus`` (``xx.tsv``: English, tab,
    xx), by ``tok``'s segmentation; ties by token id. Counted once per corpus, language and vocabulary."""
    key = (corpus, lang, tuple(sorted(tok.get_vocab().items())))
    if key not in _COUNTS:
        counts = Counter()
        for f in sorted(Path(corpus).glob("*.tsv")):
            col = 0 if lang == "en" else 1 if f.stem == lang else None
            if col is not None:
                texts = [r.split("\t")[col] for r in f.read_text(encoding="utf-8").splitlines() if "\t" in r]
                counts.update(i for x in tok(texts, add_special_tokens=False)["input_ids"] for i in x)
        _COUNTS[key] = counts
    counts = _COUNTS[key]
    if not counts:
        raise SystemExit(f"--vmap-frequent: no {lang} text in {corpus}/*.tsv")
    ids = sorted(counts, key=lambda i: (-counts[i], i))[:n]
    return tok.convert_ids_to_tokens(ids)


class _Restricted:
    """One restricted CTranslate2 translator per target language, behind ``translate``."""

    def __init__(self, by_target):
        self.by_target = by_target

    def translate(self, texts, s, t, num_beams, max_new_tokens):
        return self.by_target[t].translate(texts, s, t, num_beams, max_new_tokens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--flores", default="data/flores101")
    ap.add_argument("--sentences", type=int, default=60)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", choices=("torch", "ctranslate2"), default="torch")
    ap.add_argument("--compute-type", default="int8")
    ap.add_argument("--vmap-frequent", type=int, default=0, metavar="N")
    ap.add_argument("--corpus", default="data/corpus-sample")
    a = ap.parse_args()
    if a.vmap_frequent and a.backend != "ctranslate2":
        ap.error("--vmap-frequent needs --backend ctranslate2")
    torch.set_num_threads(a.threads)
    lines = {c: Path(a.flores, language(c).flores_file).read_text(encoding="utf-8").splitlines() for c in ("en", "de", "sw")}
    work = [(s, t, lines[s][i]) for i in range(a.sentences // len(DIRECTIONS)) for s, t in DIRECTIONS]
    tmp = tempfile.mkdtemp(prefix="fb-batch1-")
    models, disk, reads = {}, {}, {}
    for k, m in enumerate(a.models):
        model, tok = load(m, dtype="fp32", with_signature=False)[:2]
        reads[m] = weights_per_generated_token(model)
        if a.backend == "ctranslate2":
            folder = ct2.convert(model, tok, Path(tmp, str(k)), ct2.COMPUTE_TYPES[a.compute_type])
            models[m] = (ct2.Ct2Translator(folder, tok, "cpu", ct2.COMPUTE_TYPES[a.compute_type], a.threads), tok)
            disk[m] = ct2.disk_bytes(folder)
            if a.vmap_frequent:
                name = f"{m} [top {a.vmap_frequent}]"
                models[name] = (_Restricted({t: ct2.Ct2Translator(
                    ct2.restricted(folder, Path(tmp, f"{k}-{t}"), frequent(tok, a.corpus, t, a.vmap_frequent)), tok,
                    "cpu", ct2.COMPUTE_TYPES[a.compute_type], a.threads, use_vmap=True) for t in {t for _, t in DIRECTIONS}}),
                    tok)
                disk[name], reads[name] = disk[m], reads[m] - model.get_output_embeddings().weight.numel() + \
                    a.vmap_frequent * model.config.d_model
        else:
            models[m] = (TorchTranslator(model, tok), tok)
            disk[m] = sum(f.stat().st_size for f in Path(m).glob("*.safetensors"))
    for tr, _ in models.values():
        tr.translate([work[0][2]], work[0][0], work[0][1], 1, a.max_new_tokens)  # warm-up
    secs, toks, hyps = dict.fromkeys(models, 0.0), dict.fromkeys(models, 0), {name: [] for name in models}
    two_steps = dict.fromkeys(models, 0.0)
    per = {name: [] for name in models}  # seconds per sentence, for the speed-up's interval
    load0 = environment()["loadavg"]
    for s, t, src in work:
        for name, (tr, tok) in models.items():
            t0 = time.perf_counter()
            hyp = tr.translate([src], s, t, 1, a.max_new_tokens)[0]
            per[name].append(time.perf_counter() - t0)
            hyps[name].append(hyp)
            secs[name] += per[name][-1]
            toks[name] += len(tok(hyp, add_special_tokens=False)["input_ids"]) + 1
            t0 = time.perf_counter()  # the same sentence stopped after two decoding steps: encoder and fixed work
            tr.translate([src], s, t, 1, 2)
            two_steps[name] += time.perf_counter() - t0
    tag = f" [top {a.vmap_frequent}]"
    # each model against the first in the same form (a restricted model against the first one restricted alike)
    base = {name: a.models[0] + (tag if name.endswith(tag) else "") for name in models}
    refs = [lines[t][i] for i in range(a.sentences // len(DIRECTIONS)) for _, t in DIRECTIONS]
    # speed-up over the first model with a paired bootstrap 95 % interval: sentences resampled, ratio of summed times
    weights = bs.counts(len(work), 1000, 0)
    ci = {name: [round(q, 3) for q in bs.percentile_interval(
        bs.resample_ratio(np.asarray(per[base[name]]), np.asarray(per[name]), weights)).to_dict()] for name in models}
    out = {name: {"sentences_per_s": round(len(work) / secs[name], 3), "tokens_per_s": round(toks[name] / secs[name], 1),
                  "tokens_per_sentence": round(toks[name] / len(work), 1),
                  "speedup_vs_first": round(secs[base[name]] / secs[name], 3), "speedup_ci95": ci[name],
                  "ms_per_token": round(secs[name] / toks[name] * 1000, 2),
                  "disk_mib": round(disk[name] / 2**20, 2), "weights_per_generated_token": reads[name],
                  "bound_per_token_vs_first": round(reads[base[name]] / reads[name], 3),
                  "two_steps_ms_per_sentence": round(two_steps[name] / len(work) * 1000, 3),
                  "two_steps_share": round(two_steps[name] / secs[name], 3),
                  "chrf": round(CHRF3.corpus_score(hyps[name], [refs]).score, 2)}
           for name in models}
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"sentences": len(work), "directions": [f"{s}-{t}" for s, t in DIRECTIONS], "models": out,
                      "backend": a.backend if a.backend == "torch" else f"ctranslate2 {a.compute_type}",
                      "threads": a.threads, "chrf_signature": chrf_signature(), "loadavg_start": load0, "environment": environment()}, indent=1))


if __name__ == "__main__":
    main()
