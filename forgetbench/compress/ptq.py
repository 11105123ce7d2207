"""8-bit post-training quantisation, Wu et al. (2020) recipe, as fake quantisation (docs/METHOD.md §1.2).

    state = quantize(model, QuantConfig(calibrator="mse"), calibrate=lambda m: run_forwards(m))

1. Activation sites (see ``sites``) are installed in *calibrate* mode and ``calibrate(model)``
   runs forward passes (model-agnostic: any callable) while every site collects statistics.
2. Each site's range is computed: per tensor by the chosen calibrator, per channel as each channel's max
   (``granularity``: a site kind's scales per tensor, per channel or per token; per token needs no range).
3. Weight matrices are fake-quantised in place, per output channel (max): every ``nn.Linear``
   weight and every LSTM/GRU ``weight_ih_l*``/``weight_hh_l*`` (one row per gate unit); tied
   storage once (``weight_matrices``).
4. Sites switch to *quant* mode: every later forward is fake-quantised.

The returned ``QuantState`` holds the ranges; ``state.to_dict()`` serialises them and
``attach(model, QuantState.from_dict(...))`` restores activation quantisation on a reloaded model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from forgetbench.compress.calibrators import CALIBRATORS, make_calibrator
from forgetbench.compress.prune import OpenTensors, in_place
from forgetbench.compress.quantizer import fake_quant, per_channel_amax
from forgetbench.compress.sites import (
    GRANULARITIES,
    SITE_KINDS,
    SiteRegistry,
    attach_sites,
    excluded,
    remove_handles,
    site_kind,
)
from forgetbench.compress.units import _storage_key
from forgetbench.errors import ForgetbenchError

ACTIVATION_KINDS = tuple(k for k in SITE_KINDS if k != "linear_weight")
# kinds whose last axis is a channel of the model (a hidden unit): the attention operands' last axis is a head's
# dimension or a key position, and keys/values are quantised at their projection as one tensor (``sites``)
CHANNEL_KINDS = ("linear_input", "residual")


@dataclass(frozen=True)
class QuantConfig:
    calibrator: str = "mse"
    num_bins: int = 2048
    percentile: float = 99.99
    start_bin: int = 128
    sites: dict = field(default_factory=lambda: {k: True for k in SITE_KINDS})
    exclude: tuple = ()
    granularity: dict = field(default_factory=dict)  # site kind -> tensor (default) | channel | token

    def __post_init__(self):
        if self.calibrator not in CALIBRATORS:
            raise ForgetbenchError(f"unknown calibrator {self.calibrator!r}; choose one of {', '.join(CALIBRATORS)}")
        unknown = set(self.sites) - set(SITE_KINDS)
        if unknown:
            raise ForgetbenchError(f"unknown quantisation site kind(s) {sorted(unknown)}; known: {', '.join(SITE_KINDS)}")
        if not isinstance(self.num_bins, int) or isinstance(self.num_bins, bool) or self.num_bins < 16:
            raise ForgetbenchError(f"num_bins must be an integer >= 16, got {self.num_bins!r}")
        if not isinstance(self.start_bin, int) or isinstance(self.start_bin, bool) or not 0 <= self.start_bin < self.num_bins:
            raise ForgetbenchError(f"start_bin must be an integer in [0, num_bins), got {self.start_bin!r}")
        if not isinstance(self.sites, dict) or not all(isinstance(v, bool) for v in self.sites.values()):
            raise ForgetbenchError(f"sites must be a mapping of site kind -> true/false, got {self.sites!r}")
        if not isinstance(self.exclude, tuple) or not all(isinstance(x, str) for x in self.exclude):
            raise ForgetbenchError(f"exclude must be a list of globs over site names, got {self.exclude!r}")
        if not isinstance(self.percentile, (int, float)) or isinstance(self.percentile, bool) \
                or not 0 < float(self.percentile) <= 100:
            raise ForgetbenchError(f"percentile must be in (0, 100], got {self.percentile}")

        if not isinstance(self.granularity, dict):
            raise ForgetbenchError(f"granularity must be a mapping of site kind -> tensor/channel/token, "
                                   f"got {self.granularity!r}")
        for k, g in self.granularity.items():
            if k not in ACTIVATION_KINDS:
                raise ForgetbenchError(f"granularity of {k!r}: only activation site kinds take one "
                                       f"({', '.join(ACTIVATION_KINDS)}); weights are always per output channel")
            if g not in GRANULARITIES:
                raise ForgetbenchError(f"granularity {k}: {g!r}; choose one of {', '.join(GRANULARITIES)}")
            if g != "tensor" and k not in CHANNEL_KINDS:
                raise ForgetbenchError(f"granularity {k}: {g} needs a channel axis; attention operands are "
                                       "quantised per tensor (per channel / per token: linear_input, residual)")

    @property
    def kinds(self) -> set[str]:
        return {k for k in SITE_KINDS if self.sites.get(k, True)}

    def granularity_of(self, kind: str) -> str:
        return self.granularity.get(kind, "tensor")

    @property
    def needs_calibration(self) -> bool:
        return any(self.granularity_of(k) != "token" for k in self.kinds & set(ACTIVATION_KINDS))

    def make_calibrator(self):
        if self.calibrator == "max":
            return make_calibrator("max")
        return make_calibrator(self.calibrator, num_bins=self.num_bins, percentile=self.percentile,
                               start_bin=self.start_bin)


@dataclass
class QuantState:
    config: QuantConfig
    activation_amax: dict[str, float | torch.Tensor]  # per channel: a vector; per-token sites have none
    weight_amax: dict[str, torch.Tensor]  # qualified Linear weight name -> per-output-channel amax
    registry: SiteRegistry | None = None
    handles: list = field(default_factory=list)

    def remove(self) -> None:
        """Remove activation quantisation hooks (weights stay quantised)."""
        remove_handles(self.handles)
        self.handles = []

    def to_dict(self) -> dict:
        cfg = asdict(self.config)
        cfg["exclude"] = list(cfg["exclude"])
        return {
            "format": "forgetbench-quant-v2",
            "config": cfg,
            "activation_amax": {k: v.tolist() if isinstance(v, torch.Tensor) else v
                                for k, v in sorted(self.activation_amax.items())},
            "weights": sorted(self.weight_amax),
        }

    @classmethod
    def from_dict(cls, d: dict) -> QuantState:
        """A saved state; v1 (per-tensor ranges only, before ``granularity``) reads as v2 with every site per tensor."""
        if d.get("format") not in ("forgetbench-quant-v1", "forgetbench-quant-v2"):
            raise ForgetbenchError(f"not a forgetbench quantisation state (format={d.get('format')!r})")
        cfg = dict(d["config"])
        cfg["exclude"] = tuple(cfg.get("exclude", ()))
        amax = {k: torch.tensor(v, dtype=torch.float32) if isinstance(v, list) else float(v)
                for k, v in d["activation_amax"].items()}
        return cls(QuantConfig(**cfg), amax, {k: None for k in d.get("weights", [])})


def _ensure_eager(model: nn.Module, kinds: set[str]) -> None:
    cfg = getattr(model, "config", None)
    if {"attn_qk", "attn_pv"} & kinds and cfg is not None and getattr(cfg, "_attn_implementation", "eager") != "eager":
        if not hasattr(model, "set_attn_implementation"):
            raise ForgetbenchError("attention sites need eager attention; load the model with attn_implementation='eager'")
        model.set_attn_implementation("eager")


def weight_matrices(model: nn.Module, exclude: tuple | list = ()) -> list[tuple[str, nn.Parameter, nn.Module]]:
    """The weight sites, in module order: every Linear weight and every LSTM/GRU input-hidden and
    hidden-hidden matrix (``weight_ih_l*``, ``weight_hh_l*``), minus ``exclude`` globs; tied storage once.
    Works on a meta-device skeleton too (the streamed path enumerates a checkpoint's matrices with it)."""
    done: set = set()
    out = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear):
            weights = [("weight", mod.weight)]
        elif isinstance(mod, nn.RNNBase):
            weights = [(p, w) for p, w in mod.named_parameters(recurse=False) if p.startswith(("weight_ih_l", "weight_hh_l"))]
        elif hasattr(mod, "forgetbench_weight_matrices"):  # stacked matrices a fused forward reads (UD-PrLM's USI maps)
            weights = [(p, getattr(mod, p)) for p in mod.forgetbench_weight_matrices]
        else:
            continue
        for pname, w in weights:
            full = f"{name}.{pname}" if name else pname
            if excluded(full, list(exclude)):
                continue
            key = _storage_key(w)
            if key in done:
                continue
            done.add(key)
            out.append((full, w, mod))
    return out


@torch.no_grad()
def quantize_weights(model: nn.Module, exclude: tuple | list = (),
                     open_tensors: OpenTensors | None = None) -> dict[str, torch.Tensor]:
    """Fake-quantise every weight matrix of ``weight_matrices`` per output channel; returns name -> amax.
    ``open_tensors`` as in ``prune`` (default: in place)."""
    amaxes = {}
    for full, w, mod in weight_matrices(model, exclude):
        with (open_tensors or in_place)([(full, w)]) as (t,):
            if t.ndim == 3:  # [D, H_in, H_out] maps: a row per (map, output channel), quantised as a Linear's
                out_axis = getattr(mod, "forgetbench_weight_matrices", {}).get(full.rsplit(".", 1)[-1], -1)
                rows = t.movedim(out_axis, 1)
                flat = rows.reshape(-1, rows.shape[-1])
                amax = per_channel_amax(flat, axis=0)
                t.copy_(fake_quant(flat, amax, axis=0).view(rows.shape).movedim(1, out_axis))
                amax = amax.view(rows.shape[:2] + (1,)).movedim(1, out_axis)  # broadcasts against the maps
            else:
                amax = per_channel_amax(t, axis=0)
                t.copy_(fake_quant(t, amax, axis=0))
        amaxes[full] = amax
        if open_tensors is None and isinstance(mod, nn.RNNBase):
            mod.flatten_parameters()
    return amaxes


def quantize(model: nn.Module, config: QuantConfig | None = None,
             calibrate: Callable[[nn.Module], None] | None = None,
             attention_blocks: list[str] | None = None, residual_blocks: list[str] | None = None,
             open_tensors: OpenTensors | None = None) -> QuantState:
    """Fake-quantise ``model`` in place with the Wu et al. recipe; see the module docstring.
    ``open_tensors`` reaches the weight matrices elsewhere (the streamed path; weight sites only)."""
    config = config or QuantConfig()
    kinds = config.kinds
    if config.needs_calibration and calibrate is None:
        raise ForgetbenchError(
            "activation quantisation needs calibration data: pass calibrate=<callable running forward passes> "
            "(CLI: a 'calibration' block in the quantize step, or --calibration FILE)"
        )
    _ensure_eager(model, kinds)
    was_training = model.training
    model.eval()
    registry = SiteRegistry(config.make_calibrator, config.granularity)
    handles, present = attach_sites(model, registry, kinds & set(ACTIVATION_KINDS), list(config.exclude),
                                    attention_blocks, residual_blocks)
    amax: dict[str, float] = {}
    if config.needs_calibration:
        registry.set_mode("calibrate")
        with torch.no_grad():
            calibrate(model)
        if not registry.quantizers:
            remove_handles(handles)
            raise ForgetbenchError("calibration ran no forward pass through any quantisation site")
        missing = [k for k in sorted(present) if not any(q.kind == k for q in registry.quantizers.values())]
        if missing:
            remove_handles(handles)
            raise ForgetbenchError(
                f"site kind(s) {missing} never executed during calibration: is attention eager, and are the "
                "attention/residual blocks declared for this model?"
            )
        for name, q in registry.quantizers.items():
            if q.calibrator is not None:  # per-token sites have no range
                q.set_amax(q.calibrator.compute_amax())
                amax[name] = q.amax
            q.calibrator = None  # free histograms
    weight_amax = quantize_weights(model, config.exclude, open_tensors) if "linear_weight" in kinds else {}
    registry.set_mode("quant")
    model.train(was_training)
    return QuantState(config, amax, weight_amax, registry, handles)


def attach(model: nn.Module, state: QuantState, attention_blocks: list[str] | None = None,
           residual_blocks: list[str] | None = None) -> QuantState:
    """Re-install activation quantisation from saved ranges on a model whose weights are already quantised."""
    return attach_state_sites(model, state, state.config.kinds & set(ACTIVATION_KINDS), "quant", attention_blocks,
                              residual_blocks)


def attach_state_sites(model: nn.Module, state: QuantState, kinds: set[str], mode: str = "quant",
                       attention_blocks: list[str] | None = None, residual_blocks: list[str] | None = None
                       ) -> QuantState:
    """The activation sites of ``kinds`` with ``state``'s ranges, in ``mode`` (quant, or measure: the diagnosis)."""
    _ensure_eager(model, kinds)
    registry = SiteRegistry(state.config.make_calibrator, state.config.granularity)
    for name, a in state.activation_amax.items():
        if site_kind(name) in kinds:
            registry.restore(name, site_kind(name), a)
    registry.set_mode(mode)
    handles, _ = attach_sites(model, registry, kinds, list(state.config.exclude), attention_blocks, residual_blocks)
    return QuantState(state.config, {k: v for k, v in state.activation_amax.items() if site_kind(k) in kinds},
                      state.weight_amax, registry, handles)
