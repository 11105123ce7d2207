"""Cost of a train-mt step in float32 against bfloat16 autocast, side by side in one run, at a given model size.

    python -m benchmarks.train_step [--config artifacts/teacher/config.json] [--d-model N --layers E D --ffn F]
                                    [--tokens 4096] [--rounds 6] [--threads 1]

The model is an M2M-100 of the shipped teacher's shape (or the given one), randomly initialised; a batch is
random token ids of ~``--tokens`` source + target tokens (32 rows), as train-mt's length-bucketed batches. A
step is what ``train.mt`` does: forward under the autocast (or none), label-smoothed CE in float32, backward,
gradient clipping, AdamW. The two arithmetics alternate in every round (same batch, same load); the first
round of each is a warm-up and not counted. Printed as JSON: each arithmetic's median seconds per step, the
ratio float32 / bfloat16 with a 95 % bootstrap interval over the rounds' ratios, tokens/s, and the environment
(the CPU flags say whether AMX ran the bfloat16 matmuls).
"""

import argparse
import json
import statistics
import time

import numpy as np
import torch

from benchmarks.common import environment
from forgetbench.models.architecture import m2m100_config


def build(args):
    from transformers import M2M100ForConditionalGeneration

    if args.d_model:
        conf = m2m100_config(8111, d_model=args.d_model, layers=args.layers[0], decoder_layers=args.layers[1],
                             heads=args.heads, ffn=args.ffn, max_positions=256, dropout=0.1,
                             attention_dropout=0.0, activation_dropout=0.0)
    else:
        from transformers import AutoConfig

        conf = AutoConfig.from_pretrained(args.config)
        conf.dtype = "float32"
    torch.manual_seed(0)
    return M2M100ForConditionalGeneration(conf).float().train()


def batch(vocab: int, tokens: int, rows: int = 32):
    g = torch.Generator().manual_seed(1)
    n = tokens // (2 * rows)
    ids = torch.randint(10, vocab, (rows, n), generator=g)
    labels = torch.randint(10, vocab, (rows, n), generator=g)
    dec = torch.cat([torch.full((rows, 1), 2), labels[:, :-1]], 1)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "decoder_input_ids": dec, "labels": labels}


def plain_logits(model, b):
    return model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                 decoder_input_ids=b["decoder_input_ids"]).logits


def step(model, opt, b, bf16: bool, loss_fn, forward=plain_logits) -> float:
    """One timed train-mt step: ``forward(model, batch)`` → logits under the autocast, loss, backward, AdamW."""
    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = forward(model, b)
    loss = loss_fn(logits.float().view(-1, logits.size(-1)), b["labels"].view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return time.perf_counter() - t0


def model_arguments(description: str) -> argparse.ArgumentParser:
    """The options every train-step benchmark shares: the model's shape, the batch, rounds and threads."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--config", default="artifacts/teacher/config.json")
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--layers", type=int, nargs=2, default=[4, 3])
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    return ap


def main():
    ap = model_arguments(__doc__.splitlines()[0])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = build(args)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-6)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    b = batch(model.config.vocab_size, args.tokens)
    times = {"float32": [], "bfloat16": []}
    for r in range(args.rounds + 1):
        for name in ("float32", "bfloat16") if r % 2 == 0 else ("bfloat16", "float32"):
            t = step(model, opt, b, name == "bfloat16", loss_fn)
            if r:  # round 0 warms both up
                times[name].append(t)
    ratios = np.array(times["float32"]) / np.array(times["bfloat16"])
    rng = np.random.default_rng(0)
    boot = [float(np.median(rng.choice(ratios, len(ratios)))) for _ in range(2000)]
    tokens = int(b["attention_mask"].sum() + b["labels"].numel())
    print(json.dumps({
        "parameters": sum(p.numel() for p in model.parameters()), "tokens_per_step": tokens, "rounds": args.rounds,
        "seconds_per_step": {k: round(statistics.median(v), 3) for k, v in times.items()},
        "tokens_per_s": {k: round(tokens / statistics.median(v)) for k, v in times.items()},
        "speedup_bf16": round(float(np.median(ratios)), 3),
        "speedup_bf16_ci95": [round(float(np.percentile(boot, 2.5)), 3), round(float(np.percentile(boot, 97.5)), 3)],
        "environment": environment()}, indent=1))


if __name__ == "__main__":
    main()
