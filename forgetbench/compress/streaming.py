"""Layer-streamed compression of (sharded) safetensors checkpoints, for models larger than RAM.

    forgetbench compress-stream MODEL_DIR --recipe prune-30 --out OUT_DIR

Offloaded modules hold meta placeholders, so compressing an offloaded model in place is silently
lost. Instead this reads one unit at a time from the checkpoint shards, prunes it (same unit map,
same exact threshold and tie order as in-memory ``prune``, hence identical results) or fake-
quantises its Linear weights per output channel, and writes it at its byte offset in output
shards that keep the input's layout (headers copied, files preallocated). Everything else is
copied in chunks. Peak memory is about one unit plus one chunk.

Activation quantisation needs forward passes for calibration and is not streamable: load the
model with a device map instead.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from forgetbench.compress.prune import GroupReport, num_to_prune, prune_smallest, selection_groups
from forgetbench.compress.quantizer import fake_quant, per_channel_amax
from forgetbench.compress.recipe import Recipe
from forgetbench.compress.sites import excluded
from forgetbench.compress.units import resolve_units
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory, atomic_write_json, sha256_file

COPY_CHUNK = 64 << 20
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_header(path: Path) -> tuple[int, dict]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return n, json.loads(f.read(n))


def shard_map(model_dir: Path) -> dict[str, str]:
    idx = model_dir / "model.safetensors.index.json"
    if idx.is_file():
        return json.loads(idx.read_text())["weight_map"]
    single = model_dir / "model.safetensors"
    if not single.is_file():
        raise ForgetbenchError(f"{model_dir}: no model.safetensors(.index.json); streamed compression reads safetensors")
    with safe_open(str(single), framework="pt") as f:
        return {k: "model.safetensors" for k in f.keys()}


class ShardIO:
    """Random-access tensor reads from input shards and writes into preallocated output shards."""

    def __init__(self, src: Path, dst: Path, weight_map: dict[str, str]):
        self.src, self.dst, self.weight_map = src, dst, weight_map
        self.headers = {s: read_header(src / s) for s in sorted(set(weight_map.values()))}
        self.bytes_read = self.bytes_written = 0
        for s, (n, _) in self.headers.items():  # header verbatim, data region preallocated
            with open(src / s, "rb") as fi, open(dst / s, "wb") as fo:
                fo.write(fi.read(8 + n))
                fo.truncate(os.path.getsize(src / s))

    def _loc(self, name: str):
        s = self.weight_map[name]
        n, h = self.headers[s]
        meta = h[name]
        if meta["dtype"] not in _DTYPES:
            raise ForgetbenchError(f"{name}: dtype {meta['dtype']} not supported for streamed compression")
        b, e = meta["data_offsets"]
        return s, 8 + n + b, e - b, meta

    def read(self, name: str) -> torch.Tensor:
        s, off, size, meta = self._loc(name)
        with open(self.src / s, "rb") as f:
            f.seek(off)
            buf = bytearray(size)
            f.readinto(buf)
        self.bytes_read += size
        return torch.frombuffer(buf, dtype=_DTYPES[meta["dtype"]]).reshape(meta["shape"]) if size else \
            torch.empty(meta["shape"], dtype=_DTYPES[meta["dtype"]])

    def write(self, name: str, t: torch.Tensor) -> None:
        s, off, size, _ = self._loc(name)
        data = t.contiguous().view(torch.uint8).numpy()
        if data.nbytes != size:
            raise ForgetbenchError(f"{name}: size changed while compressing")
        with open(self.dst / s, "r+b") as f:
            f.seek(off)
            f.write(memoryview(data))
        self.bytes_written += size

    def copy(self, name: str) -> None:
        s, off, size, _ = self._loc(name)
        with open(self.src / s, "rb") as fi, open(self.dst / s, "r+b") as fo:
            fi.seek(off)
            fo.seek(off)
            left = size
            while left:
                chunk = fi.read(min(COPY_CHUNK, left))
                fo.write(chunk)
                left -= len(chunk)
        self.bytes_read += size
        self.bytes_written += size


def _checkpoint_name(p_name: str, aliases: list[str], weight_map: dict) -> str:
    for n in [p_name, *aliases]:
        if n in weight_map:
            return n
    raise ForgetbenchError(f"{p_name}: not in the checkpoint (nor its tied aliases {aliases})")


def stream_compress(model_dir: str | Path, recipe: Recipe, out_dir: str | Path, units: list[dict] | None = None) -> dict:
    from transformers import AutoConfig

    from forgetbench.models.device_map import empty_model

    src = Path(model_dir)
    for st in recipe.steps:
        if st.kind == "quantize" and st.config.needs_calibration:
            raise ForgetbenchError(f"{recipe.source}: activation quantisation needs calibration forward passes and cannot "
                                   "be streamed; use a weights-only quantize step (sites: {linear_weight: true, others "
                                   "false}) or load the model with a device map")
    config = AutoConfig.from_pretrained(str(src))
    meta_model = empty_model(config)
    weight_map = shard_map(src)
    t0 = time.perf_counter()
    report: dict = {"format": "forgetbench-compression-v1", "mode": "streamed", "recipe": recipe.raw,
                    "recipe_name": recipe.name, "steps": []}
    with atomic_directory(out_dir) as tmp:
        io = ShardIO(src, tmp, weight_map)
        done: set[str] = set()

        def load(name):  # a tensor changed by an earlier step is re-read from the output shard
            return _reread(io, name) if name in done else io.read(name)

        for step in recipe.steps:
            if step.kind == "prune":
                resolved = resolve_units(meta_model, units, include_embeddings=step.config.include_embeddings)
                groups = []
                for gname, gparams in selection_groups(resolved, step.config.scope):
                    names = [_checkpoint_name(p.name, p.aliases, weight_map) for p in gparams]
                    tensors = [load(n) for n in names]  # fresh buffers: pruned in place, then written
                    n_el = sum(t.numel() for t in tensors)
                    k = num_to_prune(step.config.sparsity, n_el)
                    thr = prune_smallest(tensors, k)
                    for n, t in zip(names, tensors, strict=True):
                        io.write(n, t)
                        done.add(n)
                    groups.append(GroupReport(gname, n_el, k, thr).__dict__)
                    del tensors
                report["steps"].append({"prune": {"config": step.config.__dict__, "groups": groups}})
            else:
                qnames = []
                seen = set()
                for mname, mod in meta_model.named_modules():
                    if not isinstance(mod, nn.Linear) or excluded(f"{mname}.weight", list(step.config.exclude)):
                        continue
                    aliases = [a for a in _aliases(meta_model, mod.weight) if a != f"{mname}.weight"]
                    n = _checkpoint_name(f"{mname}.weight", aliases, weight_map)
                    if n in seen:
                        continue
                    seen.add(n)
                    w = load(n)
                    q = fake_quant(w, per_channel_amax(w, 0), axis=0)
                    io.write(n, q)
                    done.add(n)
                    qnames.append(n)
                report["steps"].append({"quantize": {"config": {"sites": step.config.sites, "exclude": list(step.config.exclude)},
                                                     "weights": qnames}})
        for name in weight_map:
            if name not in done:
                io.copy(name)
        for f in src.iterdir():
            if f.is_file() and not f.name.endswith(".safetensors"):
                shutil.copyfile(f, tmp / f.name)
        seconds = time.perf_counter() - t0
        report |= {"seconds": round(seconds, 3), "bytes_read": io.bytes_read, "bytes_written": io.bytes_written,
                   "inputs_sha256": {f.name: sha256_file(f) for f in sorted(src.glob("*.safetensors*"))}}
        atomic_write_json(tmp / "compression.json", report)
    return report


def _reread(io: ShardIO, name: str) -> torch.Tensor:
    s, off, size, meta = io._loc(name)
    with open(io.dst / s, "rb") as f:
        f.seek(off)
        buf = bytearray(size)
        f.readinto(buf)
    return torch.frombuffer(buf, dtype=_DTYPES[meta["dtype"]]).reshape(meta["shape"])


def _aliases(model: nn.Module, param: nn.Parameter) -> list[str]:
    return [f"{m}.{n}" if m else n for m, mod in model.named_modules(remove_duplicate=False)
            for n, p in mod.named_parameters(recurse=False) if p is param]
