"""Training configurations (YAML → dataclasses, unknown keys refused) and the fingerprint that ties a
checkpoint to the settings that shape its weights.

    data:  {shared: ../../shared/data, languages: [de, fr], dev_per_language: 100, max_chars: 300}
    spm:   {vocab_size: 8000, character_coverage: 0.9995, sample_per_language: 20000}
           # or {from: ../artifacts/teacher}: that model's vocabulary, none trained (to fine-tune it on own data)
    model: {d_model: 256, encoder_layers: 4, decoder_layers: 3, heads: 4, ffn: 1024, dropout: 0.1,
            embeddings: {graphmerge: {hops: 2}}}   # embeddings optional (train.graphmerge)
           # or {from: ../artifacts/teacher}: that model's shape from its config.json (to warm-start from it)
    train: {seed: 1, max_tokens: 4096, lr: 0.001, warmup: 1000, steps: 3600, ...}
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from forgetbench.configs import dataclass_from, expect, known_keys, load_yaml_mapping
from forgetbench.errors import ForgetbenchError
from forgetbench.train.arithmetic import valid_bf16


@dataclass
class DataCfg:
    shared: str = "../shared/data"  # WMT news + Tatoeba and the evaluation sets filtered out ("": none)
    languages: list = field(default_factory=lambda: ["de", "fr"])
    dev_per_language: int = 100
    max_chars: int = 300
    corpora: dict = field(default_factory=dict)  # {lang: TSV "english<TAB>foreign" or a datasets folder}
    sample: str = ""  # a folder of <lang>.tsv used, with a warning, when data.shared is not there (a clone)


@dataclass
class SpmCfg:
    vocab_size: int = 8000
    character_coverage: float = 0.9995
    sample_per_language: int = 20000
    from_model: str = ""  # YAML ``from``: a model folder whose vocabulary the run takes instead of training one


@dataclass
class ModelCfg:
    d_model: int = 256
    encoder_layers: int = 4
    decoder_layers: int = 3
    heads: int = 4
    ffn: int = 1024
    dropout: float = 0.1
    max_positions: int = 256
    embeddings: dict = field(default_factory=dict)  # {graphmerge: {hops: 2, ...}} (train.graph.GraphSettings)


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
    bf16: bool | str = "auto"  # auto | true | false: bfloat16 autocast (train.arithmetic)
    device: str = "auto"  # auto | cpu | cuda | cuda:N (train.arithmetic; not in the fingerprint)
    threads: int = 1
    checkpoint_minutes: float = 10.0
    dev_every: int = 1000
    patience: int = 0  # early stopping (train.early_stop): measurements without improvement; 0 = off
    min_delta: float = 0.0  # the least dev-score rise that counts as an improvement
    dev_sentences: int = 16
    dev_directions: list = field(default_factory=list)
    temperature: float = 1.0  # train-mt: sampling over languages (train.data); 1 = the corpus as it is
    snapshot_every: int = 0  # keep the weights every N steps (loop.run's ``snapshot``), for equal-step comparisons


@dataclass
class TrainMTConfig:
    data: DataCfg
    spm: SpmCfg
    model: ModelCfg
    train: TrainCfg
    source: str = ""


def train_section(raw, path: Path, cls=TrainCfg):
    """A config's ``train:`` section as ``cls`` (``train-mt``'s and ``pretrain-encoder``'s ``TrainCfg``, ``distill``'s
    own): ``bf16`` checked apart."""
    train_raw = dict(raw or {}) if isinstance(raw, dict) or raw is None else raw
    bf16 = train_raw.pop("bf16", "auto") if isinstance(train_raw, dict) else "auto"
    if not valid_bf16(bf16):
        raise ForgetbenchError(f"{path}: train.bf16: {bf16!r}; choose auto, true or false")
    tc = dataclass_from(cls, train_raw, f"{path}: train")
    tc.bf16 = bf16
    if getattr(tc, "patience", 0) < 0 or getattr(tc, "min_delta", 0.0) < 0:
        raise ForgetbenchError(f"{path}: train.patience and train.min_delta must be >= 0 (patience 0: no early stopping)")
    if not getattr(tc, "temperature", 1.0) > 0:
        raise ForgetbenchError(f"{path}: train.temperature: {tc.temperature!r}; a positive number (1: the corpus as it "
                               "is; the GraphMerge paper: 2 and 5)")
    if getattr(tc, "patience", 0) and not getattr(tc, "dev_every", 0):
        raise ForgetbenchError(f"{path}: train.patience {tc.patience} needs train.dev_every > 0 (how often the dev "
                               "score is measured)")
    return tc


def load_config(path: str | Path) -> TrainMTConfig:
    """The training config in ``path``, every key and value checked (one line per problem)."""
    path = Path(path)
    raw = load_yaml_mapping(path, "training config")
    known_keys(raw, {"data", "spm", "model", "train"}, str(path), kind="section(s)")
    spm_raw, reused = _spm_from(raw.get("spm"), path)
    model_raw, shaped = _model_from(raw.get("model"), path)
    parts = {key: dataclass_from(cls, part, f"{path}: {key}")
             for key, cls, part in (("data", DataCfg, raw.get("data")), ("spm", SpmCfg, spm_raw),
                                    ("model", ModelCfg, model_raw))}
    parts["spm"].from_model = reused
    parts["train"] = train_section(raw.get("train"), path)
    for sec, keys in (("spm", ("vocab_size", "sample_per_language")), ("model", ("d_model", "encoder_layers",
                      "decoder_layers", "heads", "ffn", "max_positions")),
                      ("train", ("max_tokens", "max_len", "warmup", "steps", "threads")), ("data", ("max_chars",))):
        for k in keys:
            if getattr(parts[sec], k) < 1:
                raise ForgetbenchError(f"{path}: {sec}.{k} must be at least 1, got {getattr(parts[sec], k)}")
    if parts["model"].d_model % parts["model"].heads:
        raise ForgetbenchError(f"{path}: model.d_model {parts['model'].d_model} must be a multiple of model.heads")
    if parts["train"].patience and not parts["train"].dev_directions:
        raise ForgetbenchError(f"{path}: train.patience {parts['train'].patience} stops on the dev chrF of "
                               "train.dev_directions, which is empty; list them (e.g. [en-de, de-en])")
    if not parts["data"].languages:
        raise ForgetbenchError(f"{path}: data.languages is empty; list the languages to train with English")
    emb = parts["model"].embeddings
    if not isinstance(emb, dict) or set(emb) - {"graphmerge"}:
        raise ForgetbenchError(f"{path}: model.embeddings: {emb!r}; the one kind is graphmerge: {{hops: 2, ...}}")
    if "graphmerge" in emb:
        from forgetbench.train.graph import GraphSettings

        where = f"{path}: model.embeddings.graphmerge"
        emb["graphmerge"] = dataclass_from(GraphSettings, emb["graphmerge"] or {}, where).check(where)
    cfg = TrainMTConfig(**parts, source=str(path))
    cfg.data_note = resolve_corpus(cfg.data, path)  # not a field: a warning for the command to print
    cfg.model_from = shaped  # not a field: the fingerprint is the shape's, however it was written
    return cfg


VOCABULARY_FILES = ("sentencepiece.bpe.model", "vocab.json")


def _spm_from(raw, path: Path) -> tuple[object, str]:
    """``spm: {from: DIR}``: DIR (resolved against the config's folder) must hold an M2M-100 vocabulary
    (``VOCABULARY_FILES``), and no other ``spm`` key may be given, since none of them applies. Returns the section
    left for the dataclass and DIR ("" without ``from``)."""
    if not isinstance(raw, dict) or ("from" not in raw and "from_model" not in raw):
        return raw, ""
    raw = dict(raw)
    if "from_model" in raw:
        raise ForgetbenchError(f"{path}: spm: unknown key 'from_model'; the key is spm.from: MODEL_FOLDER")
    folder = _beside(path, expect(raw.pop("from"), str, f"{path}: spm.from"))
    if raw:
        raise ForgetbenchError(f"{path}: spm.from takes {folder}'s vocabulary as it is: {sorted(raw)} do not apply; "
                               "drop them")
    missing = [f for f in VOCABULARY_FILES if not (Path(folder) / f).is_file()]
    if missing:
        raise ForgetbenchError(f"{path}: spm.from {folder}: no {' and '.join(missing)} there; give an M2M-100 "
                               "model folder (e.g. artifacts/teacher or a train-mt run's model)")
    return {}, folder


# model section key <- M2M-100 config.json key(s): an encoder and a decoder key must agree (one model.heads, one ffn)
_SHAPE_KEYS = {"d_model": ("d_model",), "encoder_layers": ("encoder_layers",), "decoder_layers": ("decoder_layers",),
               "heads": ("encoder_attention_heads", "decoder_attention_heads"),
               "ffn": ("encoder_ffn_dim", "decoder_ffn_dim"), "max_positions": ("max_position_embeddings",)}


def _model_from(raw, path: Path) -> tuple[object, str]:
    """``model: {from: DIR}``: the shape of DIR's M2M-100 model (its ``config.json``), so a config that warm-starts
    from it need not repeat it. Only ``dropout`` (which shapes no weight) may be given beside ``from``; DIR's own
    dropout otherwise. Returns the section for the dataclass and DIR ("" without ``from``)."""
    if not isinstance(raw, dict) or "from" not in raw:
        return raw, ""
    raw = dict(raw)
    folder = _beside(path, expect(raw.pop("from"), str, f"{path}: model.from"))
    if extra := sorted(set(raw) - {"dropout"}):
        raise ForgetbenchError(f"{path}: model.from takes {folder}'s shape as it is: {extra} do not apply (only dropout "
                               "may be given beside it); drop them")
    conf_file = Path(folder) / "config.json"
    try:
        conf = json.loads(conf_file.read_text())
    except (OSError, ValueError) as e:
        raise ForgetbenchError(f"{path}: model.from {folder}: cannot read its config.json ({type(e).__name__}); give "
                               "an M2M-100 model folder (e.g. artifacts/teacher or a train-mt run's model)") from None
    if not isinstance(conf, dict) or conf.get("model_type") != "m2m_100":
        kind = conf.get("model_type") if isinstance(conf, dict) else None
        raise ForgetbenchError(f"{path}: model.from {folder}: model_type {kind!r}, not m2m_100; train-mt builds "
                               "M2M-100 models only")
    shape = {}
    for key, names in _SHAPE_KEYS.items():
        vals = {conf.get(n) for n in names}
        if len(vals) != 1 or not isinstance(v := vals.pop(), int):
            raise ForgetbenchError(f"{path}: model.from {folder}: config.json gives {' and '.join(names)} "
                                   f"{[conf.get(n) for n in names]}; train-mt's model takes one whole number for "
                                   f"model.{key}")
        shape[key] = v
    own = conf.get("dropout")
    return shape | {"dropout": raw.get("dropout", float(own) if isinstance(own, int | float) else ModelCfg.dropout)}, folder


def _beside(path: Path, p: str) -> str:
    q = Path(p)
    return str(q if q.is_absolute() else (path.parent / q).resolve())


def sample_fallback(d, shared: str, sample: Path, path: Path, doing: str, real: str) -> str:
    """``data.sample``'s ``<lang>.tsv`` files become the corpora of every language without one (``data.shared`` is
    not there); returns the warning line. Shared by train-mt and distill configs."""
    missing = [x for x in d.languages if x not in d.corpora and not (sample / f"{x}.tsv").is_file()]
    if missing:
        raise ForgetbenchError(f"{path}: data.shared {shared} is not here and data.sample {sample} has no TSV for "
                               f"{missing}")
    d.corpora = {x: str(sample / f"{x}.tsv") for x in d.languages} | d.corpora
    sizes = sorted({sum(1 for _ in open(f, encoding="utf-8", errors="replace")) for f in d.corpora.values()
                    if Path(f).is_file()})
    n = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}" if sizes else "a few hundred"
    return (f"{path}: the study's training corpora (data.shared: Tatoeba + WMT news per language, not distributed "
            f"with forgetbench) are not in {shared}: {doing} on the shipped sample {sample} ({n} pairs per language, "
            f"for trying the command); for {real} give your own parallel text as data.corpora: {{LANG: FILE.tsv}} "
            "(English<TAB>other lines; README, 'Training data')")


def resolve_corpus(d, path: Path) -> str | None:
    """``data.shared``, ``data.corpora`` and ``data.sample`` resolved against the config's folder and checked: every
    language needs a corpus. When ``shared`` is not there and ``sample`` is, the sample's ``<lang>.tsv`` files are
    the corpora (shared cleared); the warning line that says so is returned (None otherwise). Shared by train-mt
    and distill configs."""
    note = None
    d.corpora = {str(k): _beside(path, expect(v, str, f"{path}: data.corpora.{k}")) for k, v in d.corpora.items()}
    for lang, f in d.corpora.items():
        if lang not in d.languages:
            raise ForgetbenchError(f"{path}: data.corpora.{lang}: {lang!r} is not in data.languages {d.languages}")
        if not Path(f).exists():
            raise ForgetbenchError(f"{path}: data.corpora.{lang}: {f} not found (a TSV file or a datasets folder)")
    shared = _beside(path, d.shared) if d.shared else ""
    if shared and not Path(shared).is_dir() and d.sample:
        note = sample_fallback(d, shared, Path(_beside(path, d.sample)), path, "training", "real training")
        shared = ""
    if shared and not Path(shared).is_dir():
        raise ForgetbenchError(f"{path}: data.shared {shared} is not a folder (the shared data directory); give "
                               "data.corpora: {LANG: FILE.tsv} ('english<TAB>foreign' lines) for your own data")
    d.shared = shared
    missing = [x for x in d.languages if x not in d.corpora]
    if missing and not shared:
        raise ForgetbenchError(f"{path}: no corpus for {missing}: give data.shared or data.corpora.<lang>")
    return note


_RUN_ONLY = {"steps", "time_budget_minutes", "checkpoint_minutes", "dev_every", "dev_sentences", "dev_directions",
             "patience", "min_delta", "snapshot_every",
             "device"}


def where_free(data: dict) -> dict:
    """A config's ``data`` section (its ``asdict``) as what it reads, not where that lies, so a run folder resumes
    in another checkout or on another machine (docs/METHOD.md §5): the shared and sample folders by whether they
    are given (what was read from them is pinned by the run's prepared data, its ids' SHA-256), TSV corpora and
    treebank folders by content (``io.content_sha256``)."""
    from forgetbench.io import content_sha256

    d = dict(data)
    for k in ("shared", "sample"):
        if k in d:
            d[k] = bool(d[k])
    if "corpora" in d:
        d["corpora"] = {lang: content_sha256(p) for lang, p in sorted(d["corpora"].items())}
    if "treebanks" in d:
        d["treebanks"] = [content_sha256(p) for p in d["treebanks"]]
    return d


def settings_hash(d: dict) -> str:
    """The fingerprint of a config's ``asdict`` (any trainer's): every setting but the source and the ``train``
    keys that only say how long to run or how often to checkpoint/evaluate."""
    d = dict(d)
    d.pop("source", None)
    d["train"] = {k: v for k, v in d["train"].items() if k not in _RUN_ONLY}
    if d["train"].get("temperature", 1.0) == 1.0:
        d["train"].pop("temperature", None)  # the corpus as it is: the fingerprint of configs written before the key
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def spm_settings(spm: SpmCfg) -> dict:
    """What of ``spm`` shapes a run: a reused vocabulary by its files' content (not where they lie), else the
    training settings (as in configs written before ``spm.from``)."""
    if not spm.from_model:
        return {k: v for k, v in asdict(spm).items() if k != "from_model"}
    from forgetbench.io import sha256_file

    return {"from": {f: sha256_file(Path(spm.from_model) / f) for f in VOCABULARY_FILES}}


def config_record(cfg: TrainMTConfig) -> dict:
    """The config as a run's ``training.json`` records it: ``spm`` as written (``{from: DIR}`` or the training
    settings), ``model`` whole (with the ``from`` folder its shape came from), every other section whole."""
    d = asdict(cfg)
    d["spm"] = {"from": cfg.spm.from_model} if cfg.spm.from_model else spm_settings(cfg.spm)
    if getattr(cfg, "model_from", ""):
        d["model"]["from"] = cfg.model_from
    return d


def fingerprint(cfg: TrainMTConfig, legacy: bool = False) -> str:
    """Hash of every setting that shapes the weights (not how long or how often to checkpoint/evaluate), so a
    run can only resume from a checkpoint made with the same data, vocabulary, model and optimiser; the data as
    what it reads (``where_free``). ``legacy``: the fingerprint of checkpoints written before, which held where
    the data lay (accepted by ``loop.resume``)."""
    d = asdict(cfg)
    if not legacy:
        d["data"] = where_free(d["data"])
    d["spm"] = spm_settings(cfg.spm)
    if not d["model"]["embeddings"]:
        d["model"].pop("embeddings")  # a plain table: the fingerprint of configs written before the key
    return settings_hash(d)
