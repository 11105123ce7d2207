"""Copy a trained teacher into the repo as fp16 safetensors with its tokenizer, config and training record.

    python scripts/ship_teacher.py runs/teacher artifacts/teacher
"""

import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM


def main(run: str, out: str) -> None:
    run_p, out_p = Path(run), Path(out)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(run_p / "model"), dtype=torch.float32)
    if out_p.exists():
        sys.exit(f"{out_p} exists; remove it first")
    out_p.mkdir(parents=True)
    model.half().save_pretrained(out_p)
    for f in ("vocab.json", "sentencepiece.bpe.model", "tokenizer_config.json", "training.json"):
        shutil.copyfile(run_p / "model" / f, out_p / f)
    shutil.copyfile(run_p / "train_log.jsonl", out_p / "train_log.jsonl")
    t = json.loads((out_p / "training.json").read_text())
    print(f"shipped {out_p}: {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{(out_p / 'model.safetensors').stat().st_size / 2**20:.1f} MiB, {t['steps']} steps")


if __name__ == "__main__":
    main(*sys.argv[1:3])
