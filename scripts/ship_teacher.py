"""Copy a trained teacher into the repo as fp16 safetensors with its tokenizer, config and training record.

    python scripts/ship_teacher.py RUN [RUN ...] artifacts/teacher

Each RUN is a ``train-mt`` run folder (``model/training.json``, ``train_log.jsonl``); several RUNs are the
segments of one training, in order, each warm-started from the one before (a CPU run continued on a lent GPU,
say). The weights are the last segment's. ``training.json`` is the last segment's record plus ``segments`` (each
one's steps, tokens, wall time, device and arithmetic, settings and warm start) and ``total`` (steps, tokens,
wall time and the epochs those tokens make); ``train_log.jsonl`` is every segment's log, each record with its
``segment`` and its ``tokens_total`` (tokens seen since the first segment began).
"""

import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM

from forgetbench.io import atomic_directory
from forgetbench.train.data import Examples


def epoch_tokens(run: Path, max_len: int) -> int | None:
    """Source + target tokens of one pass over the prepared corpus (``train.npz``), as ``train-mt`` counts them."""
    f = run / "train.npz"
    if not f.is_file():
        return None
    ex = Examples(f, max_len)
    return int(ex.src_len.sum() + ex.tgt_len.sum())


def segment(run: Path, rec: dict) -> dict:
    tc = rec["config"]["train"]
    return {"run": run.name, "config": rec["config"].get("source", ""), "steps": rec["steps"], "tokens": rec["tokens"],
            "train_seconds": rec["train_seconds"], "stopped_by": rec["stopped_by"], "threads": rec.get("threads"),
            "arithmetic": rec.get("arithmetic"), "cpu": ((rec.get("environment") or {}).get("cpu") or {}).get("model"),
            "gpus": (rec.get("environment") or {}).get("gpus", []),
            "torch": (rec.get("environment") or {}).get("torch"), "warm_start": rec.get("warm_start"),
            "max_tokens": tc["max_tokens"], "lr": tc["lr"], "warmup": tc["warmup"],
            "dev_sentences": tc["dev_sentences"]}


def main(*args: str) -> None:
    if len(args) < 2:
        sys.exit(__doc__)
    runs, out_p = [Path(a) for a in args[:-1]], Path(args[-1])
    if out_p.exists():
        sys.exit(f"{out_p} exists; remove it first")
    recs = [json.loads((r / "model" / "training.json").read_text()) for r in runs]
    if len({r["spm_sha256"] for r in recs}) != 1:
        sys.exit("the segments' SentencePiece models differ: they are not one training")
    last = runs[-1]
    model = AutoModelForSeq2SeqLM.from_pretrained(str(last / "model"), dtype=torch.float32)
    with atomic_directory(out_p) as tmp:  # a kill leaves no half-shipped folder
        model.half().save_pretrained(tmp)
        for f in ("vocab.json", "sentencepiece.bpe.model", "tokenizer_config.json"):
            shutil.copyfile(last / "model" / f, tmp / f)
        segs = [segment(r, t) for r, t in zip(runs, recs, strict=True)]
        per_epoch = next((e for r in runs if (e := epoch_tokens(r, recs[-1]["config"]["train"]["max_len"]))), None)
        total = {"steps": sum(s["steps"] for s in segs), "tokens": sum(s["tokens"] for s in segs),
                 "train_seconds": round(sum(s["train_seconds"] for s in segs), 1), "epoch_tokens": per_epoch,
                 "epochs_seen": round(sum(s["tokens"] for s in segs) / per_epoch, 2) if per_epoch else None}
        if len(runs) == 1:  # one run: its record and log as they are
            shutil.copyfile(last / "model" / "training.json", tmp / "training.json")
            shutil.copyfile(last / "train_log.jsonl", tmp / "train_log.jsonl")
        else:
            (tmp / "training.json").write_text(json.dumps(recs[-1] | {"segments": segs, "total": total}, indent=1) + "\n")
            lines, offset = [], 0
            for i, (r, s) in enumerate(zip(runs, segs, strict=True)):
                for line in (r / "train_log.jsonl").read_text().splitlines():
                    rec = json.loads(line)
                    if rec["step"] <= s["steps"]:  # records past the segment's last checkpoint are not in its weights
                        lines.append(json.dumps(rec | {"segment": i + 1, "tokens_total": offset + rec["tokens"]}))
                offset += s["tokens"]
            (tmp / "train_log.jsonl").write_text("\n".join(lines) + "\n")
    print(f"shipped {out_p}: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{(out_p / 'model.safetensors').stat().st_size / 2**20:.1f} MiB, {total['steps']} steps in {len(runs)} segment(s)"
          + (f", {total['epochs_seen']} epochs" if total["epochs_seen"] else ""))


if __name__ == "__main__":
    main(*sys.argv[1:])
