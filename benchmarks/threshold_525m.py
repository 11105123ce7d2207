"""Exact pruning threshold on a 525 M-element tensor (M2M-100 12B's embedding: 128,112 x 4,096).

    python benchmarks/threshold_525m.py [--compare-kthvalue]

Reports wall time and peak RSS of forgetbench's radix select + exact in-place pruning, and
optionally torch.kthvalue on the same tensor in the same run (torch.quantile refuses > 16 M).
"""

import argparse
import json
import math
import time

import torch

from benchmarks.common import environment, peak_rss_mib
from forgetbench.compress.prune import numel_zeros, prune_smallest
from forgetbench.compress.threshold import kth_smallest_abs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=128_112)
    ap.add_argument("--cols", type=int, default=4_096)
    ap.add_argument("--sparsity", type=float, default=0.3)
    ap.add_argument("--compare-kthvalue", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    w = torch.randn(a.rows, a.cols)
    n = w.numel()
    k = math.floor(a.sparsity * n + 0.5)
    rss0 = peak_rss_mib()
    res = {"numel": n, "k": k, "tensor_mib": n * 4 / 2**20, "rss_after_alloc_mib": rss0}
    if a.compare_kthvalue:
        try:
            torch.quantile(w[:4097].abs().reshape(-1), 0.3)  # 16.8 M elements
            res["torch_quantile"] = "ok"
        except RuntimeError as e:
            res["torch_quantile"] = "refused: " + str(e).splitlines()[0][:60]
    t0 = time.perf_counter()
    t = kth_smallest_abs([w], k)
    res["radix_threshold_s"] = time.perf_counter() - t0
    res["radix_peak_rss_mib"] = peak_rss_mib()
    if a.compare_kthvalue:
        t0 = time.perf_counter()
        ref = float(w.abs().reshape(-1).kthvalue(k).values)
        res["kthvalue_s"] = time.perf_counter() - t0
        res["kthvalue_peak_rss_mib"] = peak_rss_mib()
        res["same_threshold"] = ref == t
    t0 = time.perf_counter()
    prune_smallest([w], k)
    res["prune_in_place_s"] = time.perf_counter() - t0
    res["zeros"] = numel_zeros(w)
    res["exact"] = res["zeros"] == k
    res["final_peak_rss_mib"] = peak_rss_mib()
    res["environment"] = environment()
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
