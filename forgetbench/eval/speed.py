"""Decoding speed of a model: batch-1 (the deployment number a distilled student is for, SMaLL-100's 4.3×) and
batched (length-sorted batches, as a sweep translates).

Rules:

1. *One timing.* The first ``n`` sources of one job, translated one at a time with greedy decoding by a backend's
   translator (``eval.backends``: the torch loop or a CTranslate2 model), after one untimed warm-up sentence
   (``batch1_speed``); or in length-sorted batches after a 2-sentence warm-up (``batched_speed``); sentences/s
   and generated tokens/s over the timed ones, with the thread count and the load average beside them.
2. *A speed-up is a paired, repeated comparison* (``interleaved``): a variant and its base are timed in
   ``rounds`` rounds on the same sentences, alternating which goes first, so drifts in load hit both; the
   speed-up is the geometric mean over rounds of base seconds / variant seconds with a 95 % percentile bootstrap
   interval over rounds (2,000 resamples, seeded); an interval covering 1 is reported as no measurable
   difference. A single timing is never turned into a ratio.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import torch

from forgetbench.eval.translate import Job, length_batches


def batch1_speed(translator, tok, job: Job, n: int, max_new_tokens: int) -> dict:
    srcs = job.lines()[0][: n + 1]
    translator.translate(srcs[:1], job.src, job.tgt, 1, max_new_tokens)
    tokens, load0 = 0, os.getloadavg()[0]
    t0 = time.perf_counter()
    for s in srcs[1:]:
        hyp = translator.translate([s], job.src, job.tgt, 1, max_new_tokens)[0]
        tokens += len(tok(hyp, add_special_tokens=False)["input_ids"]) + 1
    secs = time.perf_counter() - t0
    k = len(srcs) - 1
    return {"pair": f"{job.src}-{job.tgt}", "benchmark": job.benchmark.name, "sentences": k, "tokens": tokens,
            "seconds": round(secs, 3), "sentences_per_s": round(k / secs, 3) if secs else None,
            "tokens_per_s": round(tokens / secs, 1) if secs else None, "backend": translator.name,
            "threads": torch.get_num_threads(),
            "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def batched_speed(translator, job: Job, n: int, batch_size: int, max_new_tokens: int) -> dict:
    """The first ``n`` sources of ``job`` in length-sorted batches of ``batch_size`` (after a 2-sentence warm-up)."""
    srcs = job.lines()[0][:n]
    translator.translate(srcs[:2], job.src, job.tgt, 1, max_new_tokens)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    for batch in length_batches(list(range(len(srcs))), srcs, batch_size):
        translator.translate([srcs[i] for i in batch], job.src, job.tgt, 1, max_new_tokens)
    secs = time.perf_counter() - t0
    return {"pair": f"{job.src}-{job.tgt}", "sentences": len(srcs), "batch_size": batch_size, "seconds": round(secs, 3),
            "sentences_per_s": round(len(srcs) / secs, 3) if secs else None, "backend": translator.name,
            "threads": torch.get_num_threads(), "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)]}


def interleaved(time_base, time_variant, rounds: int, seed: int = 0) -> dict:
    """Rule 2: ``time_base()`` / ``time_variant()`` return one timing's seconds; ``rounds`` of each, alternating
    order. Returns both lists of seconds, the speed-up (base / variant, geometric mean over rounds), its 95 %
    interval and whether the interval covers 1."""
    base, var = [], []
    for r in range(rounds):
        for f, out in ((time_base, base), (time_variant, var)) if r % 2 == 0 else ((time_variant, var), (time_base, base)):
            out.append(f())
    logs = np.log(np.array(base) / np.array(var))
    rng = np.random.default_rng(seed)
    boot = rng.choice(logs, (2000, len(logs))).mean(1)
    lo, hi = (float(math.exp(np.percentile(boot, q))) for q in (2.5, 97.5))
    return {"rounds": rounds, "base_seconds": [round(x, 4) for x in base], "seconds": [round(x, 4) for x in var],
            "speedup": round(float(math.exp(logs.mean())), 3), "speedup_ci95": [round(lo, 3), round(hi, 3)],
            "measurable": not lo <= 1.0 <= hi}
