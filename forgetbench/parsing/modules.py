"""The parsers' layers: character features, MLP, biaffine scorer (as SuPar's ``supar.modules``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

TOKEN_UNITS = [{"unit": "embeddings", "module": "embed"}, {"unit": "char_encoder", "module": "char_lstm"}]


@dataclass
class TokenFeatureConfig:
    """Vocabulary sizes and the token-feature sizes every parser shares (word, character BiLSTM, UPOS)."""

    n_words: int
    n_chars: int
    n_tags: int
    n_rels: int
    word_dim: int = 100
    char_dim: int = 50
    char_hidden: int = 100
    tag_dim: int = 50
    pretrained: dict | None = None  # a pre-trained encoder's settings (parsing.pretrained.EncoderConfig): it reads

    @property
    def feature_dim(self) -> int:
        if self.pretrained:
            return self.pretrained["d_model"] + self.tag_dim
        return self.word_dim + self.char_hidden + self.tag_dim

    def to_dict(self) -> dict:
        d = asdict(self)
        if d.get("pretrained") is None:
            d.pop("pretrained", None)  # a scratch parser's config.json as before the option
        return d


def token_embeddings(cfg: TokenFeatureConfig, **extra: nn.Module) -> tuple[nn.ModuleDict, nn.LSTM]:
    """``embed`` (word, char, tag [+ extra]) and ``char_lstm``: the modules ``token_features`` reads."""
    embed = nn.ModuleDict({"word": nn.Embedding(cfg.n_words, cfg.word_dim, padding_idx=0),
                           "char": nn.Embedding(cfg.n_chars, cfg.char_dim, padding_idx=0),
                           "tag": nn.Embedding(cfg.n_tags, cfg.tag_dim, padding_idx=0), **extra})
    return embed, nn.LSTM(cfg.char_dim, cfg.char_hidden // 2, batch_first=True, bidirectional=True)


PRETRAINED_TOKEN_UNITS = [{"unit": "embeddings", "module": "embed"},
                         {"unit": "pretrained.embeddings", "module": "words.encoder.embed"},
                         {"unit": "pretrained.layers.{0}", "module": "words.encoder.layers.*"},
                         {"unit": "pretrained.usl", "module": "words.encoder.mlp"},
                         {"unit": "pretrained.usl_biaffine", "module": "words.encoder.scorer"},
                         {"unit": "pretrained.usi", "module": "words.encoder.usi_layer"}]  # the globs a variant lacks match nothing


def word_inputs(model: nn.Module, cfg: TokenFeatureConfig, **extra: nn.Module) -> list[dict]:
    """What a parser reads per word, set on ``model``: from scratch, ``embed`` (word, character, UPOS [+ extra]) and
    ``char_lstm``; or, with ``cfg.pretrained``, ``words`` (``parsing.pretrained.PretrainedWords``: the encoder's
    first-piece states) and ``embed`` (UPOS [+ extra]). Returns the matching compression units."""
    if cfg.pretrained:
        from forgetbench.parsing.pretrained import EncoderConfig, PretrainedWords

        model.words = PretrainedWords(EncoderConfig(**cfg.pretrained))
        model.embed = nn.ModuleDict({"tag": nn.Embedding(cfg.n_tags, cfg.tag_dim, padding_idx=0), **extra})
        model.char_lstm = None
        return PRETRAINED_TOKEN_UNITS
    model.words = None
    model.embed, model.char_lstm = token_embeddings(cfg, **extra)
    return TOKEN_UNITS


def read_words(model: nn.Module, words, sub, tags) -> torch.Tensor:
    """The per-word input of ``word_inputs``: ``sub`` is the characters [B, L, C] (scratch) or the encoder's pieces
    [B, L, K] (``subunits``)."""
    if model.words is not None:
        return torch.cat([model.words(sub, words != 0), model.embed["tag"](tags)], -1)
    return token_features(model.embed, model.char_lstm, words, sub, tags)


def subunits(model: nn.Module, b: dict) -> torch.Tensor:
    """What the parser ``model`` reads below the word in batch ``b``: its characters, or its encoder's pieces."""
    return b["pieces"] if getattr(model, "words", None) is not None else b["chars"]


def char_features(embed: nn.Embedding, lstm: nn.LSTM, chars: torch.Tensor) -> torch.Tensor:
    """chars [B, L, C] → final states of a BiLSTM over each word's characters, [B, L, 2·hidden]."""
    B, L, C = chars.shape
    flat = chars.view(B * L, C)
    lengths = (flat != 0).sum(-1).clamp(min=1).cpu()
    packed = nn.utils.rnn.pack_padded_sequence(embed(flat), lengths, batch_first=True, enforce_sorted=False)
    _, (h, _) = lstm(packed)
    return torch.cat([h[0], h[1]], -1).view(B, L, -1)


def token_features(embed: nn.ModuleDict, char_lstm: nn.LSTM, words, chars, tags) -> torch.Tensor:
    """word ⊕ character-BiLSTM ⊕ UPOS embeddings per position, [B, L, word + char_hidden + tag dims]."""
    return torch.cat([embed["word"](words), char_features(embed["char"], char_lstm, chars), embed["tag"](tags)], -1)


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


def biaffine_heads(d: int, arc_mlp: int, rel_mlp: int, n_rels: int, dropout: float) -> tuple[nn.ModuleDict, nn.ModuleDict]:
    """The four MLPs (arc-dep, arc-head, rel-dep, rel-head) and the two biaffine scorers over encoder states of
    size ``d``: the decoder the biaffine parser, SynTr and RNGTr share (module names ``mlp`` and ``scorer``)."""
    mlp = nn.ModuleDict({"arc_dep": MLP(d, arc_mlp, dropout), "arc_head": MLP(d, arc_mlp, dropout),
                         "rel_dep": MLP(d, rel_mlp, dropout), "rel_head": MLP(d, rel_mlp, dropout)})
    return mlp, nn.ModuleDict({"arc": Biaffine(arc_mlp, 1), "rel": Biaffine(rel_mlp, n_rels)})


def biaffine_scores(mlp: nn.ModuleDict, scorer: nn.ModuleDict, h: torch.Tensor, mask: torch.Tensor):
    """Arc scores [B, L(dep), L(head)] (padding heads at -1e9) and the label MLPs' outputs (dependent, head views)."""
    arc = scorer["arc"](mlp["arc_dep"](h), mlp["arc_head"](h)).squeeze(1)
    arc = arc.masked_fill(~mask.unsqueeze(1), -1e9)  # heads must be real positions
    return arc, mlp["rel_dep"](h), mlp["rel_head"](h)
