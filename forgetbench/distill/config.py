"""Distillation configs (YAML → dataclasses; every key, type, path and language checked before any work).

    name: student-kd
    teacher: {path: ../artifacts/teacher, device_map: null}      # device_map: accelerate map for the teacher
    student: {init: null, encoder_layers: 4, decoder_layers: 1, copy: first, format: small100}
    data:
      shared: ../../shared/data       # the teacher's corpus (evaluation sets filtered out), or per-language TSVs:
      corpora: {}                     # {sw: corpora/en-sw.tsv}: "english<TAB>foreign" lines, read streaming, or a
                                      # datasets folder (save_to_disk) with en and sw columns
      languages: [de, sw]
      sampling: uniform               # uniform (same budget per pair) | temperature
      budget: 3000                    # examples per pair; temperature sampling spreads budget × pairs
      temperature: 5.0
      dev_per_language: 100
      max_chars: 300
      tiers: [1000, 10000, 30000]     # training-pair bounds of Very-Low / Low / Medium / High
    kd:
      source: cache                   # cache | online | none (the no-KD twin)
      alpha: 1.0
      alpha_mode: fixed               # fixed | learned (α = exp(−s), + s; docs/METHOD.md §3)
      temperature: 1.0
      top_k: 8
      tail_samples: 8
      cache: null                     # a teacher cache folder to reuse (default <run>/teacher-cache)
    train: {seed: 1, max_tokens: 4096, lr: 0.0005, warmup: 200, phase1_steps: 300, steps: 1800, ...}
    hardware: {device: cpu, dtype: float32}   # models.hardware; the teacher in dtype, the student fp32 with
                                              # autocast in it (bfloat16, float16); device_map places the teacher
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from forgetbench.configs import dataclass_from, expect, is_type, known_keys, load_yaml_mapping
from forgetbench.errors import ForgetbenchError
from forgetbench.models.hardware import Hardware, parse_hardware
from forgetbench.models.hub import resolve_model
from forgetbench.train.config import train_section

SAMPLING = ("uniform", "temperature")
KD_SOURCES = ("cache", "online", "none")
COPY = ("first", "strided")
FORMATS = ("small100", "m2m")


@dataclass
class TeacherCfg:
    path: str = ""
    device_map: object = None  # None: the student's device; "auto" or an accelerate map


@dataclass
class StudentCfg:
    init: str = ""  # model folder the student copies its layers from; "" = the teacher
    encoder_layers: int = 4
    decoder_layers: int = 1
    copy: str = "first"
    format: str = "small100"


@dataclass
class DistillDataCfg:
    shared: str = ""
    corpora: dict = field(default_factory=dict)
    languages: list = field(default_factory=list)
    sampling: str = "uniform"
    budget: int = 3000
    temperature: float = 5.0
    dev_per_language: int = 100
    max_chars: int = 300
    tiers: list = field(default_factory=lambda: [1000, 10000, 30000])
    sample: str = ""  # a folder of <lang>.tsv used, with a warning, when data.shared is not there (a clone)


@dataclass
class KDCfg:
    source: str = "cache"
    alpha: float = 1.0
    alpha_mode: str = "fixed"
    temperature: float = 1.0
    top_k: int = 8
    tail_samples: int = 8
    tail_draws: int = 1  # independent tail samples stored per position; an example's n-th use reads draw n mod R
    cache: str = ""
    alpha_directions: dict = field(default_factory=dict)  # {en-sw: 0.0}: α of those directions' KD term


@dataclass
class DistillTrainCfg:
    seed: int = 1
    max_tokens: int = 4096
    max_len: int = 128
    lr: float = 5e-4
    warmup: int = 200
    phase1_steps: int = 300
    steps: int = 1800
    label_smoothing: float = 0.1
    dropout: float = 0.1
    attention_dropout: float = 0.0  # on the attention weights (the thesis: 0.1, Table 6.8); 0 keeps the teacher's
    clip: float = 1.0
    bf16: bool | str = "auto"  # auto | true | false: bfloat16 autocast on the CPU, chosen as train-mt's (train.arithmetic)
    threads: int = 1
    checkpoint_minutes: float = 5.0
    log_every: int = 50
    signal_every: int = 300
    signal_sentences: int = 8
    dev_every: int = 0  # the dev chrF for early stopping (train.early_stop) every so many steps; 0: never
    dev_sentences: int = 50  # the first dev pairs of each direction it translates
    patience: int = 0  # measurements without improvement before the run stops; 0: never
    min_delta: float = 0.0
    cooldown: int = 0  # the last so many steps decay the learning rate linearly (train.loop.cooled); needs patience 0


@dataclass
class DistillConfig:
    name: str
    teacher: TeacherCfg
    student: StudentCfg
    data: DistillDataCfg
    kd: KDCfg
    train: DistillTrainCfg
    source: str = ""
    hardware: Hardware = field(default_factory=Hardware)  # the teacher's placement and dtype; the student's device

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """English-centric directions, both ways, in config order."""
        return [p for x in self.data.languages for p in (("en", x), (x, "en"))]


def _resolve(base: Path, p: str) -> str:
    q = Path(p).expanduser()
    return str(q if q.is_absolute() else (base / q).resolve())


def load_distill_config(path: str | Path) -> DistillConfig:
    """The config in ``path``; paths resolve against its folder. Problems end in one line naming the key."""
    path = Path(path)
    raw = load_yaml_mapping(path, "distillation config")
    keys = {"name", "teacher", "student", "data", "kd", "train", "hardware"}
    known_keys(raw, keys, str(path))
    parts = {k: dataclass_from(cls, raw.get(k), f"{path}: {k}") for k, cls in
             (("teacher", TeacherCfg), ("student", StudentCfg), ("data", DistillDataCfg), ("kd", KDCfg))}
    parts["train"] = train_section(raw.get("train"), path, DistillTrainCfg)
    base = path.parent.resolve()
    cfg = DistillConfig(name=str(raw.get("name") or path.stem), **parts, source=str(path),
                        hardware=parse_hardware(raw.get("hardware"), f"{path}: hardware", base))
    if cfg.teacher.device_map is not None and cfg.hardware.device_map is not None:
        raise ForgetbenchError(f"{path}: teacher.device_map and hardware.device_map both place the teacher; keep one "
                               "(hardware.device_map)")
    if not cfg.teacher.path:
        raise ForgetbenchError(f"{path}: teacher.path (the teacher's model folder) is required")
    cfg.teacher.path = str(resolve_model(cfg.teacher.path, f"{path}: teacher.path", base).folder)  # or a hub id
    cfg.student.init = (str(resolve_model(cfg.student.init, f"{path}: student.init", base).folder)
                        if cfg.student.init else cfg.teacher.path)
    _check_choices(path, cfg)
    _check_numbers(path, cfg)
    d = cfg.data
    if not d.languages:
        raise ForgetbenchError(f"{path}: data.languages is empty; list the languages to pair with English")
    if len(set(d.languages)) != len(d.languages) or "en" in d.languages:
        raise ForgetbenchError(f"{path}: data.languages {d.languages} repeats a language or lists en "
                               "(pairs are English-centric: list the other side only)")
    cfg.data_note = None
    if d.shared and d.sample and not Path(_resolve(base, d.shared)).is_dir():
        from forgetbench.train.config import sample_fallback

        cfg.data_note = sample_fallback(d, _resolve(base, d.shared), Path(_resolve(base, d.sample)), path,
                                        "distilling", "a real student")
        d.shared = ""
    corpora = {}
    for lang, f in d.corpora.items():
        corpora[str(lang)] = _resolve(base, expect(f, str, f"{path}: data.corpora.{lang}"))
        if Path(corpora[str(lang)]).is_dir():  # a datasets folder (save_to_disk): readable, with both columns
            from forgetbench.eval.hf_datasets import parallel_rows

            if not parallel_rows(f"{path}: data.corpora.{lang}", corpora[str(lang)], "en", str(lang)):
                raise ForgetbenchError(f"{path}: data.corpora.{lang}: {corpora[str(lang)]} has no row with en and {lang}")
        elif not Path(corpora[str(lang)]).is_file():
            raise ForgetbenchError(f"{path}: data.corpora.{lang}: {corpora[str(lang)]} not found (a TSV file or a "
                                   "datasets folder)")
        if lang not in d.languages:
            raise ForgetbenchError(f"{path}: data.corpora.{lang}: {lang!r} is not in data.languages {d.languages}")
    d.corpora = corpora
    if d.shared:
        d.shared = _resolve(base, d.shared)
        if not Path(d.shared).is_dir():
            raise ForgetbenchError(f"{path}: data.shared {d.shared} is not a folder (the shared data directory)")
    missing = [x for x in d.languages if x not in corpora]
    if missing and not d.shared:
        raise ForgetbenchError(f"{path}: no corpus for {missing}: give data.shared or data.corpora.<lang>")
    if missing and d.shared:
        from forgetbench.train.corpus import SOURCES

        unknown = [x for x in missing if x not in SOURCES]
        if unknown:
            raise ForgetbenchError(f"{path}: data.languages: unknown language(s) {unknown}: no training corpus in "
                                   f"data.shared (known: {', '.join(sorted(SOURCES))}); give data.corpora.<lang>")
    if cfg.kd.cache:
        cfg.kd.cache = _resolve(base, cfg.kd.cache)
    return cfg


def _check_choices(path: Path, cfg: DistillConfig) -> None:
    for where, value, allowed in (("data.sampling", cfg.data.sampling, SAMPLING), ("kd.source", cfg.kd.source, KD_SOURCES),
                                  ("kd.alpha_mode", cfg.kd.alpha_mode, ("fixed", "learned")),
                                  ("student.copy", cfg.student.copy, COPY), ("student.format", cfg.student.format, FORMATS)):
        if value not in allowed:
            raise ForgetbenchError(f"{path}: {where} must be one of {', '.join(allowed)}, got {value!r}")


def _check_numbers(path: Path, cfg: DistillConfig) -> None:
    positive = (("student", ("encoder_layers", "decoder_layers")), ("data", ("budget", "max_chars")),
                ("kd", ("top_k", "tail_samples", "tail_draws")),
                ("train", ("max_tokens", "max_len", "warmup", "steps", "threads", "log_every", "signal_every",
                           "signal_sentences")))
    for sec, keys in positive:
        for k in keys:
            if getattr(getattr(cfg, sec), k) < 1:
                raise ForgetbenchError(f"{path}: {sec}.{k} must be at least 1, got {getattr(getattr(cfg, sec), k)}")
    t = cfg.train
    if not 0 <= t.phase1_steps <= t.steps:
        raise ForgetbenchError(f"{path}: train.phase1_steps {t.phase1_steps} must be between 0 and train.steps {t.steps}")
    if not 0 <= t.cooldown < t.steps:
        raise ForgetbenchError(f"{path}: train.cooldown {t.cooldown} must be between 0 and train.steps {t.steps} "
                               "(excluded)")
    if t.cooldown and t.patience:
        raise ForgetbenchError(f"{path}: train.cooldown {t.cooldown} with train.patience {t.patience}: a cooldown ends "
                               "at train.steps, which early stopping would move; set patience 0")
    for where, v in (("kd.temperature", cfg.kd.temperature), ("data.temperature", cfg.data.temperature),
                     ("train.lr", t.lr)):
        if v <= 0:
            raise ForgetbenchError(f"{path}: {where} must be > 0, got {v}")
    if cfg.kd.alpha < 0:
        raise ForgetbenchError(f"{path}: kd.alpha must be >= 0, got {cfg.kd.alpha}")
    for where, v in (("train.dropout", t.dropout), ("train.attention_dropout", t.attention_dropout)):
        if not 0 <= v < 1:
            raise ForgetbenchError(f"{path}: {where} must be in [0, 1), got {v}")
    ad = cfg.kd.alpha_directions
    if not isinstance(ad, dict) or any(not isinstance(v, int | float) or isinstance(v, bool) or v < 0 for v in ad.values()):
        raise ForgetbenchError(f"{path}: kd.alpha_directions: {ad!r}; a mapping direction: α >= 0, e.g. {{en-sw: 0.0}}")
    pairs = {f"{a}-{b}" for a, b in cfg.pairs}
    if set(ad) - pairs:
        raise ForgetbenchError(f"{path}: kd.alpha_directions: {sorted(set(ad) - pairs)} not among the run's directions "
                               f"({', '.join(sorted(pairs))})")
    if ad and cfg.kd.alpha <= 0:
        raise ForgetbenchError(f"{path}: kd.alpha_directions needs kd.alpha > 0 (each direction's α is read relative "
                               "to it under alpha_mode learned)")
    tiers = cfg.data.tiers
    if len(tiers) != 3 or not all(is_type(x, int) for x in tiers) or tiers != sorted(tiers):
        raise ForgetbenchError(f"{path}: data.tiers must be 3 increasing integers, got {tiers!r}")


_RUN_ONLY = {"steps", "checkpoint_minutes", "log_every", "signal_every", "signal_sentences", "threads", "dev_every",
             "dev_sentences", "patience", "min_delta"}


def fingerprint(cfg: DistillConfig, legacy: bool = False) -> str:
    """Hash of every setting that shapes the weights, so a run resumes only from its own checkpoint: the teacher
    and the student's initialisation by their weights' SHA-256, the data as what it reads (``train.config.
    where_free``), a given teacher cache not at all (its manifest is checked against the run's keys: it holds what
    the run's own would).
    ``legacy``: the fingerprint of checkpoints written before, which held where these lay (``loop.resume``)."""
    d = asdict(cfg)
    if not legacy:
        from forgetbench.train.config import where_free

        d["data"] = where_free(d["data"])
        d["teacher"]["path"] = _weights_identity(cfg.teacher.path)
        d["student"]["init"] = _weights_identity(cfg.student.init)
        d["kd"].pop("cache")
    d.pop("source", None)
    d.pop("name", None)
    d["teacher"].pop("device_map", None)
    d.pop("hardware", None)  # where it runs does not shape the weights; a dtype other than float32 does
    if cfg.hardware.dtype != "float32":
        d["dtype"] = cfg.hardware.dtype
    d["train"] = {k: v for k, v in d["train"].items() if k not in _RUN_ONLY}
    if cfg.train.cooldown:
        d["train"]["cooldown_end"] = cfg.train.steps  # with a cooldown the last step shapes every rate after its start
    else:
        d["train"].pop("cooldown")  # no cooldown: the fingerprint of configs written before the key
    if not d["kd"].get("alpha_directions"):
        d["kd"].pop("alpha_directions", None)  # one α for all: the fingerprint of configs written before the key
    if d["kd"].get("tail_draws") == 1:
        d["kd"].pop("tail_draws")  # one tail draw: the fingerprint of configs written before the key
    if not d["train"].get("attention_dropout"):
        d["train"].pop("attention_dropout", None)  # none: the fingerprint of configs written before the key
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _weights_identity(folder: str) -> str:
    """A model folder by its weights' SHA-256 (``models.load.weights_sha256``), else as given (a folder without
    weights files: refused later where it is loaded). Each weights file is hashed once per state (``io.sha256_file``:
    a 1.2B teacher's 4.8 GB take seconds; a run asks at every resume and record)."""
    if not folder or not Path(folder).is_dir():
        return folder
    from forgetbench.models.load import weights_sha256

    return weights_sha256(Path(folder)) or folder
