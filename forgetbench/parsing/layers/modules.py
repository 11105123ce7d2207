"""The parsers' input layers: word, character and UPOS features, a pre-trained encoder's features beside or instead of
them (as SuPar's ``supar.modules``); the MLP and biaffine scorers are ``parsing.layers.biaffine``'s, re-exported here."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

# the scoring layers' old home: their imports from here keep working
from forgetbench.parsing.layers.biaffine import MLP, Biaffine, biaffine_heads, biaffine_scores, usl_heads  # noqa: F401

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
    pretrained: dict | None = None  # a pre-trained encoder's settings (parsing.layers.pretrained.EncoderConfig): it reads
    pretrained_mode: str = "beside"  # beside: its features join the scratch inputs; replace: they replace them
    pretrained_dim: int = 300  # beside: the encoder's features projected to this size (Sun, Li, Zhao §4)

    @property
    def scratch_dim(self) -> int:
        return self.word_dim + self.char_hidden + self.tag_dim

    @property
    def feature_dim(self) -> int:
        """The size of what a parser's first layer reads per word (``read_words``)."""
        if not self.pretrained:
            return self.scratch_dim
        if self.pretrained_mode == "replace":
            return self.pretrained["d_model"] + self.tag_dim
        return self.scratch_dim + self.pretrained_dim

    @property
    def built_dim(self) -> int:
        """The input size a parser builds its first layer with: beside, the scratch size, widened afterwards by
        ``beside_inputs``."""
        return self.scratch_dim if self.pretrained and self.pretrained_mode == "beside" else self.feature_dim

    def to_dict(self) -> dict:
        d = asdict(self)
        if d.get("pretrained") is None:
            for k in ("pretrained", "pretrained_mode", "pretrained_dim"):
                d.pop(k, None)  # a scratch parser's config.json as before the option
        return d

    @classmethod
    def stored(cls, d: dict) -> dict:
        """A parser's stored settings as this class reads them: one saved with an encoder before ``pretrained_mode``
        existed replaced its inputs."""
        return ({"pretrained_mode": "replace"} | d) if d.get("pretrained") else d


def token_embeddings(cfg: TokenFeatureConfig, **extra: nn.Module) -> tuple[nn.ModuleDict, nn.LSTM]:
    """``embed`` (word, char, tag [+ extra]) and ``char_lstm``: the modules ``token_features`` reads."""
    embed = nn.ModuleDict({"word": nn.Embedding(cfg.n_words, cfg.word_dim, padding_idx=0),
                           "char": nn.Embedding(cfg.n_chars, cfg.char_dim, padding_idx=0),
                           "tag": nn.Embedding(cfg.n_tags, cfg.tag_dim, padding_idx=0), **extra})
    return embed, nn.LSTM(cfg.char_dim, cfg.char_hidden // 2, batch_first=True, bidirectional=True)


PRETRAINED_TOKEN_UNITS = [{"unit": "embeddings", "module": "embed"},
                         {"unit": "pretrained.embeddings", "module": "words.encoder.embed"},
                         {"unit": "pretrained.positions", "module": "words.encoder.positions"},
                         {"unit": "pretrained.layers.{0}", "module": "words.encoder.layers.*"},
                         {"unit": "pretrained.usl", "module": "words.encoder.mlp"},
                         {"unit": "pretrained.usl_biaffine", "module": "words.encoder.scorer"},
                         # USI (§3.4): its per-label maps W [D, H, H] (3-D: magnitude over the unit, as every weight)
                         # and its Linear (H·D → H); then its Transformer layer
                         {"unit": "pretrained.usi_integration", "module": "words.encoder.usi"},
                         {"unit": "pretrained.usi", "module": "words.encoder.usi_layer"}]  # the globs a variant lacks match nothing


BESIDE_UNITS = PRETRAINED_TOKEN_UNITS[1:] + [{"unit": "pretrained.projection", "module": "feature_proj"}]


def word_inputs(model: nn.Module, cfg: TokenFeatureConfig, **extra: nn.Module) -> list[dict]:
    """What a parser reads per word, set on ``model``: from scratch, ``embed`` (word, character, UPOS [+ extra]) and
    ``char_lstm``; with ``cfg.pretrained`` in ``replace`` mode, ``words`` (``parsing.layers.pretrained.PretrainedWords``:
    the encoder's first-piece states) and ``embed`` (UPOS [+ extra]); in ``beside`` mode the scratch modules here
    and the encoder later (``beside_inputs``). Returns the matching compression units."""
    model.words = None
    if cfg.pretrained and cfg.pretrained_mode == "replace":
        from forgetbench.parsing.layers.pretrained import EncoderConfig, PretrainedWords

        model.words = PretrainedWords(EncoderConfig.from_dict(cfg.pretrained))
        model.embed = nn.ModuleDict({"tag": nn.Embedding(cfg.n_tags, cfg.tag_dim, padding_idx=0), **extra})
        model.char_lstm = None
        return PRETRAINED_TOKEN_UNITS
    if cfg.pretrained and cfg.pretrained_mode != "beside":
        raise ValueError(f"pretrained_mode {cfg.pretrained_mode!r}: use beside or replace")
    model.embed, model.char_lstm = token_embeddings(cfg, **extra)
    return TOKEN_UNITS + (BESIDE_UNITS if cfg.pretrained else [])


def widen_inputs(first: nn.Module, extra: int) -> None:
    """Append ``extra`` input columns to ``first`` (an ``nn.LSTM``'s first layer, both directions, or an
    ``nn.Linear``), drawn as that module draws its own weights: U(±1/√hidden) resp. U(±1/√fan-in)."""
    if isinstance(first, nn.LSTM):
        bound, names = 1 / math.sqrt(first.hidden_size), ["weight_ih_l0"] + (["weight_ih_l0_reverse"]
                                                                                  if first.bidirectional else [])
        for name in names:
            w = getattr(first, name)
            setattr(first, name, nn.Parameter(torch.cat([w.data, torch.empty(w.shape[0], extra).uniform_(-bound, bound)], 1)))
        first.input_size += extra
        first._init_flat_weights()
    elif isinstance(first, nn.Linear):
        bound = 1 / math.sqrt(first.in_features + extra)
        w = first.weight
        first.weight = nn.Parameter(torch.cat([w.data, torch.empty(w.shape[0], extra).uniform_(-bound, bound)], 1))
        first.in_features += extra
    else:
        raise TypeError(f"cannot widen the inputs of {type(first).__name__}")


def beside_inputs(model: nn.Module, cfg: TokenFeatureConfig, first: nn.Module) -> None:
    """The paper's way of reading a pre-trained encoder (Sun, Li, Zhao §4), called last in a parser's constructor:
    ``words`` (the encoder's first-piece states) and ``feature_proj`` (H → ``pretrained_dim``, no bias), whose output
    ``read_words`` appends to the scratch inputs; ``first``, the layer reading them, widened to match. Built after
    every scratch module, so a parser of the same seed draws the same scratch weights, and a zero encoder output
    leaves its forward that of the scratch parser."""
    if not cfg.pretrained or cfg.pretrained_mode != "beside":
        return
    from forgetbench.parsing.layers.pretrained import EncoderConfig, PretrainedWords

    widen_inputs(first, cfg.pretrained_dim)
    model.words = PretrainedWords(EncoderConfig.from_dict(cfg.pretrained))
    model.feature_proj = nn.Linear(model.words.dim, cfg.pretrained_dim, bias=False)


def read_words(model: nn.Module, words, sub, tags) -> torch.Tensor:
    """The per-word input of ``word_inputs``: ``sub`` is the characters [B, L, C] (scratch), the encoder's pieces
    [B, L, K] (replace) or both (beside; ``subunits``)."""
    if model.words is None:
        return token_features(model.embed, model.char_lstm, words, sub, tags)
    if model.char_lstm is None:
        return torch.cat([model.words(sub, words != 0), model.embed["tag"](tags)], -1)
    chars, pieces = sub
    return torch.cat([token_features(model.embed, model.char_lstm, words, chars, tags),
                      model.feature_proj(model.words(pieces, words != 0))], -1)


def rows(sub, idx):
    """The sentences ``idx`` of what ``subunits`` gave (a tensor, or beside a pair of them)."""
    return tuple(x[idx] for x in sub) if isinstance(sub, tuple) else sub[idx]


def subunits(model: nn.Module, b: dict):
    """What the parser ``model`` reads below the word in batch ``b``: its characters, its encoder's pieces, or both
    (``(chars, pieces)``, beside)."""
    if getattr(model, "words", None) is None:
        return b["chars"]
    return b["pieces"] if model.char_lstm is None else (b["chars"], b["pieces"])


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
