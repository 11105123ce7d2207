"""Calibration data for PTQ: a TSV of parallel sentences and a teacher-forced seq2seq forward.

TSV columns: ``src_lang  tgt_lang  source  target`` (M2M-100 language codes, e.g. ``en de``).
**Decision** (docs/METHOD.md §1.2): calibrate on data that is not the test set; the project ships
a slice of NTREX-128 for that (``data/calibration/``).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from forgetbench.errors import ForgetbenchError
from forgetbench.io import read_text, sha256_file, training_counts
from forgetbench.models.generation import encode_sources, set_source_language, target_ids
from forgetbench.models.hardware import input_device
from forgetbench.models.tokenizers import is_nllb

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


def trained_languages(folder) -> set[str] | None:
    """The languages of a model's own training pairs (its ``training.json``), where it has one."""
    f = Path(str(folder)) / "training.json"
    return (set(training_counts(f)) or None) if folder and f.is_file() else None


def _languages(rows: list[Row]) -> dict[str, int]:
    """Rows per non-English language (the calibration choice's realised mix, for the variant's record)."""
    out: dict[str, int] = {}
    for r in rows:
        x = r[1] if r[0] == "en" else r[0]
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items()))


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
            if is_nllb(tokenizer):  # labels in NLLB's training layout whatever the tokenizer's legacy setting
                enc = dict(encode_sources(tokenizer, [r[2] for r in rs], s, t, max_length))
                enc["labels"] = target_ids(tokenizer, [r[3] for r in rs], t, max_length)
            else:
                set_source_language(tokenizer, s, t)
                tokenizer.tgt_lang = t
                enc = tokenizer([r[2] for r in rs], text_target=[r[3] for r in rs], padding=True, truncation=True,
                                max_length=max_length, return_tensors="pt")
            with torch.no_grad():
                model(**{k: v.to(device) for k, v in enc.items()})

    return run


def choose(rows: list[Row], spec, trained: set[str] | None = None) -> list[Row]:
    """The rows of a ``recipe.Calibration``'s choice, ``spec.max_sentences`` of them, seeded: refused in one line when
    the choice leaves fewer rows than asked (so that every variant is calibrated on as many sentences; the plain
    sample takes what there is). ``trained``: the model's training languages (its training.json), where known: rows
    in other languages are not drawn (a range is not set by text the model never learnt to encode), and choice:
    language with another language is refused. Without it, the sample is ``read_calibration_tsv``'s own draw."""
    if trained is not None:
        if spec.choice in ("language", "target") and spec.language not in trained | {"en"}:
            raise ForgetbenchError(f"calibration language {spec.language!r} is not among the model's training languages "
                                   f"({', '.join(sorted(trained))}; its training.json)")
        rows = [r for r in rows if {r[0], r[1]} <= trained | {"en"}]
        if not rows:
            raise ForgetbenchError(f"calibration data {spec.data}: no row is in the model's training languages "
                                   f"({', '.join(sorted(trained))}; its training.json)")
    rng, n = random.Random(spec.seed), spec.max_sentences
    other = lambda r: r[1] if r[0] == "en" else r[0]  # noqa: E731 - a row's non-English language
    if spec.choice == "sample":
        return rng.sample(rows, n) if len(rows) > n else rows
    if spec.choice == "english":
        pool = [r for r in rows if r[0] == "en"]
    elif spec.choice == "language":
        pool = [r for r in rows if spec.language in (r[0], r[1])]
    elif spec.choice == "target":
        pool = [r for r in rows if r[1] == spec.language]
    else:
        by: dict[str, list[Row]] = {}
        for r in rows:
            by.setdefault(other(r), []).append(r)
        langs = sorted(by)
        if spec.choice == "uniform":
            share = {x: 1.0 for x in langs}
        else:
            train = training_counts(spec.counts)
            share = {x: float(train.get(x, 0)) for x in langs}
            if not sum(share.values()):
                raise ForgetbenchError(f"calibration: {spec.counts} counts none of the calibration languages {langs}")
        quota = _largest_remainder(share, n)
        short = [x for x in langs if quota[x] > len(by[x])]
        if short:
            raise ForgetbenchError(f"calibration choice {spec.choice}: {short[0]} needs {quota[short[0]]} rows, "
                                   f"{spec.data} has {len(by[short[0]])}; lower max_sentences or give more data")
        return [r for x in langs for r in rng.sample(by[x], quota[x])]
    if len(pool) < n:
        what = {"language": f"language {spec.language}", "target": f"target language {spec.language}"}.get(
            spec.choice, "English sources")
        raise ForgetbenchError(f"calibration choice {spec.choice}: {spec.data} has {len(pool)} rows with {what}, "
                               f"max_sentences asks {n}; lower max_sentences or give more data")
    return rng.sample(pool, n)


def _largest_remainder(share: dict[str, float], n: int) -> dict[str, int]:
    """Integer quotas summing to ``n`` in proportion to ``share`` (largest remainders, ties by name)."""
    total = sum(share.values())
    exact = {x: n * s / total for x, s in share.items()}
    quota = {x: int(v) for x, v in exact.items()}
    for x in sorted(exact, key=lambda x: (-(exact[x] - quota[x]), x))[: n - sum(quota.values())]:
        quota[x] += 1
    return quota


class Seq2SeqCalibration:
    """The MT models' calibration source for ``compress.apply_recipe``: a step's ``calibration`` TSV,
    sampled (``max_sentences``, ``seed``), run teacher-forced through the model with its tokenizer."""

    def __init__(self, tokenizer, progress: bool = False):
        self.tokenizer, self.progress = tokenizer, progress
        self._rows: dict = {}

    def check(self, spec) -> str | None:
        if self.tokenizer is None:
            return "calibration needs the model's tokenizer (tokenizer files in the model folder)"
        if spec is None:
            return "no calibration data: add calibration: {data: FILE.tsv} to the step or pass --calibration FILE.tsv"
        if spec.data.suffix == ".conllu":
            return f"calibration data {spec.data} is CoNLL-U; MT models calibrate on a TSV of parallel sentences"
        if getattr(spec, "routed", False):
            return ("calibration choice target without language: a sweep routes each pair to the model calibrated on "
                    "its target language; to compress one model, give calibration.language")
        try:  # every choice, the plain sample too: the rows' languages are checked before any work
            rows = self.rows(spec)
        except ForgetbenchError as e:
            return str(e)
        langs = {x for r in rows for x in r[:2]}
        if is_nllb(self.tokenizer):  # NLLB: which of the two ways a name fails (no mapping, a code not held)
            for x in sorted(langs):
                try:
                    self.tokenizer.code_of(x)
                except ForgetbenchError as e:
                    return f"calibration data {spec.data}: {e}"
        codes = getattr(self.tokenizer, "lang_code_to_id", None)
        lacking = sorted(langs - set(codes)) if codes is not None else []
        if lacking:
            return f"calibration language(s) {lacking} are not language codes of the model's tokenizer"
        return None

    @functools.cached_property
    def trained(self) -> set[str] | None:
        return trained_languages(getattr(self.tokenizer, "name_or_path", ""))

    def rows(self, spec) -> list[Row]:
        """The step's calibration rows (``choose``); read once per step, however many times the recipe is checked."""
        if spec not in self._rows:
            self._rows[spec] = choose(read_calibration_tsv(spec.data), spec, self.trained)
        return self._rows[spec]

    def forwards(self, spec) -> tuple[Callable[[nn.Module], None], dict]:
        choice, rows = getattr(spec, "choice", "sample"), self.rows(spec)
        run = seq2seq_calibration(self.tokenizer, rows, spec.batch_size, spec.max_length, progress=self.progress)
        return run, {"data": str(spec.data), "sha256": sha256_file(spec.data), "sentences": len(rows),
                     "directions": sorted({f"{r[0]}-{r[1]}" for r in rows}),
                     "languages_from": "the model's training.json" if self.trained is not None else
                     "every row (the model folder has no training.json)"} | (
                         {"choice": choice, "language": spec.language, "languages": _languages(rows)}
                         if choice != "sample" else {})
