"""Pre-training data: raw text and UD trees, one SentencePiece vocabulary, and batches that hold both.

Rules:

1. **Trees**: the ``*-ud-train.conllu`` of each ``data.treebanks`` folder (``parsing.data.conll.read_conllu``: a
   sentence without exactly one root or with a cycle is refused in one line). Never a dev or test sentence.
2. **Raw text**: for each of ``data.raw_languages``, the training sides of the shared corpora
   (``train.corpus.raw_pairs``: the foreign side; ``en``: the English sides of every listed language's pairs, or
   of the German pairs when ``en`` is listed alone),
   de-duplicated, without any sentence that occurs (normalised) in FLORES-101, NTREX-128, TICO-19 or a dev/test
   split of the listed treebanks, then ``raw_per_language`` of them drawn with the run's seed. The treebanks'
   training sentences join the raw text, so the MLM-only encoder reads the same text as the others. Without the
   shared folder (a clone) the raw text is the treebanks' text alone, with a warning.
3. **Vocabulary**: a unigram SentencePiece model trained on the raw text (one thread, input order fixed):
   ``<pad>`` 0, ``<unk>`` 1, ``<s>`` 2, ``</s>`` 3, ``<mask>`` 4.
4. **Encoding**: raw sentences as ``<s> pieces </s>``; tree sentences word by word (each word's own pieces), their
   heads and labels by ``subword_trees.subword_tree`` (labels: the treebanks' relations, sorted, then
   ``subword``). Sentences over ``max_pieces`` positions are left out and counted.
5. **Held out** (``dev_set``): the treebanks' dev sentences encoded as rule 4's trees (``dev.npz``, made when a run
   first measures its dev score), never trained on; a relation the training trees lack is unscored.
6. **Batches** (``Batches``, ``buckets``): an epoch is one pass over the raw text in a seeded order
   (``numpy.random.default_rng(seed · 1,000 + epoch)``); that order is taken in pools of ``POOL`` sentences, each
   pool sorted by length (ties in the seeded order) and cut into batches whose padded size — sentences × the
   longest — is at most ``max_tokens / 2``; the batches are then put in an order drawn from the same generator.
   Each is paired with the next batch of trees, cut the same way from their own seeded order (cycled). Sentences
   of like length share a batch, so the padded positions are near the real ones (in random batches of 2,048 real
   text tokens the longest sentence made 7,700 positions, and every USI and label-biaffine product grows with
   the square of that length).
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import numpy as np
import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_bytes, atomic_write_json
from forgetbench.models.vocabulary import train_spm
from forgetbench.parsing.layers.pretrained import BOS, EOS, PAD, UNK
from forgetbench.parsing.structures.subword_trees import SUBWORD, subword_tree
from forgetbench.pretrain.config import PretrainConfig


def treebank_sentences(folder: Path, split: str):
    from forgetbench.parsing.data.conll import read_conllu

    files = sorted(Path(folder).glob(f"*-ud-{split}.conllu"))
    return [s for f in files for s in read_conllu(f)]


def check_treebanks(cfg: PretrainConfig) -> None:
    """Rule 1 before any work: every split of every treebank reads (one line for the first bad sentence)."""
    for t in cfg.data.treebanks:
        for split in ("train", "dev", "test"):
            treebank_sentences(Path(t), split)


def raw_text(cfg: PretrainConfig, banned: set[str], log=print) -> dict[str, list[str]]:
    """Rule 2 (without the treebanks' text): language → sentences."""
    from forgetbench.train.corpus import normalise, raw_pairs

    shared = Path(cfg.data.shared) if cfg.data.shared else None
    if shared is None or not shared.is_dir():
        log(f"warning: data.shared {cfg.data.shared or '(none)'} not found: the raw text is the treebanks' text alone")
        return {}
    foreign = [x for x in cfg.data.raw_languages if x != "en"]
    out: dict[str, list[str]] = {}
    english: list[str] = []
    for lang in foreign or ["de"]:
        pairs = raw_pairs(shared, lang)
        english += [e for e, _ in pairs]
        if lang in foreign:
            out[lang] = [x for _, x in pairs]
    if "en" in cfg.data.raw_languages:
        out["en"] = english
    rng = random.Random(cfg.train.seed)
    for lang, sents in out.items():
        seen, keep = set(), []
        for s in sents:
            n = normalise(s)
            if s.strip() and n not in seen and n not in banned:
                seen.add(n)
                keep.append(s.strip())
        rng.shuffle(keep)
        out[lang] = keep[: cfg.data.raw_per_language]
    return out


def _flat(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    return (np.concatenate([np.asarray(r, dtype=np.int32) for r in rows]) if rows else np.zeros(0, np.int32)), offsets


def prepare(cfg: PretrainConfig, out: Path, log=print) -> dict:
    """Rules 1–4 into ``out`` (``spm.model``, ``text.npz``, ``trees.npz``, ``prepared.json``); a prepared folder is
    reused."""
    import sentencepiece as spm

    from forgetbench.train.corpus import eval_sentences, normalise, repository_eval_sentences

    if (out / "prepared.json").is_file():
        return json.loads((out / "prepared.json").read_text())
    trees = [(t, s) for t in cfg.data.treebanks for s in treebank_sentences(Path(t), "train")]
    shared = Path(cfg.data.shared) if cfg.data.shared else None
    banned = eval_sentences(shared) if shared is not None and shared.is_dir() else repository_eval_sentences()
    for t in cfg.data.treebanks:
        for split in ("dev", "test"):
            banned |= {normalise(" ".join(s.forms)) for s in treebank_sentences(Path(t), split)}
    raw = raw_text(cfg, banned, log)
    tree_text = [" ".join(s.forms) for _, s in trees]
    text = [s for lang in sorted(raw) for s in raw[lang]] + tree_text
    if not text:
        raise ForgetbenchError(f"{cfg.source}: no text to pre-train on (no raw text and no treebank sentences)")
    model_bytes = train_spm(text, cfg.spm.vocab_size, model_type="unigram", character_coverage=cfg.spm.character_coverage,
                            ids={"pad_id": PAD, "unk_id": UNK, "bos_id": BOS, "eos_id": EOS},
                            user_defined_symbols=("<mask>",), shuffle_input_sentence=False, seed_sentencepiece_size=None)
    atomic_write_bytes(out / "spm.model", model_bytes)
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    limit = cfg.data.max_pieces
    rows = [[BOS, *sp.encode(s), EOS] for s in text]
    text_rows = [r for r in rows if len(r) <= limit]
    labels = sorted({r for _, s in trees for r in s.deprels}) + [SUBWORD]
    index = {x: i for i, x in enumerate(labels)}
    ids, heads, rels = [], [], []
    for t, s in trees:
        pieces = [sp.encode(w) or [UNK] for w in s.forms]
        if sum(map(len, pieces)) + 2 > limit:
            continue
        h, lab = subword_tree([len(p) for p in pieces], s.heads, s.deprels, f"{t} sentence {len(ids) + 1}")
        ids.append([BOS, *(i for p in pieces for i in p), EOS])
        heads.append(h)
        rels.append([-100 if x is None else index[x] for x in lab])
    for name, arrays in (("text.npz", {"ids": text_rows}), ("trees.npz", {"ids": ids, "heads": heads, "rels": rels})):
        flat = {}
        for k, v in arrays.items():
            flat[k], flat[k + "_offsets"] = _flat(v)
        buf = io.BytesIO()
        np.savez(buf, **flat)
        atomic_write_bytes(out / name, buf.getvalue())
    meta = {"vocab_size": sp.get_piece_size(), "labels": labels, "raw_sentences": {k: len(v) for k, v in raw.items()},
            "treebank_sentences": len(tree_text), "text_sentences": len(text_rows), "tree_sentences": len(ids),
            "left_out_long": {"text": len(rows) - len(text_rows), "trees": len(trees) - len(ids)},
            "treebanks": cfg.data.treebanks}
    atomic_write_json(out / "prepared.json", meta)
    log(f"pre-training data: {len(text_rows):,} sentences of text, {len(ids):,} trees, vocabulary {meta['vocab_size']:,}")
    return meta


def dev_set(cfg: PretrainConfig, out: Path, labels: list[str]) -> dict[str, list[np.ndarray]]:
    """Rule 5: ``{"ids", "heads", "rels"}``, one row per dev sentence that fits ``max_pieces``."""
    import sentencepiece as spm

    f = out / "dev.npz"
    if not f.is_file():
        sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
        index = {x: i for i, x in enumerate(labels)}
        rows: dict[str, list] = {"ids": [], "heads": [], "rels": []}
        for t in cfg.data.treebanks:
            for k, s in enumerate(treebank_sentences(Path(t), "dev")):
                pieces = [sp.encode(w) or [UNK] for w in s.forms]
                if sum(map(len, pieces)) + 2 > cfg.data.max_pieces:
                    continue
                h, lab = subword_tree([len(p) for p in pieces], s.heads, s.deprels, f"{t} dev sentence {k + 1}")
                rows["ids"].append([BOS, *(i for p in pieces for i in p), EOS])
                rows["heads"].append(h)
                rows["rels"].append([-100 if x is None else index.get(x, -100) for x in lab])
        flat = {}
        for k, v in rows.items():
            flat[k], flat[k + "_offsets"] = _flat(v)
        buf = io.BytesIO()
        np.savez(buf, **flat)
        atomic_write_bytes(f, buf.getvalue())
    z = np.load(f, allow_pickle=False)
    return {k: [r for r in _Ragged(z, k)] for k in ("ids", "heads", "rels")}


class _Ragged:
    def __init__(self, z, key: str):
        self.flat, self.off = z[key], z[key + "_offsets"]

    def __len__(self) -> int:
        return len(self.off) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.flat[self.off[i]: self.off[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.off)


def pad_rows(rows: list[np.ndarray], value: int) -> torch.Tensor:
    n = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), n), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.from_numpy(r.astype(np.int64))
    return out


POOL = 1000  # sentences sorted together (rule 6)


def buckets(order: np.ndarray, lengths: np.ndarray, budget: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Rule 6: ``order`` cut into batches of at most ``budget`` padded positions (one sentence longer than that
    alone), like lengths together, the batches in an order drawn from ``rng``."""
    out = []
    for p in range(0, len(order), POOL):
        pool = order[p: p + POOL]
        pool = pool[np.argsort(lengths[pool], kind="stable")]
        cur: list = []
        for i in pool:
            if cur and (len(cur) + 1) * lengths[i] > budget:  # sorted: i is the longest so far
                out.append(np.asarray(cur))
                cur = []
            cur.append(i)
        if cur:
            out.append(np.asarray(cur))
    return [out[k] for k in rng.permutation(len(out))] if out else out


def token_chunks(order: np.ndarray, lengths: np.ndarray, budget: int) -> list[np.ndarray]:
    """``order`` cut into consecutive chunks of at most ``budget`` real tokens (the held-out set's batches)."""
    out, cur, used = [], [], 0
    for i in order:
        if cur and used + lengths[i] > budget:
            out.append(np.asarray(cur))
            cur, used = [], 0
        cur.append(i)
        used += lengths[i]
    if cur:
        out.append(np.asarray(cur))
    return out


class Batches:
    """Rule 6, as ``train.loop.BatchSource``."""

    def __init__(self, out: Path, with_trees: bool):
        t, g = np.load(out / "text.npz", allow_pickle=False), np.load(out / "trees.npz", allow_pickle=False)
        self.text = _Ragged(t, "ids")
        self.tree_ids, self.heads, self.rels = _Ragged(g, "ids"), _Ragged(g, "heads"), _Ragged(g, "rels")
        self.with_trees = with_trees and len(self.tree_ids) > 0

    def batches(self, max_tokens: int, seed: int, epoch: int) -> list:
        rng = np.random.default_rng(seed * 1000 + epoch)
        text = buckets(rng.permutation(len(self.text)), self.text.lengths(), max_tokens // 2, rng)
        if not self.with_trees:
            return [(c, np.zeros(0, np.int64)) for c in text]
        trees: list[np.ndarray] = []
        cycle = 0
        while len(trees) < len(text):
            g = np.random.default_rng(seed * 1000 + epoch + 7919 * (cycle + 1))
            trees += buckets(g.permutation(len(self.tree_ids)), self.tree_ids.lengths(), max_tokens // 2, g)
            cycle += 1
        return list(zip(text, trees[: len(text)], strict=True))

    def epoch_tokens(self, batches: list) -> int:
        """The text and tree tokens an epoch's batches hold (trees only where they are read)."""
        text, trees = self.text.lengths(), self.tree_ids.lengths()
        return int(sum(text[t].sum() + (trees[g].sum() if len(g) else 0) for t, g in batches))

    def collate(self, idx) -> dict[str, torch.Tensor]:
        text, trees = idx
        b = {"text": pad_rows([self.text[i] for i in text], PAD)}
        if len(trees):
            b |= {"tree_ids": pad_rows([self.tree_ids[i] for i in trees], PAD),
                  "heads": pad_rows([self.heads[i] for i in trees], -100), "rels": pad_rows([self.rels[i] for i in trees], -100)}
        return b
