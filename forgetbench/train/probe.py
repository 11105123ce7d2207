"""The throughput probe: what this host buys for a training config, measured, before a long run is started.

    forgetbench train-mt CONFIG --out RUN --probe [--steps 30] [--hours 2.5]

Rules:

1. The run folder's data is prepared as for training (and kept: the run that follows reuses it); the config's
   model is built on the chosen device and arithmetic (``train.arithmetic``); 2 warm-up steps, then ``steps``
   timed training steps on the run's own batches (epoch 0, in order). No checkpoint is written and no weights are
   kept: the probe leaves the folder resumable as a fresh run.
2. Reported, as arithmetic on the measured steps only: seconds per step (median), tokens per second (timed
   tokens / timed seconds), steps per hour (3600 / median), the epoch's tokens (every example's source and target,
   each cut at ``max_len``, as the batches hold them), hours per epoch (epoch tokens / tokens per second) and the
   epochs ``hours`` of wall time buy.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from forgetbench.env import environment
from forgetbench.train.config import TrainMTConfig

WARMUP_STEPS = 2


def figures(step_seconds: list[float], step_tokens: list[int], epoch_tokens: int, hours: float) -> dict:
    """Rule 2's numbers from the timed steps."""
    tps = sum(step_tokens) / sum(step_seconds)
    median = statistics.median(step_seconds)
    per_epoch = epoch_tokens / tps / 3600
    return {"steps_timed": len(step_seconds), "seconds_per_step": round(median, 4), "tokens_per_s": round(tps, 1),
            "steps_per_hour": round(3600 / median, 1), "tokens_per_epoch": int(epoch_tokens),
            "hours_per_epoch": round(per_epoch, 3), "budget_hours": hours, "epochs_in_budget": round(hours / per_epoch, 3)}


def timed_steps(model, opt, data, batches: list, step_loss, tc, arith, steps: int, state: dict | None = None
                ) -> tuple[list[float], list[int]]:
    """Rule 1's timing: ``WARMUP_STEPS`` then ``steps`` training steps on epoch 0's first batches, each seeded as in
    a run (``state["step"]``, where given, follows them: step losses that read it see the run's step)."""
    import torch

    from forgetbench.train.loop import step_seed, train_step

    seconds, tokens = [], []
    for k in range(min(len(batches), WARMUP_STEPS + steps)):
        b = data.collate(batches[k])
        torch.manual_seed(step_seed(tc.seed, k + 1))
        t0 = time.perf_counter()
        _, n = train_step(model, opt, b, step_loss, tc.clip)
        if arith.device_type == "cuda":
            torch.cuda.synchronize()
        if state is not None:
            state["step"] = k + 1
        if k >= WARMUP_STEPS:
            seconds.append(time.perf_counter() - t0)
            tokens.append(n)
    return seconds, tokens


def probe(cfg: TrainMTConfig, out_dir: str | Path, steps: int = 30, hours: float = 2.5, log=print) -> dict:
    from forgetbench.train.mt import setup

    S = setup(cfg, Path(out_dir), log)
    batches = S.data.batches(cfg.train.max_tokens, cfg.train.seed, 0)
    seconds, tokens = timed_steps(S.model, S.opt, S.data, batches, S.step_loss, cfg.train, S.arith, steps)
    if not seconds:
        from forgetbench.errors import ForgetbenchError

        raise ForgetbenchError(f"train-mt --probe: the corpus has {len(batches)} batches, fewer than the "
                               f"{WARMUP_STEPS} warm-up steps; nothing to time")
    epoch = int(S.data.src_len.sum() + S.data.tgt_len.sum())
    out = figures(seconds, tokens, epoch, hours) | {
        "parameters": sum(p.numel() for p in S.model.parameters()), "arithmetic": S.arith.record(),
        "threads": cfg.train.threads, "environment": environment()}
    return out
