"""Sweep translation throughput vs a naive per-sentence ``generate`` loop, same model and sentences.

    python -m benchmarks.sweep_throughput MODEL_DIR [--pairs en-de,de-en] [--sentences 64]

Both paths use greedy decoding with the same max_new_tokens: the naive one Hugging Face ``generate``
per sentence, the sweep length-sorted batches through forgetbench's greedy loop (finished rows
dropped). Hypotheses are compared; the ratio is measured side by side in one run, with threads
and load average.
"""

import argparse
import json
import time

import torch

from benchmarks.common import environment
from forgetbench.compress.pipeline import load_model_dir
from forgetbench.eval.backends import TorchTranslator
from forgetbench.eval.benchmarks import open_benchmark
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job, length_batches, run_variant
from forgetbench.models.generation import translate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--flores", default="data/flores101")
    ap.add_argument("--pairs", default="en-de,de-en")
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, tok = load_model_dir(a.model, eager=False)
    bench = open_benchmark("flores101", "flores101", a.flores)
    jobs = [Job(bench, *p.split("-"), a.sentences) for p in a.pairs.split(",")]
    n = sum(len(j.lines()[0]) for j in jobs)
    t0 = time.perf_counter()
    naive = []
    for j in jobs:
        for s in j.lines()[0]:  # the naive loop: Hugging Face generate, one sentence at a time
            naive += translate(model, tok, [s], j.src, j.tgt, 1, a.max_new_tokens, greedy_loop=False)
    t_naive = time.perf_counter() - t0
    # the same length-sorted batches through HF generate (the runner before the greedy loop)
    t0 = time.perf_counter()
    hf_batched = {}
    for j in jobs:
        srcs = j.lines()[0]
        for batch in length_batches(list(range(len(srcs))), srcs, a.batch_size):
            hyps = translate(model, tok, [srcs[i] for i in batch], j.src, j.tgt, 1, a.max_new_tokens, greedy_loop=False)
            for i, h in zip(batch, hyps, strict=True):
                hf_batched[(j.src, j.tgt, i)] = h
    t_hf_batched = time.perf_counter() - t0
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        store = Store(f"{d}/s.sqlite")
        t0 = time.perf_counter()
        run_variant(store, "base", TorchTranslator(model, tok), jobs, a.batch_size, 1, a.max_new_tokens, progress=False)
        t_sweep = time.perf_counter() - t0
        batched = [r["hyp"] for j in jobs for r in sorted(
            (r for r in store.translations("base") if r["src"] == j.src and r["tgt"] == j.tgt), key=lambda r: r["idx"])]
    same = sum(x == y for x, y in zip(naive, batched, strict=True))
    hf_list = [hf_batched[(j.src, j.tgt, i)] for j in jobs for i in range(len(j.lines()[0]))]
    same_hf = sum(x == y for x, y in zip(hf_list, batched, strict=True))
    print(json.dumps({"sentences": n, "naive_s": round(t_naive, 2), "sweep_s": round(t_sweep, 2),
                      "naive_sent_per_s": round(n / t_naive, 2), "sweep_sent_per_s": round(n / t_sweep, 2),
                      "speedup": round(t_naive / t_sweep, 2), "identical_hypotheses": same,
                      "hf_batched_s": round(t_hf_batched, 2), "greedy_loop_speedup_over_hf_batched": round(t_hf_batched / t_sweep, 2),
                      "identical_to_hf_batched": same_hf,
                      "batch_size": a.batch_size, "environment": environment()}, indent=2))


if __name__ == "__main__":
    main()
