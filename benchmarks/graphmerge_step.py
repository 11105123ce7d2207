"""Cost of a train-mt step with GraphMerge embeddings against the plain table, side by side in one run.

    python -m benchmarks.graphmerge_step [--config artifacts/teacher/config.json] [--hops 2] [--degree 6]
                                         [--tokens 4096] [--rounds 6] [--threads 1]

The model is an M2M-100 of the shipped teacher's shape, randomly initialised, and a batch of random ids, as
``benchmarks.train_step``. The graph is random with ``--degree`` cross-word neighbours per subword row
(row-stochastic; a real graph from the corpus has fewer: its density is in the card). Each round times one float32
step of the baseline (``model(...)``) and one of GraphMerge (``train.graphmerge.logits``: the hops over the whole
table once per step, the table as input embedding and output projection), alternating order; the first round
warms both and is not counted. Printed as JSON: median seconds per step, the ratio GraphMerge / baseline with a
95 % bootstrap interval over the rounds, the extra parameters, and the environment.
"""

import copy
import json
import statistics

import numpy as np
import torch

from benchmarks.common import environment
from benchmarks.train_step import batch, build, model_arguments, plain_logits, step
from forgetbench.train.graph import GraphSettings
from forgetbench.train.graphmerge import attach, logits


def random_graph(vocab: int, degree: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    rows = torch.arange(vocab).repeat_interleave(degree)
    cols = torch.randint(0, vocab, (vocab * degree,), generator=g)
    vals = torch.full((vocab * degree,), 1.0 / degree)
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (vocab, vocab), check_invariants=True).coalesce()


def graph_logits(model, b):
    return logits(model, b["input_ids"], b["attention_mask"], b["decoder_input_ids"])


def main():
    ap = model_arguments(__doc__.splitlines()[0])
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--degree", type=int, default=6)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    base = build(args)
    gm = copy.deepcopy(base)
    torch.manual_seed(1)
    attach(gm, random_graph(gm.config.vocab_size, args.degree), GraphSettings(hops=args.hops))
    models = {"baseline": base, "graphmerge": gm}
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-6) for k, m in models.items()}
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    b = batch(base.config.vocab_size, args.tokens)
    times = {k: [] for k in models}
    for r in range(args.rounds + 1):
        for name in models if r % 2 == 0 else reversed(models):
            t = step(models[name], opts[name], b, False, loss_fn, graph_logits if name == "graphmerge" else plain_logits)
            if r:
                times[name].append(t)
    ratios = np.array(times["graphmerge"]) / np.array(times["baseline"])
    rng = np.random.default_rng(0)
    boot = [float(np.median(rng.choice(ratios, len(ratios)))) for _ in range(2000)]
    n_base = sum(p.numel() for p in base.parameters())
    print(json.dumps({
        "parameters": n_base, "extra_parameters": sum(p.numel() for p in gm.graphmerge.parameters()),
        "hops": args.hops, "graph_edges": int(gm.graphmerge.adjacency._nnz()), "rounds": args.rounds,
        "seconds_per_step": {k: round(statistics.median(v), 3) for k, v in times.items()},
        "graphmerge_over_baseline": round(float(np.median(ratios)), 3),
        "ci95": [round(float(np.percentile(boot, 2.5)), 3), round(float(np.percentile(boot, 97.5)), 3)],
        "environment": environment()}, indent=1))


if __name__ == "__main__":
    main()
