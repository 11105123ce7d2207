"""The biaffine label scorer's two computation orders, forward and backward, side by side in one run; and UD-PrLM's
phase-2 step with the one the scorer uses.

    python -m benchmarks.biaffine_scores [--positions 40] [--tokens 4096] [--labels 59] [--dep 64] [--head 128]
                                         [--rounds 6] [--threads 1]

- ``per-output``: x W_o yᵀ as a product per (sentence, output) — ``torch.matmul`` broadcast over outputs, the
  form the scorer had before ``Biaffine.scores_last``;
- ``head-first``: ``Biaffine.scores_last`` (one product over every head position, then one per sentence).

Each round times forward + backward of both on the same random batch (⌊tokens / positions⌋ sentences of
``positions`` pieces; a softmax over the labels, as USI reads them, and a sum), alternating order; the first round
warms both and is not counted. Then the same for a whole phase-2 step of a UD-PrLM encoder of
``configs/pretrain/ud-prlm.yaml``'s shape (USL loss, MLM through USI, AdamW; random weights and ids) with its label
scorer in either form. Printed as JSON: the median seconds, each ratio per-output / head-first with a 95 %
bootstrap interval over the rounds, the largest difference of the scores, and the environment.
"""

import argparse
import json
import statistics
import time

import numpy as np
import torch

from benchmarks.common import environment
from forgetbench.parsing.layers.biaffine import Biaffine
from forgetbench.parsing.layers.pretrained import EncoderConfig, PretrainedEncoder


def per_output(b: Biaffine, dep, head):
    dep = torch.cat([dep, torch.ones_like(dep[..., :1])], -1)
    head = torch.cat([head, torch.ones_like(head[..., :1])], -1)
    return torch.matmul(torch.matmul(dep.unsqueeze(1), b.weight), head.unsqueeze(1).transpose(-1, -2)).permute(0, 2, 3, 1)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def alternate(names, fn, rounds: int) -> dict[str, list[float]]:
    """Seconds of ``fn(name)`` per round for each name, the order alternating; the first round not counted."""
    times = {k: [] for k in names}
    for r in range(rounds + 1):
        for name in names if r % 2 == 0 else reversed(list(names)):
            t = timed(lambda name=name: fn(name))
            if r:
                times[name].append(t)
    return times


def summary(times: dict[str, list[float]]) -> dict:
    ratios = np.array(times["per-output"]) / np.array(times["head-first"])
    rng = np.random.default_rng(0)
    boot = [float(np.median(rng.choice(ratios, len(ratios)))) for _ in range(2000)]
    return {"seconds": {k: round(statistics.median(v), 4) for k, v in times.items()},
            "per_output_over_head_first": round(float(np.median(ratios)), 3),
            "ci95": [round(float(np.percentile(boot, 2.5)), 3), round(float(np.percentile(boot, 97.5)), 3)]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, default=40)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--labels", type=int, default=59)
    ap.add_argument("--dep", type=int, default=64)
    ap.add_argument("--head", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    n, b = a.positions, a.tokens // a.positions
    scorer = Biaffine(a.dep, a.labels, a.head)
    scorer.weight.data.normal_(std=0.1)
    dep = torch.randn(b, n, a.dep, requires_grad=True)
    head = torch.randn(b, n, a.head, requires_grad=True)
    forms = {"per-output": lambda: per_output(scorer, dep, head), "head-first": lambda: scorer.scores_last(dep, head)}
    with torch.no_grad():
        diff = float((forms["per-output"]() - forms["head-first"]()).abs().max())

    def run(form):
        forms[form]().softmax(-1).sum().backward()

    scorer_times = alternate(forms, run, a.rounds)

    c = EncoderConfig(vocab_size=8000, n_rels=a.labels, d_model=128, layers=2, heads=4, ffn=512, max_positions=128,
                      head_mlp=a.head, dep_mlp=a.dep)  # ud-prlm.yaml: L = 3, so 2 below the USI layer
    enc = PretrainedEncoder(c)
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-4)
    ids = torch.randint(5, c.vocab_size, (b, n))
    labels = torch.full((b, n), -100)
    labels[:, ::7] = ids[:, ::7]
    heads, rels = torch.randint(0, n, (b, n)), torch.randint(0, a.labels, (b, n))

    def phase2_step():
        h, mask = enc.encode(ids)
        loss = enc.usl_loss(h, mask, heads, rels)
        h, mask = enc.encode(ids)
        loss = loss + enc.mlm_loss(enc.integrate(h, mask), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    rel = enc.scorer["rel"]
    kinds = ("per-output", "head-first")

    def step_with(form):
        if form == "per-output":
            rel.scores_last = lambda d, h: per_output(rel, d, h)  # the instance's attribute shadows the method
        else:
            rel.__dict__.pop("scores_last", None)
        phase2_step()

    step_times = alternate(kinds, step_with, a.rounds)
    rel.__dict__.pop("scores_last", None)
    print(json.dumps({
        "sentences": b, "positions": n, "labels": a.labels, "dep": a.dep, "head": a.head, "rounds": a.rounds,
        "max_abs_difference": diff, "scorer_forward_backward": summary(scorer_times),
        "ud_prlm_phase2_step": summary(step_times), "environment": environment()}, indent=1))


if __name__ == "__main__":
    main()
