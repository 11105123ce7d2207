"""Batch-1 decoding speed of a model: the deployment number a distilled student is for (SMaLL-100's 4.3×).

The first ``n`` sources of one job, translated one at a time with greedy decoding (``models.generation.translate``),
after one untimed warm-up sentence; sentences/s and generated tokens/s over the timed ones, with the thread
count and the load average beside them (timings depend on both; compare variants measured in one run).
"""

from __future__ import annotations

import os
import time

import torch

from forgetbench.eval.translate import Job
from forgetbench.models.generation import translate


def batch1_speed(model, tok, job: Job, n: int, max_new_tokens: int) -> dict:
    srcs = job.lines()[0][: n + 1]
    translate(model, tok, srcs[:1], job.src, job.tgt, max_new_tokens=max_new_tokens)
    tokens, load0 = 0, os.getloadavg()[0]
    t0 = time.perf_counter()
    for s in srcs[1:]:
        hyp = translate(model, tok, [s], job.src, job.tgt, max_new_tokens=max_new_tokens)[0]
        tokens += len(tok(hyp, add_special_tokens=False)["input_ids"]) + 1
    secs = time.perf_counter() - t0
    k = len(srcs) - 1
    return {"pair": f"{job.src}-{job.tgt}", "benchmark": job.benchmark.name, "sentences": k,
            "seconds": round(secs, 3), "sentences_per_s": round(k / secs, 3) if secs else None,
            "tokens_per_s": round(tokens / secs, 1) if secs else None, "threads": torch.get_num_threads(),
            "loadavg": [round(load0, 2), round(os.getloadavg()[0], 2)]}
