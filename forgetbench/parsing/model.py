"""Biaffine dependency parser (Dozat & Manning; METHOD.md §4), sized for CPU training.

word + character + UPOS embeddings → BiLSTM → four MLPs (arc-dep, arc-head, rel-dep, rel-head) →
biaffine arc scores s[b, h, d] and biaffine label scores; cross-entropy on heads and on labels
given the gold head. Units for the compression hooks are declared (``forgetbench_units``), so
``prune``/``quantize`` work on it unchanged.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json


def epoch_would_overrun(t0: float, epochs_done: int, minutes: float, t_first: float | None = None) -> bool:
    """True when another epoch, as long as the mean epoch so far (counted from ``t_first``, default ``t0``),
    would end after ``t0 + minutes``: time-budgeted training stops *within* its budget."""
    import time

    now = time.perf_counter()
    per_epoch = (now - (t0 if t_first is None else t_first)) / max(epochs_done, 1)
    return now + per_epoch > t0 + minutes * 60


def save_module_dir(module: nn.Module, model_type: str, cfg: dict, out_dir: Path) -> None:
    """HF-style folder: ``config.json`` (with ``model_type``) + ``model.safetensors``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(out_dir / "model.safetensors"))
    atomic_write_json(out_dir / "config.json", {"model_type": model_type, **cfg})


def load_module_dir(d: str | Path, model_type: str, build, what: str) -> nn.Module:
    """Inverse of ``save_module_dir``: ``build(config_dict)`` makes the module; the weights are loaded, eval mode."""
    d = Path(d)
    if not (d / "config.json").is_file():
        raise ForgetbenchError(f"{d}: not a {what} folder (no config.json)")
    cfg = json.loads((d / "config.json").read_text())
    if cfg.pop("model_type", None) != model_type:
        raise ForgetbenchError(f"{d}: config.json is not a forgetbench {what}")
    module = build(cfg)
    module.load_state_dict(load_file(str(d / "model.safetensors")))
    return module.eval()


@dataclass
class ParserConfig:
    n_words: int
    n_chars: int
    n_tags: int
    n_rels: int
    word_dim: int = 100
    char_dim: int = 50
    char_hidden: int = 100
    tag_dim: int = 50
    lstm_hidden: int = 200
    lstm_layers: int = 2
    arc_mlp: int = 300
    rel_mlp: int = 100
    dropout: float = 0.33

    def to_dict(self) -> dict:
        return asdict(self)


def char_features(embed: nn.Embedding, lstm: nn.LSTM, chars: torch.Tensor) -> torch.Tensor:
    """chars [B, L, C] → final states of a BiLSTM over each word's characters, [B, L, 2·hidden]."""
    B, L, C = chars.shape
    flat = chars.view(B * L, C)
    lengths = (flat != 0).sum(-1).clamp(min=1).cpu()
    packed = nn.utils.rnn.pack_padded_sequence(embed(flat), lengths, batch_first=True, enforce_sorted=False)
    _, (h, _) = lstm(packed)
    return torch.cat([h[0], h[1]], -1).view(B, L, -1)


class MLP(nn.Module):
    def __init__(self, d_in: int, d_out: int, dropout: float):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(nn.functional.leaky_relu(self.linear(x), 0.1))


class Biaffine(nn.Module):
    """s[b, o, h, d] = [x_d; 1]ᵀ W_o [y_h; 1] (bias on both sides)."""

    def __init__(self, d: int, n_out: int = 1):
        super().__init__()
        self.n_out = n_out
        self.weight = nn.Parameter(torch.zeros(n_out, d + 1, d + 1))

    def forward(self, dep, head):
        dep = torch.cat([dep, torch.ones_like(dep[..., :1])], -1)
        head = torch.cat([head, torch.ones_like(head[..., :1])], -1)
        s = torch.matmul(torch.matmul(dep.unsqueeze(1), self.weight), head.unsqueeze(1).transpose(-1, -2))
        return s  # [B, O, D(dep), H(head)]

    def at_heads(self, dep, head, heads):
        """Scores of each dependent d with one given head ``heads[b, d]`` only: [B, O, D]. The same numbers as
        ``forward(dep, head)[b, :, d, heads[b, d]]`` at O·(d+1)² per word instead of O·(d+1)·L."""
        dep = torch.cat([dep, torch.ones_like(dep[..., :1])], -1)
        head = torch.cat([head, torch.ones_like(head[..., :1])], -1)
        head_at = head.gather(1, heads.clamp(min=0).unsqueeze(-1).expand(-1, -1, head.shape[-1]))
        return torch.einsum("bdi,oij,bdj->bod", dep, self.weight, head_at)


class BiaffineParser(nn.Module):
    forgetbench_units = [
        {"unit": "embeddings", "module": "embed"},
        {"unit": "char_encoder", "module": "char_lstm"},
        {"unit": "encoder.lstm", "module": "lstm"},
        {"unit": "mlp", "module": "mlp", "groups": {"arc": ["arc_*"], "rel": ["rel_*"]}},
        {"unit": "biaffine", "module": "scorer"},
    ]
    forgetbench_residual_blocks: list = []

    def __init__(self, cfg: ParserConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.ModuleDict({"word": nn.Embedding(cfg.n_words, cfg.word_dim, padding_idx=0),
                                    "char": nn.Embedding(cfg.n_chars, cfg.char_dim, padding_idx=0),
                                    "tag": nn.Embedding(cfg.n_tags, cfg.tag_dim, padding_idx=0)})
        self.char_lstm = nn.LSTM(cfg.char_dim, cfg.char_hidden // 2, batch_first=True, bidirectional=True)
        d_in = cfg.word_dim + cfg.char_hidden + cfg.tag_dim
        self.lstm = nn.LSTM(d_in, cfg.lstm_hidden, num_layers=cfg.lstm_layers, batch_first=True, bidirectional=True,
                            dropout=cfg.dropout)
        d = 2 * cfg.lstm_hidden
        self.mlp = nn.ModuleDict({"arc_dep": MLP(d, cfg.arc_mlp, cfg.dropout), "arc_head": MLP(d, cfg.arc_mlp, cfg.dropout),
                                  "rel_dep": MLP(d, cfg.rel_mlp, cfg.dropout), "rel_head": MLP(d, cfg.rel_mlp, cfg.dropout)})
        self.scorer = nn.ModuleDict({"arc": Biaffine(cfg.arc_mlp, 1), "rel": Biaffine(cfg.rel_mlp, cfg.n_rels)})
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, words, chars, tags):
        """words/tags [B, L] (position 0 = root), chars [B, L, C]; returns arc [B, L(dep), L(head)], rel [B, R, L, L]."""
        arc, rel_dep, rel_head = self.encode(words, chars, tags)
        return arc, self.scorer["rel"](rel_dep, rel_head)

    def label_scores(self, rel_dep, rel_head, heads):
        """Label scores at one head per word (gold heads in training, decoded heads at inference): [B, R, L]."""
        return self.scorer["rel"].at_heads(rel_dep, rel_head, heads)

    def encode(self, words, chars, tags):
        """Arc scores [B, L(dep), L(head)] and the label MLPs' outputs (dependent, head views)."""
        L = words.shape[1]
        char_vec = char_features(self.embed["char"], self.char_lstm, chars)
        x = torch.cat([self.embed["word"](words), char_vec, self.embed["tag"](tags)], -1)
        lengths = (words != 0).sum(-1).cpu()
        out, _ = self.lstm(nn.utils.rnn.pack_padded_sequence(self.drop(x), lengths, batch_first=True, enforce_sorted=False))
        h, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=L)
        h = self.drop(h)
        arc = self.scorer["arc"](self.mlp["arc_dep"](h), self.mlp["arc_head"](h)).squeeze(1)
        mask = words != 0
        arc = arc.masked_fill(~mask.unsqueeze(1), -1e9)  # heads must be real positions
        return arc, self.mlp["rel_dep"](h), self.mlp["rel_head"](h)
