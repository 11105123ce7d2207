"""One recipe runner for every path: MT models in memory, parsers, checkpoints streamed from disk.

    report, qstate = apply_recipe(model, recipe, calibrate=Seq2SeqCalibration(tokenizer))

Rules:

1. A step's handler is looked up by the type of its config (``PruneConfig`` → prune,
   ``QuantConfig`` → quantize), the way torchao's ``quantize_(model, config)`` dispatches; a
   config type without a handler is refused.
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

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from torch import nn

from forgetbench.compress.bnb import BnbConfig
from forgetbench.compress.prune import OpenTensors, PruneConfig, prune
from forgetbench.compress.ptq import QuantConfig, QuantState, quantize
from forgetbench.compress.recipe import Calibration, Recipe, Step
from forgetbench.compress.smooth import SmoothConfig, check_model, smooth
from forgetbench.compress.units import resolve_units
from forgetbench.errors import ForgetbenchError


@dataclass
class Target:
    """What a recipe changes: ``model``'s parameters in place (``open_tensors`` None), or, streamed, a
    meta-device skeleton whose tensors ``open_tensors`` reads from and writes back to checkpoint shards."""

    model: nn.Module
    open_tensors: OpenTensors | None = None
    units: list[dict] | None = None  # unit map override (default: declared by / inferred from the model)
    diagnose: bool = False  # a quantize step also reports which quantiser pays (compress.diagnosis)

    @property
    def streamed(self) -> bool:
        return self.open_tensors is not None


class CalibrationSource(Protocol):
    def check(self, spec: Calibration | None) -> str | None:
        """Why ``spec`` cannot calibrate this model (None: it can). Called before any work."""

    def forwards(self, spec: Calibration) -> tuple[Callable[[nn.Module], None], dict]:
        """A callable running forward passes over the data, and a record of the data (path, hash, size)."""


StepReport = tuple[dict, QuantState | None]


@dataclass(frozen=True)
class StepHandler:
    kind: str
    check: Callable[[Step, bool, CalibrationSource | None], str | None]  # (step, streamed, calibrate) -> refusal
    run: Callable[[Target, Step, CalibrationSource | None], StepReport]


HANDLERS: dict[type, StepHandler] = {}


def register(config_type: type, handler: StepHandler) -> None:
    """Make ``handler`` run the steps whose config is a ``config_type``."""
    HANDLERS[config_type] = handler


def _prune_check(step, streamed, calibrate):
    if not step.config.needs_calibration:
        return None
    if calibrate is None and streamed:
        return (f"{step.config.method} pruning streamed calibrates through an MT model folder's tokenizer, and this folder "
                "has none; prune a parser in memory (forgetbench parse compress)")
    if calibrate is None:
        return f"{step.config.method} pruning needs calibration forward passes, and this path has no calibration source"
    return calibrate.check(step.calibration)


def _prune_run(target: Target, step: Step, calibrate) -> StepReport:
    if step.config.needs_calibration:
        from forgetbench.compress.data_aware_layerwise import layerwise_prune
        from forgetbench.compress.data_aware_prune import data_aware_prune

        forwards, info = calibrate.forwards(step.calibration)
        if target.streamed:  # layer by layer from the shards
            rep, how = layerwise_prune(target.model, step.config, forwards, target.units, target.open_tensors), "layers"
        elif _layerwise_in_memory(target):
            rep, how = layerwise_prune(target.model, step.config, forwards), "layers"
        else:
            rep, how = data_aware_prune(target.model, step.config, forwards, target.units), "whole-model forwards"
        return {"prune": rep.to_dict() | coverage(target, rep) | {"calibration": info, "calibrated_by": how}}, None
    rep = prune(target.model, step.config, target.units, open_tensors=target.open_tensors)
    return {"prune": rep.to_dict() | coverage(target, rep)}, None


def coverage(target: Target, rep) -> dict:
    """The model's prunable weights (every unit's, embeddings included: ``units.resolve_units``) and the fraction of
    them the step's units hold: its nominal size is 1 − p · covered (docs/METHOD.md §1.4)."""
    weights = sum(u.numel for u in resolve_units(target.model, target.units, include_embeddings=True))
    return {"model_weights": weights, "covered": rep.numel / weights if weights else 1.0}


def _layerwise_in_memory(target: Target) -> bool:
    """Data-aware pruning in memory goes layer by layer (``compress.data_aware_layerwise``: each layer run twice, not
    the whole model once per unit) where the units are a seq2seq model's layers (the default unit map) and the model
    sits on one device; a declared unit map (parsers) or a device map (accelerate's hooks) calibrates by whole-model
    forwards (``compress.data_aware_prune``), which give the same masks."""
    return (target.units is None and getattr(target.model, "forgetbench_units", None) is None
            and not getattr(target.model, "hf_device_map", None))


def _quantize_check(step, streamed, calibrate):
    if not step.config.needs_calibration:
        return None
    if streamed:
        return ("activation quantisation needs calibration forward passes and cannot be streamed; use a weights-only "
                "quantize step (sites: {linear_weight: true, others false}) or load the model with a device map")
    if calibrate is None:
        return "activation quantisation needs calibration forward passes, and this path has no calibration source"
    return calibrate.check(step.calibration)


def _quantize_run(target: Target, step: Step, calibrate) -> StepReport:
    forwards, info = calibrate.forwards(step.calibration) if step.config.needs_calibration else (None, None)
    reference = copy.deepcopy(target.model) if target.diagnose and forwards is not None else None
    qstate = quantize(target.model, step.config, forwards, open_tensors=target.open_tensors)
    rep = {"quantize": qstate.to_dict() | {"calibration": info}}
    if reference is not None:
        from forgetbench.compress.diagnosis import diagnose

        rep["diagnosis"] = diagnose(reference, qstate, forwards)
    return rep, qstate


def _smooth_check(step, streamed, calibrate):
    if streamed:
        return "smoothing needs calibration forward passes and cannot be streamed; load the model with a device map"
    if calibrate is None:
        return "smoothing needs calibration forward passes, and this path has no calibration source"
    return calibrate.check(step.calibration)


def _smooth_run(target: Target, step: Step, calibrate) -> StepReport:
    forwards, info = calibrate.forwards(step.calibration)
    return {"smooth": smooth(target.model, step.config, forwards) | {"calibration": info}}, None


def _bnb_check(step, streamed, calibrate):
    return ("bitsandbytes quantises when a model is loaded, on a GPU; there is no folder to write (compress.bnb "
            "rule 2): use the recipe as a sweep variant")


register(BnbConfig, StepHandler("bitsandbytes", _bnb_check, lambda target, step, calibrate: ({}, None)))
register(PruneConfig, StepHandler("prune", _prune_check, _prune_run))
register(SmoothConfig, StepHandler("smooth", _smooth_check, _smooth_run))
register(QuantConfig, StepHandler("quantize", _quantize_check, _quantize_run))


def _handler(recipe: Recipe, i: int, step: Step) -> StepHandler:
    h = HANDLERS.get(type(step.config))
    if h is None:
        raise ForgetbenchError(f"{recipe.source}: step {i}: no handler for {type(step.config).__name__}; "
                               f"known: {', '.join(h.kind for h in HANDLERS.values())}")
    return h


def check_recipe(recipe: Recipe, calibrate: CalibrationSource | None = None, streamed: bool = False) -> None:
    """Refuse, before any work, a recipe whose steps this path cannot perform (one line per refusal)."""
    for i, step in enumerate(recipe.steps, 1):
        h = _handler(recipe, i, step)
        why = h.check(step, streamed, calibrate)
        if why:
            raise ForgetbenchError(f"{recipe.source}: step {i} ({h.kind}): {why}")


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
