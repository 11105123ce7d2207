"""Units: the "layers" of a model for layer-wise operations (docs/METHOD.md §1.1).

A unit map is declarative: a list of entries ``{"unit": NAME, "module": GLOB, "groups": {...}}``.
``GLOB`` matches qualified module names; ``*`` matches one dotted component and its captures
fill ``{0}``, ``{1}``… in ``NAME``. ``groups`` (optional) splits a unit's parameters for the
``attn-ffn`` pruning scope: group name -> globs over parameter names relative to the unit module.

Every parameter of a matched module belongs to the first unit that claims its storage, so tied
parameters (M2M-100's ``shared`` = ``encoder.embed_tokens`` = ``decoder.embed_tokens`` =
``lm_head``) are processed once; their aliases are recorded.

Prunable parameters are weights: ``ndim >= 2``, not a bias, not inside a normalisation module.
(**Decision**, docs/METHOD.md §1.1: biases and LayerNorm are never pruned.)
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

import torch
from torch import nn

from forgetbench.errors import ForgetbenchError

# M2M-100, SMaLL-100, NLLB, Bart and Marian share this layout; the prefix is the base model's.
SEQ2SEQ_GROUPS = {"attention": ["*attn.*"], "ffn": ["fc1.*", "fc2.*"]}


def seq2seq_unit_map(prefix: str = "model") -> list[dict]:
    p = f"{prefix}." if prefix else ""
    return [
        {"unit": "embeddings", "module": f"{p}shared"},
        {"unit": "encoder.layers.{0}", "module": f"{p}encoder.layers.*", "groups": SEQ2SEQ_GROUPS},
        {"unit": "decoder.layers.{0}", "module": f"{p}decoder.layers.*", "groups": SEQ2SEQ_GROUPS},
        # Only becomes a unit when the output projection is not tied to ``shared``.
        {"unit": "lm_head", "module": "lm_head"},
    ]


@dataclass
class UnitParam:
    name: str  # qualified parameter name (first alias)
    param: nn.Parameter
    group: str  # for the attn-ffn scope
    aliases: list[str] = field(default_factory=list)  # other qualified names sharing the storage

    @property
    def numel(self) -> int:
        return self.param.numel()


@dataclass
class Unit:
    name: str
    module: str
    params: list[UnitParam]

    @property
    def numel(self) -> int:
        return sum(p.numel for p in self.params)


def _glob_regex(glob: str) -> re.Pattern:
    parts = []
    for tok in re.split(r"(\*)", glob):
        parts.append("([^.]+)" if tok == "*" else re.escape(tok))
    return re.compile("^" + "".join(parts) + "$")


def _is_norm(module: nn.Module) -> bool:
    return isinstance(module, (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase)) or (
        "norm" in type(module).__name__.lower()
    )


def _storage_key(t: torch.Tensor) -> tuple:
    if t.device.type == "meta":
        return ("meta", id(t))
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))


def default_unit_map(model: nn.Module) -> list[dict]:
    declared = getattr(model, "forgetbench_units", None)
    if declared is not None:
        return list(declared)
    names = dict(model.named_modules())
    for prefix in ("model", ""):
        p = f"{prefix}." if prefix else ""
        if f"{p}shared" in names and f"{p}encoder.layers" in names and f"{p}decoder.layers" in names:
            return seq2seq_unit_map(prefix)
    raise ForgetbenchError(
        f"{type(model).__name__}: no unit map known; declare one as `model.forgetbench_units = [...]` "
        "or pass `units=` (see forgetbench.compress.units)"
    )


def resolve_units(model: nn.Module, unit_map: list[dict] | None = None, include_embeddings: bool = True) -> list[Unit]:
    """Resolve a unit map against a model; returns units in map order, tied storage claimed once."""
    unit_map = default_unit_map(model) if unit_map is None else unit_map
    modules = dict(model.named_modules(remove_duplicate=False))
    # every qualified name of every parameter (aliases included)
    all_names: dict[tuple, list[str]] = {}
    for mname, mod in modules.items():
        for pname, p in mod.named_parameters(recurse=False):
            q = f"{mname}.{pname}" if mname else pname
            all_names.setdefault(_storage_key(p), [])
            if q not in all_names[_storage_key(p)]:
                all_names[_storage_key(p)].append(q)
    claimed: set[tuple] = set()
    if not include_embeddings:  # pre-claim embeddings, so a tied lm_head is excluded with them
        claimed |= {_storage_key(m.weight) for m in modules.values() if isinstance(m, nn.Embedding)}
    units: list[Unit] = []
    for entry in unit_map:
        if "unit" not in entry or "module" not in entry:
            raise ForgetbenchError(f"unit map entry {entry!r} needs 'unit' and 'module' keys")
        rx = _glob_regex(entry["module"])
        groups = entry.get("groups") or {}
        for mname, mod in modules.items():
            m = rx.match(mname)
            if not m:
                continue
            uname = entry["unit"].format(*m.groups())
            params = []
            for sub_name, sub in mod.named_modules():
                if _is_norm(sub):
                    continue
                for pname, p in sub.named_parameters(recurse=False):
                    if p.ndim < 2 or "bias" in pname:
                        continue
                    key = _storage_key(p)
                    if key in claimed:
                        continue
                    claimed.add(key)
                    rel = f"{sub_name}.{pname}" if sub_name else pname
                    group = next(
                        (g for g, pats in groups.items() if any(fnmatch.fnmatchcase(rel, pat) for pat in pats)),
                        "other",
                    )
                    qname = f"{mname}.{rel}" if mname else rel
                    aliases = [a for a in all_names.get(key, []) if a != qname]
                    params.append(UnitParam(qname, p, group, aliases))
            if params:
                units.append(Unit(uname, mname, params))
    if not units:
        raise ForgetbenchError("the unit map matched no prunable parameter; check its module globs")
    seen = set()
    for u in units:
        if u.name in seen:
            raise ForgetbenchError(f"unit map produces the unit name {u.name!r} twice; make the names distinct")
        seen.add(u.name)
    return units
