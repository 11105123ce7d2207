"""A small UPOS tagger of the parser's own, for the predicted-tag mode (no gold tags at test time).

word + character embeddings → one BiLSTM layer → linear → UPOS, cross-entropy; the same word and
character vocabularies as the parser, dev-accuracy model selection, saved beside the parser in
``<parser>/tagger/`` (config + safetensors). Units are declared like the parser's, so the
compression hooks reach it too.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from forgetbench.io import atomic_write_json
from forgetbench.parsing.data.batching import batches, batchify
from forgetbench.parsing.data.conll import Sentence
from forgetbench.parsing.epochs import StepBudget, train_epochs
from forgetbench.parsing.layers.modules import char_features
from forgetbench.parsing.layers.regularise import SharedDropout, VariationalLSTM
from forgetbench.parsing.saving import load_module_dir, save_module_dir


@dataclass
class TaggerConfig:
    n_words: int
    n_chars: int
    n_tags: int
    word_dim: int = 100
    char_dim: int = 50
    char_hidden: int = 100
    lstm_hidden: int = 150
    dropout: float = 0.33
    lstm_layers: int = 1  # the thesis's tagger (§6.3): 2
    recurrent_dropout: float = 0.0  # the thesis's tagger: 0.5, the same mask at every step (``regularise``)


class UposTagger(nn.Module):
    forgetbench_units = [
        {"unit": "embeddings", "module": "embed"},
        {"unit": "char_encoder", "module": "char_lstm"},
        {"unit": "encoder.lstm", "module": "lstm"},
        {"unit": "classifier", "module": "out"},
    ]
    forgetbench_residual_blocks: list = []

    def __init__(self, cfg: TaggerConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.ModuleDict({"word": nn.Embedding(cfg.n_words, cfg.word_dim, padding_idx=0),
                                    "char": nn.Embedding(cfg.n_chars, cfg.char_dim, padding_idx=0)})
        self.char_lstm = nn.LSTM(cfg.char_dim, cfg.char_hidden // 2, batch_first=True, bidirectional=True)
        self.lstm = VariationalLSTM(cfg.word_dim + cfg.char_hidden, cfg.lstm_hidden, num_layers=cfg.lstm_layers,
                                    batch_first=True, bidirectional=True,
                                    dropout=cfg.dropout if cfg.lstm_layers > 1 else 0.0,
                                    recurrent_dropout=cfg.recurrent_dropout)
        self.out = nn.Linear(2 * cfg.lstm_hidden, cfg.n_tags)
        self.drop = SharedDropout(cfg.dropout) if cfg.recurrent_dropout > 0 else nn.Dropout(cfg.dropout)

    def forward(self, words, chars):
        """words [B, L] (position 0 = root), chars [B, L, C] → tag scores [B, L, n_tags]."""
        x = torch.cat([self.embed["word"](words), char_features(self.embed["char"], self.char_lstm, chars)], -1)
        lengths = (words != 0).sum(-1).cpu()
        out, _ = self.lstm(nn.utils.rnn.pack_padded_sequence(self.drop(x), lengths, batch_first=True, enforce_sorted=False))
        h, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=words.shape[1])
        return self.out(self.drop(h))


def _tag_ids(b: dict) -> torch.Tensor:
    gold = b["tags"].clone()
    gold[:, 0] = -100  # the root is not tagged
    return gold.masked_fill(b["words"] == 0, -100)


@torch.no_grad()
def tag(tagger: UposTagger, vocab, sents: list[Sentence], max_tokens: int = 4000) -> list[list[str]]:
    """Predicted UPOS per sentence (never PAD/UNK/ROOT)."""
    tagger.eval()
    index = {id(s): k for k, s in enumerate(sents)}
    out: dict[int, list[str]] = {}
    for bs in batches(sents, max_tokens, shuffle=False):
        b = batchify(bs, vocab, device=next(tagger.parameters()).device)
        scores = tagger(b["words"], b["chars"])
        scores[..., :3] = float("-inf")
        pred = scores.argmax(-1)
        for k, s in enumerate(bs):
            out[index[id(s)]] = [vocab.tags[t] for t in pred[k, 1 : len(s.words) + 1].tolist()]
    return [out[k] for k in range(len(sents))]


def upos_accuracy(sents: list[Sentence], pred: list[list[str]]) -> float:
    """Percentage of words whose predicted UPOS equals the gold one in ``sents``."""
    n = sum(len(s.words) for s in sents)
    return 100.0 * sum(a == b for s, p in zip(sents, pred, strict=True) for a, b in zip(s.upos, p, strict=True)) / n


def accuracy(tagger, vocab, sents: list[Sentence]) -> float:
    return upos_accuracy(sents, tag(tagger, vocab, sents))


def with_tags(sents: list[Sentence], tags: list[list[str]]) -> list[Sentence]:
    """Copies of ``sents`` whose UPOS are ``tags`` (the originals keep their gold tags)."""
    out = []
    for s, ts in zip(sents, tags, strict=True):
        words = [dict(w) | {"upos": t} for w, t in zip(s.words, ts, strict=True)]
        out.append(Sentence(s.tokens, words))
    return out


def train_tagger(tr: list[Sentence], dv: list[Sentence], vocab, out_dir: Path, minutes: float | None, seed: int = 1,
                 max_tokens: int = 1000, lr: float = 5e-3, progress: bool = True, max_epochs: int = 999,
                 desc: str = "tagger", device: torch.device | str = "cpu", steps: StepBudget | None = None,
                 network: dict | None = None) -> dict:
    """Dev-selected tagger in ``out_dir``: within ``steps`` (a ``StepBudget``: the parser's rule; ``minutes`` a
    safety stop) or within ``minutes`` and ``max_epochs``, whichever ends first (no epoch starts that would end
    past the time budget; an epoch budget alone makes the run deterministic).
    Small batches and a high rate: measured on English-LinES, 95.0 % dev UPOS after 87 s (1000 tokens,
    5e-3) against 90.2 % after 79 s (3000 tokens, 2e-3). ``device``: where it trains (``parse train --device``);
    ``network``: ``TaggerConfig`` settings (the thesis's tagger: ``train.NETWORKS``)."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tagger = UposTagger(TaggerConfig(len(vocab.words), len(vocab.chars), len(vocab.tags), **(network or {}))).to(device)
    opt = torch.optim.Adam(tagger.parameters(), lr=lr, betas=(0.9, 0.9))
    t0 = time.perf_counter()

    def batch_loss(b, words):
        return nn.functional.cross_entropy(tagger(words, b["chars"]).flatten(0, 1), _tag_ids(b).flatten())

    acc = None

    def dev_upos(epoch):
        nonlocal acc
        acc = accuracy(tagger, vocab, dv)
        return acc, {"epoch": epoch, "dev_upos": round(acc, 2), "elapsed_s": round(time.perf_counter() - t0, 1)}

    def save(epoch, history):
        save_tagger(tagger, out_dir, {"best_epoch": epoch, "best_step": history[-1]["step"], "dev_upos": acc,
                                      "history": history, "seed": seed})

    epoch, history = train_epochs(tagger, opt, tr, vocab, rng, max_tokens, batch_loss, dev_upos, save, minutes, max_epochs,
                                  t0, desc=desc, progress=progress, steps=steps)
    info = json.loads((out_dir / "training.json").read_text()) | {
        "history": history, "epochs": epoch, "steps": history[-1]["step"], "stopped_by": history[-1]["stop"],
        "budget": steps.to_dict() if steps else {"minutes": minutes, "max_epochs": max_epochs},
        "train_seconds": round(time.perf_counter() - t0, 1)}
    atomic_write_json(out_dir / "training.json", info)
    return info


def save_tagger(tagger: UposTagger, out_dir: Path, info: dict) -> None:
    save_module_dir(tagger, "forgetbench-upos-tagger", asdict(tagger.cfg), out_dir)
    atomic_write_json(out_dir / "training.json", info)


def load_tagger(parser_dir: str | Path) -> UposTagger | None:
    """The tagger saved with a parser trained in predicted-tag mode, or None (gold-tag parser)."""
    d = Path(parser_dir) / "tagger"
    return load_tagger_dir(d) if (d / "config.json").is_file() else None


def load_tagger_dir(d: str | Path) -> UposTagger:
    return load_module_dir(d, "forgetbench-upos-tagger", lambda c: UposTagger(TaggerConfig(**c)), "UPOS tagger")
