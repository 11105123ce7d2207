"""Copy a pre-trained encoder into the repo as fp16 safetensors with its vocabulary, config and training record.

    python scripts/ship_encoder.py MODEL [MODEL ...] artifacts/encoders/VARIANT

Each MODEL is a ``pretrain-encoder`` model folder (``config.json``, ``model.safetensors``, ``spm.model``,
``training.json``); several are the segments of one pre-training, in order, each continued from the one before
(``--continue-from``: a run on a lent GPU finished on the CPU, say). A segment is accepted only if its record's
``continued_from`` names the step and the weights' SHA-256 of the segment before it. The weights, config and
vocabulary are the last segment's (its weights as ``parsing.layers.pretrained.load_encoder`` reads them, in the current
layer's names); ``training.json`` is its record plus ``segments`` (each one's steps, tokens,
wall time, device and arithmetic) and ``shipped`` (float16, and the SHA-256 of the float32 weights it rounds).
"""

import json
import shutil
import sys
from pathlib import Path

from safetensors.torch import save_file

from forgetbench.io import atomic_directory, sha256_file
from forgetbench.parsing.layers.pretrained import load_encoder
from forgetbench.train.weights import unique_tensors


def segments(models: list[Path], recs: list[dict]) -> list[dict]:
    segs, step0, tokens0, seconds0 = [], 0, 0, 0.0  # a continuation's record counts from step 0
    for i, (m, r) in enumerate(zip(models, recs, strict=True)):
        cont = r.get("continued_from")
        if i == 0 and cont:
            sys.exit(f"{m} continues an encoder at step {cont['step']}: give that encoder's folder before it")
        before = models[i - 1] / "model.safetensors" if i else None
        if before and (not cont or cont["step"] != step0 or cont["weights_sha256"] != sha256_file(before)):
            sys.exit(f"{m} does not continue {models[i - 1]} (step {step0}): they are not one pre-training")
        env = r.get("environment") or {}
        segs.append({"run": m.resolve().parent.name, "first_step": step0 + 1, "last_step": r["steps"],
                     "tokens": r["tokens"] - tokens0, "train_seconds": round(r["train_seconds"] - seconds0, 1),
                     "stopped_by": r["stopped_by"], "threads": r.get("threads"), "arithmetic": r.get("arithmetic"),
                     "cpu": (env.get("cpu") or {}).get("model"), "gpus": env.get("gpus", []),
                     "optimiser": cont["optimiser"] if cont else "new"})
        step0, tokens0, seconds0 = r["steps"], r["tokens"], r["train_seconds"]
    return segs


def main(*args: str) -> None:
    if len(args) < 2:
        sys.exit(__doc__)
    models, out = [Path(a) for a in args[:-1]], Path(args[-1])
    if out.exists():
        sys.exit(f"{out} exists; remove it first")
    recs = [json.loads((m / "training.json").read_text()) for m in models]
    segs, last = segments(models, recs), models[-1]
    weights = unique_tensors(load_encoder(last)[0])  # read as the current layer reads it (packed q, k, v split)
    rec = recs[-1] | {"segments": segs,
                      "shipped": {"dtype": "float16", "float32_sha256": sha256_file(last / "model.safetensors")}}
    with atomic_directory(out) as tmp:  # a kill leaves no half-shipped folder
        save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()},
                  str(tmp / "model.safetensors"))
        for f in ("config.json", "spm.model"):
            shutil.copyfile(last / f, tmp / f)
        (tmp / "training.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(f"shipped {out}: {sum(v.numel() for v in weights.values()):,} parameters, "
          f"{(out / 'model.safetensors').stat().st_size / 2**20:.1f} MiB, {rec['steps']} steps in {len(segs)} segment(s)")


if __name__ == "__main__":
    main(*sys.argv[1:])
