"""The parsers' layers: character features, MLP, biaffine scorer (as SuPar's ``supar.modules``)."""

from __future__ import annotations

import math
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
                         {"unit": "pretrained.layers.{0}", "module": "words.encoder.layers.*"},
                         {"unit": "pretrained.usl", "module": "words.encoder.mlp"},
                         {"unit": "pretrained.usl_biaffine", "module": "words.encoder.scorer"},
                         {"unit": "pretrained.usi", "module": "words.encoder.usi_layer"}]  # the globs a variant lacks match nothing


BESIDE_UNITS = PRETRAINED_TOKEN_UNITS[1:] + [{"unit": "pretrained.projection", "module": "feature_proj"}]


def word_inputs(model: nn.Module, cfg: TokenFeatureConfig, **extra: nn.Module) -> list[dict]:
    """What a parser reads per word, set on ``model``: from scratch, ``embed`` (word, character, UPOS [+ extra]) and
    ``char_lstm``; with ``cfg.pretrained`` in ``replace`` mode, ``words`` (``parsing.pretrained.PretrainedWords``:
    the encoder's first-piece states) and ``embed`` (UPOS [+ extra]); in ``beside`` mode the scratch modules here
    and the encoder later (``beside_inputs``). Returns the matching compression units."""
    model.words = None
    if cfg.pretrained and cfg.pretrained_mode == "replace":
        from forgetbench.parsing.pretrained import EncoderConfig, PretrainedWords

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
    from forgetbench.parsing.pretrained import EncoderConfig, PretrainedWords

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


class MLP(nn.Module):
    """Linear → activation → dropout: LeakyReLU(0.1) as Dozat & Manning's parsers, or ReLU (UD-PrLM's USL, §3.3)."""

    def __init__(self, d_in: int, d_out: int, dropout: float, relu: bool = False):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        self.drop = nn.Dropout(dropout)
        self.relu = relu

    def forward(self, x):
        x = self.linear(x)
        return self.drop(nn.functional.relu(x) if self.relu else nn.functional.leaky_relu(x, 0.1))


class Biaffine(nn.Module):
    """s[b, o, h, d] = [x_d; 1]ᵀ W_o [y_h; 1] (bias on both sides); W_o is (d_dep + 1) × (d_head + 1), square unless
    ``d_head`` is given."""

    def __init__(self, d: int, n_out: int = 1, d_head: int | None = None):
        super().__init__()
        self.n_out = n_out
        self.weight = nn.Parameter(torch.zeros(n_out, d + 1, (d if d_head is None else d_head) + 1))

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


def usl_heads(d: int, head_dim: int, dep_dim: int, n_rels: int, dropout: float) -> tuple[nn.ModuleDict, nn.ModuleDict]:
    """UD-PrLM's USL decoder (Sun, Li, Zhao §3.3, §4): r^m = ReLU(MLP^m(h)), m ∈ {head, dep}, for arcs and labels
    alike, heads of ``head_dim`` (H_head, the paper's 128) and dependents of ``dep_dim`` (H_dep, 64) units, and the
    two biaffine scorers over them (U₁ ∈ R^{H_dep × H_head} per output); the same module names as
    ``biaffine_heads``, so ``biaffine_scores`` reads both."""
    mlp = nn.ModuleDict({"arc_dep": MLP(d, dep_dim, dropout, relu=True), "arc_head": MLP(d, head_dim, dropout, relu=True),
                         "rel_dep": MLP(d, dep_dim, dropout, relu=True), "rel_head": MLP(d, head_dim, dropout, relu=True)})
    return mlp, nn.ModuleDict({"arc": Biaffine(dep_dim, 1, head_dim), "rel": Biaffine(dep_dim, n_rels, head_dim)})


def biaffine_scores(mlp: nn.ModuleDict, scorer: nn.ModuleDict, h: torch.Tensor, mask: torch.Tensor):
    """Arc scores [B, L(dep), L(head)] (padding heads at -1e9) and the label MLPs' outputs (dependent, head views)."""
    arc = scorer["arc"](mlp["arc_dep"](h), mlp["arc_head"](h)).squeeze(1)
    arc = arc.masked_fill(~mask.unsqueeze(1), -1e9)  # heads must be real positions
    return arc, mlp["rel_dep"](h), mlp["rel_head"](h)
