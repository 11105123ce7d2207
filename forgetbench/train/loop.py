"""The training loop every trainer shares (the teacher's now, distilled students' next): schedule,
determinism, checkpoints and exact resume.

- Schedule: ``inverse_sqrt`` — linear warm-up to ``lr`` over ``warmup`` steps, then ``lr·√(warmup/step)``;
  ``cooled`` adds a linear cooldown over a run's last steps (the distilled students' ``train.cooldown``).
- Determinism: batch order comes from the data source's seeded permutation per epoch, and the
  torch RNG is re-seeded before every step (``seed·1,000,003 + step``), so dropout at step s is
  the same whether or not the run was interrupted before it.
- Checkpoint (``save_checkpoint``): weights (safetensors, tied copies stored once), optimiser
  state (``torch.save``, read back with ``weights_only=True``) and the loop state as JSON, written
  to a temporary folder and swapped in every ``checkpoint_minutes``, at the time budget and at the
  last step. ``resume`` reads it back and refuses a checkpoint made with other settings
  (fingerprint).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import torch

from forgetbench.console import Console
from forgetbench.errors import ForgetbenchError
from forgetbench.io import trim_jsonl
from forgetbench.resources import past_stop_at, stop_on_signals, stop_reason
from forgetbench.train.config import TrainCfg
from forgetbench.train.weights import unique_tensors


class BatchSource(Protocol):
    def batches(self, max_tokens: int, seed: int, epoch: int) -> list: ...
    def collate(self, idx) -> dict[str, torch.Tensor]: ...


def inverse_sqrt(step: int, lr: float, warmup: int) -> float:
    step = max(step, 1)
    return lr * min(step / warmup, math.sqrt(warmup / step))


def cooled(step: int, lr: float, warmup: int, steps: int, cooldown: int) -> float:
    """``inverse_sqrt``, except over the last ``cooldown`` of ``steps`` steps: there the rate at the cooldown's start
    c = steps − cooldown times (steps − step + 1) / cooldown, a straight line from that rate (step c + 1) to
    1/cooldown of it (the last step). ``cooldown`` 0: ``inverse_sqrt``."""
    start = steps - cooldown
    if cooldown <= 0 or step <= start:
        return inverse_sqrt(step, lr, warmup)
    return inverse_sqrt(start, lr, warmup) * (steps - step + 1) / cooldown


def new_state(fingerprint: str) -> dict:
    return {"step": 0, "epoch": 0, "batch": 0, "elapsed": 0.0, "tokens": 0, "fingerprint": fingerprint}


def save_checkpoint(model, opt, state: dict, ckpt: Path) -> None:
    from safetensors.torch import save_file

    tmp = ckpt.with_name(ckpt.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(unique_tensors(model), str(tmp / "model.safetensors"))
    torch.save(opt.state_dict(), tmp / "optim.pt")
    (tmp / "state.json").write_text(json.dumps(state))
    old = ckpt.with_name(ckpt.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if ckpt.exists():
        os.rename(ckpt, old)
    os.rename(tmp, ckpt)
    shutil.rmtree(old, ignore_errors=True)


def resume(model, opt, ckpt: Path, fingerprint: str, log=print, legacy: str | None = None) -> dict:
    """The loop state of the checkpoint in ``ckpt`` loaded into ``model``/``opt``, or a new state. A kill between
    the two renames of ``save_checkpoint`` leaves only ``<ckpt>.old`` (the previous checkpoint, complete): it is
    put back and resumed from. ``legacy``: the same settings' fingerprint as written before (it held where the
    data lay), accepted; the state then carries ``fingerprint``."""
    from safetensors.torch import load_file

    old = ckpt.with_name(ckpt.name + ".old")
    if not ckpt.is_dir() and (old / "state.json").is_file():
        os.rename(old, ckpt)
        log(f"{ckpt}: a checkpoint swap was interrupted; resuming from the previous checkpoint")
    shutil.rmtree(ckpt.with_name(ckpt.name + ".tmp"), ignore_errors=True)
    if not ckpt.is_dir():
        return new_state(fingerprint)
    saved = json.loads((ckpt / "state.json").read_text()).get("fingerprint")
    if saved != fingerprint and (legacy is None or saved != legacy):
        raise ForgetbenchError(f"{ckpt}: made with other data/model/optimiser settings (fingerprint {saved} vs "
                               f"{fingerprint}); use a new --out, or restore the config it was made with")
    missing, unexpected = model.load_state_dict(load_file(str(ckpt / "model.safetensors")), strict=False)
    if unexpected:
        raise ForgetbenchError(f"checkpoint {ckpt} does not match the model config: unexpected {unexpected[:3]}")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    opt.load_state_dict(torch.load(ckpt / "optim.pt", weights_only=True))
    state = json.loads((ckpt / "state.json").read_text()) | {"fingerprint": fingerprint}
    log(f"resumed from {ckpt} at step {state['step']}")
    return state


def step_seed(seed: int, step: int) -> int:
    """The torch seed of step ``step`` (module docstring: the same whether or not the run was interrupted)."""
    return seed * 1_000_003 + step


def train_step(model, opt, b: dict, step_loss: Callable[[dict], tuple[torch.Tensor, int]], clip: float):
    """One optimiser step on batch ``b``: the loss, backward, gradient clipping at ``clip``, the update; returns
    (loss, tokens) as ``step_loss`` gives them."""
    loss, tokens = step_loss(b)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss, tokens


def run(model, opt, data: BatchSource, step_loss: Callable[[dict], tuple[torch.Tensor, int]], tc: TrainCfg, state: dict,
        ckpt: Path, log_file: Path, on_log: Callable[[int], dict] | None = None, progress: bool = True,
        dev: Callable[[int], tuple[float, dict]] | None = None, dev_start: int = 0,
        snapshot: Callable[[int], None] | None = None) -> str:
    """Train until ``tc.steps``, the time budget or early stopping; returns what stopped it. ``step_loss(batch)``
    gives the loss to minimise and the tokens it covered; ``on_log(step)``, asked every step, adds fields (dev
    scores) to the log: to every 100th step's record, or in a record of the step's own (step, time, tokens and the
    fields) where it returns some between them; ``dev(step)`` gives the held-out score (higher is better) and the fields to log, measured and
    acted on by ``early_stop``'s rules every ``tc.dev_every`` steps after ``dev_start``; ``snapshot(step)`` keeps the
    weights every ``tc.snapshot_every`` steps (after the step's dev measurement). ``state`` is updated in place."""
    from forgetbench.train import early_stop

    if dev is not None:
        state.setdefault("early_stop", early_stop.new(dev_start))
    es = state.get("early_stop")
    if es and es.get("stopped"):  # rule 3: a stopped run trains no further
        return es["stopped"]
    batches = data.batches(tc.max_tokens, tc.seed, state["epoch"])
    t_start, last_ckpt = time.perf_counter() - state["elapsed"], time.perf_counter()
    stage = Console("train-mt", quiet=not progress).stage("steps", tc.steps, "steps", "tokens")
    stage.update(state["step"])
    tokens0 = state["tokens"]  # the rate is this run's: a resumed run's earlier tokens are not counted
    run_loss, run_n = 0.0, 0
    stopped = "steps"
    trim_jsonl(log_file, state["step"])  # a resume trains again what came after its checkpoint
    with open(log_file, "a", encoding="utf-8") as log_f, stop_on_signals():
        while state["step"] < tc.steps:
            if state["batch"] >= len(batches):
                state["epoch"], state["batch"] = state["epoch"] + 1, 0
                batches = data.batches(tc.max_tokens, tc.seed, state["epoch"])
            b = data.collate(batches[state["batch"]])
            state["batch"] += 1
            step = state["step"] + 1
            torch.manual_seed(step_seed(tc.seed, step))
            for g in opt.param_groups:
                g["lr"] = inverse_sqrt(step, tc.lr, tc.warmup)
            loss, tokens = train_step(model, opt, b, step_loss, tc.clip)
            state["step"] = step
            state["tokens"] += tokens
            run_loss, run_n = run_loss + loss.item(), run_n + 1
            stage.update(step, state["tokens"] - tokens0)
            elapsed = time.perf_counter() - t_start
            extra = on_log(step) if on_log else {}
            if step % 100 == 0:
                rec = {"step": step, "loss": round(run_loss / run_n, 4), "lr": inverse_sqrt(step, tc.lr, tc.warmup),
                       "epoch": state["epoch"], "elapsed_s": round(elapsed, 1), "tokens": state["tokens"],
                       "loadavg": os.getloadavg()[0]} | extra
                run_loss, run_n = 0.0, 0
                log_f.write(json.dumps(rec) + "\n")
                log_f.flush()
            elif extra:  # fields due at a step between the 100th ones (a dev interval of 250): a record of their own
                log_f.write(json.dumps({"step": step, "elapsed_s": round(elapsed, 1), "tokens": state["tokens"]} | extra)
                            + "\n")
                log_f.flush()
            early = False
            if dev is not None and early_stop.due(es, step, tc.dev_every):
                early, rec = early_stop.measure(es, step, model, lambda s=step: dev(s), tc.patience, tc.min_delta,
                                                ckpt.parent)
                log_f.write(json.dumps(rec) + "\n")
                log_f.flush()
            if snapshot is not None and getattr(tc, "snapshot_every", 0) and step % tc.snapshot_every == 0:
                snapshot(step)
            over_budget = tc.time_budget_minutes and elapsed > tc.time_budget_minutes * 60
            deadline = step < tc.steps and past_stop_at()  # resources rule 6
            over_budget = over_budget or deadline
            if (time.perf_counter() - last_ckpt > tc.checkpoint_minutes * 60 or over_budget or early
                    or step == tc.steps):
                state["elapsed"] = elapsed
                save_checkpoint(model, opt, state, ckpt)
                last_ckpt = time.perf_counter()
            if early:
                stopped = es["stopped"]
                break
            if over_budget:
                stopped = stop_reason() if deadline else f"time budget ({tc.time_budget_minutes} min)"
                break
    stage.close()
    return stopped
