"""The epoch loop shared by the parser and its tagger, under a time budget.

Each epoch: batches of similar length (≤ ``max_tokens`` padded tokens) in a seeded shuffled
order; word dropout (10 % of known words become ``<unk>``, so the model learns to use characters
and tags); Adam step with gradient clipping at 5; then evaluation on dev. The model is saved
whenever the dev score improves, so an interrupted run keeps its best model. No epoch starts
that would end after the budget (``epoch_would_overrun``), and an epoch running into it ends early,
leaving its dev evaluation the time the last one took (a budget shorter than an epoch overruns by at most
the first evaluation).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import torch
from tqdm.auto import tqdm

from forgetbench.console import Console, clock
from forgetbench.parsing.data.batching import batches, batchify
from forgetbench.parsing.data.conll import Sentence

WORD_DROPOUT = 0.1


def epoch_would_overrun(t0: float, epochs_done: int, minutes: float, t_first: float | None = None) -> bool:
    """True when another epoch, as long as the mean epoch so far (counted from ``t_first``, default ``t0``),
    would end after ``t0 + minutes``: time-budgeted training stops *within* its budget."""
    now = time.perf_counter()
    per_epoch = (now - (t0 if t_first is None else t_first)) / max(epochs_done, 1)
    return now + per_epoch > t0 + minutes * 60


def train_epochs(model, opt, sents: list[Sentence], vocab, rng: random.Random, max_tokens: int,
                 batch_loss: Callable[[dict, torch.Tensor], torch.Tensor],
                 evaluate: Callable[[int], tuple[float, dict]], save: Callable[[int, list[dict]], None],
                 minutes: float, max_epochs: int, t0: float, t_first: float | None = None, desc: str = "epoch",
                 progress: bool = True, scheduler=None) -> tuple[int, list[dict]]:
    """Train epoch after epoch until ``max_epochs`` or the budget (``minutes`` from ``t0``; epoch length
    measured from ``t_first``). ``batch_loss(batch, words_with_dropout)`` gives the loss of a batch;
    ``evaluate(epoch)`` the dev score used for selection and the epoch's history record; ``save(epoch,
    history)`` writes the model when the score improves; ``scheduler`` (optional) steps after every update.
    The budget binds inside an epoch too: once the next batch would leave less time than the last dev evaluation
    took, the epoch ends there (after at least one batch), is evaluated and saved as any other, and training
    stops (its record says ``"partial": true``), so a budget shorter than an epoch is kept.
    Returns (epochs run, history)."""
    best, history = -1.0, []
    device = next(model.parameters()).device  # the batches go where the network is
    con = Console("parse train", quiet=not progress)  # a bar per epoch on a terminal, else one line per epoch
    epoch, deadline, eval_s, updates = 0, t0 + minutes * 60, 0.0, 0
    for epoch in range(1, max_epochs + 1):
        model.train()
        partial = False
        for bs in tqdm(batches(sents, max_tokens, True, rng), disable=None if progress and con.tty else True,
                       desc=f"{desc} {epoch}"):
            if updates and time.perf_counter() + eval_s >= deadline:
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
        t_eval = time.perf_counter()
        score, record = evaluate(epoch)
        eval_s = time.perf_counter() - t_eval
        if partial:
            record = dict(record) | {"partial": True}
        history.append(record)
        if not con.tty:
            con.line(f"{desc}: epoch {epoch} of at most {max_epochs}, dev {score:.2f} (best {max(best, score):.2f}), "
                     f"elapsed {clock(time.perf_counter() - t0)} of {minutes:g} min")
        if score > best:
            best = score
            save(epoch, history)
        if partial or epoch_would_overrun(t0, epoch, minutes, t_first):
            break
    return epoch, history
