"""Quantisation sites: where fake quantisation is applied, each kind a switch.

- ``linear_input`` / ``linear_weight``: input and weight of every ``nn.Linear`` (forward
  pre-hooks; weights are quantised once, in place, per output channel). Recurrent layers
  (``nn.LSTM``/``nn.GRU``, the parsers' encoders) count as linear maps too: all their
  ``weight_ih``/``weight_hh`` matrices are quantised per gate row, and their input sequence
  (also a ``PackedSequence``) is an input site. Their inter-layer and recurrent states stay
  float: the fused kernel gives no hook there (quantising them would need an unrolled LSTM).
- ``attn_qk`` / ``attn_pv``: both operands of the two attention matrix products (Q·Kᵀ and
  softmax·V) in self- and cross-attention.
- ``residual``: both operands of every residual addition.

Keys and values are quantised once, where they are made: in *quant* mode the ``.qk.1`` and ``.pv.1`` sites of
an attention block that has ``k_proj``/``v_proj`` quantise those projections' outputs (a forward hook), and the
matmul passes operand 1 through. The values are the same — the operand is that output reshaped (and, during
generation, the cache's concatenation of it), and fake quantisation with a per-tensor range is elementwise —
but a decoder step no longer re-quantises the whole self-attention cache: the cost per step stops growing with
the length decoded. Calibration still reads the matmul operands.

The last three have no hook point in Hugging Face's layer code. Instead of forking the model
file, an *op scope* wraps a block's ``forward`` in a ``TorchFunctionMode`` that sees the ops the
block executes in its own code (not in its children): in an eager attention block the 1st and
2nd ``matmul`` are Q·Kᵀ and softmax·V; in a Transformer layer every same-shape tensor addition
is a residual add (2 per encoder layer, 3 per decoder layer in M2M-100). This holds for any model
whose attention is written with ``torch.matmul`` (HF "eager"), and for user blocks declared the
same way. Site names: ``<module>.input``, ``<module>.weight``, ``<attn>.qk.0|1``,
``<attn>.pv.0|1``, ``<layer>.residual.<j>.0|1`` (0 = left operand, the residual stream).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from forgetbench.compress.calibrators import ChannelMaxCalibrator
from forgetbench.compress.quantizer import fake_quant_scaled, per_token_scale, scale_from_amax
from forgetbench.errors import ForgetbenchError

SITE_KINDS = ("linear_input", "linear_weight", "attn_qk", "attn_pv", "residual")
_MATMUL = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__}
_ADD = {torch.add, torch.Tensor.add, torch.Tensor.__add__, torch.Tensor.__radd__}
QUANTISE_KV_AT_PROJECTION = True  # read by attach_sites; False: at the matmul operands (the reference, in a test)


GRANULARITIES = ("tensor", "channel", "token")


class ActQuantizer:
    """One activation site: collects statistics while calibrating, fake-quantises afterwards.

    ``granularity``: one calibrated amax per tensor (a float), per channel (a vector over the last axis; a site
    without a channel axis keeps a per-tensor range: ``ChannelMaxCalibrator``), or per token (computed from each
    token's own values at every call: nothing to calibrate). ``mode`` "measure" (the
    diagnosis, ``compress.diagnosis``) passes ``x`` on unchanged and hands (x, its fake quantisation) to
    ``measure``."""

    def __init__(self, name: str, kind: str, calibrator, granularity: str = "tensor"):
        self.name, self.kind, self.calibrator, self.granularity = name, kind, calibrator, granularity
        self.mode = "calibrate"
        self.amax: float | torch.Tensor | None = None
        self.calls = 0
        self._scale: tuple | None = None  # (amax, its scale tensor): built once, not at every call
        self.measure: Callable[[ActQuantizer, torch.Tensor, torch.Tensor], None] | None = None

    def set_amax(self, amax: float | torch.Tensor) -> None:
        """The site's calibrated or restored range; a per-channel site given one float (no channel axis there,
        ``ChannelMaxCalibrator``) quantises per tensor."""
        self.amax = amax
        if self.granularity == "channel" and not isinstance(amax, torch.Tensor):
            self.granularity = "tensor"

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        if self.granularity == "token":
            return per_token_scale(x)
        if isinstance(self.amax, torch.Tensor) and self.amax.numel() != x.shape[-1]:
            raise ForgetbenchError(f"quantisation site {self.name}: {self.amax.numel()} per-channel ranges, a tensor of "
                                   f"{x.shape[-1]} channels: its last axis is not the calibrated channel axis; quantise "
                                   "the site per tensor (granularity) or exclude it")
        if self._scale is None or self._scale[0] is not self.amax or self._scale[1].device != x.device:
            amax = torch.as_tensor(self.amax, dtype=torch.float32).to(x.device)
            self._scale = (self.amax, scale_from_amax(amax))
        return self._scale[1]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.mode == "calibrate":
            if self.calibrator is not None:
                with torch._C.DisableTorchFunction():  # a calibrator's own ops (an addition) are never recorded as sites
                    self.calibrator.collect(x)
            return x
        if self.mode in ("quant", "measure"):
            with torch._C.DisableTorchFunction():  # the op scopes' modes need not see the quantiser's own ops
                out = fake_quant_scaled(x, self.scale(x))
                if self.mode == "measure":
                    self.measure(self, x, out)
                    return x
            return out
        return x


class _OpMode(TorchFunctionMode):
    def __init__(self, scope: OpScope):
        super().__init__()
        self.scope = scope

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.scope.depth == 0 and func in self.scope.funcs:
            args = self.scope.intercept(args)
        return func(*args, **kwargs)


class OpScope:
    """Intercepts ``funcs`` executed by ``module``'s own forward code and passes operands to sites.

    The module carries its scope as ``forgetbench_op_scope``: code that runs the block's computation itself (the
    direct decoder step of ``models.decoder_step``) calls ``site(j, operand, x)`` at the same operands instead;
    the pre/post hooks a scope puts on the block's children (``op_scope_hook`` set) only keep its depth."""

    op_scope_hook = True

    def __init__(self, module: nn.Module, funcs: set, site: Callable[[int, int, torch.Tensor], torch.Tensor],
                 accept: Callable[[tuple], bool]):
        self.module, self.funcs, self.site, self.accept = module, funcs, site, accept
        module.forgetbench_op_scope = self
        self.depth = 0
        self.calls = 0
        self.handles = []
        self.mode: _OpMode | None = None
        self.suspended = False
        original = module.forward

        def forward(*args, **kwargs):
            self.depth, self.calls, self.suspended = 0, 0, False
            self.mode = _OpMode(self)
            with self.mode:
                return original(*args, **kwargs)

        module.forward = forward
        for child in module.children():
            self.handles.append(child.register_forward_pre_hook(self._enter))
            self.handles.append(child.register_forward_hook(self._leave, always_call=True))

    def _enter(self, *_):
        # a child runs its own code: take this scope's mode off the stack meanwhile (when it is on top), so the
        # child's ops do not pay a Python dispatch each; depth still guards the case where it cannot be taken off
        self.depth += 1
        n = torch._C._len_torch_function_stack()
        if self.depth == 1 and n and torch._C._get_function_stack_at(n - 1) is self.mode:
            torch._C._pop_torch_function_stack()
            self.suspended = True

    def _leave(self, *_):
        self.depth -= 1
        if self.depth == 0 and self.suspended:
            torch._C._push_on_torch_function_stack(self.mode)
            self.suspended = False

    def intercept(self, args: tuple) -> tuple:
        if not self.accept(args):
            return args
        j = self.calls
        self.calls += 1
        return (self.site(j, 0, args[0]), self.site(j, 1, args[1]), *args[2:])

    def remove(self):
        for h in self.handles:
            h.remove()
        if "forward" in self.module.__dict__:
            del self.module.forward
        if self.module.__dict__.get("forgetbench_op_scope") is self:
            del self.module.__dict__["forgetbench_op_scope"]


def _is_residual_add(args: tuple) -> bool:
    return (
        len(args) >= 2
        and isinstance(args[0], torch.Tensor)
        and isinstance(args[1], torch.Tensor)
        and args[0].shape == args[1].shape
        and args[0].is_floating_point()
        and args[1].is_floating_point()
    )


def _is_matmul(args: tuple) -> bool:
    return len(args) >= 2 and isinstance(args[0], torch.Tensor) and isinstance(args[1], torch.Tensor)


def default_attention_blocks(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if all(hasattr(m, a) for a in ("q_proj", "k_proj", "v_proj"))]


def default_residual_blocks(model: nn.Module) -> list[str]:
    declared = getattr(model, "forgetbench_residual_blocks", None)
    if declared is not None:
        return [n for n, _ in model.named_modules() if any(fnmatch.fnmatchcase(n, g) for g in declared)]
    return [n for n, m in model.named_modules() if type(m).__name__.endswith(("EncoderLayer", "DecoderLayer"))]


def excluded(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def site_kind(name: str) -> str:
    """The kind of an activation site from its name (``<module>.input``, ``<attn>.qk.j``, ``<attn>.pv.j``,
    ``<layer>.residual.j.k``)."""
    parts = name.split(".")
    if parts[-1] == "input":
        return "linear_input"
    if len(parts) >= 3 and parts[-3] == "residual":
        return "residual"
    if len(parts) >= 2 and parts[-2] in ("qk", "pv"):
        return f"attn_{parts[-2]}"
    raise ForgetbenchError(f"{name!r} is not an activation site name")


class SiteRegistry:
    """All activation quantizers of a model, created lazily on first execution while calibrating (a per-token site,
    which needs no calibration, whenever it first runs). ``granularity``: site kind -> tensor | channel | token
    (default tensor); a per-tensor site's calibrator is ``make_calibrator()``, a per-channel one's the channel max."""

    def __init__(self, make_calibrator: Callable[[], object], granularity: dict | None = None):
        self.make_calibrator = make_calibrator
        self.granularity = dict(granularity or {})
        self.quantizers: dict[str, ActQuantizer] = {}
        self.mode = "calibrate"
        self.measure: Callable | None = None  # handed to every quantiser (mode "measure")

    def restore(self, name: str, kind: str, amax: float | torch.Tensor) -> ActQuantizer:
        """A site with a saved range (no calibrator)."""
        q = self.quantizers[name] = ActQuantizer(name, kind, None, self.granularity.get(kind, "tensor"))
        q.set_amax(amax)
        q.mode, q.measure = self.mode, self.measure
        return q

    def get(self, name: str, kind: str) -> ActQuantizer:
        q = self.quantizers.get(name)
        if q is None:
            g = self.granularity.get(kind, "tensor")
            if self.mode != "calibrate" and g != "token":
                raise ForgetbenchError(
                    f"quantisation site {name} ran but was never calibrated (a code path the calibration "
                    "data did not exercise); calibrate with data that runs it, or exclude the site"
                )
            calibrator = (None if g == "token" else ChannelMaxCalibrator(self.make_calibrator()) if g == "channel"
                          else self.make_calibrator())
            q = self.quantizers[name] = ActQuantizer(name, kind, calibrator, g)
            q.mode, q.measure = self.mode, self.measure
        return q

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        for q in self.quantizers.values():
            q.mode = mode


def attach_sites(model: nn.Module, registry: SiteRegistry, kinds: set[str], exclude: list[str],
                 attention_blocks: list[str] | None = None, residual_blocks: list[str] | None = None
                 ) -> tuple[list, set[str]]:
    """Install activation sites of the given kinds; returns removable handles and the kinds that have blocks."""
    handles: list = []
    present: set[str] = set()
    modules = dict(model.named_modules())
    if "linear_input" in kinds:
        for name, mod in modules.items():
            tagged = getattr(mod, "forgetbench_site", None) == "linear_input"  # a fused forward's input (UD-PrLM's USI)
            if (isinstance(mod, (nn.Linear, nn.RNNBase)) or tagged) and not excluded(f"{name}.input", exclude):
                site = f"{name}.input"

                def pre_hook(_m, args, _site=site):
                    x = args[0]
                    if isinstance(x, nn.utils.rnn.PackedSequence):
                        x = x._replace(data=registry.get(_site, "linear_input")(x.data))
                    else:
                        x = registry.get(_site, "linear_input")(x)
                    return (x, *args[1:])

                handles.append(mod.register_forward_pre_hook(pre_hook))
    attn_kinds = {"attn_qk", "attn_pv"} & kinds
    if attn_kinds:
        names = default_attention_blocks(model) if attention_blocks is None else attention_blocks
        present |= attn_kinds if names else set()
        labels = ("qk", "pv")
        for name in names:
            block = modules[name]
            at_projection = QUANTISE_KV_AT_PROJECTION and all(isinstance(getattr(block, p, None), nn.Linear)
                                                              for p in ("k_proj", "v_proj"))

            def attn_site(j, operand, x, _name=name, _at_projection=at_projection):
                if j >= len(labels):
                    raise ForgetbenchError(f"{_name}: more than two matmuls in one attention call; not an eager attention")
                kind = f"attn_{labels[j]}"
                site = f"{_name}.{labels[j]}.{operand}"
                if kind not in kinds or excluded(site, exclude):
                    return x
                if operand == 1 and _at_projection and registry.mode == "quant":
                    return x  # quantised at k_proj / v_proj already
                return registry.get(site, kind)(x)

            handles.append(OpScope(block, _MATMUL, attn_site, _is_matmul))
            if at_projection:
                for proj, label in (("k_proj", "qk"), ("v_proj", "pv")):
                    site, kind = f"{name}.{label}.1", f"attn_{label}"
                    if kind in kinds and not excluded(site, exclude):

                        def proj_hook(_m, _args, out, _site=site, _kind=kind):
                            return registry.get(_site, _kind)(out) if registry.mode == "quant" else out

                        handles.append(getattr(block, proj).register_forward_hook(proj_hook))
    if "residual" in kinds:
        names = default_residual_blocks(model) if residual_blocks is None else residual_blocks
        present |= {"residual"} if names else set()
        for name in names:

            def res_site(j, operand, x, _name=name):
                site = f"{_name}.residual.{j}.{operand}"
                return x if excluded(site, exclude) else registry.get(site, "residual")(x)

            handles.append(OpScope(modules[name], _ADD, res_site, _is_residual_add))
    return handles, present


def remove_handles(handles: list) -> None:
    for h in handles:
        h.remove()
