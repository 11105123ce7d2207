"""Layer-wise magnitude pruning (docs/METHOD.md §1.1).

``prune(model, PruneConfig(sparsity=0.3))`` zeros, in every selection group, exactly
k = ⌊p·n⌉ (round half up) weights with the smallest |w|. Ties at the threshold are broken
deterministically by position (unit order, parameter order, flat index), so the count is exact
even when many weights share one magnitude. Masks are boolean, computed chunk by chunk and
written straight into the weight storage, so every tied view sees the same zeros.

Scopes: ``layer`` (one threshold per unit; the thesis default), ``module`` (per weight matrix),
``attn-ffn`` (attention and feed-forward parts of a unit separately), ``global`` (one threshold
over all units).

Tensor access is pluggable (``open_tensors``): in memory the group's parameters are pruned in
place; the streamed path (``compress.streaming``) opens fresh buffers read from the checkpoint
shards and writes them back when the group is done. Same groups, same order, same zeros.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from forgetbench.compress.threshold import CHUNK, kth_smallest_abs_and_rank
from forgetbench.compress.units import Unit, UnitParam, resolve_units
from forgetbench.errors import ForgetbenchError

SCOPES = ("layer", "module", "attn-ffn", "global")
# the data-aware methods' comparison groups (compress.data_aware_prune): Wanda per output row (the paper's default)
# or over the layer-wise groups; SparseGPT inside each block of columns it updates. ``global`` cannot be: units are
# calibrated in turn, each on the earlier ones already pruned.
METHOD_SCOPES = {"magnitude": SCOPES, "wanda": ("row", "module", "layer", "attn-ffn"), "sparsegpt": ("block",)}

# (qualified name, parameter) pairs -> a context giving their tensors, to be changed in place
OpenTensors = Callable[[list[tuple[str, nn.Parameter]]], AbstractContextManager[list[torch.Tensor]]]


@contextlib.contextmanager
def in_place(named: list[tuple[str, nn.Parameter]]) -> Iterator[list[torch.Tensor]]:
    """The in-memory access: the parameters' own storage."""
    yield [p.data for _, p in named]


METHODS = ("magnitude", "wanda", "sparsegpt")


@dataclass(frozen=True)
class PruneConfig:
    sparsity: float | None  # None with n_m: N / M
    scope: str | None = None  # None: the method's default (magnitude layer, wanda row, sparsegpt block)
    include_embeddings: bool | None = None  # None: the method's default (magnitude yes, data-aware no: the papers')
    method: str = "magnitude"  # magnitude | wanda | sparsegpt (compress.data_aware_prune)
    n_m: tuple | None = None  # data-aware methods: N of every M input columns pruned, e.g. (2, 4)

    @property
    def needs_calibration(self) -> bool:
        return self.method != "magnitude"

    def __post_init__(self):
        if self.method not in METHODS:
            raise ForgetbenchError(f"unknown pruning method {self.method!r}; choose one of {', '.join(METHODS)}")
        if self.include_embeddings is None:
            object.__setattr__(self, "include_embeddings", self.method == "magnitude")
        if not isinstance(self.include_embeddings, bool):
            raise ForgetbenchError(f"include_embeddings must be true or false, got {self.include_embeddings!r}")
        if self.scope is None:
            object.__setattr__(self, "scope", METHOD_SCOPES[self.method][0] if self.method != "magnitude" else "layer")
        if self.n_m is not None:
            nm = self.n_m
            if (not isinstance(nm, (list, tuple)) or len(nm) != 2
                    or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in nm)):
                raise ForgetbenchError(f"n_m must be [N, M] with positive integers, e.g. [2, 4]; got {nm!r}")
            if nm[0] >= nm[1]:
                raise ForgetbenchError(f"n_m [{nm[0]}, {nm[1]}]: N must be smaller than M (N of every M weights pruned)")
            if self.method == "magnitude":
                raise ForgetbenchError("n_m patterns are for the data-aware methods (method: wanda or sparsegpt)")
            object.__setattr__(self, "n_m", tuple(nm))
            if self.sparsity is None:
                object.__setattr__(self, "sparsity", nm[0] / nm[1])
        if not isinstance(self.sparsity, (int, float)) or isinstance(self.sparsity, bool):
            raise ForgetbenchError(f"sparsity must be a number in [0, 1), got {self.sparsity!r}")
        if not 0.0 <= float(self.sparsity) < 1.0:
            raise ForgetbenchError(f"sparsity must be in [0, 1), got {self.sparsity}")
        if self.scope not in METHOD_SCOPES[self.method]:
            what = (f"pruning scope {self.scope!r} does not go with method {self.method}"
                    if self.scope in {s for v in METHOD_SCOPES.values() for s in v} else f"unknown pruning scope {self.scope!r}")
            raise ForgetbenchError(f"{what}; choose one of {', '.join(METHOD_SCOPES[self.method])}")
        if self.n_m is not None and self.scope not in ("row", "block"):
            raise ForgetbenchError(f"n_m patterns are per output row; scope {self.scope!r} does not go with them")


@dataclass
class GroupReport:
    name: str
    numel: int
    pruned: int
    threshold: float | None


@dataclass
class UnitReport:
    name: str
    numel: int
    zeros: int
    params: list[str]
    tied: dict[str, list[str]] = field(default_factory=dict)

    @property
    def sparsity(self) -> float:
        return self.zeros / self.numel if self.numel else 0.0


@dataclass
class PruneReport:
    config: PruneConfig
    units: list[UnitReport]
    groups: list[GroupReport]

    @property
    def numel(self) -> int:
        return sum(u.numel for u in self.units)

    @property
    def zeros(self) -> int:
        return sum(u.zeros for u in self.units)

    @property
    def sparsity(self) -> float:
        return self.zeros / self.numel if self.numel else 0.0

    def to_dict(self) -> dict:
        cfg = asdict(self.config)
        if self.config.method == "magnitude":  # a magnitude report keeps its own keys
            cfg = {k: v for k, v in cfg.items() if k not in ("method", "n_m")}
        return {
            "config": cfg,
            "overall": {"numel": self.numel, "zeros": self.zeros, "sparsity": self.sparsity},
            "units": [
                {"name": u.name, "numel": u.numel, "zeros": u.zeros, "sparsity": u.sparsity, "params": u.params}
                | ({"tied": u.tied} if u.tied else {})
                for u in self.units
            ],
            "groups": [asdict(g) for g in self.groups],
        }


def numel_zeros(t: torch.Tensor, chunk: int = CHUNK) -> int:
    """Count zeros chunk by chunk (``(t == 0).sum()`` materialises an int64 copy: 4 GB for a 525 M tensor)."""
    flat = t.detach().reshape(-1)
    return sum(int(torch.count_nonzero(flat[s : s + chunk] == 0)) for s in range(0, flat.numel(), chunk))


def num_to_prune(p: float, n: int) -> int:
    """⌊p·n⌉ with halves rounded up (not banker's rounding)."""
    return int(math.floor(p * n + 0.5))


def selection_groups(units: list[Unit], scope: str) -> list[tuple[str, list[UnitParam]]]:
    if scope == "layer":
        return [(u.name, list(u.params)) for u in units]
    if scope == "module":
        return [(f"{u.name}/{p.name}", [p]) for u in units for p in u.params]
    if scope == "attn-ffn":
        out: list[tuple[str, list[UnitParam]]] = []
        for u in units:
            by_group: dict[str, list[UnitParam]] = {}
            for p in u.params:
                by_group.setdefault(p.group, []).append(p)
            out += [(f"{u.name}/{g}", ps) for g, ps in by_group.items()]
        return out
    return [("global", [p for u in units for p in u.params])]


@torch.no_grad()
def prune_smallest(params: list[torch.Tensor], k: int, chunk: int = CHUNK) -> float | None:
    """Zero exactly the k smallest-|w| elements over ``params`` in place; returns the threshold."""
    if k <= 0:
        return None
    t, n_less = kth_smallest_abs_and_rank(params, k, chunk)
    ties_left = k - n_less  # elements equal to t that must go, first ones by position
    for p in params:
        flat = p.data.view(-1) if p.data.is_contiguous() else None
        if flat is None:
            raise ForgetbenchError("cannot prune a non-contiguous parameter in place")
        for s in range(0, flat.numel(), chunk):
            c = flat[s : s + chunk]
            a = c.float().abs()
            mask = a < t
            if ties_left > 0:
                eq = (a == t).nonzero().flatten()[:ties_left]
                mask[eq] = True
                ties_left -= eq.numel()
            c.masked_fill_(mask, 0)
    return t


def prune(
    model: nn.Module,
    config: PruneConfig | None = None,
    units: list[dict] | None = None,
    open_tensors: OpenTensors | None = None,
    **kwargs,
) -> PruneReport:
    """Magnitude-prune ``model`` in place; returns realised sparsity per unit and overall.

    ``open_tensors`` (default: the parameters in place) gives each selection group's tensors; the
    streamed path passes a meta-device ``model`` and opens the tensors from checkpoint shards."""
    config = config or PruneConfig(**kwargs)
    resolved = resolve_units(model, units, include_embeddings=config.include_embeddings)
    if open_tensors is None:
        open_tensors = in_place
        for u in resolved:
            for p in u.params:
                if p.param.device.type == "meta":
                    raise ForgetbenchError(
                        f"{p.name} is on the meta device (offloaded): in-place pruning would be lost; "
                        "use streamed compression from the checkpoint shards instead"
                    )
    groups, zeros = [], {}
    for gname, gparams in selection_groups(resolved, config.scope):
        with open_tensors([(p.name, p.param) for p in gparams]) as tensors:
            n = sum(t.numel() for t in tensors)
            k = num_to_prune(config.sparsity, n)
            thr = prune_smallest(tensors, k)
            zeros |= {p.name: numel_zeros(t) for p, t in zip(gparams, tensors, strict=True)}
        groups.append(GroupReport(gname, n, k, thr))
    unit_reports = [
        UnitReport(
            u.name,
            u.numel,
            sum(zeros[p.name] for p in u.params),
            [p.name for p in u.params],
            {p.name: p.aliases for p in u.params if p.aliases},
        )
        for u in resolved
    ]
    return PruneReport(config, unit_reports, groups)
