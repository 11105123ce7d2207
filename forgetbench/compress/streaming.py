"""Layer-streamed compression of (sharded) safetensors checkpoints, for models larger than RAM.

    forgetbench compress-stream MODEL_DIR --recipe prune-30 --out OUT_DIR

Offloaded modules hold meta placeholders, so compressing an offloaded model in place is silently
lost. Instead the recipe runs through ``compress.apply_recipe`` on a meta-device skeleton of the
model whose tensors are opened from the checkpoint shards one selection group (prune) or one
weight matrix (weight quantisation: Linear and LSTM/GRU, as in memory) at a time and written at
their byte offsets in output shards that keep the input's layout (headers copied, files
preallocated). Same unit map, same threshold and tie order as in memory, hence identical results.
Everything else is copied in chunks. Peak memory is about one selection group plus one chunk
(the ``global`` pruning scope opens every unit at once).

Data-aware pruning (Wanda, SparseGPT) is streamed layer by layer, the calibration activations carried from
layer to layer (``compress.data_aware_layerwise``): its calibration source comes with the call (``calibrate``: the
MT models' TSV through the folder's tokenizer by default). Activation quantisation needs forward passes through
the whole model for calibration and is not streamable (refused before any work): load the model with a device
map instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from forgetbench.compress.apply import Target, apply_recipe, check_recipe
from forgetbench.compress.recipe import Recipe
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory, atomic_write_json, sha256_file

FORMAT = "forgetbench-streamed-compression-v1"

COPY_CHUNK = 64 << 20
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def read_header(path: Path) -> tuple[int, dict]:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 < n <= size - 8:
            raise ForgetbenchError(f"{path}: not a safetensors file (truncated or damaged header)")
        try:
            header = json.loads(f.read(n))
        except ValueError:
            raise ForgetbenchError(f"{path}: damaged safetensors header (not JSON)") from None
    end = max((m["data_offsets"][1] for k, m in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end > size:
        raise ForgetbenchError(f"{path}: truncated: its header describes {8 + n + end:,} bytes, the file has {size:,}")
    return n, header


def shard_map(model_dir: Path) -> dict[str, str]:
    """Tensor name -> shard file name; shard names from an index are confined to ``model_dir``."""
    from forgetbench.outputs import confined_name

    idx = model_dir / "model.safetensors.index.json"
    if idx.is_file():
        try:
            weight_map = json.loads(idx.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError):
            raise ForgetbenchError(f"{idx}: not a safetensors index (no weight_map)") from None
        if not isinstance(weight_map, dict) or not weight_map:
            raise ForgetbenchError(f"{idx}: weight_map must map tensor names to shard files")
        for shard in set(weight_map.values()):
            confined_name(str(shard), "shard file", str(idx))
            if not (model_dir / shard).is_file():
                raise ForgetbenchError(f"{idx}: shard {shard} is missing from {model_dir}")
        return weight_map
    single = model_dir / "model.safetensors"
    if not single.is_file():
        raise ForgetbenchError(f"{model_dir}: no model.safetensors(.index.json); streamed compression reads safetensors")
    return {k: "model.safetensors" for k in read_header(single)[1] if k != "__metadata__"}


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


class StreamedTensors:
    """``open_tensors`` for ``prune``/``quantize`` over checkpoint shards: each (name, meta parameter) is
    found in the checkpoint under its name or a tied alias, read (from the output if an earlier step
    changed it), handed out as a fresh buffer and written back when the context closes."""

    def __init__(self, io: ShardIO, meta_model: nn.Module):
        self.io, self.done = io, set()
        self.aliases: dict[int, list[str]] = {}
        for m, mod in meta_model.named_modules(remove_duplicate=False):
            for n, p in mod.named_parameters(recurse=False):
                self.aliases.setdefault(id(p), []).append(f"{m}.{n}" if m else n)

    def checkpoint_name(self, name: str, param: nn.Parameter) -> str:
        for n in [name, *self.aliases.get(id(param), [])]:
            if n in self.io.weight_map:
                return n
        raise ForgetbenchError(f"{name}: not in the checkpoint (nor its tied aliases {self.aliases.get(id(param))})")

    @contextlib.contextmanager
    def __call__(self, named: list[tuple[str, nn.Parameter]]) -> Iterator[list[torch.Tensor]]:
        names = [self.checkpoint_name(n, p) for n, p in named]
        tensors = [_reread(self.io, n) if n in self.done else self.io.read(n) for n in names]
        yield tensors
        for n, t in zip(names, tensors, strict=True):
            self.io.write(n, t)
            self.done.add(n)


def stream_compress(model_dir: str | Path, recipe: Recipe, out_dir: str | Path, units: list[dict] | None = None,
                    skeleton: nn.Module | None = None, calibrate=None) -> dict:
    """Apply ``recipe`` to the checkpoint in ``model_dir`` without loading it; ``skeleton`` is the model on
    the meta device (default: built from the folder's Hugging Face ``config.json``); ``calibrate``: the calibration
    source of a data-aware prune step (default: ``Seq2SeqCalibration`` with the folder's tokenizer, where it has
    one)."""
    src = Path(model_dir)
    config = None
    if skeleton is None:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(src))
        if calibrate is None and any(s.calibration is not None for s in recipe.steps):
            calibrate = _seq2seq_calibration(src, config)
    check_recipe(recipe, calibrate, streamed=True)  # before any work
    if skeleton is None:
        from forgetbench.models.device_map import empty_model

        skeleton = empty_model(config, "eager", torch.float32)  # as compress loads it
    meta_model = skeleton
    weight_map = shard_map(src)
    t0 = time.perf_counter()
    with atomic_directory(out_dir) as tmp:
        io = ShardIO(src, tmp, weight_map)
        opened = StreamedTensors(io, meta_model)
        report, _ = apply_recipe(Target(meta_model, opened, units), recipe, calibrate)
        for name in weight_map:
            if name not in opened.done:
                io.copy(name)
        for f in src.iterdir():  # everything but the streamed weights: configs, vocabularies, a parser's tagger/
            if f.is_file() and not f.name.endswith(".safetensors"):  # and an RNGTr's initial/ (not compressed here)
                shutil.copyfile(f, tmp / f.name)
            elif f.is_dir() and not f.name.startswith("."):
                shutil.copytree(f, tmp / f.name)
        seconds = time.perf_counter() - t0
        report = {"format": FORMAT, "mode": "streamed"} | report | {
            "seconds": round(seconds, 3), "bytes_read": io.bytes_read, "bytes_written": io.bytes_written,
            "inputs_sha256": {f.name: sha256_file(f) for f in sorted(src.glob("*.safetensors*"))}}
        atomic_write_json(tmp / "compression.json", report)
    return report


def _seq2seq_calibration(src: Path, config):
    """The folder's tokenizer as an MT calibration source, as ``compress`` loads it (None in a weights-only folder:
    ``check_recipe`` then says so)."""
    from forgetbench.compress.calibration import Seq2SeqCalibration
    from forgetbench.models.load import is_small100
    from forgetbench.models.tokenizers import tokenizer_for_folder

    tok = tokenizer_for_folder(src, small100=is_small100(src, config))
    return None if tok is None else Seq2SeqCalibration(tok)


def _reread(io: ShardIO, name: str) -> torch.Tensor:
    s, off, size, meta = io._loc(name)
    with open(io.dst / s, "rb") as f:
        f.seek(off)
        buf = bytearray(size)
        f.readinto(buf)
    return torch.frombuffer(buf, dtype=_DTYPES[meta["dtype"]]).reshape(meta["shape"])
