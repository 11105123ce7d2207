"""Symmetric int8 quantisation primitives (Wu et al. 2020).

Scale s = amax / 127; q = clamp(round(x / s), -127, 127) (narrow range, so that 0 maps to 0 and
pruned zeros survive quantisation); fake quantisation returns q · s. Weights use one amax per
output channel (axis 0); an activation site one amax per tensor, per channel (its last axis) or, computed
from each token's own values, per token (``per_token_scale``).
"""

from __future__ import annotations

import torch

QMAX = 127


def scale_from_amax(amax: torch.Tensor) -> torch.Tensor:
    amax = torch.as_tensor(amax, dtype=torch.float32)
    # an all-zero channel keeps scale 1 so that it dequantises to exact zeros
    return torch.where(amax > 0, amax / QMAX, torch.ones_like(amax))


def quantize(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return torch.clamp(torch.round(x.float() / scale), -QMAX, QMAX).to(torch.int8)


def fake_quant(x: torch.Tensor, amax: torch.Tensor | float, axis: int | None = None) -> torch.Tensor:
    """Quantise–dequantise ``x`` with symmetric int8. ``axis``: the per-channel axis of ``amax``."""
    scale = scale_from_amax(torch.as_tensor(amax, device=x.device))
    if axis is not None:
        shape = [1] * x.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
    return fake_quant_scaled(x, scale)


def fake_quant_scaled(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``fake_quant`` with the scale already computed (``scale_from_amax``): the activation sites' hot path."""
    # one allocation, then in place: the same values as clamp(round(x / s)) * s at a quarter of the memory traffic
    return torch.div(x.float(), scale).round_().clamp_(-QMAX, QMAX).mul_(scale).to(x.dtype)


def per_channel_amax(w: torch.Tensor, axis: int = 0) -> torch.Tensor:
    dims = [d for d in range(w.ndim) if d != axis]
    return w.detach().float().abs().amax(dim=dims) if dims else w.detach().float().abs()


def per_token_scale(x: torch.Tensor) -> torch.Tensor:
    """Dynamic per-token scales of an activation (one per row of its last axis: a token's hidden vector), from that
    token's own max |x| (LLM.int8's vector-wise activation scale); shape ``x.shape[:-1] + (1,)``."""
    return scale_from_amax(x.detach().float().abs().amax(dim=-1, keepdim=True))
