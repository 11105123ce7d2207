"""Training configurations (YAML → dataclasses, unknown keys refused) and the fingerprint that ties a
checkpoint to the settings that shape its weights.

    data:  {shared: ../../shared/data, languages: [de, fr], dev_per_language: 100, max_chars: 300}
    spm:   {vocab_size: 8000, character_coverage: 0.9995, sample_per_language: 20000}
    model: {d_model: 256, encoder_layers: 4, decoder_layers: 3, heads: 4, ffn: 1024, dropout: 0.1}
    train: {seed: 1, max_tokens: 4096, lr: 0.001, warmup: 1000, steps: 3600, ...}
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from forgetbench.errors import ForgetbenchError


@dataclass
class DataCfg:
    shared: str = "../shared/data"
    languages: list = field(default_factory=lambda: ["de", "fr"])
    dev_per_language: int = 100
    max_chars: int = 300


@dataclass
class SpmCfg:
    vocab_size: int = 8000
    character_coverage: float = 0.9995
    sample_per_language: int = 20000


@dataclass
class ModelCfg:
    d_model: int = 256
    encoder_layers: int = 4
    decoder_layers: int = 3
    heads: int = 4
    ffn: int = 1024
    dropout: float = 0.1
    max_positions: int = 256


@dataclass
class TrainCfg:
    seed: int = 1
    max_tokens: int = 4096  # source + target tokens per batch
    max_len: int = 128
    lr: float = 1e-3
    warmup: int = 1000
    steps: int = 10000
    time_budget_minutes: float = 0.0  # 0 = no limit; else stop (and say so) when reached
    label_smoothing: float = 0.1
    weight_decay: float = 0.0
    clip: float = 1.0
    bf16: bool = True
    threads: int = 1
    checkpoint_minutes: float = 10.0
    dev_every: int = 1000
    dev_sentences: int = 16
    dev_directions: list = field(default_factory=list)


@dataclass
class TrainMTConfig:
    data: DataCfg
    spm: SpmCfg
    model: ModelCfg
    train: TrainCfg
    source: str = ""


def load_config(path: str | Path) -> TrainMTConfig:
    path = Path(path)
    if not path.is_file():
        raise ForgetbenchError(f"config {path} not found")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    parts = {}
    for key, cls in (("data", DataCfg), ("spm", SpmCfg), ("model", ModelCfg), ("train", TrainCfg)):
        sec = raw.get(key) or {}
        known = set(cls.__dataclass_fields__)
        extra = set(sec) - known
        if extra:
            raise ForgetbenchError(f"{path}: {key}: unknown key(s) {sorted(extra)}; allowed: {', '.join(sorted(known))}")
        parts[key] = cls(**sec)
    extra = set(raw) - {"data", "spm", "model", "train"}
    if extra:
        raise ForgetbenchError(f"{path}: unknown section(s) {sorted(extra)}; allowed: data, spm, model, train")
    cfg = TrainMTConfig(**parts, source=str(path))
    shared = Path(cfg.data.shared)
    if not shared.is_absolute():
        cfg.data.shared = str((path.parent / shared).resolve() if (path.parent / shared).exists() else shared.resolve())
    if not Path(cfg.data.shared).is_dir():
        raise ForgetbenchError(f"{path}: data.shared {cfg.data.shared} is not a folder (the shared data directory)")
    return cfg


_RUN_ONLY = {"steps", "time_budget_minutes", "checkpoint_minutes", "dev_every", "dev_sentences", "dev_directions"}


def fingerprint(cfg: TrainMTConfig) -> str:
    """Hash of every setting that shapes the weights (not how long or how often to checkpoint/evaluate), so a
    run can only resume from a checkpoint made with the same data, vocabulary, model and optimiser."""
    d = asdict(cfg)
    d.pop("source", None)
    d["train"] = {k: v for k, v in d["train"].items() if k not in _RUN_ONLY}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
