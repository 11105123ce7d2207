"""Decoding speed of a model: batch-1 (the deployment number a distilled student is for, SMaLL-100's 4.3×) and
batched (length-sorted batches, as a sweep translates).

The first ``n`` sources of one job, translated one at a time with greedy decoding by a backend's translator
(``eval.backends``: the torch loop or a CTranslate2 model),
after one untimed warm-up sentence; sentences/s and generated tokens/s over the timed ones, with the thread
count and the load average beside them (timings depend on both; compare variants measured in one run).
"""

from __future__ import annotations

import os
import time

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
    return {"pair": f"{job.src}-{job.tgt}", "benchmark": job.benchmark.name, "sentences": k,
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
