"""The distillation loop on accelerate: one CPU process here, DDP on several GPUs from the same config.

- Phases: steps 1 … ``phase1_steps`` minimise L_ce only; later steps L_ce + α·T²·L_kd (``kd.source`` cache or
  online; ``none`` is the no-KD twin: L_ce throughout, same data, same steps). ``kd.alpha_directions`` gives
  some directions their own α: each target position's KD term is weighted by α_d / α before the batch mean
  (α_d = 0: those directions learn from the references alone).
- Data parallel: every process sees the same global batch order and takes every world-th example of each
  batch, so one process and N processes follow the same sequence of global batches; DDP averages the
  gradients.
- Optimiser and schedule: Adam(0.9, 0.98, eps 1e-6) via AdamW with weight decay 0, ``train.loop.inverse_sqrt``
  (with ``train.cooldown``: ``train.loop.cooled``), gradient clipping; dropout re-seeded every step (seed, step,
  rank) and checkpoints from ``train.loop``, so a resumed run continues with the same batches and the same dropout
  masks.
- Signals (``signals.jsonl``): per resource-tier pair group, the training CE and — when a teacher signal is
  in the loop — the estimated teacher–student KL every ``log_every`` steps; and on a fixed probe (the first
  ``signal_sentences`` held-out pairs of every direction) the exact KL(teacher ‖ student) and the student's
  CE every ``signal_every`` steps, for KD and no-KD students alike.
- Time: ``elapsed_s`` (wall) and ``cpu_s`` (the CPU seconds of every process: process time, which a paused or
  contended process does not accrue, so it measures the work where the wall clock measures the host) in the log
  and the checkpoint. Whether a checkpoint is due or the wall deadline has passed is the main process's call,
  shared, so that every process enters the same collectives.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from forgetbench.console import Console
from forgetbench.distill.config import DistillConfig
from forgetbench.distill.data import encode_batch
from forgetbench.distill.loss import LearnedAlpha, kd_cached, kd_online, label_smoothed_ce
from forgetbench.eval.languages import PAIR_GROUPS
from forgetbench.io import trim_jsonl
from forgetbench.models.hardware import input_device
from forgetbench.resources import past_stop_at, stop_on_signals, stop_reason
from forgetbench.train.loop import cooled, save_checkpoint


def content(x: torch.Tensor, start, C: int) -> torch.Tensor:
    s = int(start)
    return x[:, s: s + C]


def content_mask(lens: torch.Tensor, C: int) -> torch.Tensor:
    return torch.arange(C)[None, :] < lens[:, None]


def _forward(model, b: dict, prefix: str, bf16: bool) -> torch.Tensor:
    dev = input_device(model)  # a device-mapped teacher: its first GPU (accelerate's hooks move the rest)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16 and dev.type == "cpu"):
        return model(input_ids=b[f"{prefix}input_ids"].to(dev), attention_mask=b[f"{prefix}attention_mask"].to(dev),
                     decoder_input_ids=b[f"{prefix}decoder_input_ids"].to(dev)).logits


def group_sums(values: torch.Tensor, mask: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """[len(PAIR_GROUPS)] sums of ``values`` [B, C] over the masked positions of each row's group."""
    per_row = (values * mask).sum(1)
    return torch.zeros(len(PAIR_GROUPS)).index_add_(0, group, per_row.detach().float().cpu())


class StepLoss:
    """The loss of one (local) batch and its per-group signal sums."""

    def __init__(self, cfg: DistillConfig, teacher, cache, alpha_module: LearnedAlpha | None):
        self.cfg, self.teacher, self.cache, self.alpha = cfg, teacher, cache, alpha_module
        k = cfg.kd  # per direction (DistillData.pairs order = cfg.pairs): α_d / α
        self.weight = torch.tensor([k.alpha_directions.get(f"{s}-{t}", k.alpha) / k.alpha if k.alpha > 0 else 1.0
                                    for s, t in cfg.pairs]) if k.alpha_directions else None

    def __call__(self, model, b: dict, phase: int) -> tuple[torch.Tensor, dict]:
        cfg, k = self.cfg, self.cfg.kd
        logits = _forward(model, b, "", cfg.train.bf16)
        dev = logits.device
        labels = b["labels"].to(dev)
        ce_tok = label_smoothed_ce(logits, labels, cfg.train.label_smoothing)
        n_lab = (labels != -100).sum().clamp_min(1)
        ce = ce_tok.sum() / n_lab
        C = int(b["content_len"].max())
        mask = content_mask(b["content_len"], C).to(dev)
        s_content = content(logits, b["content_start"], C)
        ce_content = content(ce_tok, b["content_start"], C)
        rec = {"ce": float(ce.detach()), "ce_groups": group_sums(ce_content, mask, b["group"]),
               "tokens_groups": group_sums(torch.ones_like(ce_content), mask, b["group"])}
        loss = ce
        use_kd = k.source != "none" and phase == 2
        if use_kd:
            if k.source == "online":
                with torch.no_grad():
                    t_logits = content(_forward(self.teacher, b, "teacher_", cfg.train.bf16), b["teacher_content_start"], C)
                kd_tok, kl_tok = kd_online(s_content, t_logits.to(dev), k.temperature)
            else:
                R = k.tail_draws  # an example's n-th use reads its tail draw n mod R (METHOD §3.4)
                t = {n: v.to(dev) for n, v in self.cache.lookup(
                    b["uid"], C, *((b["occurrence"] % R, k.tail_samples) if R > 1 else ())).items()}
                kd_tok, kl_tok = kd_cached(s_content, t, k.temperature)
            n_c = mask.sum().clamp_min(1)
            w = mask if self.weight is None else mask * self.weight[b["direction"]].to(dev)[:, None]
            kd = (kd_tok * w).sum() / n_c
            scaled = k.temperature ** 2 * kd
            loss = ce + (self.alpha(scaled) if self.alpha is not None else k.alpha * scaled)
            rec |= {"kd": float(kd.detach()), "kl": float((kl_tok.detach() * mask).sum() / n_c), "n_kd": 1,
                    "kl_groups": group_sums(kl_tok, mask, b["group"])}
        rec["loss"] = float(loss.detach())
        return loss, rec


@torch.no_grad()
def probe(student, teacher, dev_rows: list, lang_id: dict, student_small100: bool, teacher_small100: bool,
          groups: list[str], batch: int = 64) -> dict:
    """Exact KL(teacher ‖ student) and the student's CE (no smoothing) per group and direction on ``dev_rows``
    = [(src, tgt, src ids, tgt ids)]; ``groups`` the group of each row."""
    was = student.training
    student.eval()
    sums: dict = {}
    for i in range(0, len(dev_rows), batch):
        rows = dev_rows[i: i + batch]
        b = encode_batch(rows, lang_id, student_small100) | encode_batch(rows, lang_id, teacher_small100, "teacher_")
        C = int(b["content_len"].max())
        mask = content_mask(b["content_len"], C)
        s = content(_forward(student, b, "", False).float().cpu(), b["content_start"], C)
        t = content(_forward(teacher, b, "teacher_", False).float().cpu(), b["teacher_content_start"], C)
        labels = content(b["labels"], b["content_start"], C)
        ce = label_smoothed_ce(s, labels.masked_fill(~mask, -100), 0.0)
        _, kl = kd_online(s, t, 1.0)
        for r, (src, tgt, *_) in enumerate(rows):
            n = int(mask[r].sum())
            for key in (groups[i + r], f"{src}-{tgt}"):
                acc = sums.setdefault(key, [0.0, 0.0, 0])
                acc[0] += float(ce[r].sum())
                acc[1] += float((kl[r] * mask[r]).sum())
                acc[2] += n
    student.train(was)
    return {key: {"ce": round(a / n, 4), "kl": round(b_ / n, 4), "tokens": n} for key, (a, b_, n) in sums.items()}


def _main_flags(acc, *flags: bool) -> tuple[bool, ...]:
    """The main process's ``flags``, the same on every process: a decision read off a process's own clock (a
    checkpoint due, a wall deadline) is the main process's, or processes whose clocks straddle the threshold would
    enter different collectives (one the checkpoint's barrier, the other the next step's gradient all-reduce) and
    hang."""
    if acc.num_processes == 1:
        return tuple(bool(f) for f in flags)
    from accelerate.utils import broadcast

    t = broadcast(torch.tensor([1 if f else 0 for f in flags], device=acc.device), from_process=0)
    return tuple(bool(v) for v in t.tolist())


def _summed(acc, cpu_s: float, tokens: int) -> tuple[float, int]:
    """This process's CPU seconds and tokens (its share of the batches; a zero-weight copy counts none) summed over
    every process, in one collective."""
    if acc.num_processes == 1:
        return cpu_s, tokens
    t = acc.reduce(torch.tensor([cpu_s, tokens], dtype=torch.float64, device=acc.device), reduction="sum")
    return float(t[0]), int(t[1])


def train_loop(acc, cfg: DistillConfig, model, opt, data, step_loss: StepLoss, state: dict, ckpt: Path, out: Path,
               probe_fn, alpha_module: LearnedAlpha | None, progress: bool = True, dev_fn=None) -> str:
    """Run until ``train.steps`` or early stopping (``dev_fn(model)``: the dev score and fields to log, measured on
    the main process every ``train.dev_every`` steps after phase 1, ``train.early_stop``'s rules); returns what
    stopped it. ``state`` is updated in place."""
    with stop_on_signals():  # resources rule 7: a stop signal ends the run after its step, with a checkpoint
        return _train_loop(acc, cfg, model, opt, data, step_loss, state, ckpt, out, probe_fn, alpha_module, progress,
                           dev_fn)


def _train_loop(acc, cfg: DistillConfig, model, opt, data, step_loss: StepLoss, state: dict, ckpt: Path, out: Path,
                probe_fn, alpha_module: LearnedAlpha | None, progress: bool, dev_fn) -> str:
    from forgetbench.train import early_stop

    tc = cfg.train
    if dev_fn is not None:
        state.setdefault("early_stop", early_stop.new(tc.phase1_steps))
    es = state.get("early_stop")
    if es and es.get("stopped"):  # a stopped run trains no further
        return es["stopped"]
    rank, world = acc.process_index, acc.num_processes
    unwrapped = acc.unwrap_model(model)
    batches = data.batches(tc.max_tokens, tc.seed, state["epoch"])
    t_start, last_ckpt = time.perf_counter() - state["elapsed"], time.perf_counter()
    if "cpu" not in state:  # CPU seconds of all processes (a checkpoint written before the count: from its step)
        state["cpu"], state["cpu_from_step"] = 0.0, state["step"]
    cpu0, cpu_before = time.process_time(), state["cpu"]  # process time stops while the process is stopped
    stage = Console("distill", quiet=not (progress and acc.is_main_process)).stage(cfg.name, tc.steps, "steps", "tokens")
    stage.update(state["step"])
    if state.get("tokens_of") != "all processes" and state["step"] > 0:  # a checkpoint that counted the main
        state["tokens"] *= world  # process's share alone: scaled by this run's processes, and said so in the record
        state["tokens_scaled_to_step"] = state["step"]
    state["tokens_of"] = "all processes"
    tokens_before, own_tokens = state["tokens"], 0  # all processes' tokens at the start; this process's since
    window: dict = {}
    main = acc.is_main_process
    if main:  # a resume trains again what came after its checkpoint: its log records go
        for name in ("train_log.jsonl", "signals.jsonl"):
            trim_jsonl(out / name, state["step"] or -1)  # from step 0: its first probe comes again
    log_f = open(out / "train_log.jsonl", "a", encoding="utf-8") if main else None
    sig_f = open(out / "signals.jsonl", "a", encoding="utf-8") if main else None
    try:
        if state["step"] == 0 and main:
            _write(sig_f, {"step": 0, "split": "probe", "groups": probe_fn(unwrapped)})
        while state["step"] < tc.steps:
            if state["batch"] >= len(batches):
                state["epoch"], state["batch"] = state["epoch"] + 1, 0
                batches = data.batches(tc.max_tokens, tc.seed, state["epoch"])
            idx = batches[state["batch"]]
            state["batch"] += 1
            local, weight = idx[rank::world], 1.0
            if len(local) == 0:  # fewer examples than processes: take part with a zero-weight copy
                local, weight = idx[:1], 0.0
            b = data.collate(local, state["epoch"])
            step = state["step"] + 1
            phase = 1 if step <= tc.phase1_steps else 2
            torch.manual_seed(tc.seed * 1_000_003 + step * 64 + rank)
            for g in opt.param_groups:
                g["lr"] = cooled(step, tc.lr, tc.warmup, tc.steps, tc.cooldown)
            loss, rec = step_loss(model, b, phase)
            opt.zero_grad(set_to_none=True)
            acc.backward(loss * weight)
            acc.clip_grad_norm_(unwrapped.parameters(), tc.clip)
            opt.step()
            state["step"] = step
            own_tokens += int(b["attention_mask"].sum() + (b["labels"] != -100).sum()) if weight else 0
            for key, v in rec.items():
                window[key] = window.get(key, 0.0) + v
            window["n"] = window.get("n", 0) + 1
            stage.update(step, own_tokens * world)  # this run's rate (an estimate between the counts)
            elapsed = time.perf_counter() - t_start
            if step % tc.log_every == 0 or step == tc.steps:
                cpu, tokens = _summed(acc, time.process_time() - cpu0, own_tokens)
                cpu, state["tokens"] = cpu_before + cpu, tokens_before + tokens
                _log(acc, window, step, phase, tc, elapsed, cpu, state, log_f, sig_f, alpha_module)
                window = {}
            if main and (step % tc.signal_every == 0 or step == tc.steps):
                _write(sig_f, {"step": step, "phase": phase, "split": "probe", "groups": probe_fn(unwrapped)})
            early = False
            if dev_fn is not None and early_stop.due(es, step, tc.dev_every):
                if main:
                    early, rec = early_stop.measure(es, step, unwrapped, lambda: dev_fn(unwrapped), tc.patience,
                                                    tc.min_delta, out)
                    _write(log_f, rec)
            due, deadline, early = _main_flags(acc, time.perf_counter() - last_ckpt > tc.checkpoint_minutes * 60,
                                               step < tc.steps and past_stop_at(), early)
            if due or step == tc.steps or deadline or early:
                state["elapsed"] = elapsed
                cpu, tokens = _summed(acc, time.process_time() - cpu0, own_tokens)
                state["cpu"], state["tokens"] = cpu_before + cpu, tokens_before + tokens
                state["alpha_s"] = float(alpha_module.s.detach()) if alpha_module is not None else None
                if main:
                    save_checkpoint(unwrapped, opt, state, ckpt)
                acc.wait_for_everyone()
                last_ckpt = time.perf_counter()
            if early:
                stage.close()
                return es["stopped"] if main else "early stop"
            if deadline:
                stage.close()
                return stop_reason()
    finally:
        for f in (log_f, sig_f):
            if f:
                f.close()
    stage.close()
    return "steps"


def _write(f, rec: dict) -> None:
    f.write(json.dumps(rec) + "\n")
    f.flush()


def _log(acc, window, step, phase, tc, elapsed, cpu, state, log_f, sig_f, alpha_module) -> None:
    n = window.pop("n")
    n_kd = window.pop("n_kd", 0)
    scalars = torch.tensor([window.get(k, float("nan")) / max(n_kd if k in ("kd", "kl") else n, 1)
                            for k in ("loss", "ce", "kd", "kl")])
    groups = torch.stack([window.get(k, torch.zeros(len(PAIR_GROUPS))) for k in ("ce_groups", "kl_groups", "tokens_groups")])
    scalars = acc.reduce(scalars, reduction="mean") if acc.num_processes > 1 else scalars
    groups = acc.reduce(groups, reduction="sum") if acc.num_processes > 1 else groups
    if not acc.is_main_process:
        return
    rec = {"step": step, "phase": phase, "lr": cooled(step, tc.lr, tc.warmup, tc.steps, tc.cooldown),
           "epoch": state["epoch"], "elapsed_s": round(elapsed, 1), "cpu_s": round(cpu, 1), "tokens": state["tokens"],
           "loadavg": os.getloadavg()[0],
           "processes": acc.num_processes}
    rec |= {k: (None if np.isnan(v) else round(float(v), 5)) for k, v in zip(("loss", "ce", "kd", "kl"), scalars.tolist(),
                                                                            strict=True)}
    if alpha_module is not None:
        rec["alpha"] = round(alpha_module.alpha, 5)
    _write(log_f, rec)
    per = {}
    for gi, g in enumerate(PAIR_GROUPS):
        t = float(groups[2, gi])
        if t:
            per[g] = {"ce": round(float(groups[0, gi]) / t, 4), "tokens": int(t)}
            if "kl_groups" in window:
                per[g]["kl"] = round(float(groups[1, gi]) / t, 4)
    _write(sig_f, {"step": step, "phase": phase, "split": "train", "groups": per})
