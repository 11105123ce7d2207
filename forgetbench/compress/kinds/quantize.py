"""The ``quantize`` step: int8 post-training quantisation, weights and activations at the sites named
(``compress.ptq``), its ranges calibrated each sentence alone.

    - quantize: {calibrator: mse, sites: {linear_input: true, residual: true}, granularity: {residual: channel},
                 calibration: {data: ../../data/calibration/ntrex128-calib.tsv, max_sentences: 256}}
"""

from __future__ import annotations

import copy

from forgetbench.compress.ptq import QuantConfig, quantize
from forgetbench.compress.step_kind import (
    ParseContext,
    Step,
    StepKind,
    StepReport,
    Target,
    calibration_check,
    parse_calibration,
    require_calibration,
)

KEYS = frozenset({"calibrator", "num_bins", "percentile", "start_bin", "sites", "exclude", "granularity", "calibration"})


def parse(opts: dict, where: str, ctx: ParseContext) -> Step:
    q = {k: v for k, v in opts.items() if k != "calibration"}
    if "exclude" in q:
        q["exclude"] = tuple(q["exclude"]) if isinstance(q["exclude"], list) else q["exclude"]
    cfg = QuantConfig(**q)
    calib = parse_calibration(where, opts.get("calibration"), ctx.base, ctx.calibration_override, alone=True)
    if cfg.needs_calibration:
        require_calibration(where, calib, "activation quantisation")
    return Step("quantize", cfg, calib)


def check(step, streamed, calibrate):
    if not step.config.needs_calibration:
        return None
    if streamed:
        return ("activation quantisation needs calibration forward passes and cannot be streamed; use a weights-only "
                "quantize step (sites: {linear_weight: true, others false}) or load the model with a device map")
    return calibration_check(step, calibrate, "activation quantisation")


def run(target: Target, step: Step, calibrate) -> StepReport:
    forwards, info = calibrate.forwards(step.calibration) if step.config.needs_calibration else (None, None)
    reference = copy.deepcopy(target.model) if target.diagnose and forwards is not None else None
    qstate = quantize(target.model, step.config, forwards, open_tensors=target.open_tensors)
    rep = {"quantize": qstate.to_dict() | {"calibration": info}}
    if reference is not None:
        from forgetbench.compress.diagnosis import diagnose

        rep["diagnosis"] = diagnose(reference, qstate, forwards)
    return rep, qstate


KIND = StepKind("quantize", QuantConfig, KEYS, "int8 fake quantisation of weights and activations at the named sites",
                parse, check, run)
