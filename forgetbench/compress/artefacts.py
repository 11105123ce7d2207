"""Real compressed artefacts on disk: int8 weights + scales, and sparse bitmask + values.

Fake quantisation and masking keep a dense fp32 model (what the study measures); these files
are what a compressed model really takes. Both are safetensors (no pickle) and load back to the
exact dense tensors:

- ``model.int8.safetensors``: every quantised Linear weight as ``<name>.int8`` (int8) and
  ``<name>.scale`` (fp32, one per output channel); other tensors unchanged.
- ``model.sparse.safetensors``: every 2-D+ tensor that has zeros as ``<name>.mask`` (bit-packed,
  uint8, row-major) + ``<name>.values`` (the non-zeros); others unchanged.

Tied tensors are stored once under their first name; aliases go in the metadata. The metadata is
one key, ``forgetbench`` (sorted JSON: format, aliases, shapes): safetensors keeps metadata in a
hash map whose order changes from process to process, so several keys would make two identical
runs write different bytes (and different model hashes). Files of the v1 formats (several keys)
still load.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from forgetbench.compress.quantizer import quantize, scale_from_amax
from forgetbench.compress.units import _storage_key
from forgetbench.errors import ForgetbenchError

INT8_FORMAT = "forgetbench-int8-v2"
SPARSE_FORMAT = "forgetbench-sparse-v2"
_V1 = {INT8_FORMAT: "forgetbench-int8-v1", SPARSE_FORMAT: "forgetbench-sparse-v1"}


def _metadata(**fields) -> dict[str, str]:
    """One metadata key, so the file's bytes do not depend on safetensors' hash-map order."""
    return {"forgetbench": json.dumps(fields, sort_keys=True)}


def unique_state_dict(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, list[str]]]:
    """State dict with tied tensors once (first name), and the aliases of each kept name."""
    out: dict[str, torch.Tensor] = {}
    aliases: dict[str, list[str]] = {}
    first: dict[tuple, str] = {}
    for name, t in model.state_dict(keep_vars=False).items():
        key = _storage_key(t)
        if key in first:
            aliases.setdefault(first[key], []).append(name)
            continue
        first[key] = name
        out[name] = t.detach().contiguous()
    return out, aliases


def save_int8(model: nn.Module, weight_amax: dict[str, torch.Tensor], path: str | Path) -> dict:
    if not weight_amax:
        raise ForgetbenchError("no quantised weights to save as int8 (the linear_weight site was off)")
    amax_by_key = {_storage_key(model.get_parameter(n)): a for n, a in weight_amax.items()}
    sd, aliases = unique_state_dict(model)
    tensors: dict[str, torch.Tensor] = {}
    quant_bytes = quant_fp32_bytes = 0
    for name, t in sd.items():
        a = amax_by_key.get(_storage_key(t))  # params are contiguous: same storage as the model's
        if a is None:
            tensors[name] = t.cpu()  # files are written from the host: a GPU model's tensors copied here
            continue
        scale = scale_from_amax(a).float()
        b = scale if scale.ndim == t.ndim else scale.reshape(-1, *([1] * (t.ndim - 1)))  # stacked maps: as given
        q = quantize(t, b.to(t.device))
        tensors[f"{name}.int8"], tensors[f"{name}.scale"] = q.cpu(), scale.cpu()
        quant_bytes += q.numel() + scale.numel() * 4
        quant_fp32_bytes += t.numel() * 4
    save_file(tensors, str(path), metadata=_metadata(format=INT8_FORMAT, aliases=aliases))
    return {"quantised_bytes": quant_bytes, "quantised_fp32_bytes": quant_fp32_bytes,
            "linear_ratio": quant_bytes / quant_fp32_bytes}


def save_sparse(model: nn.Module, path: str | Path, min_sparsity: float = 1 / 32) -> dict:
    sd, aliases = unique_state_dict(model)
    tensors: dict[str, torch.Tensor] = {}
    n_sparse = 0
    for name, t in sd.items():
        t = t.cpu()  # files are written from the host: a GPU model's tensors copied here
        nz = t != 0
        if t.ndim < 2 or 1 - nz.float().mean().item() < min_sparsity:
            tensors[name] = t
            continue
        tensors[f"{name}.mask"] = torch.from_numpy(np.packbits(nz.reshape(-1).numpy()))
        tensors[f"{name}.values"] = t[nz]
        n_sparse += 1
    shapes = {n: list(t.shape) for n, t in sd.items()}
    save_file(tensors, str(path), metadata=_metadata(format=SPARSE_FORMAT, aliases=aliases, shapes=shapes))
    return {"sparse_tensors": n_sparse}


def _open(path: str | Path, fmt: str):
    if not Path(path).is_file():
        raise ForgetbenchError(f"{path} not found")
    f = safe_open(str(path), framework="pt")
    meta = f.metadata() or {}
    if "forgetbench" in meta:
        meta = json.loads(meta["forgetbench"])
    else:  # v1: several keys, JSON values
        meta = {k: (json.loads(v) if k in ("aliases", "shapes") else v) for k, v in meta.items()}
    if meta.get("format") not in (fmt, _V1[fmt]):
        raise ForgetbenchError(f"{path} is not a {fmt} file (format={meta.get('format')!r})")
    return f, meta


def load_int8(path: str | Path) -> dict[str, torch.Tensor]:
    """Dense state dict (tied aliases included) from an int8 artefact."""
    f, meta = _open(path, INT8_FORMAT)
    keys = set(f.keys())
    sd = {}
    for k in keys:
        if k.endswith(".scale"):
            continue
        if k.endswith(".int8"):
            name = k[: -len(".int8")]
            q, scale = f.get_tensor(k), f.get_tensor(f"{name}.scale")
            sd[name] = q.float() * (scale if scale.ndim == q.ndim else scale.reshape(-1, *([1] * (q.ndim - 1))))
        else:
            sd[k] = f.get_tensor(k)
    for name, al in meta.get("aliases", {}).items():
        for a in al:
            sd[a] = sd[name]
    return sd


def load_sparse(path: str | Path) -> dict[str, torch.Tensor]:
    f, meta = _open(path, SPARSE_FORMAT)
    shapes = meta["shapes"]
    sd = {}
    for name, shape in shapes.items():
        if name in f.keys():
            sd[name] = f.get_tensor(name)
            continue
        values = f.get_tensor(f"{name}.values")
        n = int(np.prod(shape))
        mask = torch.from_numpy(np.unpackbits(f.get_tensor(f"{name}.mask").numpy(), count=n).astype(bool))
        dense = torch.zeros(n, dtype=values.dtype)
        dense[mask] = values
        sd[name] = dense.reshape(shape)
    for name, al in meta.get("aliases", {}).items():
        for a in al:
            sd[a] = sd[name]
    return sd
