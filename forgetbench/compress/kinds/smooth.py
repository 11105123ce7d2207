"""The ``smooth`` step: SmoothQuant's per-channel scales moved from activations into weights (``compress.smooth``).

    - smooth: {alpha: 0.5, calibration: {data: ../../data/calibration/ntrex128-calib.tsv}}
"""

from __future__ import annotations

from forgetbench.compress.smooth import KEYS as SMOOTH_KEYS
from forgetbench.compress.smooth import SmoothConfig, smooth
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

KEYS = frozenset(SMOOTH_KEYS)


def parse(opts: dict, where: str, ctx: ParseContext) -> Step:
    calib = parse_calibration(where, opts.get("calibration"), ctx.base, ctx.calibration_override, alone=True)
    require_calibration(where, calib, "smooth", " (max |x| per channel)")
    return Step("smooth", SmoothConfig(**{k: v for k, v in opts.items() if k != "calibration"}), calib)


def check(step, streamed, calibrate):
    if streamed:
        return "smoothing needs calibration forward passes and cannot be streamed; load the model with a device map"
    return calibration_check(step, calibrate, "smoothing")


def run(target: Target, step: Step, calibrate) -> StepReport:
    forwards, info = calibrate.forwards(step.calibration)
    return {"smooth": smooth(target.model, step.config, forwards) | {"calibration": info}}, None


KIND = StepKind("smooth", SmoothConfig, KEYS, "SmoothQuant: move activation outliers into the weights before quantize",
                parse, check, run)
