"""Train, evaluate and run the biaffine parser; models are saved like HF models (config + safetensors).

Gold tokenisation. Tags: ``gold`` (gold UPOS in training and at test time) or ``predicted`` (the
parser's own small tagger, ``parsing.tagger``: the parser is trained on jackknifed tags, i.e. each
fold of the training set tagged by a tagger that did not see it, so it learns the tagger's real
errors; dev and test are tagged by a tagger trained on all of train). Threads are set deliberately
(default 1). Model selection on dev LAS (MST decoding); the best model is written atomically
whenever dev LAS improves, so an interrupted run keeps its best model. The time budget covers the
taggers too.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory, atomic_write_json
from forgetbench.parsing.batching import Vocab, batches, batchify
from forgetbench.parsing.conll import Sentence, read_conllu, with_predictions, write_conllu
from forgetbench.parsing.decode import mst
from forgetbench.parsing.epochs import train_epochs
from forgetbench.parsing.metrics import ParseScores, score
from forgetbench.parsing.model import BiaffineParser, ParserConfig
from forgetbench.parsing.saving import load_module_dir, save_module_dir
from forgetbench.parsing.tagger import (
    load_tagger,
    load_tagger_dir,
    tag,
    train_tagger,
    upos_accuracy,
    with_tags,
)


def loss_fn(arc, rel_at_gold, b):
    """Head cross-entropy + label cross-entropy given the gold head; ``rel_at_gold`` [B, R, L]."""
    mask = b["heads"] != -100
    arc_loss = torch.nn.functional.cross_entropy(arc[mask], b["heads"][mask])
    rmask = b["rels"] != -100
    rel_loss = torch.nn.functional.cross_entropy(rel_at_gold.transpose(1, 2)[rmask], b["rels"][rmask])
    return arc_loss + rel_loss


@torch.no_grad()
def predict(model: BiaffineParser, vocab: Vocab, sents: list[Sentence], max_tokens: int = 4000,
            progress: bool = False, tagger=None) -> list[tuple[list[int], list[str]]]:
    """Heads and labels per sentence; with ``tagger`` the UPOS inputs are its predictions, not the file's."""
    model.eval()
    if tagger is not None:
        sents = with_tags(sents, tag(tagger, vocab, sents, max_tokens))
    preds: dict[int, tuple[list[int], list[str]]] = {}
    index = {id(s): k for k, s in enumerate(sents)}
    for bs in tqdm(batches(sents, max_tokens, shuffle=False), disable=None if progress else True, desc="parse"):
        b = batchify(bs, vocab)
        arc, rel_dep, rel_head = model.encode(b["words"], b["chars"], b["tags"])
        arc_np = arc.double().numpy()
        heads = torch.zeros(b["words"].shape, dtype=torch.long)
        for k, s in enumerate(bs):
            n = len(s.words)
            heads[k, 1 : n + 1] = torch.tensor(mst(arc_np[k, : n + 1, : n + 1].T))  # S[h, d]
        labels = model.label_scores(rel_dep, rel_head, heads).argmax(1)  # labels at the decoded heads only
        for k, s in enumerate(bs):
            n = len(s.words)
            preds[index[id(s)]] = (heads[k, 1 : n + 1].tolist(), [vocab.rels[r] for r in labels[k, 1 : n + 1].tolist()])
    return [preds[k] for k in range(len(sents))]


def evaluate(model, vocab, sents: list[Sentence], tagger=None) -> ParseScores:
    return score([(s.heads, s.deprels) for s in sents], predict(model, vocab, sents, tagger=tagger))


def jackknife_tags(tr: list[Sentence], dv: list[Sentence], vocab: Vocab, work: Path, folds: int, minutes: float,
                   seed: int, progress: bool) -> list[list[str]]:
    """UPOS for every training sentence from a tagger trained on the other folds (folds by position mod k)."""
    tags: list[list[str] | None] = [None] * len(tr)
    for k in range(folds):
        held = [i for i in range(len(tr)) if i % folds == k]
        rest = [s for i, s in enumerate(tr) if i % folds != k]
        train_tagger(rest, dv, vocab, work / f"fold{k}", minutes, seed=seed + k, progress=progress)
        tg = load_tagger_dir(work / f"fold{k}")
        for i, t in zip(held, tag(tg, vocab, [tr[i] for i in held]), strict=True):
            tags[i] = t
    return tags  # type: ignore[return-value]


def save_parser(model: BiaffineParser, vocab: Vocab, out_dir: Path, info: dict) -> None:
    save_module_dir(model, "forgetbench-biaffine", model.cfg.to_dict(), out_dir)
    atomic_write_json(out_dir / "vocab.json", vocab.to_dict())
    atomic_write_json(out_dir / "training.json", info)


def parser_skeleton(model_dir: str | Path) -> BiaffineParser:
    """The parser of ``model_dir`` on the meta device, no weights loaded (for streamed compression)."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    cfg.pop("model_type", None)
    with torch.device("meta"):
        return BiaffineParser(ParserConfig(**cfg))


def load_parser(model_dir: str | Path) -> tuple[BiaffineParser, Vocab]:
    model = load_module_dir(model_dir, "forgetbench-biaffine", lambda c: BiaffineParser(ParserConfig(**c)), "biaffine parser")
    return model, Vocab(**json.loads((Path(model_dir) / "vocab.json").read_text()))


HELD_OUT_EVERY = 10


def held_out_split(sents: list[Sentence]) -> tuple[list[Sentence], list[Sentence]]:
    """For treebanks without a dev set: every 10th training sentence (positions 9, 19, …) is held out for model
    selection, the rest is trained on."""
    dev = [s for i, s in enumerate(sents) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
    return [s for i, s in enumerate(sents) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1], dev


def train(train_file: str | Path, dev_file: str | Path | None, out_dir: str | Path, minutes: float = 15.0, max_epochs: int = 200,
          seed: int = 1, threads: int = 1, max_tokens: int = 3000, lr: float = 2e-3, progress: bool = True,
          tags: str = "gold", tagger_minutes: float = 1.0, jackknife: int = 4, **model_kw) -> dict:
    """Train on ``train_file``, select on ``dev_file`` (None: ``held_out_split`` of the training file); ``minutes``
    bounds the whole run (taggers included)."""
    if tags not in ("gold", "predicted"):
        raise ForgetbenchError(f"tags must be 'gold' or 'predicted', got {tags!r}")
    if tags == "predicted" and (jackknife < 2 or (jackknife + 1) * tagger_minutes >= minutes):
        raise ForgetbenchError(f"predicted tags need jackknife >= 2 folds and (folds + 1) x tagger_minutes < minutes; "
                               f"got {jackknife} folds x {tagger_minutes} min of {minutes} min")
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tr = read_conllu(train_file)
    if dev_file is None:
        tr, dv = held_out_split(tr)
        if not dv:
            raise ForgetbenchError(f"{train_file}: {len(tr)} sentences are too few to hold out a dev set "
                                   f"(every {HELD_OUT_EVERY}th); give --dev")
    else:
        dv = read_conllu(dev_file)
    vocab = Vocab.build(tr)
    model = BiaffineParser(ParserConfig(len(vocab.words), len(vocab.chars), len(vocab.tags), len(vocab.rels), **model_kw))
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.9))
    out = Path(out_dir)
    t0 = time.perf_counter()
    tag_info: dict = {"tags": tags}
    with atomic_directory(out) as tmp:
        if tags == "predicted":
            work = tmp / "_jackknife"
            tr_tags = jackknife_tags(tr, dv, vocab, work, jackknife, tagger_minutes, seed, progress)
            shutil.rmtree(work)
            jk_acc = upos_accuracy(tr, tr_tags)
            tinfo = train_tagger(tr, dv, vocab, tmp / "tagger", tagger_minutes, seed=seed, progress=progress)
            tagger = load_tagger(tmp)
            tr = with_tags(tr, tr_tags)
            dv = with_tags(dv, tag(tagger, vocab, dv))  # tagged once, not at every epoch's evaluation
            tag_info |= {"jackknife_folds": jackknife, "train_upos_jackknifed": round(jk_acc, 2),
                         "tagger_dev_upos": round(tinfo["dev_upos"], 2), "tagger_seconds": round(time.perf_counter() - t0, 1)}
        t_parser = time.perf_counter()
        tokens = 0

        def batch_loss(b, words):
            nonlocal tokens
            arc, rel_dep, rel_head = model.encode(words, b["chars"], b["tags"])
            tokens += int((b["heads"] != -100).sum())
            return loss_fn(arc, model.label_scores(rel_dep, rel_head, b["heads"]), b)

        def dev_las(epoch):
            nonlocal dev
            dev = evaluate(model, vocab, dv)
            return dev.las, {"epoch": epoch, "dev_las": dev.las, "dev_uas": dev.uas,
                             "elapsed_s": round(time.perf_counter() - t0, 1),  # dev eval included
                             "parser_tokens_per_s": round(tokens / (time.perf_counter() - t_parser), 1)}

        def save(epoch, history):
            save_parser(model, vocab, tmp, {"best_epoch": epoch, "dev": dev.to_dict(), "history": history,
                                            "threads": threads, "seed": seed, "train": str(train_file),
                                            "dev_data": str(dev_file) if dev_file else f"held out: every {HELD_OUT_EVERY}th "
                                                                                 "training sentence",
                                            "environment": environment()} | tag_info)

        dev = None
        epoch, history = train_epochs(model, opt, tr, vocab, rng, max_tokens, batch_loss, dev_las, save, minutes,
                                      max_epochs, t0, t_first=t_parser, desc="epoch", progress=progress)
        info = json.loads((tmp / "training.json").read_text()) | {"history": history, "epochs": epoch,
                                                                    "train_seconds": round(time.perf_counter() - t0, 1)}
        atomic_write_json(tmp / "training.json", info)
    return info


def predict_file(model_dir, in_file, out_file, progress: bool = True) -> None:
    """Write ``in_file`` with what the model predicted: heads and deprels, UPOS from a predicted-tag parser's
    tagger; LEMMA, XPOS and FEATS are not predicted and written as ``_`` (a gold-tag parser reads UPOS from the
    input and predicts none, so UPOS is ``_`` too): a scorer never credits the model with the input's gold."""
    model, vocab = load_parser(model_dir)
    tagger = load_tagger(model_dir)
    sents = read_conllu(in_file)
    tags = tag(tagger, vocab, sents) if tagger is not None else None
    preds = predict(model, vocab, with_tags(sents, tags) if tags else sents, progress=progress)
    write_conllu(out_file, [with_predictions(s, h, r, tags[k] if tags else None)
                            for k, (s, (h, r)) in enumerate(zip(sents, preds, strict=True))])
