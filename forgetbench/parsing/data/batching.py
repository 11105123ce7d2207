"""Vocabularies and batches for the parser and its tagger: sentences → padded index tensors
(position 0 is the root), batches of similar length under a token budget."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from forgetbench.parsing.data.conll import Sentence

PAD, UNK, ROOT = "<pad>", "<unk>", "<root>"


@dataclass
class Vocab:
    words: list[str]
    chars: list[str]
    tags: list[str]
    rels: list[str]
    pieces: str | None = None  # a parser reading a pre-trained encoder: its SentencePiece file, in the parser folder

    def __post_init__(self):
        self.w2i = {w: i for i, w in enumerate(self.words)}
        self.c2i = {c: i for i, c in enumerate(self.chars)}
        self.t2i = {t: i for i, t in enumerate(self.tags)}
        self.r2i = {r: i for i, r in enumerate(self.rels)}
        self.sp = None

    def attach(self, folder: Path) -> Vocab:
        """Load the SentencePiece model ``pieces`` names from ``folder`` (a parser folder), if any."""
        if self.pieces:
            import sentencepiece as spm

            self.sp = spm.SentencePieceProcessor(model_file=str(Path(folder) / self.pieces))
        return self

    @classmethod
    def build(cls, sents: list[Sentence], min_freq: int = 2) -> Vocab:
        wc = Counter(f.lower() for s in sents for f in s.forms)
        cc = Counter(c for s in sents for f in s.forms for c in f)
        return cls([PAD, UNK, ROOT] + sorted(w for w, n in wc.items() if n >= min_freq),
                   [PAD, UNK, ROOT] + sorted(cc), [PAD, UNK, ROOT] + sorted({t for s in sents for t in s.upos}),
                   sorted({r for s in sents for r in s.deprels}))

    def to_dict(self) -> dict:
        return {"words": self.words, "chars": self.chars, "tags": self.tags, "rels": self.rels} | (
            {"pieces": self.pieces} if self.pieces else {})


def batchify(sents: list[Sentence], vocab: Vocab, max_chars: int = 20,
             device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """A batch's index tensors (built on the host, then moved to ``device`` where given: the parser's)."""
    L = max(len(s.words) for s in sents) + 1
    C = min(max_chars, max(len(f) for s in sents for f in s.forms))
    B = len(sents)
    words = torch.zeros(B, L, dtype=torch.long)
    tags = torch.zeros(B, L, dtype=torch.long)
    chars = torch.zeros(B, L, max(C, 1), dtype=torch.long)
    heads = torch.full((B, L), -100, dtype=torch.long)
    rels = torch.full((B, L), -100, dtype=torch.long)
    for b, s in enumerate(sents):
        words[b, 0], tags[b, 0], chars[b, 0, 0] = 2, 2, 2
        for i, (f, t) in enumerate(zip(s.forms, s.upos, strict=True), 1):
            words[b, i] = vocab.w2i.get(f.lower(), 1)
            tags[b, i] = vocab.t2i.get(t, 1)
            for k, c in enumerate(f[:C]):
                chars[b, i, k] = vocab.c2i.get(c, 1)
            heads[b, i] = s.heads[i - 1]
            rels[b, i] = vocab.r2i.get(s.deprels[i - 1], -100)
    out = {"words": words, "chars": chars, "tags": tags, "heads": heads, "rels": rels}
    if vocab.sp is not None:  # a parser reading a pre-trained encoder: each word's pieces
        from forgetbench.parsing.layers.pretrained import pieces_tensor

        out["pieces"] = pieces_tensor(vocab.sp, [s.forms for s in sents], L)
    if all(s.words and INITIAL_HEAD in s.words[0] for s in sents):  # an RNGTr refiner's training graphs G⁰
        g0_heads, g0_rels = torch.full((B, L), -1, dtype=torch.long), torch.full((B, L), -1, dtype=torch.long)
        for b, s in enumerate(sents):
            for i, w in enumerate(s.words, 1):
                g0_heads[b, i], g0_rels[b, i] = w[INITIAL_HEAD], vocab.r2i.get(w[INITIAL_DEPREL], 0)
        out |= {"g0_heads": g0_heads, "g0_rels": g0_rels}
    return out if device is None else moved(out, device)


def moved(batch: dict[str, torch.Tensor], device: torch.device | str) -> dict[str, torch.Tensor]:
    """A batch's tensors on ``device`` (a network's: batches are built on the host)."""
    return {k: v.to(device) for k, v in batch.items()}


INITIAL_HEAD, INITIAL_DEPREL = "forgetbench_g0_head", "forgetbench_g0_deprel"


def with_initial_graphs(sents: list[Sentence], preds: list[tuple[list[int], list[str]]]) -> list[Sentence]:
    """Copies of ``sents`` carrying an initial graph per word (``batchify`` then gives ``g0_heads``/``g0_rels``)."""
    return [Sentence(s.tokens, [dict(w) | {INITIAL_HEAD: h, INITIAL_DEPREL: r} for w, h, r in zip(s.words, hs, rs, strict=True)])
            for s, (hs, rs) in zip(sents, preds, strict=True)]


def batches(sents: list[Sentence], max_tokens: int, shuffle: bool, rng: random.Random | None = None) -> list[list[Sentence]]:
    order = sorted(range(len(sents)), key=lambda i: len(sents[i].words))
    out, cur, cur_max = [], [], 0
    for i in order:
        n = len(sents[i].words) + 1
        if cur and (len(cur) + 1) * max(cur_max, n) > max_tokens:
            out.append(cur)
            cur, cur_max = [], 0
        cur.append(sents[i])
        cur_max = max(cur_max, n)
    if cur:
        out.append(cur)
    if shuffle:
        (rng or random).shuffle(out)
    return out
