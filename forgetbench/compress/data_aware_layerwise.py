"""Data-aware pruning layer by layer, the calibration activations carried from layer to layer (docs/METHOD.md §1.5):
streamed from checkpoint shards (``compress-stream``), and in memory for the M2M-100 family on one device.

    forgetbench compress-stream MODEL_DIR --recipe wanda-45-uniform --out OUT_DIR

Rules:

1. *Stem and layers.* A **layer** is a unit holding linear maps the data-aware rule prunes (an encoder or decoder
   layer; an untied output projection). Everything else is the **stem** (embeddings, final layer norms). Streamed,
   the stem is read from the shards once and kept in memory for the whole run; each layer is read when its turn
   comes (unit-map order), calibrated, pruned, run and written back, then released. Peak memory: the stem, one layer
   and one layer's calibration activations (inputs and outputs of every batch).
2. *Activations carried from layer to layer* (as SparseGPT's reference does). Every layer is replaced by a stand-in
   and the calibration set is run through the model: the stand-in of the layer whose turn it is records the
   arguments the model gives it, for each batch, and ends that batch's forward; the stand-ins of layers already
   pruned return the outputs of the last pruned layer of their module list (the previous layer of a stack, or the
   stack's last one), computed from its own recorded arguments after its pruning. A forward therefore costs the
   stem only; each layer runs twice, once recording its matrices' inputs (``data_aware_prune.prune_unit``, the
   padding masks of each batch as in memory) and once, pruned, for the outputs the next layer receives.
3. *Equal to whole-model calibration* (``data_aware_prune``: one forward through the whole model per unit): the same
   units in the same order, each layer called with the arguments the model's forward gives it after the earlier
   units are pruned, the same statistics and the same pruning of each matrix; the stem's units (the tied
   embedding) by magnitude. A layer reached in the forward before an earlier layer of the unit map is pruned (a
   unit map out of forward order), or a unit the forward does not call whole, is refused.
   The layers run in evaluation mode (no dropout) with the key-value cache off (one teacher-forced pass: it changes
   no output). Streamed, they run as ``compress`` loads a model: eager attention, fp32 (half-precision checkpoint
   tensors are computed in fp32 and written back in their own dtype); in memory, in the model's own dtype.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from forgetbench.compress.data_aware_prune import linear_of, position_masks, prune_unit, unit_linears
from forgetbench.compress.prune import PruneConfig, PruneReport
from forgetbench.compress.units import resolve_units
from forgetbench.errors import ForgetbenchError


class _Stop(Exception):
    """Ends one batch's forward once the layer whose turn it is has its arguments."""


class _Passes:
    """Rule 2's bookkeeping: the layer whose turn it is, the batch being run, each module list's last outputs."""

    def __init__(self, holder: dict):
        self.holder, self.turn, self.batch, self.inputs = holder, None, 0, []
        self.latest: dict[str, tuple[int, list]] = {}  # module list -> (position of its last pruned layer, outputs)

    def call(self, pos: int, parent: str, name: str, args, kwargs):
        if pos == self.turn:
            self.inputs.append((args, kwargs, dict(self.holder)))
            raise _Stop
        last = self.latest.get(parent)
        if last is None or last[0] < pos:
            raise ForgetbenchError(f"{name} runs before a layer earlier in the unit map is pruned; layer-by-layer "
                                   "data-aware pruning needs a unit map in forward order")
        return last[1][self.batch]


class _StandIn(nn.Module):
    def __init__(self, passes: _Passes, pos: int, parent: str, name: str):
        super().__init__()
        self.passes, self.pos, self.parent, self.name = passes, pos, parent, name

    def forward(self, *args, **kwargs):
        return self.passes.call(self.pos, self.parent, self.name, args, kwargs)

    def _not_whole(self, *_):
        raise ForgetbenchError(f"{self.name} is not called whole in the model's forward (its parts are); layer-by-layer "
                               "data-aware pruning needs units that are layers; prune this model in memory")

    __getitem__ = __iter__ = __len__ = _not_whole

    def __getattr__(self, attr):
        try:
            return super().__getattr__(attr)
        except AttributeError:
            self._not_whole()


def _split(name: str) -> tuple[str, str]:
    return tuple(name.rsplit(".", 1)) if "." in name else ("", name)


@contextlib.contextmanager
def _materialised(model: nn.Module, opened, named: list[tuple[str, nn.Parameter]], *more: nn.Module):
    """``named``'s tensors read from the shards (``opened``) and set in the model (and the modules ``more``: a layer
    its stand-in replaces) wherever the (meta) parameter sits, tied places included; on exit written back and the
    meta parameters put back (the memory released). In memory (``opened`` None): the parameters' own values."""
    if opened is None:
        yield {id(p): p.data for _, p in named}
        return
    with opened(named) as tensors:
        real = {id(p): nn.Parameter(_fp32(t), requires_grad=False) for (_, p), t in zip(named, tensors, strict=True)}
        swapped = []
        for mod in {id(m): m for root in (model, *more) for m in root.modules()}.values():
            for pname, p in list(mod._parameters.items()):
                if p is not None and id(p) in real:
                    swapped.append((mod, pname, p))
                    mod._parameters[pname] = real[id(p)]
        try:
            yield {pid: r.data for pid, r in real.items()}
        finally:
            for mod, pname, p in swapped:
                mod._parameters[pname] = p
            for t, r in zip(tensors, real.values(), strict=True):
                if r.data is not t:  # computed in fp32: written back in the checkpoint's own dtype
                    t.copy_(r.data.to(t.dtype))


def _fp32(t: torch.Tensor) -> torch.Tensor:
    """Half-precision weights are computed in fp32, as ``compress`` loads a model (``models.load``)."""
    return t.float() if t.is_floating_point() and t.dtype != torch.float32 else t


@contextlib.contextmanager
def _stood_in(model: nn.Module, resolved, layers: dict, passes: _Passes):
    """Rule 2's set-up, undone on exit: every layer replaced by its stand-in (the originals given), a batch's forward
    ended by ``_Stop``, evaluation mode, the key-value cache off."""
    modules, originals = dict(model.named_modules()), {}
    config = getattr(model, "config", None)
    training, use_cache = model.training, getattr(config, "use_cache", None)
    model.eval()  # a skeleton built from a config is in training mode: dropout would draw at random
    for pos, u in enumerate(resolved):
        if u.name in layers:
            parent, child = _split(u.module)
            originals[u.name] = modules[u.module]
            setattr(modules[parent] if parent else model, child, _StandIn(passes, pos, parent, u.module))

    def forward(*args, _orig=model.forward, **kwargs):
        try:
            return _orig(*args, **kwargs)
        except _Stop:
            return None
        finally:
            passes.batch += 1

    model.forward = forward
    if use_cache is not None:
        config.use_cache = False
    try:
        yield originals
    finally:
        del model.forward
        if use_cache is not None:
            config.use_cache = use_cache
        for u in resolved:
            if u.name in originals:
                parent, child = _split(u.module)
                setattr(modules[parent] if parent else model, child, originals[u.name])
        model.train(training)


def layerwise_prune(model: nn.Module, config: PruneConfig, forwards, units: list[dict] | None = None,
                    opened=None) -> PruneReport:
    """Rules 1–3 on ``model``: in memory, or (``opened``: ``streaming.StreamedTensors``) a meta-device skeleton whose
    tensors are read from and written to the shards; ``forwards(model)`` runs the calibration set."""
    resolved = resolve_units(model, units, include_embeddings=config.include_embeddings)
    modules, linears = dict(model.named_modules()), linear_of(model)
    layers = {u.name: mats for u in resolved if (mats := unit_linears(u, linears))}
    in_layers = {id(p) for u in resolved if u.name in layers for p in modules[u.module].parameters()}
    stem = [(n, p) for n, p in model.named_parameters() if id(p) not in in_layers]
    holder, top = position_masks(model)
    passes = _Passes(holder)
    reports, groups = [], []
    try:
        with _stood_in(model, resolved, layers, passes) as originals, _materialised(model, opened, stem) as stem_values:
            for pos, u in enumerate(resolved):
                if u.name in layers:
                    reports.append(_prune_layer(model, u, pos, originals[u.name], layers[u.name], config, forwards,
                                                opened, passes, groups))
                else:  # a stem unit: magnitude (rule 3)
                    reports.append(prune_unit(u, [], config, None, holder, groups, lambda p: stem_values[id(p.param)]))
    finally:
        top.remove()
    return PruneReport(config, reports, groups)


def _prune_layer(model, u, pos: int, layer: nn.Module, mats, config: PruneConfig, forwards, opened, passes: _Passes,
                 groups: list):
    """One layer (rule 2): its arguments recorded for every batch, its matrices calibrated and pruned, its pruned
    outputs kept for the layer after it."""
    passes.turn, passes.batch, passes.inputs = pos, 0, []
    forwards(model)
    inputs, passes.turn = passes.inputs, None
    if not inputs:
        raise ForgetbenchError(f"{u.module}: the calibration passes never reached this layer; data-aware pruning needs "
                               "inputs for every weight matrix it prunes")
    with _materialised(model, opened, list(layer.named_parameters(prefix=u.module)), layer) as values:

        def run():
            for args, kwargs, masks in inputs:
                passes.holder.update(masks)
                layer(*args, **kwargs)

        report = prune_unit(u, mats, config, run, passes.holder, groups, lambda p: values[id(p.param)])
        with torch.no_grad():
            passes.latest[_split(u.module)[0]] = (pos, [layer(*args, **kwargs) for args, kwargs, _ in inputs])
    return report
