"""Pre-training configs (YAML → dataclasses, unknown keys refused): the data, the vocabulary, the encoder variant,
the objectives' settings and the training settings ``train-mt`` uses (``train.config.TrainCfg``).

    data:   {shared: ../../shared/data, treebanks: [../data/ud/UD_English-LinES, ...],
             raw_languages: [en, tr], raw_per_language: 20000, max_pieces: 128}
    spm:    {vocab_size: 8000, character_coverage: 0.9995}
    model:  {variant: ud-prlm, d_model: 256, layers: 4, heads: 4, ffn: 1024, dropout: 0.1, head_mlp: 128, dep_mlp: 64}
    objective: {mask_rate: 0.15, joint_steps: 10000, p: 0.8}
    train:  {seed: 1, max_tokens: 4096, lr: 0.0005, warmup: 1000, steps: 20000, threads: 1, bf16: auto}

``variant``: ``mlm`` (MLM only; with the treebanks' text, the paper's "w/ UD plain text"), ``usl-mlm`` (w/o US
Integration), ``usi-mlm`` (w/o UD pre-training: USL and USI layers, no USL loss) or ``ud-prlm``. ``layers`` is the
baseline's L: a variant with USI builds L − 1 layers below it (§4's layer parity). ``structure``: ``paper`` or
``expected-label`` (the ablation of ``parsing.layers.structure`` rule 3, whose MLPs are ``arc_mlp`` and ``rel_mlp``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from forgetbench.configs import dataclass_from, known_keys, load_yaml_mapping
from forgetbench.errors import ForgetbenchError
from forgetbench.train.config import TrainCfg, settings_hash, train_section, where_free

VARIANTS = ("mlm", "usl-mlm", "usi-mlm", "ud-prlm")
USI_VARIANTS = ("usi-mlm", "ud-prlm")
TREE_VARIANTS = ("usl-mlm", "ud-prlm")  # trained on trees (the USL loss)


@dataclass
class PretrainData:
    shared: str = "../shared/data"  # raw text: the training sides of its WMT news / Tatoeba corpora ("" none)
    treebanks: list = field(default_factory=list)  # UD folders; their *-ud-train.conllu is read
    raw_languages: list = field(default_factory=lambda: ["en"])
    raw_per_language: int = 20000
    max_pieces: int = 128  # longer sentences (in pieces, with <s> and </s>) are left out and counted


@dataclass
class PretrainSpm:
    vocab_size: int = 8000
    character_coverage: float = 0.9995


@dataclass
class PretrainModel:
    variant: str = "ud-prlm"
    d_model: int = 256
    layers: int = 4
    heads: int = 4
    ffn: int = 1024
    dropout: float = 0.1
    arc_mlp: int = 128
    rel_mlp: int = 64
    structure: str = "paper"
    head_mlp: int = 128  # H_head (§4)
    dep_mlp: int = 64  # H_dep


@dataclass
class Objective:
    mask_rate: float = 0.15
    joint_steps: int = 10000  # Algorithm 1's m (the paper: m = n)
    p: float = 0.8  # Algorithm 1's probability of a USL + MLM step after the joint steps (the paper's 0.8)


@dataclass
class PretrainConfig:
    data: PretrainData
    spm: PretrainSpm
    model: PretrainModel
    objective: Objective
    train: TrainCfg
    source: str = ""


def resolve(path: Path, p: str) -> str:
    q = Path(p)
    return str(q if q.is_absolute() else (path.parent / q).resolve())


def load_pretrain_config(path: str | Path) -> PretrainConfig:
    """The config in ``path``, every key and value checked (one line per problem); paths resolve against its folder."""
    path = Path(path)
    raw = load_yaml_mapping(path, "pre-training config")
    sections = {"data": PretrainData, "spm": PretrainSpm, "model": PretrainModel, "objective": Objective,
                "train": TrainCfg}
    known_keys(raw, sections, str(path), kind="section(s)")
    parts = {k: dataclass_from(cls, raw.get(k), f"{path}: {k}") for k, cls in sections.items() if k != "train"}
    parts["train"] = train_section(raw.get("train"), path)
    if parts["train"].temperature != 1.0:
        raise ForgetbenchError(f"{path}: train.temperature is train-mt's (sampling over translation languages); an "
                               "encoder reads its treebanks' text as it is")
    m, d, o = parts["model"], parts["data"], parts["objective"]
    if m.variant not in VARIANTS:
        raise ForgetbenchError(f"{path}: model.variant {m.variant!r}; choose one of {', '.join(VARIANTS)}")
    if m.structure not in ("paper", "expected-label"):
        raise ForgetbenchError(f"{path}: model.structure {m.structure!r}; choose paper or expected-label")
    if m.variant in USI_VARIANTS and m.layers < 2:
        raise ForgetbenchError(f"{path}: model.layers {m.layers}: a {m.variant} encoder builds layers − 1 below its "
                               "USI layer (layer parity); give at least 2")
    if m.d_model % m.heads:
        raise ForgetbenchError(f"{path}: model.d_model {m.d_model} must be a multiple of model.heads")
    if not 0 < o.mask_rate < 1 or not 0 <= o.p <= 1 or o.joint_steps < 0:
        raise ForgetbenchError(f"{path}: objective: mask_rate in (0, 1), p in [0, 1] and joint_steps >= 0; got {o}")
    if m.variant in TREE_VARIANTS and not d.treebanks:
        raise ForgetbenchError(f"{path}: data.treebanks is empty; the {m.variant} variant learns from UD trees")
    d.treebanks = [resolve(path, t) for t in d.treebanks]
    for t in d.treebanks:
        if not any(Path(t).glob("*-ud-train.conllu")):
            raise ForgetbenchError(f"{path}: data.treebanks: {t} has no *-ud-train.conllu")
    d.shared = resolve(path, d.shared) if d.shared else ""
    return PretrainConfig(**parts, source=str(path))


def fingerprint(cfg: PretrainConfig, legacy: bool = False) -> str:
    """Hash of every setting that shapes the weights (a run resumes only a checkpoint made with the same); the
    data as what it reads (``train.config.where_free``: treebanks by content). ``legacy``: the fingerprint of
    checkpoints and encoders written before, which held where the data lay (accepted where they are read)."""
    d = asdict(cfg)
    return settings_hash(d if legacy else d | {"data": where_free(d["data"])})
