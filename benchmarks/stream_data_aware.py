"""Data-aware pruning streamed layer by layer against in memory, on a synthetic M2M-100-shaped checkpoint.

    python -m benchmarks.stream_data_aware [--config m2m100_418M] [--method wanda] [--sentences 16] [--no-in-memory]

A random checkpoint of the real config's shapes (fp32, sharded, ``benchmarks.stream_prune_1b2.make_checkpoint``)
with the shipped teacher's tokenizer (its ids fit every M2M-100 vocabulary) is pruned at 45 % with the given method,
calibrated on ``--sentences`` NTREX-128 rows spread evenly over languages, twice side by side in one run, each in a
child process with one thread: ``forgetbench compress-stream`` (layer by layer from the shards, the calibration
activations carried along) and ``forgetbench compress`` (the whole model in memory, layer by layer as well).
Reported: wall time and peak RSS of each, their ratios, the checkpoint's size, and whether the two give the same
masks.
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors import safe_open

from benchmarks.common import environment
from benchmarks.stream_prune_1b2 import make_checkpoint

REPO = Path(__file__).resolve().parents[1]
TOKENIZER_FILES = ("sentencepiece.bpe.model", "tokenizer_config.json", "vocab.json", "added_tokens.json",
                   "special_tokens_map.json", "training.json")


def child(args: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes, its own) of one forgetbench command in its own process."""
    code = ("import resource, sys; from forgetbench.cli import main; rc = main(sys.argv[1:]); "
            "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode:
        sys.exit(p.stderr)
    peak = next(int(ln.split()[1]) for ln in p.stderr.splitlines() if ln.startswith("PEAK "))
    return wall, peak * 1024


def masks_equal(a: Path, b: Path) -> tuple[bool, int]:
    """Whether every weight matrix has the same zeros in both outputs, and how many tensors were compared."""
    def tensors(d):
        out = {}
        for f in sorted(d.glob("model*.safetensors")):
            if f.name.endswith(".sparse.safetensors"):
                continue
            with safe_open(str(f), "pt") as s:
                out |= {k: s.get_tensor(k) for k in s.keys() if k.endswith("proj.weight") or k.endswith("fc1.weight")
                        or k.endswith("fc2.weight")}
        return out
    ta, tb = tensors(a), tensors(b)
    return all(torch.equal(ta[k].half() == 0, tb[k].half() == 0) for k in ta if k in tb), len(set(ta) & set(tb))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/fb-stream-da")
    ap.add_argument("--config", default="m2m100_418M")
    ap.add_argument("--method", default="wanda", choices=("wanda", "sparsegpt"))
    ap.add_argument("--sentences", type=int, default=16)
    ap.add_argument("--no-in-memory", action="store_true")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    w = Path(a.workdir)
    shutil.rmtree(w, ignore_errors=True)
    (w / "ckpt").mkdir(parents=True)
    largest = make_checkpoint(w / "ckpt", 1 << 30, a.config)
    for f in TOKENIZER_FILES:
        if (REPO / "artifacts" / "teacher" / f).is_file():
            shutil.copyfile(REPO / "artifacts" / "teacher" / f, w / "ckpt" / f)
    recipe = w / "recipe.yaml"
    recipe.write_text(json.dumps({"name": f"{a.method}-45", "steps": [{"prune": {
        "method": a.method, "sparsity": 0.45, "calibration": {
            "data": str(REPO / "data" / "calibration" / "ntrex128-calib.tsv"), "max_sentences": a.sentences,
            "choice": "uniform", "batch_size": 8}}}]}))
    total = sum(f.stat().st_size for f in (w / "ckpt").glob("*.safetensors"))
    res = {"config": a.config, "method": a.method, "calibration_sentences": a.sentences, "checkpoint_bytes": total,
           "largest_tensor_bytes": largest, "child_threads": 1}
    wall, peak = child(["compress-stream", str(w / "ckpt"), "--recipe", str(recipe), "--out", str(w / "stream"),
                        "--threads", "1"])
    step = json.loads((w / "stream" / "compression.json").read_text())["steps"][0]["seconds"]
    res["streamed"] = {"wall_s": round(wall, 1), "prune_step_s": step, "peak_rss_bytes": peak,
                       "peak_rss_over_checkpoint": round(peak / total, 3)}
    if not a.no_in_memory:
        wall, peak = child(["compress", str(w / "ckpt"), "--recipe", str(recipe), "--out", str(w / "memory"),
                            "--threads", "1", "--quiet"])
        step = json.loads((w / "memory" / "compression.json").read_text())["steps"][0]["seconds"]
        same, n = masks_equal(w / "memory", w / "stream")
        res["in_memory"] = {"wall_s": round(wall, 1), "prune_step_s": step, "peak_rss_bytes": peak,
                            "peak_rss_over_checkpoint": round(peak / total, 3)}
        res["streamed_over_in_memory"] = {"prune_step": round(res["streamed"]["prune_step_s"] / step, 3),
                                          "peak_rss": round(res["streamed"]["peak_rss_bytes"] / peak, 3)}
        res["same_masks"] = {"equal": same, "matrices": n}
    res["environment"] = environment()
    print(json.dumps(res, indent=2))
    if not a.keep:
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    main()
