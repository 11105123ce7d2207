"""The training loop shared by the parser and its tagger: a budget in steps (the default), or epochs.

Batches of similar length (≤ ``max_tokens`` padded tokens) in a seeded shuffled order, epoch after epoch;
word dropout (10 % of known words become ``<unk>``, so the model learns to use characters and tags); an Adam
step with gradient clipping at 5.

**Steps** (``StepBudget``; Dozat's rule, thesis §6.3): dev measured every ``eval_every`` updates and at the
last; the model saved whenever the dev score improves; training ends at ``max_steps`` updates, or once
``patience`` updates have passed since the best measurement. Nothing reads a clock: the same command trains
the same weights on an idle or a loaded host. ``minutes``, if given, is only a safety stop; when it fires the
run ends at the next batch with a dev measurement, and its record says so (``"stop"``).

**Epochs** (``steps`` None): dev after every epoch, up to ``max_epochs`` (deterministic), or within ``minutes``
too (no epoch starts that would end after the budget, ``epoch_would_overrun``; an epoch running into it ends
early, leaving its dev evaluation the time the last one took): a wall-clock budget trains another model on a
loaded host, so no shipped recipe or study uses one.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from forgetbench.console import Console, clock
from forgetbench.parsing.data.batching import batches, batchify
from forgetbench.parsing.data.conll import Sentence

WORD_DROPOUT = 0.1


@dataclass(frozen=True)
class StepBudget:
    """Training by steps (thesis §6.3: up to 30,000 steps, stop when 5,000 pass without a dev improvement; dev
    every 100 steps). ``patience`` 0: no early stop (``max_steps`` exactly)."""

    max_steps: int = 30000
    patience: int = 5000
    eval_every: int = 100

    def __post_init__(self):
        for name in ("max_steps", "eval_every"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ValueError(f"{name} must be a positive whole number of steps, got {getattr(self, name)!r}")
        if not (isinstance(self.patience, int) and self.patience >= 0):
            raise ValueError(f"patience must be a whole number of steps >= 0, got {self.patience!r}")

    def to_dict(self) -> dict:
        return {"max_steps": self.max_steps, "patience": self.patience, "eval_every": self.eval_every}


def epoch_would_overrun(t0: float, epochs_done: int, minutes: float, t_first: float | None = None) -> bool:
    """True when another epoch, as long as the mean epoch so far (counted from ``t_first``, default ``t0``),
    would end after ``t0 + minutes``: time-budgeted training stops *within* its budget."""
    now = time.perf_counter()
    per_epoch = (now - (t0 if t_first is None else t_first)) / max(epochs_done, 1)
    return now + per_epoch > t0 + minutes * 60


def train_epochs(model, opt, sents: list[Sentence], vocab, rng: random.Random, max_tokens: int,
                 batch_loss: Callable[[dict, torch.Tensor], torch.Tensor],
                 evaluate: Callable[[int], tuple[float, dict]], save: Callable[[int, list[dict]], None],
                 minutes: float | None, max_epochs: int, t0: float, t_first: float | None = None, desc: str = "epoch",
                 progress: bool = True, scheduler=None, steps: StepBudget | None = None) -> tuple[int, list[dict]]:
    """Train until the budget ends: ``steps`` (a ``StepBudget``; ``minutes`` then a safety stop only, None for
    none) or, without it, ``max_epochs`` within ``minutes`` from ``t0`` (epoch length measured from ``t_first``;
    None: epochs alone, deterministic).
    ``batch_loss(batch, words_with_dropout)`` gives the loss of a batch; ``evaluate(epoch)`` the dev score used
    for selection and the measurement's history record (``"step"`` added: the updates so far); ``save(epoch,
    history)`` writes the model when the score improves; ``scheduler`` (optional) steps after every update.
    The last history record says why training stopped (``"stop"``). Epochs: the budget binds inside an epoch
    too: once the next batch would leave less time than the last dev evaluation took, the epoch ends there (after
    at least one batch), is evaluated and saved as any other, and training stops (its record says
    ``"partial": true``), so a budget shorter than an epoch is kept. Returns (epochs begun, history)."""
    best, best_step, history = -1.0, 0, []
    device = next(model.parameters()).device  # the batches go where the network is
    con = Console("parse train", quiet=not progress)  # a bar per epoch on a terminal, else one line per measurement
    deadline = None if minutes is None else t0 + minutes * 60
    epoch, eval_s, updates, stop = 0, 0.0, 0, ""

    def measure(partial: bool = False) -> None:
        nonlocal best, best_step, eval_s
        t_eval = time.perf_counter()
        score, record = evaluate(epoch)
        eval_s = time.perf_counter() - t_eval
        record = dict(record) | {"step": updates} | ({"partial": True} if partial else {})
        history.append(record)
        if not con.tty:
            at = f"step {updates} of at most {steps.max_steps}" if steps else f"epoch {epoch} of at most {max_epochs}"
            left = f" of {minutes:g} min" if minutes is not None else ""
            con.line(f"{desc}: {at}, dev {score:.2f} (best {max(best, score):.2f}), "
                     f"elapsed {clock(time.perf_counter() - t0)}{left}")
        if score > best:
            best, best_step = score, updates
            save(epoch, history)

    for epoch in range(1, (max_epochs if steps is None else 10**9) + 1):
        model.train()
        partial = False
        for bs in tqdm(batches(sents, max_tokens, True, rng), disable=None if progress and con.tty else True,
                       desc=f"{desc} {epoch}"):
            if deadline is not None and updates and time.perf_counter() + eval_s >= deadline:
                partial = True
                break
            updates += 1
            b = batchify(bs, vocab, device=device)
            drop = (torch.rand(b["words"].shape, device=device) < WORD_DROPOUT) & (b["words"] > 2)
            loss = batch_loss(b, b["words"].masked_fill(drop, 1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            if scheduler is not None:
                scheduler.step()
            if steps is not None and (updates % steps.eval_every == 0 or updates == steps.max_steps):
                measure()
                if updates == steps.max_steps:
                    stop = f"max_steps: {steps.max_steps} steps"
                elif steps.patience and updates - best_step >= steps.patience:
                    stop = (f"patience: no dev improvement in {steps.patience} steps after step {best_step} "
                            f"(best {best:.2f})")
                if stop:
                    break
        if stop:
            break
        if steps is not None:
            if updates == 0:
                raise ValueError("no training batch: the training set is empty")
            if partial:  # the safety stop: the steps since the last measurement are measured
                if history and history[-1]["step"] == updates:
                    history[-1]["partial"] = True
                else:
                    measure(partial=True)
                stop = f"safety stop: --minutes {minutes:g} of wall time at step {updates} (not a step budget)"
                break
            continue
        measure(partial)
        if partial or (minutes is not None and epoch_would_overrun(t0, epoch, minutes, t_first)):
            stop = f"minutes: {minutes:g}" + (" (inside an epoch)" if partial else "")
            break
    else:
        stop = f"max_epochs: {max_epochs}"
    if history:
        history[-1]["stop"] = stop
    return epoch, history
