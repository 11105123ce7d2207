"""Data-aware pruning of a whole model (``prune: {method: wanda | sparsegpt, sparsity, calibration: …}``).

Rules (docs/METHOD.md §1.5):

1. Units in order (``compress.units``: the same unit map as magnitude pruning; encoder layers, then decoder
   layers). For each unit, one calibration pass through the model *as pruned so far* records the inputs of the
   unit's weight matrices (forward pre-hooks on its ``nn.Linear`` modules), then those matrices are pruned
   (``compress.data_aware``: Wanda per output row, SparseGPT per block of 128 columns). Later units are
   calibrated on the outputs of the pruned earlier ones, as SparseGPT's reference carries activations from
   layer to layer; each pass costs one forward over the calibration set.
2. Encoder–decoder inputs: the encoder's matrices see the calibration sources; the decoder's, teacher-forced
   references; the cross-attention key/value projections, the encoder's outputs — which the hooks record as
   they are. Padding positions are left out (the sources' attention mask on the encoder side and for the
   cross-attention key/value projections; the references' non-padding labels on the decoder side).
3. A unit's weights that are not linear maps run as modules (LSTM matrices, a parser's biaffine tensors, UD-PrLM's
   USI maps and its fused Linear; the shared embedding, tied with the output projection, whose input is a lookup) are pruned by magnitude within the unit at the same
   sparsity, the tie kept (one storage); biases and layer norms are never unit weights (``compress.units``). Counts are
   exact per scope: per output row (Wanda's default; or its ``scope``: per matrix, per unit, per attention / FFN
   part of a unit), per block (SparseGPT), per unit for the rest; N:M patterns per group of M input columns.
4. Layer by layer, the calibration activations carried from layer to layer instead of a whole-model forward per
   unit, the same units are pruned the same way: ``compress.data_aware_layerwise`` (streamed from checkpoint
   shards, and in memory for a seq2seq model on one device).
"""

from __future__ import annotations

import torch
from torch import nn

from forgetbench.compress.data_aware import lowest_over, sparsegpt, wanda_mask, wanda_scores
from forgetbench.compress.prune import (
    GroupReport,
    PruneConfig,
    PruneReport,
    UnitReport,
    num_to_prune,
    numel_zeros,
    prune_smallest,
    selection_groups,
)
from forgetbench.compress.units import Unit, resolve_units
from forgetbench.errors import ForgetbenchError

ENCODER_SIDE = (".encoder.", ".encoder_attn.k_proj", ".encoder_attn.v_proj")


class _Inputs:
    """A linear map's calibration statistics: Σ x² per input column (Wanda) or Σ x xᵀ (SparseGPT), valid positions
    only, accumulated in float32 on ``device`` (the weight's own: a GPU model's statistics never leave its GPU; a
    weight not yet in memory, the inputs' device)."""

    def __init__(self, cols: int, method: str, device: torch.device | None = None):
        self.method, self.cols, self.n = method, cols, 0
        self.device = None if device is None or device.type == "meta" else device
        self.stat: torch.Tensor | None = None

    def add(self, x: torch.Tensor, keep: torch.Tensor | None) -> None:
        x = x.detach().reshape(-1, x.shape[-1])
        if keep is not None and keep.numel() == x.shape[0]:
            x = x[keep.reshape(-1).to(x.device)]
        x = x.to(self.device or x.device, torch.float32)
        if self.stat is None:
            shape = (self.cols, self.cols) if self.method == "sparsegpt" else (self.cols,)
            self.stat = torch.zeros(shape, dtype=torch.float32, device=x.device)
        self.n += x.shape[0]
        self.stat += x.T @ x if self.method == "sparsegpt" else (x**2).sum(0)


def position_masks(model: nn.Module):
    """Positions to keep, set per batch from the model's own inputs (rule 2)."""
    holder: dict = {}
    pad = getattr(getattr(model, "config", None), "pad_token_id", None)

    def hook(_m, args, kwargs):
        am, labels = kwargs.get("attention_mask"), kwargs.get("labels")
        holder["enc"] = am.bool() if am is not None else None
        holder["dec"] = (labels != pad) & (labels != -100) if labels is not None and pad is not None else None

    return holder, model.register_forward_pre_hook(hook, with_kwargs=True)


def linear_of(model: nn.Module) -> dict[str, tuple[str, nn.Linear]]:
    """``<module>.weight`` -> (module name, module) for every ``nn.Linear`` (a meta skeleton's too) that runs as a
    module; one whose weight a fused forward reads instead (``forgetbench_fused``: UD-PrLM's USI Linear) gets no
    calibration input and is pruned by magnitude with the unit's other weights (rule 3)."""
    return {f"{name}.weight": (name, m) for name, m in model.named_modules()
            if isinstance(m, nn.Linear) and not getattr(m, "forgetbench_fused", False)}


def unit_linears(u, linears: dict) -> list[tuple]:
    """The unit's weight matrices pruned by the data-aware rule: linear maps, not tied (rule 3)."""
    return [(p, *linears[p.name]) for p in u.params if p.name in linears and not p.aliases]


def data_aware_prune(model: nn.Module, config: PruneConfig, forwards, units: list[dict] | None = None) -> PruneReport:
    """Rules 1–3: prune ``model`` in place with ``config.method``; ``forwards(model)`` runs the calibration set."""
    resolved = resolve_units(model, units, include_embeddings=config.include_embeddings)  # in memory: apply_recipe
    linears = linear_of(model)
    holder, top = position_masks(model)
    reports, groups = [], []
    try:
        for u in resolved:
            mats = unit_linears(u, linears)
            reports.append(prune_unit(u, mats, config, lambda: forwards(model), holder, groups))
    finally:
        top.remove()
    return PruneReport(config, reports, groups)


def prune_unit(u, mats: list[tuple], config: PruneConfig, run, holder: dict, groups: list,
               tensor_of=lambda p: p.param.data) -> UnitReport:
    """One unit: its matrices recorded over ``run()`` (the calibration inputs reaching them) and pruned (rule 1),
    then the rest of its parameters by magnitude (rule 3); ``tensor_of(param)``: where a parameter's values are."""
    zeros = _prune_unit_linears(mats, config, run, holder, groups, u.name) if mats else {}
    rest = [p for p in u.params if all(p is not q for q, _, _ in mats)]
    if rest:
        k = num_to_prune(config.sparsity, sum(p.numel for p in rest))
        thr = prune_smallest([tensor_of(p) for p in rest], k)
        groups.append(GroupReport(f"{u.name}/rest (magnitude)", sum(p.numel for p in rest), k, thr))
        zeros |= {p.name: numel_zeros(tensor_of(p)) for p in rest}
    return UnitReport(u.name, u.numel, sum(zeros[p.name] for p in u.params), [p.name for p in u.params],
                      {p.name: p.aliases for p in u.params if p.aliases})


def _prune_unit_linears(mats, config: PruneConfig, run, holder, groups, unit: str) -> dict[str, int]:
    """One calibration pass (``run()``) recording the unit's linear inputs, then each matrix pruned (rule 1)."""
    stats, handles = {}, []
    for p, name, mod in mats:
        stats[p.name] = _Inputs(mod.in_features, config.method, mod.weight.device)
        side = "enc" if any(s in f".{name}" for s in ENCODER_SIDE) else "dec"

        def pre(_m, args, _s=stats[p.name], _side=side):
            _s.add(args[0], holder.get(_side))

        handles.append(mod.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            run()
    finally:
        for h in handles:
            h.remove()
    for p, name, _ in mats:
        if stats[p.name].n == 0:
            raise ForgetbenchError(f"{name}: the calibration passes never reached this layer; data-aware pruning needs "
                                   "inputs for every weight matrix it prunes")
    if config.method == "wanda" and config.scope != "row":
        return _wanda_over_groups(mats, stats, config, groups, unit)
    zeros = {}
    for p, _, mod in mats:
        s, W = stats[p.name], mod.weight.data
        with torch.no_grad():
            if config.method == "wanda":
                mask = wanda_mask(W, s.stat.sqrt(), config.sparsity, config.n_m)
                W.masked_fill_(mask.to(W.device), 0)
            else:
                new, mask = sparsegpt(W, s.stat, config.sparsity, n_m=config.n_m)
                W.copy_(new)
        groups.append(GroupReport(f"{unit}/{p.name} ({config.method})", W.numel(), int(mask.sum()), None))
        zeros[p.name] = numel_zeros(W)
    return zeros


def _wanda_over_groups(mats, stats, config: PruneConfig, groups, unit: str) -> dict[str, int]:
    """Wanda compared over a layer-wise group of the unit's linear maps (``prune.selection_groups``: scope module,
    layer or attn-ffn): the ⌊p·n⌉ lowest scores of the group pruned, ties by position."""
    module_of = {id(p): mod for p, _, mod in mats}
    zeros = {}
    for name, members in selection_groups([Unit(unit, "", [p for p, _, _ in mats])], config.scope):
        scores = [wanda_scores(module_of[id(p)].weight.data, stats[p.name].stat.sqrt()) for p in members]
        k = num_to_prune(config.sparsity, sum(s.numel() for s in scores))
        with torch.no_grad():
            for p, mask in zip(members, lowest_over(scores, k), strict=True):
                W = module_of[id(p)].weight.data
                W.masked_fill_(mask.to(W.device), 0)
                zeros[p.name] = numel_zeros(W)
        groups.append(GroupReport(f"{name} (wanda, {config.scope})", sum(s.numel() for s in scores), k, None))
    return zeros
