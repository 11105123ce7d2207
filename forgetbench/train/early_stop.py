"""When a training run has stopped improving (docs/METHOD.md §5, "Early stopping"): the rule every trainer with a
held-out dev score applies.

Rules, with ``train.patience`` P (0: off) and ``train.min_delta`` δ:

1. The dev score (higher is better) is measured every ``train.dev_every`` steps once ``start`` steps have passed
   (a schedule whose objective changes at step m, as UD-PrLM's Algorithm 1, starts counting after it).
2. A score above the best so far by more than δ is an improvement: it becomes the best, its step the best step,
   and the weights of that step are written to ``RUN/best`` (safetensors, atomically) before training goes on.
3. After P measurements in a row without an improvement the run stops: ``state["early_stop"]["stopped"]`` says
   so, the checkpoint is written, and a later run of the same folder — a resume, a longer ``train.steps`` —
   trains no further.
4. The exported model is the best step's weights (``restore_best``), and its record names that step and score.

The state (best, best step, measurements since the best, every measurement) lives in the loop state, so a
resumed run goes on counting where the interrupted one stood.
"""

from __future__ import annotations

from pathlib import Path

import torch

BEST = "best"


def new(start: int = 0) -> dict:
    return {"start": start, "best": None, "best_step": None, "since": 0, "stopped": None, "scores": []}


def due(es: dict, step: int, every: int) -> bool:
    """Rule 1: whether step ``step`` measures the dev score."""
    return bool(every) and step % every == 0 and step > es["start"]


def record(es: dict, step: int, score: float, patience: int, min_delta: float, model, folder: Path) -> bool:
    """Rules 2–3 for a measurement at ``step``; returns whether the run stops now."""
    es["scores"].append([step, score])
    if es["best"] is None or score > es["best"] + min_delta:
        es.update(best=score, best_step=step, since=0)
        save_best(model, folder)
    else:
        es["since"] += 1
    if patience and es["since"] >= patience:
        es["stopped"] = (f"early stop: no dev improvement above {min_delta:g} in {patience} measurements after step "
                         f"{es['best_step']} (best {es['best']:.4f})")
        return True
    return False


def save_best(model, folder: Path) -> None:
    from safetensors.torch import save_file

    from forgetbench.io import atomic_directory
    from forgetbench.train.weights import unique_tensors

    with atomic_directory(folder / BEST, replace=True) as tmp:
        save_file(unique_tensors(model), str(tmp / "model.safetensors"))


def measure(es: dict, step: int, model, score_fn, patience: int, min_delta: float, folder: Path) -> tuple[bool, dict]:
    """One measurement at ``step`` (``score_fn()`` in eval mode, rules 2-3): whether the run stops now, and the
    log record (step, score, the fields ``score_fn`` gave, the best step)."""
    score, fields = evaluated(model, score_fn)
    stop = record(es, step, score, patience, min_delta, model, folder)
    return stop, {"step": step, "dev_score": round(score, 6), **fields, "best_step": es["best_step"]}


def finish(model, state: dict, folder: Path, patience: int) -> dict | None:
    """Rule 4 at export: the best step's weights loaded where early stopping was on, and the record for
    ``training.json`` (the measurements, the best step, which weights were exported)."""
    es = state.get("early_stop")
    if not es:
        return None
    best = patience > 0 and restore_best(model, es, folder)
    return es | {"exported": "best" if best else "last"}


def restore_best(model, es: dict | None, folder: Path) -> bool:
    """Rule 4: load the best step's weights into ``model`` where the run measured any; returns whether it did."""
    from safetensors.torch import load_file

    f = folder / BEST / "model.safetensors"
    if not es or es.get("best_step") is None or not f.is_file():
        return False
    device = next(model.parameters()).device
    model.load_state_dict({k: v.to(device) for k, v in load_file(str(f)).items()}, strict=False)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return True


@torch.no_grad()
def evaluated(model, score_fn):
    """``score_fn()`` with ``model`` in eval mode, its training mode restored afterwards."""
    was = model.training
    model.eval()
    try:
        return score_fn()
    finally:
        model.train(was)
