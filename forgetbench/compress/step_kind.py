"""What every recipe step kind is made of, and what a step runs on: a kind's name, its options' keys, its help line,
how it reads its options into a ``Step`` (``parse``), what it refuses before any work on a path (``check``) and
what it does (``run``); a step's calibration block; the ``Target`` a recipe changes and the ``CalibrationSource``
that runs forward passes over calibration data. Each kind lives in its own module of ``compress.kinds``, found
through that package's one registry; ``compress.recipe`` reads recipes through it, ``compress.apply`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from torch import nn

from forgetbench.compress.prune import OpenTensors
from forgetbench.compress.ptq import QuantState
from forgetbench.configs import known_keys
from forgetbench.errors import ForgetbenchError

CALIB_KEYS = {"data", "max_sentences", "batch_size", "max_length", "seed", "choice", "language", "counts"}
CHOICES = ("sample", "english", "uniform", "proportional", "language", "target")


def fail(where: str, msg: str):
    raise ForgetbenchError(f"{where}: {msg}")


def require_calibration(where: str, calib, what: str, why: str = "") -> None:
    """A kind that calibrates: its step without a calibration block (and no ``--calibration``) is one line."""
    if calib is None:
        fail(where, f"{what} needs calibration data{why}: add calibration: {{data: FILE.tsv}} or pass --calibration "
                    "FILE.tsv")


def calibration_check(step, calibrate, what: str) -> str | None:
    """A calibrating kind's refusal on a path: no calibration source there, or data the source cannot read."""
    if calibrate is None:
        return f"{what} needs calibration forward passes, and this path has no calibration source"
    return calibrate.check(step.calibration)


@dataclass(frozen=True)
class Calibration:
    """A step's calibration set: ``max_sentences`` rows of ``data`` (default: 256 for PTQ, 128 for data-aware pruning)
    chosen by ``choice`` (``calibration.choose``):
    sample (a seeded sample of every row), english (English sources only), uniform (as many per language),
    proportional (per language as its share of ``counts``' training pairs: Multilingual Brain Surgeon), language
    (the rows of one ``language``, either side), target (the rows translating into ``language``: target-language
    calibration; without ``language`` only in a sweep, which routes each pair to the model calibrated on its target
    language)."""

    data: Path
    max_sentences: int = 256
    batch_size: int = 16
    max_length: int = 128
    seed: int = 0
    choice: str = "sample"
    language: str | None = None
    counts: Path | None = None  # a training.json (corpus.train pair counts) for choice: proportional

    @property
    def routed(self) -> bool:
        """choice: target without a language: one calibration per target language, made in a sweep."""
        return self.choice == "target" and self.language is None


@dataclass(frozen=True)
class Step:
    kind: str
    config: Any  # the kind's config (PruneConfig, SmoothConfig, QuantConfig, BnbConfig, ...)
    calibration: Calibration | None = None


@dataclass(frozen=True)
class ParseContext:
    """What a kind's ``parse`` may need beyond its options: the recipe file's folder (relative calibration paths),
    a ``--calibration`` override, the step's position and every step of the recipe (rules across steps)."""

    base: Path
    calibration_override: Path | None
    index: int
    steps: list


@dataclass
class Target:
    """What a recipe changes: ``model``'s parameters in place (``open_tensors`` None), or, streamed, a
    meta-device skeleton whose tensors ``open_tensors`` reads from and writes back to checkpoint shards."""

    model: nn.Module
    open_tensors: OpenTensors | None = None
    units: list[dict] | None = None  # unit map override (default: declared by / inferred from the model)
    diagnose: bool = False  # a quantize step also reports which quantiser pays (compress.diagnosis)

    @property
    def streamed(self) -> bool:
        return self.open_tensors is not None


class CalibrationSource(Protocol):
    def check(self, spec: Calibration | None) -> str | None:
        """Why ``spec`` cannot calibrate this model (None: it can). Called before any work."""

    def forwards(self, spec: Calibration) -> tuple[Callable[[nn.Module], None], dict]:
        """A callable running forward passes over the data, and a record of the data (path, hash, size)."""


StepReport = tuple[dict, QuantState | None]


@dataclass(frozen=True)
class StepKind:
    """A recipe step kind: ``name`` (the recipe's key), ``config_type``, ``keys`` (its options; anything else is
    refused by ``configs.known_keys``), ``help`` (one line for ``forgetbench recipes``), ``parse(opts, where, ctx)``
    -> ``Step``, ``check(step, streamed, calibrate)`` -> why this path cannot run it (None: it can), and
    ``run(target, step, calibrate)`` -> its report and quantisation state."""

    name: str
    config_type: type
    keys: frozenset
    help: str
    parse: Callable[[dict, str, ParseContext], Step]
    check: Callable[[Step, bool, CalibrationSource | None], str | None]
    run: Callable[[Target, Step, CalibrationSource | None], StepReport]


def parse_calibration(where: str, d, base: Path, override: Path | None, max_sentences: int | None = None,
                 alone: bool = False) -> Calibration | None:
    """A step's ``calibration`` block; ``alone``: each sentence runs by itself (batch_size 1: no padded position
    reaches a statistic), and a batch_size other than 1 is refused."""
    if override is not None:
        d = dict(d or {}) | {"data": str(override)}
        base = Path.cwd()
    if d is None:
        return None
    if not isinstance(d, dict) or "data" not in d:
        fail(where, "calibration needs a 'data' key: a TSV of src_lang, tgt_lang, source, target")
    known_keys(d, CALIB_KEYS, f"{where}: calibration")
    path = Path(d["data"])
    path = path if path.is_absolute() else (base / path)
    if not path.is_file():
        fail(where, f"calibration data {path} not found")
    for k in ("max_sentences", "batch_size", "max_length"):
        if k in d and (not isinstance(d[k], int) or isinstance(d[k], bool) or d[k] < 1):
            fail(where, f"calibration.{k} must be a positive integer, got {d[k]!r}")
    if alone and d.get("batch_size", 1) != 1:
        fail(where, f"calibration.batch_size {d['batch_size']}: quantisation calibrates each sentence alone, so that "
                     "no padding reaches a range (docs/METHOD.md §1.2); remove batch_size")
    choice = d.get("choice", "sample")
    if choice not in CHOICES:
        fail(where, f"calibration.choice {choice!r} is unknown; choose one of {', '.join(CHOICES)}")
    if (choice == "language" and "language" not in d) or (choice not in ("language", "target") and "language" in d):
        fail(where, "calibration.language (an M2M-100 code) goes with choice: language or target, and only with them")
    counts = None
    if choice == "proportional":
        if "counts" not in d:
            fail(where, "calibration choice proportional needs counts: a training.json with corpus.train pair counts")
        counts = Path(d["counts"]) if Path(d["counts"]).is_absolute() else base / d["counts"]
        if not counts.is_file():
            fail(where, f"calibration.counts {counts} not found")
        counts = counts.resolve()
    elif "counts" in d:
        fail(where, "calibration.counts goes with choice: proportional")
    d = ({"max_sentences": max_sentences} if max_sentences else {}) | ({"batch_size": 1} if alone else {}) | d
    return Calibration(path.resolve(), **{k: d[k] for k in ("max_sentences", "batch_size", "max_length", "seed") if k in d},
                       choice=choice, language=d.get("language"), counts=counts)
