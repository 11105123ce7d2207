"""SmoothQuant (Xiao et al., 2023, §4): activation outliers migrated into the weights, a recipe step before ``quantize``.

    name: ptq-int8-smoothquant
    steps:
      - smooth: {alpha: 0.5, calibration: {data: ../../data/calibration/ntrex128-calib.tsv}}
      - quantize: {...}

A layer norm's output X feeds linear maps Y = X Wᵀ (in M2M-100's pre-norm layers: the self-attention's q/k/v after
``self_attn_layer_norm``, the decoder's cross-attention query after ``encoder_attn_layer_norm``, ``fc1`` after
``final_layer_norm``). With one factor per input channel j,

    s_j = max|X_j|^α / max|W_{·j}|^(1−α)     (the max over calibration tokens; over the rows of every map reading X)

the norm's gain and bias are divided by s and each map's column j multiplied by s_j: X' Wᵀ' = (X diag(s)⁻¹)(W diag(s))ᵀ
= X Wᵀ, the same function in exact arithmetic, while X' has flatter channels (easier to quantise per tensor) and W'
takes the difficulty a per-output-channel weight scale absorbs. α = 0.5 is the paper's default. s_j is floored at
1e-5 (the authors' code), so a dead channel is not divided by zero.

Rules:

1. Only a norm whose output goes to the listed maps and nowhere else can be folded: the pre-norm layers of
   M2M-100 / NLLB-200 / SMaLL-100 (``M2M100EncoderLayer``, ``M2M100DecoderLayer``); a model without them is refused
   before any work (``smoothing_pairs``). Keys and values of the cross-attention read the encoder's output (its
   last norm feeds every decoder layer and the λ pass) and are left as they are.
2. The statistic max|X_j| is taken from each calibration sentence run alone (no padded position), as
   ``quantize`` takes its ranges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from forgetbench.compress.calibrators import ChannelMaxCalibrator
from forgetbench.compress.quantizer import per_channel_amax
from forgetbench.errors import ForgetbenchError

KEYS = {"alpha", "calibration"}
SMOOTHED_LAYERS = ("M2M100EncoderLayer", "M2M100DecoderLayer")
FLOOR = 1e-5


@dataclass(frozen=True)
class SmoothConfig:
    alpha: float = 0.5

    def __post_init__(self):
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)) or not 0 <= self.alpha <= 1:
            raise ForgetbenchError(f"smooth alpha must be a number in [0, 1], got {self.alpha!r}")

    @property
    def needs_calibration(self) -> bool:
        return True


def smoothing_pairs(model: nn.Module) -> list[tuple[str, nn.LayerNorm, list[tuple[str, nn.Linear]]]]:
    """(norm name, norm, [(map name, map)]) of every foldable norm (rule 1), in module order."""
    out = []
    for name, m in model.named_modules():
        if type(m).__name__ not in SMOOTHED_LAYERS:
            continue
        pairs = [("self_attn_layer_norm", "self_attn", ("q_proj", "k_proj", "v_proj")),
                 ("encoder_attn_layer_norm", "encoder_attn", ("q_proj",)),
                 ("final_layer_norm", None, ("fc1",))]
        for norm_name, block, maps in pairs:
            norm = getattr(m, norm_name, None)
            if not isinstance(norm, nn.LayerNorm):
                continue
            owner = getattr(m, block) if block else m
            lins = [(f"{name}.{block + '.' if block else ''}{p}", getattr(owner, p)) for p in maps]
            if all(isinstance(lin, nn.Linear) for _, lin in lins):
                out.append((f"{name}.{norm_name}", norm, lins))
    return out


def check_model(model: nn.Module) -> None:
    if not smoothing_pairs(model):
        raise ForgetbenchError(f"smooth: {type(model).__name__} has no pre-norm M2M-100 layer whose norm feeds only linear "
                               f"maps ({', '.join(SMOOTHED_LAYERS)}); SmoothQuant cannot fold its factors into this model")


def factors(act_amax: torch.Tensor, weight_amax: torch.Tensor, alpha: float) -> torch.Tensor:
    """s_j = max|X_j|^α / max|W_·j|^(1−α), floored at 1e-5 (module docstring); float32."""
    s = act_amax.float().pow(alpha) / weight_amax.float().pow(1 - alpha)
    return s.clamp(min=FLOOR)


@torch.no_grad()
def fold(norm: nn.LayerNorm, linears: list[nn.Linear], s: torch.Tensor) -> None:
    """X' = X / s through the norm's gain and bias; each map's input column j times s_j."""
    s = s.to(norm.weight.device, norm.weight.dtype)
    norm.weight.div_(s)
    if norm.bias is not None:
        norm.bias.div_(s)
    for lin in linears:
        lin.weight.mul_(s.to(lin.weight.device, lin.weight.dtype).view(1, -1))


def smooth(model: nn.Module, config: SmoothConfig, calibrate: Callable[[nn.Module], None]) -> dict:
    """Fold SmoothQuant's factors into ``model`` in place (module docstring); returns the step's report."""
    pairs = smoothing_pairs(model)
    if not pairs:
        check_model(model)
    stats = {name: ChannelMaxCalibrator() for name, _, _ in pairs}  # max |X_j| over the tokens, on the CPU
    handles = [norm.register_forward_hook(lambda _m, _a, out, c=stats[name]: c.collect(out)) for name, norm, _ in pairs]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            calibrate(model)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    unseen = [name for name, _, _ in pairs if stats[name].count == 0]
    if unseen:
        raise ForgetbenchError(f"smooth: calibration never ran {unseen[0]} (and {len(unseen) - 1} more); calibrate on "
                               "data that runs the whole model")
    report = {}
    for name, norm, lins in pairs:
        x_amax = stats[name].compute_amax()
        w_amax = torch.stack([per_channel_amax(lin.weight, axis=1).cpu() for _, lin in lins]).amax(dim=0)
        s = factors(x_amax, w_amax, config.alpha)
        fold(norm, [lin for _, lin in lins], s)
        report[name] = {"maps": [n for n, _ in lins], "act_amax_max": float(x_amax.max()),
                        "act_amax_median": float(x_amax.median()), "s_min": float(s.min()), "s_max": float(s.max())}
    return {"alpha": config.alpha, "norms": len(pairs), "per_norm": report}
