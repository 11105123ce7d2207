"""The ``prune`` step: magnitude, Wanda or SparseGPT pruning (``compress.prune``, ``compress.data_aware*``).

    - prune: {sparsity: 0.30, scope: layer}
    - prune: {sparsity: 0.45, method: wanda, calibration: {data: ../../data/calibration/ntrex128-calib.tsv}}
"""

from __future__ import annotations

from forgetbench.compress.prune import PruneConfig, prune
from forgetbench.compress.step_kind import (
    CalibrationSource,
    ParseContext,
    Step,
    StepKind,
    StepReport,
    Target,
    calibration_check,
    fail,
    parse_calibration,
    require_calibration,
)
from forgetbench.compress.units import resolve_units

KEYS = frozenset({"sparsity", "scope", "include_embeddings", "method", "n_m", "calibration"})
PRUNE_CALIBRATION_SENTENCES = 128  # data-aware pruning's default calibration size (Wanda's and SparseGPT's papers)


def parse(opts: dict, where: str, ctx: ParseContext) -> Step:
    if "sparsity" not in opts and "n_m" not in opts:
        fail(where, "prune needs 'sparsity' (a number in [0, 1))")
    cfg = PruneConfig(**{"sparsity": None} | {k: v for k, v in opts.items() if k != "calibration"})
    calib = parse_calibration(where, opts.get("calibration"), ctx.base,
                              ctx.calibration_override if cfg.needs_calibration else None, PRUNE_CALIBRATION_SENTENCES)
    if cfg.needs_calibration:
        require_calibration(where, calib, f"{cfg.method} pruning")
    if not cfg.needs_calibration and "calibration" in opts:
        fail(where, "magnitude pruning reads no calibration data: remove 'calibration' or set method: "
                    "wanda or sparsegpt")
    return Step("prune", cfg, calib)


def check(step, streamed, calibrate):
    if not step.config.needs_calibration:
        return None
    if calibrate is None and streamed:
        return (f"{step.config.method} pruning streamed calibrates through an MT model folder's tokenizer, and this folder "
                "has none; prune a parser in memory (forgetbench parse compress)")
    return calibration_check(step, calibrate, f"{step.config.method} pruning")


def run(target: Target, step: Step, calibrate: CalibrationSource | None) -> StepReport:
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


KIND = StepKind("prune", PruneConfig, KEYS, "zero the smallest weights per unit (magnitude, Wanda or SparseGPT scores)",
                parse, check, run)
