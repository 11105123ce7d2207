"""The teacher cache: top-k + sampled-tail targets (``loss.teacher_targets``) for the examples a run's KD steps
use, written as they are first needed and read by every KD step (no teacher forward in the loop).

Layout of a cache folder:

- ``building.json``: the keys it is being built for (written first; a folder being built for another
  teacher or sample is refused);
- ``shard-00000.safetensors`` …: per shard of up to ``SHARD`` unique examples, their ids (``uid``) and flat
  arrays over their content positions (``top_ids``, ``top_q`` fp16, ``tail_ids``, ``tail_logq`` fp16,
  ``tail_mass`` fp32) and ``off`` (positions per example); each written to a temporary name and renamed, so a
  killed build resumes with the examples no complete shard holds;
- ``cache.json``: the manifest, written last (format tag, teacher weights SHA-256, the sample's keys,
  T, k, m, the examples held, positions, bytes, seconds). Only a folder with a manifest is a cache.

Rules:

1. *What is built.* ``build_cache(..., uids)`` adds shards for the unique examples of ``uids`` that no shard in
   the folder holds (all of the sample's when ``uids`` is None): a run builds what its KD steps will use
   (``DistillData.kd_uids``: the batches of steps ``phase1_steps + 1 … steps``), so a 20-step run computes the
   targets of a few hundred examples, not the sample's tens of thousands; a longer run of the same teacher and
   data adds the rest.
2. *Per-example draws.* An example's tail draws use a generator seeded by (seed, its unique id), so its
   entries do not depend on which build, shard or batch computed them.
3. No pickle: safetensors (numpy) only. Ids are uint16 when the vocabulary fits, else int32. A cache made by
   another teacher, another sample (``data_key`` from the config before any work, ``data_sha256`` from the
   ids on disk after) or other T/k/m is refused in one line. Shards written before rule 1 (no ``uid``) hold the
   contiguous ids their manifest entry gives (``first``, ``count``).
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


def cache_keys(teacher_sha256: str, data_key: str, temperature: float, k: int, m: int, vocab: int,
               draws: int = 1) -> dict:
    """A cache's identity; ``draws`` (R independent tail samples per position) only where above 1, so a cache of
    one draw keeps the keys it was made with."""
    return {"format": FORMAT, "teacher_sha256": teacher_sha256, "data_key": data_key, "temperature": temperature,
            "top_k": k, "tail_samples": m, "vocab_size": vocab} | ({"tail_draws": draws} if draws > 1 else {})


def earlier_keys(folder: Path, keys: dict, legacy_data_key: str) -> dict:
    """``keys`` with the data key written before (it held where the sample folder lay) where the cache in
    ``folder`` (finished or being built) was made with it: the same settings, so the cache stands."""
    for name in ("cache.json", "building.json"):
        f = folder / name
        if f.is_file():
            try:
                man = json.loads(f.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                return keys  # check_manifest says what is wrong
            return keys | {"data_key": legacy_data_key} if man.get("data_key") == legacy_data_key else keys
    return keys


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
    if man.get("tail_draws", 1) != keys.get("tail_draws", 1):
        raise ForgetbenchError(f"kd.cache {folder}: holds {man.get('tail_draws', 1)} tail draw(s) per position, kd.tail_draws "
                               f"is {keys.get('tail_draws', 1)}; use a cache made with it, or leave kd.cache empty")
    if data_sha256 is not None and man.get("data_sha256") != data_sha256:
        raise ForgetbenchError(f"kd.cache {folder}: made from other token ids (data_sha256 {man.get('data_sha256', '')[:16]} "
                               f"vs {data_sha256[:16]}); leave kd.cache empty to rebuild")
    return man


def _pad_rows(rows: list[np.ndarray], width: int, fill=0) -> np.ndarray:
    out = np.full((len(rows), width, *rows[0].shape[1:]), fill, dtype=rows[0].dtype)
    for r, a in enumerate(rows):
        out[r, : len(a)] = a
    return out


def shard_uids(folder: Path, entry: dict | None = None, path: Path | None = None) -> np.ndarray:
    """The unique ids a shard holds: its ``uid`` array, or (rule 3) the contiguous range of its manifest entry."""
    from safetensors import safe_open

    path = path or folder / entry["file"]
    with safe_open(str(path), framework="np") as f:
        if "uid" in f.keys():
            return f.get_tensor("uid")
    if entry is None or "first" not in entry:
        raise ForgetbenchError(f"{path}: a teacher cache shard without its example ids; rebuild the cache")
    return np.arange(entry["first"], entry["first"] + entry["count"])


def _held(folder: Path) -> dict[str, np.ndarray]:
    """Every complete shard in ``folder`` and the ids it holds (the manifest's entries for shards without ids)."""
    entries = {}
    if (folder / "cache.json").is_file():
        entries = {e["file"]: e for e in json.loads((folder / "cache.json").read_text()).get("shards", [])}
    return {p.name: shard_uids(folder, entries.get(p.name), p) for p in sorted(folder.glob("shard-*.safetensors"))}


@torch.no_grad()
def build_cache(folder: Path, keys: dict, data, teacher, seed: int, max_tokens: int, bf16: bool = False,
                progress: bool = True, log=print, uids=None) -> dict:
    """Teacher targets for the unique examples ``uids`` of ``data`` (a ``DistillData``; None: all of them) that
    ``folder`` does not hold yet (rule 1); returns the manifest of everything it holds."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from forgetbench.distill.loss import teacher_targets

    folder.mkdir(parents=True, exist_ok=True)
    data_sha = data.sample_sha256()
    record = keys | {"data_sha256": data_sha}
    b = folder / "building.json"
    if b.is_file() and json.loads(b.read_text()) != record:
        raise ForgetbenchError(f"{folder}: a teacher cache for other keys is being built here; use another folder")
    done = folder / "cache.json"
    if done.is_file():  # its shards are extended, never mixed with another teacher's or sample's
        man = json.loads(done.read_text())
        if {k: man.get(k) for k in record} != record:
            raise ForgetbenchError(f"{folder}: holds a teacher cache for other keys (another teacher, data or KD "
                                   "settings); use another folder")
    atomic_write_json(b, record)
    t0 = time.perf_counter()
    n_unique = len(data.unique_keys)
    held = _held(folder)
    have = np.concatenate([np.zeros(0, np.int64), *held.values()])
    want = np.arange(n_unique) if uids is None else np.unique(np.asarray(uids, dtype=np.int64))
    need = np.setdiff1d(want, have)
    first = np.zeros(n_unique, np.int64)  # a plan entry for each unique example
    first[data.uid[::-1]] = np.arange(len(data.uid))[::-1]
    id_dtype = np.uint16 if keys["vocab_size"] <= 65535 else np.int32
    k, m, T = keys["top_k"], keys["tail_samples"] * keys.get("tail_draws", 1), keys["temperature"]
    index = max((int(n[6:11]) for n in held), default=-1) + 1
    bar = Console("distill", quiet=not progress or not len(need)).stage("teacher cache", len(need), "examples")
    for start in range(0, len(need), SHARD):
        uids_s = need[start : start + SHARD]
        path = folder / f"shard-{index:05d}.safetensors"
        index += 1
        entries = first[uids_s]
        lens = np.maximum(data.src_len[entries], data.tgt_len[entries])
        order = np.argsort(lens, kind="stable")
        per_uid: list[dict | None] = [None] * len(uids_s)
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
            c0 = int(batch["teacher_content_start"])
            for r, u in enumerate(sel):  # rule 2: each example's draws from its own generator
                n = int(batch["content_len"][r])
                gen = torch.Generator().manual_seed(seed * 1_000_003 + int(uids_s[u]))
                t = teacher_targets(logits[r, c0 : c0 + n].float().cpu(), T, k, m, gen)
                per_uid[u] = {name: v.numpy() for name, v in t.items()}
            bar.update(bar.done + len(sel))
            i = j
        arrays = {
            "uid": uids_s.astype(np.int64),
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
        held[path.name] = uids_s
    bar.close()
    old = json.loads((folder / "cache.json").read_text()) if (folder / "cache.json").is_file() else {}
    shards, positions, size = [], 0, 0
    for name, ids in held.items():
        p = folder / name
        size += p.stat().st_size
        shards.append({"file": name, "count": len(ids)} | ({"first": int(ids[0])} if len(ids) and np.array_equal(
            ids, np.arange(ids[0], ids[0] + len(ids))) else {}))
        with safe_open(str(p), framework="np") as f:
            positions += int(f.get_slice("tail_mass").get_shape()[0])
    examples = sum(len(ids) for ids in held.values())
    seconds = round(old.get("seconds", 0) + time.perf_counter() - t0, 1)
    man = record | {"shards": shards, "examples": examples, "sample_examples": n_unique, "positions": positions,
                    "bytes": size, "bytes_per_million_positions": round(size / max(positions, 1) * 1e6),
                    "seconds": seconds}
    atomic_write_json(folder / "cache.json", man)
    if len(need):
        log(f"teacher cache: {len(need):,} examples added ({examples:,} of the sample's {n_unique:,} held), "
            f"{positions:,} target positions, {size / 2**20:.1f} MiB "
            f"({man['bytes_per_million_positions'] / 2**20:.1f} MiB per million target tokens) in {seconds} s")
    return man


class TeacherCache:
    """A finished cache, read where it lies: ``lookup(uids, C)`` gives padded target tensors [B, C, ·], reading each
    example's rows from its shard (safetensors slices over the file's memory map) — in memory only the index (a
    shard, start and length per unique example), so a cache of the whole corpus costs its index, not its size."""

    NAMES = ("top_ids", "top_q", "tail_ids", "tail_logq", "tail_mass")

    def __init__(self, folder: Path, manifest: dict):
        from safetensors import safe_open

        self.folder = folder
        self.files = [safe_open(str(folder / s["file"]), framework="np") for s in manifest["shards"]]
        ids = [f.get_tensor("uid") if "uid" in f.keys() else shard_uids(folder, s)
               for f, s in zip(self.files, manifest["shards"], strict=True)]
        n = max((int(i.max()) + 1 for i in ids if len(i)), default=0)
        self.shard = np.full(n, -1, np.int32)
        self.start = np.full(n, -1, np.int64)
        self.length = np.zeros(n, np.int64)
        for k, (f, i) in enumerate(zip(self.files, ids, strict=True)):
            off = f.get_tensor("off")
            self.shard[i], self.start[i], self.length[i] = k, off[:-1], np.diff(off)
        self.slices = [{name: f.get_slice(name) for name in self.NAMES} for f in self.files]

    def holds(self, uids) -> np.ndarray:
        """Which of ``uids`` the cache has entries for."""
        u = np.asarray(uids, dtype=np.int64)
        ok = u < len(self.start)
        ok[ok] = self.start[u[ok]] >= 0
        return ok

    def lookup(self, uids, C: int, draws=None, m: int | None = None) -> dict[str, torch.Tensor]:
        """Padded targets [B, C, ·] of ``uids``; with ``draws`` (one per row) and ``m``, the tail columns of that
        draw alone (``m`` of the R·m stored per position)."""
        missing = ~self.holds(uids)
        if missing.any():
            raise ForgetbenchError(f"teacher cache {self.folder}: no entries for {int(missing.sum())} example(s) of this "
                                   "batch (e.g. unique id {}); it was built for fewer steps: leave kd.cache empty to "
                                   "build this run's own".format(int(np.asarray(uids)[missing][0])))
        out = {}
        r_of = None if draws is None else np.asarray(draws, dtype=np.int64)
        for name in self.NAMES:
            rows = []
            for n, u in enumerate(np.asarray(uids)):
                a = int(self.start[u])
                row = self.slices[self.shard[u]][name][a: a + int(min(self.length[u], C))]
                if r_of is not None and name in ("tail_ids", "tail_logq"):
                    row = row[:, int(r_of[n]) * m: (int(r_of[n]) + 1) * m]
                rows.append(row)
            a = _pad_rows(rows, C)
            out[name] = torch.from_numpy(a.astype(np.int64) if a.dtype in (np.uint16, np.int32) else a.astype(np.float32))
        return out
