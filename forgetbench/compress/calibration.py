"""Calibration data for PTQ: a TSV of parallel sentences and a teacher-forced seq2seq forward.

TSV columns: ``src_lang  tgt_lang  source  target`` (M2M-100 language codes, e.g. ``en de``).
**Decision** (docs/METHOD.md §1.2): calibrate on data that is not the test set; the project ships
a slice of NTREX-128 for that (``data/calibration/``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from forgetbench.errors import ForgetbenchError
from forgetbench.io import read_text, sha256_file
from forgetbench.models.hardware import input_device

Row = tuple[str, str, str, str]


def read_calibration_tsv(path: str | Path, max_sentences: int | None = None, seed: int = 0) -> list[Row]:
    path = Path(path)
    if not path.is_file():
        raise ForgetbenchError(f"calibration file {path} not found; give a TSV 'src_lang<TAB>tgt_lang<TAB>source<TAB>target'")
    rows: list[Row] = []
    for i, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 4 or not all(c.strip() for c in cols):
            raise ForgetbenchError(f"{path}:{i}: expected 4 non-empty tab-separated columns (src_lang, tgt_lang, source, target)")
        rows.append((cols[0].strip(), cols[1].strip(), cols[2], cols[3]))
    if not rows:
        raise ForgetbenchError(f"calibration file {path} is empty")
    if max_sentences is not None and len(rows) > max_sentences:
        rows = random.Random(seed).sample(rows, max_sentences)
    return rows


def seq2seq_calibration(tokenizer, rows: list[Row], batch_size: int = 16, max_length: int = 128,
                        progress: bool = False) -> Callable[[nn.Module], None]:
    """A callable running teacher-forced forwards of ``rows`` (grouped by direction, length-sorted)."""
    by_pair: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by_pair.setdefault((r[0], r[1]), []).append(r)
    batches = []
    for (s, t), rs in sorted(by_pair.items()):
        for lang in (s, t):
            if hasattr(tokenizer, "lang_code_to_id") and lang not in tokenizer.lang_code_to_id:
                raise ForgetbenchError(f"calibration language {lang!r} is not a language code of the tokenizer")
        rs = sorted(rs, key=lambda r: len(r[2]))
        batches += [(s, t, rs[i : i + batch_size]) for i in range(0, len(rs), batch_size)]

    def run(model: nn.Module) -> None:
        device = input_device(model)
        for s, t, rs in tqdm(batches, desc="calibrating", disable=None if progress else True, unit="batch"):
            tokenizer.src_lang, tokenizer.tgt_lang = s, t
            enc = tokenizer([r[2] for r in rs], text_target=[r[3] for r in rs], padding=True, truncation=True,
                            max_length=max_length, return_tensors="pt")
            with torch.no_grad():
                model(**{k: v.to(device) for k, v in enc.items()})

    return run


class Seq2SeqCalibration:
    """The MT models' calibration source for ``compress.apply_recipe``: a step's ``calibration`` TSV,
    sampled (``max_sentences``, ``seed``), run teacher-forced through the model with its tokenizer."""

    def __init__(self, tokenizer, progress: bool = False):
        self.tokenizer, self.progress = tokenizer, progress

    def check(self, spec) -> str | None:
        if self.tokenizer is None:
            return "calibration needs the model's tokenizer (tokenizer files in the model folder)"
        if spec is None:
            return "no calibration data: add calibration: {data: FILE.tsv} to the step or pass --calibration FILE.tsv"
        if spec.data.suffix == ".conllu":
            return f"calibration data {spec.data} is CoNLL-U; MT models calibrate on a TSV of parallel sentences"
        return None

    def forwards(self, spec) -> tuple[Callable[[nn.Module], None], dict]:
        rows = read_calibration_tsv(spec.data, spec.max_sentences, spec.seed)
        run = seq2seq_calibration(self.tokenizer, rows, spec.batch_size, spec.max_length, progress=self.progress)
        return run, {"data": str(spec.data), "sha256": sha256_file(spec.data), "sentences": len(rows),
                     "directions": sorted({f"{r[0]}-{r[1]}" for r in rows})}
