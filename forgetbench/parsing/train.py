"""Train, evaluate and run the parsers (biaffine, SynTr, RNGTr, G2GTr); saved like HF models (config + safetensors).

Gold tokenisation. Tags: ``gold`` (gold UPOS in training and at test time) or ``predicted`` (the
parser's own small tagger, ``parsing.parsers.tagger``: the parser is trained on jackknifed tags, i.e. each
fold of the training set tagged by a tagger that did not see it, so it learns the tagger's real
errors; dev and test are tagged by a tagger trained on all of train; ``tagger_from`` reuses another
parser's tagger and training tags). Threads are set deliberately (default 1). One epoch loop for
every architecture (``epochs.train_epochs``); model selection on dev LAS (each architecture's own
decoding: MST, refinement, transitions); the best model is written atomically whenever dev LAS
improves, so an interrupted run keeps its best model. The time budget covers the taggers too.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory, atomic_write_json, sha256_file
from forgetbench.models.hardware import resolve_device
from forgetbench.parsing.data.batching import Vocab, with_initial_graphs
from forgetbench.parsing.data.conll import Sentence, read_conllu, with_predictions, write_conllu
from forgetbench.parsing.epochs import StepBudget, train_epochs
from forgetbench.parsing.layers.pretrained import memo_frozen
from forgetbench.parsing.metrics import ParseScores, score
from forgetbench.parsing.parsers import interface as parsers
from forgetbench.parsing.parsers.architectures import check_initial_parser
from forgetbench.parsing.parsers.model import BiaffineParser, ParserConfig
from forgetbench.parsing.parsers.refine import DEFAULT_ITERATIONS, EMPTY_ITERATIONS
from forgetbench.parsing.parsers.tagger import (
    load_tagger,
    load_tagger_dir,
    tag,
    train_tagger,
    upos_accuracy,
    with_tags,
)
from forgetbench.parsing.saving import load_module_dir


def predict(model, vocab: Vocab, sents: list[Sentence], max_tokens: int = 4000, progress: bool = False,
            tagger=None) -> list[tuple[list[int], list[str]]]:
    """Heads and labels per sentence for a biaffine or SynTr network; with ``tagger`` the UPOS inputs are its
    predictions, not the file's. (Any architecture: ``parsers.Parser.parse``.)"""
    if tagger is not None:
        sents = with_tags(sents, tag(tagger, vocab, sents, max_tokens))
    arch = "biaffine" if isinstance(model, BiaffineParser) else "syntr"
    return parsers.Parser(arch, model, vocab).parse(sents, max_tokens, progress)


def evaluate(model, vocab, sents: list[Sentence], tagger=None) -> ParseScores:
    return score([(s.heads, s.deprels) for s in sents], predict(model, vocab, sents, tagger=tagger))


def kfold_graphs(tr: list[Sentence], dv: list[Sentence], initial: parsers.Parser, work: Path, folds: int,
                 minutes: float | None, seed: int, threads: int, progress: bool, device: str = "cpu",
                 steps: StepBudget | None = None, max_epochs: int = 200) -> tuple[list, dict]:
    """k-fold predictions of the initial parser's architecture on the training sentences (folds by position mod k):
    parser k is trained (same sizes, the sentences' own UPOS, dev ``dv``; the run's ``steps``, else ``max_epochs``
    within ``minutes``) on the other folds and parses fold k."""
    work.mkdir()
    dev_file = work / "dev.conllu"
    write_conllu(dev_file, [with_predictions(s, s.heads, s.deprels, s.upos) for s in dv])
    sizes = {k: v for k, v in initial.model.cfg.to_dict().items() if not k.startswith("n_")}
    preds: list = [None] * len(tr)
    fold_dev = []
    for k in range(folds):
        held = [i for i in range(len(tr)) if i % folds == k]
        f = work / f"train{k}.conllu"
        write_conllu(f, [with_predictions(s, s.heads, s.deprels, s.upos) for i, s in enumerate(tr) if i % folds != k])
        info = train(f, dev_file, work / f"fold{k}", minutes=minutes, seed=seed + k, threads=threads, progress=progress,
                     tags="gold", arch=initial.arch, label=f"fold {k + 1}/{folds}: ", device=device, steps=steps,
                     max_epochs=max_epochs, **sizes)
        fold_dev.append(round(info["dev"]["las"], 2))
        for i, p in zip(held, parsers.load(work / f"fold{k}").to(device).parse([tr[i] for i in held]), strict=True):
            preds[i] = p
    g0 = score([(s.heads, s.deprels) for s in tr], preds)
    budget = {"fold_steps": steps.to_dict()} if steps else {"fold_minutes": minutes, "fold_max_epochs": max_epochs}
    return preds, {"kfold": {"folds": folds, **budget, "fold_dev_las": fold_dev,
                             "train_graph_las": round(g0.las, 2), "train_graph_uas": round(g0.uas, 2)}}


def jackknife_tags(tr: list[Sentence], dv: list[Sentence], vocab: Vocab, work: Path, folds: int, minutes: float | None,
                   seed: int, progress: bool, max_epochs: int = 999, device: str = "cpu",
                   steps: StepBudget | None = None, network: dict | None = None) -> list[list[str]]:
    """UPOS for every training sentence from a tagger trained on the other folds (folds by position mod k)."""
    tags: list[list[str] | None] = [None] * len(tr)
    for k in range(folds):
        held = [i for i in range(len(tr)) if i % folds == k]
        rest = [s for i, s in enumerate(tr) if i % folds != k]
        train_tagger(rest, dv, vocab, work / f"fold{k}", minutes, seed=seed + k, progress=progress, max_epochs=max_epochs,
                     desc=f"jackknife tagger {k + 1}/{folds}", device=device, steps=steps, network=network)
        tg = load_tagger_dir(work / f"fold{k}").to(device)
        for i, t in zip(held, tag(tg, vocab, [tr[i] for i in held]), strict=True):
            tags[i] = t
    return tags  # type: ignore[return-value]


TRAINING_TAGS = "training_tags.json"


def save_training_tags(tagger_dir: Path, train_file, dev_file, tags: list[list[str]], folds: int) -> None:
    """The jackknifed UPOS of the training sentences, kept beside the tagger so that another parser trained on the
    same file can reuse tagger and training tags (``--tagger-from``): same tags, fair comparison, no second
    jackknife."""
    atomic_write_json(tagger_dir / TRAINING_TAGS, {"train_sha256": sha256_file(train_file), "held_out_dev": dev_file is None,
                                                   "jackknife_folds": folds, "tags": tags})


def parser_skeleton(model_dir: str | Path):
    """The network of a parser folder (any architecture; an RNGTr's refiner, not its ``initial/``) on the meta
    device, no weights loaded (for streamed compression)."""
    arch = parsers.arch_of(model_dir)
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    cfg.pop("model_type", None)
    with torch.device("meta"):
        return parsers.build(arch, cfg)


def load_parser(model_dir: str | Path) -> tuple[BiaffineParser, Vocab]:
    model = load_module_dir(model_dir, "forgetbench-biaffine", lambda c: BiaffineParser(ParserConfig(**ParserConfig.stored(c))), "biaffine parser")
    return model, Vocab(**json.loads((Path(model_dir) / "vocab.json").read_text()))


HELD_OUT_EVERY = 10


def held_out_split(sents: list[Sentence]) -> tuple[list[Sentence], list[Sentence]]:
    """For treebanks without a dev set: every 10th training sentence (positions 9, 19, …) is held out for model
    selection, the rest is trained on."""
    dev = [s for i, s in enumerate(sents) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
    return [s for i, s in enumerate(sents) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1], dev


def _reused_tags(tagger_from: Path, train_file, dev_file) -> dict:
    """The jackknifed training tags saved beside another parser's tagger; refused unless made on this training file
    with the same dev setting."""
    f = tagger_from / "tagger" / TRAINING_TAGS
    if not f.is_file():
        raise ForgetbenchError(f"{tagger_from}: no tagger/{TRAINING_TAGS} (train that parser with --tags predicted "
                               "first; parsers trained before this option cannot share their tags)")
    saved = json.loads(f.read_text())
    if saved["train_sha256"] != sha256_file(train_file) or saved["held_out_dev"] != (dev_file is None):
        raise ForgetbenchError(f"{tagger_from}: its tagger's training tags were made on another training file or dev "
                               f"setting than {train_file}; --tagger-from needs the same --train (and --dev or not)")
    return saved


MODEL_OPTIONS = ("attention", "relation_norm", "value_relations", "graph")  # network settings `parse train` sets
# ``parse train --network``: today's biaffine network, or the thesis's UD setting (Dozat §6.3, Table 5.1): 3 × 200
# BiLSTM, arc MLP 400, label MLP 100, word and tag dropout 0.33, same-mask recurrent dropout 0.33, the rate annealed
# by 0.75^(t/5000); its tagger 2 BiLSTM layers with recurrent dropout 0.5
NETWORKS = {
    "today": {"model": {}, "tagger": {}, "anneal": None},
    "thesis": {"model": {"lstm_layers": 3, "lstm_hidden": 200, "arc_mlp": 400, "rel_mlp": 100, "embed_dropout": 0.33,
                         "recurrent_dropout": 0.33},
               "tagger": {"lstm_layers": 2, "lstm_hidden": 200, "recurrent_dropout": 0.5}, "anneal": (0.75, 5000)},
}


@dataclass(frozen=True)
class ParseTrainConfig:
    """Every setting of ``parse train`` in one place, named as the command's options (``from_options`` reads
    them); ``train_parser`` runs it. Defaults are the command's."""

    train: str
    out: str
    dev: str | None = None
    arch: str = "biaffine"
    minutes: float | None = None  # steps: a safety stop (None: none); epochs: their wall-time budget (None: none)
    max_epochs: int | None = None  # a budget in epochs (dev after each) instead of steps
    max_steps: int = 30000  # Dozat's rule (thesis §6.3): up to 30,000 steps, dev every 100,
    patience: int = 5000  # stop when 5,000 steps pass without a dev improvement
    eval_every: int = 100
    seed: int = 1
    threads: int = 1
    tags: str = "predicted"
    tagger_max_steps: int | None = None  # each tagger's cap in steps (None: max_steps; patience and eval_every shared)
    tagger_epochs: int | None = None  # a tagger budget in epochs instead of steps,
    tagger_minutes: float | None = None  # within this wall time (None: none)
    jackknife: int = 2
    tagger_from: str | None = None
    initial: str | None = None
    iterations: int | None = None  # None: the thesis's T (3 from an initial parser, 4 from the empty graph)
    train_iterations: int | None = None  # None: iterations (training and test alike)
    warm_start: str | None = None
    refiner_graphs: str | None = None  # None: k-fold graphs with an initial parser, else empty ones
    folds: int = 2
    fold_minutes: float | None = None  # epochs only (steps: each fold parser has the run's budget)
    encoder: str | None = None  # a pretrain-encoder model folder the parser reads
    encoder_mode: str = "beside"  # beside: its features join the parser's own inputs; replace: instead of them
    encoder_lr_scale: float = 1.0  # the encoder's learning rate relative to the parser's (0: frozen)
    encoder_lr_decay: float = 1.0  # layer-wise: each encoder layer down gets this factor more
    device: str = "cpu"  # cpu, cuda, cuda:N or auto (a GPU where torch sees one)
    network: str = "today"  # NETWORKS: today's biaffine network or the thesis's (its tagger and annealing too)
    model: dict = field(default_factory=dict)  # network settings given (MODEL_OPTIONS); the rest are defaults

    @classmethod
    def from_options(cls, options, **given) -> ParseTrainConfig:
        """From parsed command-line options (an ``argparse.Namespace``; None leaves a default); ``given``
        overrides by name."""
        names = {f.name for f in fields(cls)} - {"model"} - set(given)
        model = {k: getattr(options, k) for k in MODEL_OPTIONS if getattr(options, k, None) is not None}
        return cls(**{k: v for k in names if (v := getattr(options, k, None)) is not None}, model=model, **given)

    def budgets(self) -> tuple[StepBudget | None, StepBudget | None]:
        """The parser's and each tagger's ``StepBudget`` (None, None: a budget in epochs)."""
        if self.tagger_minutes is not None and self.tagger_epochs is None:
            raise ForgetbenchError("parse train --tagger-minutes bounds a tagger budget in epochs: give --tagger-epochs "
                                   "too, or drop it (taggers train by steps: --tagger-max-steps)")
        if self.fold_minutes is not None and self.max_epochs is None:
            raise ForgetbenchError("parse train --fold-minutes bounds k-fold parsers trained by epochs: give "
                                   "--max-epochs too, or drop it (by steps each fold parser has the run's budget)")
        try:
            return (None if self.max_epochs else StepBudget(self.max_steps, self.patience, self.eval_every),
                    None if self.tagger_epochs else StepBudget(self.tagger_max_steps or self.max_steps, self.patience,
                                                               self.eval_every))
        except ValueError as e:
            raise ForgetbenchError(f"parse train: {e}") from None


def train_parser(cfg: ParseTrainConfig, progress: bool = True) -> dict:
    """``parse train``: ``train`` with the config's settings and the command's defaults resolved."""
    steps, tagger_steps = cfg.budgets()
    if cfg.network not in NETWORKS:
        raise ForgetbenchError(f"parse train --network {cfg.network!r}: use one of {sorted(NETWORKS)}")
    net = NETWORKS[cfg.network]
    if cfg.network != "today" and cfg.arch != "biaffine":
        raise ForgetbenchError(f"parse train --network {cfg.network} is the biaffine parser's setting; --arch is "
                               f"{cfg.arch}")
    settings = {f.name: getattr(cfg, f.name) for f in fields(cfg)
                if f.name not in ("max_steps", "patience", "eval_every", "tagger_max_steps", "network")} | {
        "model": net["model"] | cfg.model, "tagger_network": net["tagger"], "anneal": net["anneal"]} | {
        "refiner_graphs": cfg.refiner_graphs or ("kfold" if cfg.initial else "empty"),
        "iterations": cfg.iterations or (DEFAULT_ITERATIONS if cfg.initial else EMPTY_ITERATIONS),
        "max_epochs": cfg.max_epochs or 200, "tagger_epochs": cfg.tagger_epochs or 999, "steps": steps,
        "tagger_steps": tagger_steps}
    files = [settings.pop(k) for k in ("train", "dev", "out")]
    return train(*files, progress=progress, **settings.pop("model"), **settings)


def train(train_file: str | Path, dev_file: str | Path | None, out_dir: str | Path, minutes: float | None = 15.0,
          max_epochs: int = 200, seed: int = 1, threads: int = 1, max_tokens: int | None = None, lr: float | None = None,
          progress: bool = True, tags: str = "gold", tagger_minutes: float | None = 1.0, tagger_epochs: int = 999,
          jackknife: int = 4, steps: StepBudget | None = None, tagger_steps: StepBudget | None = None,
          arch: str = "biaffine", tagger_from: str | Path | None = None, initial: str | Path | None = None,
          iterations: int = DEFAULT_ITERATIONS, train_iterations: int | None = None, warm_start: str | Path | None = None,
          refiner_graphs: str = "empty", folds: int = 2, fold_minutes: float | None = 6.0, label: str = "",
          encoder: str | Path | None = None, encoder_lr_scale: float = 1.0, encoder_lr_decay: float = 1.0,
          encoder_mode: str = "beside", device: str = "cpu", tagger_network: dict | None = None,
          anneal: tuple[float, int] | None = None, **model_kw) -> dict:
    """Train a parser of ``arch`` on ``train_file``, select on ``dev_file`` (None: ``held_out_split`` of the
    training file). Budget: ``steps`` (a ``StepBudget``: Dozat's rule; each k-fold parser ``steps`` too;
    ``minutes`` then only a safety stop of the parser, reported in ``stopped_by`` when it fires) — deterministic
    on any host and load; or, without ``steps``, ``max_epochs`` of the parser within ``minutes`` for the whole run
    (taggers included) and ``fold_minutes`` each k-fold parser. Each tagger (predicted tags) likewise by
    ``tagger_steps``, else ``tagger_epochs`` within ``tagger_minutes``. Deterministic where no time budget binds
    (None: none). ``tagger_network``: the taggers' ``TaggerConfig`` settings; ``anneal`` (rate, every): the
    learning rate × rate^(step / every) (the thesis's 0.75, 5000).

    ``tagger_from``: reuse another parser's tagger and jackknifed training tags (same training file), so that
    architectures are compared on the same tags. RNGTr: ``initial`` is the parser giving G^0 at evaluation (a
    biaffine or SynTr folder, copied into the model; None = the empty graph); the refiner's first training
    iteration starts from ``refiner_graphs``: ``empty`` graphs, or ``kfold`` predictions of the initial parser's
    architecture and sizes (``folds`` parsers, each trained ``fold_minutes`` on the other folds with the same
    training tags, parsing its held-out fold; their time is part of ``minutes``, which must exceed
    ``folds × fold_minutes``); ``label`` prefixes the progress lines (``fold 1/2:``); each of its
    ``train_iterations`` (default ``iterations``) is trained on the previous iteration's output;
    ``warm_start``: a SynTr folder (same vocabulary) whose weights initialise the refiner — every weight but the
    relation embeddings, so the refiner starts as that SynTr (whose training time is then part of the refiner's).
    ``encoder``: a ``pretrain-encoder`` model folder; the parser reads its first-piece states (⊕ UPOS) instead of
    its own word, character and BiLSTM layers (biaffine) or embeddings (SynTr, RNGTr), fine-tuned at
    ``encoder_lr_scale`` × the parser's learning rate (0: frozen), ``encoder_lr_decay`` per layer downwards
    (``encoder_groups``); its SentencePiece model is saved with the parser. ``device``: where the networks (taggers,
    k-fold parsers, parser) train and parse — cpu, cuda, cuda:N or auto; MST and the transition system decode on
    the host; the record says where it ran."""
    architecture = parsers.architecture(arch)
    if steps is not None:  # the clock is a safety stop of the parser only
        fold_minutes = None
    if tagger_steps is not None:
        tagger_minutes = None
    _check_settings(architecture, tags, tagger_from, jackknife, tagger_minutes, minutes, refiner_graphs, initial,
                    warm_start, folds, iterations, train_iterations)
    device = resolve_device(device)
    warm, init_parser = _given_parsers(warm_start, initial)
    if refiner_graphs == "kfold" and None not in (minutes, fold_minutes) and folds * fold_minutes >= minutes:
        raise ForgetbenchError(f"--minutes {minutes} must exceed --folds {folds} x --fold-minutes {fold_minutes} (the "
                               "k-fold parsers run inside it): raise --minutes or lower --fold-minutes")
    settings = architecture.settings | {k: v for k, v in (("lr", lr), ("max_tokens", max_tokens), ("anneal", anneal))
                                        if v is not None}
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    tr, dv = _read_split(train_file, dev_file)
    reused = _reused_tags(Path(tagger_from), train_file, dev_file) if tagger_from is not None else None
    vocab = Vocab(**json.loads((Path(tagger_from) / "vocab.json").read_text())) if reused is not None else Vocab.build(tr)
    pretrained = _pretrained_encoder(encoder, encoder_lr_scale, encoder_lr_decay, architecture, vocab, model_kw,
                                     encoder_mode)
    model = _build(architecture, vocab, model_kw, warm, warm_start)
    if pretrained is not None:
        model.words.encoder.load_state_dict(pretrained.state_dict())
    parser = parsers.Parser(arch, model, vocab, initial=init_parser, iterations=iterations).to(device)
    t_iter = train_iterations or iterations
    t0 = time.perf_counter()
    with atomic_directory(Path(out_dir)) as tmp:
        tr, dv, tag_info = _tag_phase(tmp, tr, dv, vocab, tags, reused, tagger_from, train_file, dev_file, jackknife,
                                      tagger_minutes, tagger_epochs, seed, progress, t0, device, tagger_steps,
                                      tagger_network)
        if init_parser is not None:
            shutil.copytree(initial, tmp / "initial", ignore=shutil.ignore_patterns("tagger"))
        kfold_info: dict = {}
        if refiner_graphs == "kfold":
            tr, kfold_info = _kfold_phase(tmp, tr, dv, init_parser, folds, fold_minutes, seed, threads, progress, device,
                                          steps, max_epochs)
        budget = ({"steps": steps.to_dict(), "safety_minutes": minutes} if steps else
                  {"max_epochs": max_epochs, "minutes": minutes})
        record = {"arch": arch, "device": device, "threads": threads, "seed": seed, "train": str(train_file),
                  "budget": budget, "optimiser": settings,
                  "dev_data": str(dev_file) if dev_file else f"held out: every {HELD_OUT_EVERY}th training sentence",
                  "environment": environment()} | tag_info | ({"encoder": {
                      "folder": str(encoder), "weights_sha256": sha256_file(Path(encoder) / "model.safetensors"),
                      "variant": pretrained.config.variant, "mode": encoder_mode, "lr_scale": encoder_lr_scale,
                      "lr_decay": encoder_lr_decay}} if encoder else {}) | \
            architecture.training_record(
                      initial, iterations, t_iter, warm_start, refiner_graphs, folds, kfold_info)
        return _fit(tmp, parser, tr, dv, settings, t_iter, record, minutes, max_epochs, seed, t0, progress, label, steps)


def _pretrained_encoder(encoder, lr_scale: float, lr_decay: float, architecture, vocab: Vocab, model_kw: dict,
                        mode: str = "beside"):
    """The pre-trained encoder a parser reads (``encoder`` given): its settings join ``model_kw``, its SentencePiece
    model the vocabulary; refused in one line for an architecture that cannot read one or a bad scale."""
    if encoder is None:
        return None
    from forgetbench.parsing.layers.pretrained import load_encoder

    if architecture.name not in ("biaffine", "syntr", "rngtr"):
        raise ForgetbenchError(f"--encoder: {architecture.name} reads its own features; a pre-trained encoder is read "
                               "by biaffine, syntr and rngtr parsers")
    if not lr_scale >= 0:
        raise ForgetbenchError(f"--encoder-lr-scale {lr_scale}: give a number >= 0 (0 freezes the encoder)")
    if not 0 < lr_decay <= 1:
        raise ForgetbenchError(f"--encoder-lr-decay {lr_decay}: give a number in (0, 1] (1: one rate for every layer)")
    if mode not in ("beside", "replace"):
        raise ForgetbenchError(f"--encoder-mode {mode!r}: use beside (the encoder's features join the parser's own "
                               "inputs) or replace (they replace them)")
    model, sp, _ = load_encoder(encoder)
    model_kw["pretrained"], model_kw["pretrained_mode"] = model.config.to_dict(), mode
    vocab.pieces, vocab.sp = "spm.model", sp
    return model


def _check_settings(architecture, tags, tagger_from, jackknife, tagger_minutes, minutes, refiner_graphs, initial,
                    warm_start, folds, iterations, train_iterations) -> None:
    """Every training option checked before any work, one line each."""
    if tags not in ("gold", "predicted"):
        raise ForgetbenchError(f"tags must be 'gold' or 'predicted', got {tags!r}")
    if tags == "predicted" and tagger_from is None and (jackknife < 2 or (
            None not in (tagger_minutes, minutes) and (jackknife + 1) * tagger_minutes >= minutes)):
        raise ForgetbenchError(f"predicted tags need --jackknife >= 2 folds and (folds + 1) x --tagger-minutes < "
                               f"--minutes; got {jackknife} folds x {tagger_minutes} min of {minutes} min: raise "
                               "--minutes, or lower --tagger-minutes or --jackknife")
    if tagger_from is not None and tags != "predicted":
        raise ForgetbenchError("--tagger-from reuses a tagger: it needs --tags predicted")
    if refiner_graphs not in ("empty", "kfold"):
        raise ForgetbenchError(f"refiner training graphs {refiner_graphs!r}: use empty or kfold")
    architecture.check_options(initial, warm_start, refiner_graphs, folds)
    if iterations < 1 or (train_iterations is not None and train_iterations < 1):
        raise ForgetbenchError("refinement iterations must be at least 1")


def _given_parsers(warm_start, initial):
    """The SynTr a refiner is warm-started from and the parser giving its initial graphs, each checked."""
    warm = parsers.load(warm_start) if warm_start is not None else None
    if warm is not None and warm.arch != "syntr":
        raise ForgetbenchError(f"{warm_start}: a refiner is warm-started from a syntr folder, not {warm.arch}")
    return warm, check_initial_parser(parsers.load(initial), initial) if initial is not None else None


def _read_split(train_file, dev_file) -> tuple[list[Sentence], list[Sentence]]:
    tr = read_conllu(train_file)
    if dev_file is not None:
        return tr, read_conllu(dev_file)
    tr, dv = held_out_split(tr)
    if not dv:
        raise ForgetbenchError(f"{train_file}: {len(tr)} sentences are too few to hold out a dev set "
                               f"(every {HELD_OUT_EVERY}th); give --dev")
    return tr, dv


def _build(architecture, vocab: Vocab, model_kw: dict, warm, warm_start):
    """The network, sized by the vocabulary; a warm start's weights loaded (all but the relation embeddings)."""
    if warm is not None and warm.vocab.to_dict() != vocab.to_dict():
        raise ForgetbenchError(f"{warm_start}: its vocabulary differs from this run's; warm-start from a SynTr trained on "
                               "the same file (and the same --tagger-from)")
    dims = {"n_words": len(vocab.words), "n_chars": len(vocab.chars), "n_tags": len(vocab.tags), "n_rels": len(vocab.rels)}
    try:
        model = architecture.build(dims | architecture.model_kw(model_kw, warm, dims))
    except (TypeError, ValueError) as e:
        raise ForgetbenchError(f"bad {architecture.name} model setting: {e}") from None
    if warm is not None:
        missing, unexpected = model.load_state_dict(warm.model.state_dict(), strict=False)
        if unexpected or any(".rel_" not in k for k in missing):
            raise ForgetbenchError(f"{warm_start}: its SynTr does not match the refiner's layout "
                                   f"(missing {missing[:3]}, unexpected {unexpected[:3]}); give the same model sizes")
    return model


def _tag_phase(tmp: Path, tr, dv, vocab, tags, reused, tagger_from, train_file, dev_file, jackknife, tagger_minutes,
               tagger_epochs, seed, progress, t0, device: str = "cpu",
               tagger_steps: StepBudget | None = None,
               tagger_network: dict | None = None) -> tuple[list[Sentence], list[Sentence], dict]:
    """The UPOS the parser trains and selects on: gold; another parser's tagger and training tags; or its own
    tagger (in ``tmp/tagger``) with jackknifed training tags. Returns the tagged sentences and their record."""
    tag_info: dict = {"tags": tags}
    if reused is not None:
        shutil.copytree(Path(tagger_from) / "tagger", tmp / "tagger")
        tagger = load_tagger(tmp).to(device)
        tag_info |= {"tagger_from": str(tagger_from), "jackknife_folds": reused["jackknife_folds"]}
        return with_tags(tr, reused["tags"]), with_tags(dv, tag(tagger, vocab, dv)), tag_info
    if tags != "predicted":
        return tr, dv, tag_info
    work = tmp / "_jackknife"
    tr_tags = jackknife_tags(tr, dv, vocab, work, jackknife, tagger_minutes, seed, progress, tagger_epochs, device,
                             tagger_steps, tagger_network)
    shutil.rmtree(work)
    jk_acc = upos_accuracy(tr, tr_tags)
    tinfo = train_tagger(tr, dv, vocab, tmp / "tagger", tagger_minutes, seed=seed, progress=progress,
                         max_epochs=tagger_epochs, device=device, steps=tagger_steps, network=tagger_network)
    tagger = load_tagger(tmp).to(device)
    save_training_tags(tmp / "tagger", train_file, dev_file, tr_tags, jackknife)
    tag_info |= {"jackknife_folds": jackknife, "train_upos_jackknifed": round(jk_acc, 2),
                 "tagger_dev_upos": round(tinfo["dev_upos"], 2), "tagger_steps": tinfo["steps"],
                 "tagger_best_step": tinfo["best_step"], "tagger_stopped_by": tinfo["stopped_by"],
                 "tagger_seconds": round(time.perf_counter() - t0, 1)}
    return with_tags(tr, tr_tags), with_tags(dv, tag(tagger, vocab, dv)), tag_info  # dev tagged once


def _kfold_phase(tmp: Path, tr, dv, init_parser, folds, fold_minutes, seed, threads, progress, device: str = "cpu",
                 steps: StepBudget | None = None, max_epochs: int = 200):
    """The refiner's first training graphs: k-fold predictions of its initial parser's architecture."""
    t_k = time.perf_counter()
    preds, kfold_info = kfold_graphs(tr, dv, init_parser, tmp / "_kfold", folds, fold_minutes, seed, threads, progress,
                                     device, steps, max_epochs)
    shutil.rmtree(tmp / "_kfold")
    kfold_info["kfold"]["seconds"] = round(time.perf_counter() - t_k, 1)
    return with_initial_graphs(tr, preds), kfold_info


def encoder_groups(model, lr: float, scale: float, decay: float) -> list[dict]:
    """Adam's parameter groups: the parser's own layers at ``lr``; a pre-trained encoder's at ``lr · scale`` for its
    top (USL/USI, the layers above the last Transformer layer), ``lr · scale · decay^(L−l)`` for its Transformer
    layer l of L (0-based: the lowest decays most) and ``lr · scale · decay^(L+1)`` for its embeddings (layer-wise
    decay; 1: one rate). ``scale`` 0 freezes the encoder."""
    enc = getattr(model, "words", None)
    own = [p for n, p in model.named_parameters() if not n.startswith("words.")]
    if enc is None:
        return [{"params": own}]
    if scale == 0:
        enc.requires_grad_(False)
        return [{"params": own}]
    L = len(enc.encoder.layers)
    depth: dict[int, list] = {}
    for n, p in enc.encoder.named_parameters():
        if n.startswith("layers."):
            d = L - int(n.split(".")[1])
        elif n.startswith(("embed.", "positions.")):
            d = L + 1
        else:
            d = 0
        depth.setdefault(d, []).append(p)
    return [{"params": own}] + [{"params": ps, "lr": lr * scale * decay ** d} for d, ps in sorted(depth.items())]


def lr_schedule(warmup: int, anneal: tuple[float, int] | None):
    """The learning rate's factor at update k: linear warm-up over ``warmup`` updates, times ``rate^(k / every)``
    with ``anneal`` = (rate, every) (the thesis's Table 5.1: 0.75^(t/5000))."""
    def factor(k: int) -> float:
        f = min(1.0, (k + 1) / warmup) if warmup else 1.0
        return f * anneal[0] ** (k / anneal[1]) if anneal else f

    return factor


def _fit(tmp: Path, parser, tr, dv, settings: dict, t_iter: int, record: dict, minutes, max_epochs, seed, t0,
         progress, label: str = "", steps: StepBudget | None = None) -> dict:
    """The training loop: Adam with linear warm-up, dev LAS every ``steps.eval_every`` steps or after every epoch
    (the parser's own decoding), the best model saved in ``tmp`` with ``record``; returns the final training
    record."""
    model, architecture = parser.model, parser.architecture
    enc_rec = record.get("encoder", {})
    groups = encoder_groups(model, settings["lr"], enc_rec.get("lr_scale", 1.0), enc_rec.get("lr_decay", 1.0))
    opt = torch.optim.Adam(groups, lr=settings["lr"], betas=settings["betas"])
    steps_up, anneal = settings["warmup"], settings.get("anneal")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(steps_up, anneal)) if steps_up or anneal else None
    dv_initial = parser.initial.parse(dv) if parser.initial is not None else None  # G^0 of dev, computed once
    t_parser, tokens, dev = time.perf_counter(), 0, None

    def batch_loss(b, words):
        nonlocal tokens
        tokens += int((b["heads"] != -100).sum())
        return architecture.loss(model, b, words, t_iter)

    def dev_las(epoch):
        nonlocal dev
        dev = score([(s.heads, s.deprels) for s in dv], parser.parse(dv, initial_preds=dv_initial))
        return dev.las, {"epoch": epoch, "dev_las": dev.las, "dev_uas": dev.uas,
                         "elapsed_s": round(time.perf_counter() - t0, 1),  # dev eval included
                         "parser_tokens_per_s": round(tokens / (time.perf_counter() - t_parser), 1)}

    def save(epoch, history):
        parsers.save(parser, tmp, {"arch": record["arch"], "best_epoch": epoch, "best_step": history[-1]["step"],
                                   "dev": dev.to_dict(), "history": history}
                     | {k: v for k, v in record.items() if k != "arch"})

    with memo_frozen(model):  # a frozen encoder reads each training and dev sentence once
        epoch, history = train_epochs(model, opt, tr, parser.vocab, random.Random(seed), settings["max_tokens"],
                                      batch_loss, dev_las, save, minutes, max_epochs, t0, t_first=t_parser,
                                      desc=f"{label}{parser.arch} parser", progress=progress, scheduler=sched,
                                      steps=steps)
    info = json.loads((tmp / "training.json").read_text()) | {
        "history": history, "epochs": epoch, "steps": history[-1]["step"], "stopped_by": history[-1]["stop"],
        "train_seconds": round(time.perf_counter() - t0, 1)}
    atomic_write_json(tmp / "training.json", info)
    return info


def predict_file(model_dir, in_file, out_file, progress: bool = True, device: str = "cpu") -> None:
    """Write ``in_file`` with what the model predicted: heads and deprels, UPOS from a predicted-tag parser's
    tagger; LEMMA, XPOS and FEATS are not predicted and written as ``_`` (a gold-tag parser reads UPOS from the
    input and predicts none, so UPOS is ``_`` too): a scorer never credits the model with the input's gold."""
    parser = parsers.load(model_dir).to(resolve_device(device))
    sents = read_conllu(in_file)
    tags = tag(parser.tagger, parser.vocab, sents) if parser.tagger is not None else None
    preds = parser.parse(with_tags(sents, tags) if tags else sents, progress=progress)
    write_conllu(out_file, [with_predictions(s, h, r, tags[k] if tags else None)
                            for k, (s, (h, r)) in enumerate(zip(sents, preds, strict=True))])
