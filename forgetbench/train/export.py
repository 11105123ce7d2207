"""The trained model as an ordinary Hugging Face folder (weights, tokenizer, ``training.json``).

Written to ``<run>/model.tmp`` and swapped in as ``<run>/model`` only when complete; a previous
``model`` folder is moved aside first and removed after the swap, so there is always a complete
model folder or the previous one under ``model.old``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from forgetbench.io import atomic_write_json


def export_model(model, tokenizer, out: Path, record: dict, extra_files: tuple[Path, ...] = ()) -> Path:
    """``extra_files`` (run records such as a student's ``signals.jsonl``) are copied in beside the weights."""
    final, tmp, old = out / "model", out / "model.tmp", out / "model.old"
    shutil.rmtree(tmp, ignore_errors=True)
    model.eval()
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    atomic_write_json(tmp / "training.json", record)
    for f in extra_files:
        shutil.copyfile(f, tmp / f.name)
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final
