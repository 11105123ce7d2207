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
    fail,
    parse_calibration,
)

KEYS = frozenset(SMOOTH_KEYS)


def parse(opts: dict, where: str, ctx: ParseContext) -> Step:
    calib = parse_calibration(where, opts.get("calibration"), ctx.base, ctx.calibration_override, alone=True)
    if calib is None:
        fail(where, "smooth needs calibration data (max |x| per channel): add calibration: {data: FILE.tsv} "
                    "or pass --calibration FILE.tsv")
    return Step("smooth", SmoothConfig(**{k: v for k, v in opts.items() if k != "calibration"}), calib)


def check(step, streamed, calibrate):
    if streamed:
        return "smoothing needs calibration forward passes and cannot be streamed; load the model with a device map"
    if calibrate is None:
        return "smoothing needs calibration forward passes, and this path has no calibration source"
    return calibrate.check(step.calibration)


def run(target: Target, step: Step, calibrate) -> StepReport:
    forwards, info = calibrate.forwards(step.calibration)
    return {"smooth": smooth(target.model, step.config, forwards) | {"calibration": info}}, None


KIND = StepKind("smooth", SmoothConfig, KEYS, "SmoothQuant: move activation outliers into the weights before quantize",
                parse, check, run)
