"""Copy a distilled student into the repo as fp16 safetensors with its tokenizer, config and run records.

    python scripts/ship_student.py runs/student-kd artifacts/student-kd
"""

import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM

from forgetbench.io import atomic_directory, read_run_log


def main(run: str, out: str) -> None:
    run_p, out_p = Path(run), Path(out)
    if out_p.exists():
        sys.exit(f"{out_p} exists; remove it first")
    model = AutoModelForSeq2SeqLM.from_pretrained(str(run_p / "model"), dtype=torch.float32)
    with atomic_directory(out_p) as tmp:  # a kill leaves no half-shipped folder
        model.half().save_pretrained(tmp)
        for f in ("vocab.json", "sentencepiece.bpe.model", "tokenizer_config.json", "training.json"):
            shutil.copyfile(run_p / "model" / f, tmp / f)
        shutil.copyfile(run_p / "quotas.json", tmp / "quotas.json")
        for log in (run_p / "model" / "signals.jsonl", run_p / "train_log.jsonl"):  # each step once
            (tmp / log.name).write_text("".join(json.dumps(r) + "\n" for r in read_run_log(log)), encoding="utf-8")
    t = json.loads((out_p / "training.json").read_text())
    print(f"shipped {out_p}: {t['parameters']:,} parameters, "
          f"{(out_p / 'model.safetensors').stat().st_size / 2**20:.1f} MiB, {t['steps']} steps")


if __name__ == "__main__":
    main(*sys.argv[1:3])
