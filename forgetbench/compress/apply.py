"""One recipe runner for every path: MT models in memory, parsers, checkpoints streamed from disk.

    report, qstate = apply_recipe(model, recipe, calibrate=Seq2SeqCalibration(tokenizer))

Rules:

1. A step runs through its kind (``compress.kinds``: one module per kind, one registry), whose config type it
   must carry (``PruneConfig`` → prune, ``QuantConfig`` → quantize), as torchao's ``quantize_(model, config)``
   dispatches on the config; a step whose config is not its kind's is refused.
2. What a step runs on is a ``Target``: an ``nn.Module`` whose parameters are changed in place,
   or a meta-device skeleton whose tensors are opened one selection group (prune) or one weight
   matrix (quantize) at a time from checkpoint shards (``compress.streaming``). Both go through
   the same ``prune`` / ``quantize`` code, so they cover the same tensors: Linear and LSTM/GRU
   weight matrices alike.
3. Calibration data is read by a ``CalibrationSource`` that knows the model family:
   ``compress.calibration.Seq2SeqCalibration`` (TSV of parallel sentences, teacher-forced MT
   forwards) or ``parsing.compress_eval.ConlluCalibration`` (CoNLL-U sentences through a parser).
4. Every step is checked before any work (``check_recipe``): activation quantisation on a
   streamed target, a missing calibration source or data the source cannot read is refused in one
   line naming the recipe and the step.
"""

from __future__ import annotations

import time

from torch import nn

from forgetbench.compress.kinds import KINDS
from forgetbench.compress.recipe import Recipe, Step
from forgetbench.compress.smooth import check_model
from forgetbench.compress.step_kind import CalibrationSource, StepKind, StepReport, Target
from forgetbench.errors import ForgetbenchError

__all__ = ["CalibrationSource", "StepReport", "Target", "apply_recipe", "check_in_memory", "check_recipe"]


def _handler(recipe: Recipe, i: int, step: Step) -> StepKind:
    """Rule 1: the step's kind from the registry, its config of that kind's type."""
    kind = KINDS.get(step.kind)
    if kind is None or not isinstance(step.config, kind.config_type):
        raise ForgetbenchError(f"{recipe.source}: step {i}: no handler for {type(step.config).__name__}; "
                               f"known: {', '.join(f'{k.name} ({k.config_type.__name__})' for k in KINDS.values())}")
    return kind


def check_recipe(recipe: Recipe, calibrate: CalibrationSource | None = None, streamed: bool = False) -> None:
    """Refuse, before any work, a recipe whose steps this path cannot perform (one line per refusal)."""
    for i, step in enumerate(recipe.steps, 1):
        h = _handler(recipe, i, step)
        why = h.check(step, streamed, calibrate)
        if why:
            raise ForgetbenchError(f"{recipe.source}: step {i} ({h.name}): {why}")


def check_in_memory(model: nn.Module) -> None:
    """Rule 2, in place: every weight must be in CPU or GPU memory. A device map's offloaded modules hold meta
    placeholders (accelerate's hooks load the weights for each forward), so a change made there would be lost:
    refused, naming the first such weight."""
    meta = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if meta:
        raise ForgetbenchError(f"{len(meta)} weights are offloaded (e.g. {meta[0]}): compressing them in place would be "
                               "lost; give the device map room for every weight (max_memory), or prune and quantise "
                               "weights shard by shard with compress-stream")


def apply_recipe(model: nn.Module | Target, recipe: Recipe, calibrate: CalibrationSource | None = None) -> StepReport:
    """Run ``recipe``'s steps in order on ``model`` (in place) and return the compression report's
    ``recipe``/``steps`` part and the last quantisation state (None without a quantize step)."""
    target = model if isinstance(model, Target) else Target(model)
    check_recipe(recipe, calibrate, target.streamed)
    if target.diagnose and (target.streamed or not any(s.kind == "quantize" for s in recipe.steps)):
        raise ForgetbenchError(f"{recipe.source}: --diagnose measures a quantize step's sites in memory; this recipe "
                               f"{'is streamed' if target.streamed else 'has no quantize step'}")
    if not target.streamed:
        check_in_memory(target.model)
        if any(s.kind == "smooth" for s in recipe.steps):
            check_model(target.model)
    steps, qstate = [], None
    for i, step in enumerate(recipe.steps, 1):
        t0 = time.perf_counter()
        rep, q = _handler(recipe, i, step).run(target, step, calibrate)
        qstate = q or qstate
        steps.append(rep | {"seconds": round(time.perf_counter() - t0, 3)})
    return {"recipe": recipe.raw, "recipe_name": recipe.name, "steps": steps}, qstate
