"""The teacher cache: top-k + sampled-tail targets (``loss.teacher_targets``) for every example of a run's
sample, written once and read by every KD step (no teacher forward in the loop).

Layout of a cache folder:

- ``building.json``: the keys it is being built for (written first; a folder being built for another
  teacher or sample is refused);
- ``shard-00000.safetensors`` …: per shard of ``SHARD`` unique examples, flat arrays over their content
  positions (``top_ids``, ``top_q`` fp16, ``tail_ids``, ``tail_logq`` fp16, ``tail_mass`` fp32) and ``off``
  (positions per example); each written to a temporary name and renamed, so a killed build resumes at
  the first missing shard;
- ``cache.json``: the manifest, written last (format tag, teacher weights SHA-256, the sample's keys,
  T, k, m, positions, bytes, seconds). Only a folder with a manifest is a cache.

No pickle: safetensors (numpy) only. Ids are uint16 when the vocabulary fits, else int32. A cache made by
another teacher, another sample (``data_key`` from the config before any work, ``data_sha256`` from the
ids on disk after) or other T/k/m is refused in one line.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from forgetbench.console import Console
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json
from forgetbench.models.hardware import input_device

FORMAT = "forgetbench-kd-cache-v1"
SHARD = 4096


def cache_keys(teacher_sha256: str, data_key: str, temperature: float, k: int, m: int, vocab: int) -> dict:
    return {"format": FORMAT, "teacher_sha256": teacher_sha256, "data_key": data_key, "temperature": temperature,
            "top_k": k, "tail_samples": m, "vocab_size": vocab}


def check_manifest(folder: Path, keys: dict, data_sha256: str | None = None) -> dict:
    """The manifest of the cache in ``folder`` if it was made for ``keys`` (and ``data_sha256``), else one line."""
    f = folder / "cache.json"
    if not f.is_file():
        raise ForgetbenchError(f"kd.cache {folder}: not a finished teacher cache (no cache.json); build it with a run "
                               "whose kd.source is cache, or leave kd.cache empty")
    try:
        man = json.loads(f.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ForgetbenchError(f"{f}: damaged manifest (not JSON); rebuild the cache") from None
    names = {"teacher_sha256": "another teacher", "data_key": "other data or sampling settings",
             "temperature": "another KD temperature", "top_k": "another top_k", "tail_samples": "another tail_samples",
             "vocab_size": "another vocabulary", "format": "another format"}
    for key, what in names.items():
        if man.get(key) != keys[key]:
            raise ForgetbenchError(f"kd.cache {folder}: made by {what} ({key} {str(man.get(key))[:16]} vs "
                                   f"{str(keys[key])[:16]}); use the cache of this teacher and data, or leave kd.cache empty")
    if data_sha256 is not None and man.get("data_sha256") != data_sha256:
        raise ForgetbenchError(f"kd.cache {folder}: made from other token ids (data_sha256 {man.get('data_sha256', '')[:16]} "
                               f"vs {data_sha256[:16]}); leave kd.cache empty to rebuild")
    return man


def _pad_rows(rows: list[np.ndarray], width: int, fill=0) -> np.ndarray:
    out = np.full((len(rows), width, *rows[0].shape[1:]), fill, dtype=rows[0].dtype)
    for r, a in enumerate(rows):
        out[r, : len(a)] = a
    return out


@torch.no_grad()
def build_cache(folder: Path, keys: dict, data, teacher, seed: int, max_tokens: int, bf16: bool = False,
                progress: bool = True, log=print) -> dict:
    """Teacher targets for every unique example of ``data`` (a ``DistillData``) into ``folder``; returns the manifest."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from forgetbench.distill.loss import teacher_targets

    folder.mkdir(parents=True, exist_ok=True)
    data_sha = data.sample_sha256()
    record = keys | {"data_sha256": data_sha}
    b = folder / "building.json"
    if b.is_file() and json.loads(b.read_text()) != record:
        raise ForgetbenchError(f"{folder}: a teacher cache for other keys is being built here; use another folder")
    atomic_write_json(b, record)
    t0 = time.perf_counter()
    n_unique = len(data.unique_keys)
    first = np.zeros(n_unique, np.int64)  # a plan entry for each unique example
    first[data.uid[::-1]] = np.arange(len(data.uid))[::-1]
    id_dtype = np.uint16 if keys["vocab_size"] <= 65535 else np.int32
    k, m, T = keys["top_k"], keys["tail_samples"], keys["temperature"]
    shards = []
    bar = Console("distill", quiet=not progress).stage("teacher cache", n_unique, "examples")
    for si, start in enumerate(range(0, n_unique, SHARD)):
        uids = np.arange(start, min(start + SHARD, n_unique))
        path = folder / f"shard-{si:05d}.safetensors"
        shards.append({"file": path.name, "first": int(start), "count": len(uids)})
        if path.is_file():
            bar.update(bar.done + len(uids))
            continue
        gen = torch.Generator().manual_seed(seed * 1_000_003 + si)
        entries = first[uids]
        lens = np.maximum(data.src_len[entries], data.tgt_len[entries])
        order = np.argsort(lens, kind="stable")
        per_uid: list[dict | None] = [None] * len(uids)
        i = 0
        while i < len(order):
            j, width = i, 0
            while j < len(order) and (j - i + 1) * max(width, lens[order[j]]) * 2 <= max_tokens:
                width = max(width, int(lens[order[j]]))
                j += 1
            j = max(j, i + 1)
            sel = order[i:j]
            batch = data.collate(entries[sel])
            dev = input_device(teacher)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16 and dev.type == "cpu"):
                logits = teacher(input_ids=batch["teacher_input_ids"].to(dev),
                                 attention_mask=batch["teacher_attention_mask"].to(dev),
                                 decoder_input_ids=batch["teacher_decoder_input_ids"].to(dev)).logits
            c0, C = int(batch["teacher_content_start"]), int(batch["content_len"].max())
            t = teacher_targets(logits[:, c0: c0 + C].float().cpu(), T, k, m, gen)
            for r, u in enumerate(sel):
                n = int(batch["content_len"][r])
                per_uid[u] = {name: v[r, :n].numpy() for name, v in t.items()}
            bar.update(bar.done + len(sel))
            i = j
        arrays = {
            "top_ids": np.concatenate([e["top_ids"] for e in per_uid]).astype(id_dtype),
            "top_q": np.concatenate([e["top_q"] for e in per_uid]).astype(np.float16),
            "tail_ids": np.concatenate([e["tail_ids"] for e in per_uid]).astype(id_dtype),
            "tail_logq": np.concatenate([e["tail_logq"] for e in per_uid]).astype(np.float16),
            "tail_mass": np.concatenate([e["tail_mass"] for e in per_uid]).astype(np.float32),
            "off": np.concatenate([[0], np.cumsum([len(e["tail_mass"]) for e in per_uid])]).astype(np.int64),
        }
        tmp = folder / f".{path.name}.partial"
        save_file(arrays, str(tmp), metadata={"format": FORMAT})
        os.replace(tmp, path)
    bar.close()
    positions = 0
    size = 0
    for s in shards:
        p = folder / s["file"]
        size += p.stat().st_size
        with safe_open(str(p), framework="np") as f:
            positions += int(f.get_slice("tail_mass").get_shape()[0])
    man = record | {"shards": shards, "examples": n_unique, "positions": positions, "bytes": size,
                    "bytes_per_million_positions": round(size / max(positions, 1) * 1e6),
                    "seconds": round(time.perf_counter() - t0, 1)}
    atomic_write_json(folder / "cache.json", man)
    log(f"teacher cache: {n_unique:,} examples, {positions:,} target positions, {size / 2**20:.1f} MiB "
        f"({man['bytes_per_million_positions'] / 2**20:.1f} MiB per million target tokens) in {man['seconds']} s")
    return man


class TeacherCache:
    """A finished cache in memory; ``lookup(uids, C)`` gives padded target tensors [B, C, ·]."""

    def __init__(self, folder: Path, manifest: dict):
        from safetensors.numpy import load_file

        parts = [load_file(str(folder / s["file"])) for s in manifest["shards"]]
        self.arrays = {name: np.concatenate([p[name] for p in parts]) for name in
                       ("top_ids", "top_q", "tail_ids", "tail_logq", "tail_mass")}
        starts, base = [], 0
        for p in parts:
            starts.append(p["off"][:-1] + base)
            base += int(p["off"][-1])
        self.start = np.concatenate(starts)
        self.length = np.concatenate([np.diff(p["off"]) for p in parts])

    def lookup(self, uids, C: int) -> dict[str, torch.Tensor]:
        out = {}
        for name, arr in self.arrays.items():
            rows = [arr[self.start[u]: self.start[u] + min(self.length[u], C)] for u in np.asarray(uids)]
            a = _pad_rows(rows, C)
            out[name] = torch.from_numpy(a.astype(np.int64) if a.dtype in (np.uint16, np.int32) else a.astype(np.float32))
        return out
