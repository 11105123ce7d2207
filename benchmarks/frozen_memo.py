"""A frozen encoder's parser trained with and without the per-sentence feature memo, side by side in one run.

    python -m benchmarks.frozen_memo --encoder artifacts/encoders/ud-prlm \\
        --train data/ud/UD_Wolof-WTB/wo_wtb-ud-train.conllu --dev data/ud/UD_Wolof-WTB/wo_wtb-ud-dev.conllu \\
        --epochs 3 [--sentences 400] [--out frozen-memo.json]

Each run: ``parse train --encoder ENC --encoder-lr-scale 0 --tags gold --max-epochs E``, 1 thread, seed 1; the
second with ``memo_frozen`` replaced by a context that keeps nothing (every epoch and dev evaluation reads every
sentence through the encoder again). Reported: each run's seconds per epoch (dev evaluation included, from its
history), the ratio of the later epochs' mean, and whether the two runs' saved weights are equal bit for bit.
"""

import argparse
import contextlib
import json
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from benchmarks.common import environment
from forgetbench.cli import main as cli
from forgetbench.io import atomic_write_json
from forgetbench.parsing import train as train_mod


def _subset(src: Path, n: int | None, dst: Path) -> Path:
    if n is None:
        return src
    blocks = [b for b in src.read_text(encoding="utf-8").split("\n\n") if b.strip()][:n]
    dst.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return dst


def run(args, out: Path, memo: bool) -> dict:
    real = train_mod.memo_frozen
    if not memo:
        train_mod.memo_frozen = lambda model: contextlib.nullcontext()
    try:
        t = time.perf_counter()
        code = cli(["parse", "train", "--train", str(args.train_file), "--dev", str(args.dev_file), "--out", str(out),
                    "--tags", "gold", "--max-epochs", str(args.epochs), "--minutes", "600", "--encoder",
                    str(args.encoder), "--encoder-lr-scale", "0", "--threads", "1", "--seed", "1", "--quiet"])
        wall = time.perf_counter() - t
    finally:
        train_mod.memo_frozen = real
    if code != 0:
        raise SystemExit(f"parse train failed ({code})")
    hist = json.loads((out / "training.json").read_text())["history"]
    ends = [h["elapsed_s"] for h in hist]
    per_epoch = [round(b - a, 2) for a, b in zip([0.0, *ends[:-1]], ends, strict=True)]
    return {"wall_s": round(wall, 2), "seconds_per_epoch": per_epoch, "dev_las": [h["dev_las"] for h in hist]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--encoder", type=Path, required=True)
    ap.add_argument("--train", type=Path, required=True)
    ap.add_argument("--dev", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--sentences", type=int, help="the first N training sentences only")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    env0 = environment()
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        args.train_file, args.dev_file = _subset(args.train, args.sentences, d / "train.conllu"), args.dev
        res = {name: run(args, d / name, memo) for name, memo in (("memo", True), ("read anew", False))}
        w = [load_file(str(d / name / "model.safetensors")) for name in res]
    later = {k: sum(v["seconds_per_epoch"][1:]) / max(1, len(v["seconds_per_epoch"]) - 1) for k, v in res.items()}
    rec = {"encoder": str(args.encoder), "train": str(args.train), "sentences": args.sentences, "epochs": args.epochs,
           "runs": res, "later_epochs_speedup": round(later["read anew"] / later["memo"], 2),
           "weights_equal": w[0].keys() == w[1].keys() and all(torch.equal(w[0][k], w[1][k]) for k in w[0]),
           "environment_start": env0, "environment": environment()}
    if args.out:
        atomic_write_json(args.out, rec)
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
