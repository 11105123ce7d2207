"""SparseGPT and Wanda kernels in float32 (the arithmetic used) against float64 everywhere, side by side in one run.

    python -m benchmarks.data_aware_kernels [--rows 1024] [--cols 1024 4096] [--tokens 2048] [--rounds 6]
                                            [--threads 1]

One linear map per ``--cols`` value (M2M-100 418M: 1024 × 1024 attention projections, 1024 × 4096 fc2), random
weights and ``--tokens`` random calibration inputs with uneven column scales. A round times, for each arithmetic,
the statistics' accumulation (Σ x xᵀ for SparseGPT, Σ x² for Wanda, over the inputs in batches of 256 rows) and
the pruning at 45 % (``data_aware.sparsegpt`` with ``dtype``, ``data_aware.wanda_mask``); the two arithmetics
alternate order every round, the first round warms both up and is not counted. Printed as JSON per shape: each
arithmetic's median seconds, the ratio float64 / float32 with a 95 % bootstrap interval over the rounds' ratios
(above 1: float32 is faster), the masks' agreement, and the environment.
"""

import argparse
import json
import statistics
import time

import numpy as np
import torch

from benchmarks.common import environment
from forgetbench.compress.data_aware import sparsegpt, wanda_mask

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def layer(rows: int, cols: int, tokens: int):
    g = torch.Generator().manual_seed(cols)
    scales = torch.linspace(0.2, 3.0, cols)[torch.randperm(cols, generator=g)]
    return torch.randn(rows, cols, generator=g) * 0.02, torch.randn(tokens, cols, generator=g) * scales


def run(W: torch.Tensor, X: torch.Tensor, dtype: torch.dtype, method: str) -> tuple[float, torch.Tensor]:
    t0 = time.perf_counter()
    cols = X.shape[1]
    stat = torch.zeros((cols, cols) if method == "sparsegpt" else (cols,), dtype=dtype)
    for x in X.split(256):
        x = x.to(dtype)
        stat += x.T @ x if method == "sparsegpt" else (x**2).sum(0)
    if method == "sparsegpt":
        _, mask = sparsegpt(W, stat, 0.45, dtype=dtype)
    else:
        mask = wanda_mask(W, stat.sqrt(), 0.45)
    return time.perf_counter() - t0, mask


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    out = {"rows": a.rows, "tokens": a.tokens, "rounds": a.rounds, "threads": a.threads, "shapes": []}
    rng = np.random.default_rng(0)
    for cols in a.cols:
        W, X = layer(a.rows, cols, a.tokens)
        for method in ("sparsegpt", "wanda"):
            times, masks = {k: [] for k in DTYPES}, {}
            for r in range(a.rounds + 1):
                for name in DTYPES if r % 2 == 0 else reversed(DTYPES):
                    t, masks[name] = run(W, X, DTYPES[name], method)
                    if r:
                        times[name].append(t)
            ratios = np.array(times["float64"]) / np.array(times["float32"])
            boot = [float(np.median(rng.choice(ratios, len(ratios)))) for _ in range(2000)]
            out["shapes"].append({
                "method": method, "weight": [a.rows, cols],
                "seconds": {k: round(statistics.median(v), 3) for k, v in times.items()},
                "float64_over_float32": round(float(np.median(ratios)), 3),
                "ci95": [round(float(np.percentile(boot, 2.5)), 3), round(float(np.percentile(boot, 97.5)), 3)],
                "same_mask_fraction": round(float((masks["float32"] == masks["float64"]).float().mean()), 6)})
    out["environment"] = environment()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
