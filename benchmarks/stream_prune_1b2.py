"""Streamed pruning of a synthetic sharded M2M-100 1.2B-shaped checkpoint (fp32, ~4.8 GB).

    python -m benchmarks.stream_prune_1b2 [--workdir /tmp/fb-stream] [--keep] [--config m2m100_1.2B] [--shard-mib 1024]

Measured side by side in one run: raw disk bandwidth (copy of one shard, read + write, fsync),
then `forgetbench compress-stream --recipe prune-30` in a child process (its own peak RSS), and
the ratio of its effective bandwidth (bytes read + written / wall time) to the raw one.
Targets (issue 3): >= 50 % of the raw bandwidth; peak RSS <= 3x the largest tensor.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from benchmarks.common import environment


def make_checkpoint(d: Path, shard_bytes: int = 1 << 30, config_name: str = "m2m100_1.2B") -> int:
    from forgetbench.models.device_map import empty_model, load_config

    config = load_config(config_name)
    config.save_pretrained(d)
    model = empty_model(config)
    names = {}
    seen = set()
    for n, p in model.named_parameters():  # tied storage once, like save_pretrained
        if id(p) not in seen:
            seen.add(id(p))
            names[n] = (tuple(p.shape), p.numel())
    g = torch.Generator().manual_seed(0)
    shards, cur, cur_bytes, largest = [], {}, 0, 0
    weight_map = {}

    def flush():
        nonlocal cur, cur_bytes
        if cur:
            fname = f"model-{len(shards) + 1:05d}.safetensors"
            save_file(cur, str(d / fname), metadata={"format": "pt"})
            weight_map.update({k: fname for k in cur})
            shards.append(fname)
            cur, cur_bytes = {}, 0

    for n, (shape, numel) in names.items():
        if cur_bytes + numel * 4 > shard_bytes:
            flush()
        cur[n] = torch.randn(shape, generator=g) * 0.02
        cur_bytes += numel * 4
        largest = max(largest, numel * 4)
    flush()
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return largest


def raw_bandwidth(src: Path, dst: Path) -> float:
    t0 = time.perf_counter()
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while b := fi.read(64 << 20):
            fo.write(b)
        fo.flush()
        os.fsync(fo.fileno())
    dt = time.perf_counter() - t0
    return 2 * src.stat().st_size / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/fb-stream")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--config", default="m2m100_1.2B", help="a known config or a model folder whose config.json "
                                                             "shapes the synthetic checkpoint")
    ap.add_argument("--shard-mib", type=int, default=1024, help="shard size of the synthetic checkpoint")
    a = ap.parse_args()
    w = Path(a.workdir)
    shutil.rmtree(w, ignore_errors=True)
    (w / "ckpt").mkdir(parents=True)
    t0 = time.perf_counter()
    largest = make_checkpoint(w / "ckpt", a.shard_mib << 20, a.config)
    make_s = time.perf_counter() - t0
    total = sum(f.stat().st_size for f in (w / "ckpt").glob("*.safetensors"))
    first = sorted((w / "ckpt").glob("*.safetensors"))[0]
    bw = raw_bandwidth(first, w / "copy.bin")
    (w / "copy.bin").unlink()
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "forgetbench.cli", "compress-stream", str(w / "ckpt"), "--recipe", "prune-30",
                        "--out", str(w / "out"), "--threads", "1"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode:
        sys.exit(p.stderr)
    rep = json.loads((w / "out" / "compression.json").read_text())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    moved = rep["bytes_read"] + rep["bytes_written"]
    res = {"checkpoint_bytes": total, "shards": len(list((w / "ckpt").glob("*.safetensors"))), "make_s": round(make_s, 1),
           "largest_tensor_bytes": largest, "raw_bandwidth_MBps": round(bw / 1e6, 1),
           "stream_wall_s": round(wall, 1), "stream_inner_s": rep["seconds"], "bytes_moved": moved,
           "stream_bandwidth_MBps": round(moved / rep["seconds"] / 1e6, 1),
           "bandwidth_ratio": round(moved / rep["seconds"] / bw, 3),
           "peak_rss_bytes": peak, "peak_rss_over_largest_tensor": round(peak / largest, 2),
           "child_threads": 1, "environment": environment()}
    print(json.dumps(res, indent=2))
    if not a.keep:
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
