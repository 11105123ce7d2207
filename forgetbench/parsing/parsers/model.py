"""Biaffine dependency parser (Dozat & Manning; docs/METHOD.md §4), sized for CPU training.

word + character + UPOS embeddings [+ a pre-trained encoder's projected features, ``modules.beside_inputs``] → BiLSTM → four MLPs (arc-dep, arc-head, rel-dep, rel-head) →
biaffine arc scores s[b, h, d] and biaffine label scores; cross-entropy on heads and on labels
given the gold head. Units for the compression hooks are declared (``forgetbench_units``), so
``prune``/``quantize`` work on it unchanged. Layers in ``parsing.layers.modules``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from forgetbench.parsing.layers.modules import (
    TOKEN_UNITS,
    TokenFeatureConfig,
    beside_inputs,
    biaffine_heads,
    biaffine_scores,
    read_words,
    word_inputs,
)
from forgetbench.parsing.layers.regularise import SharedDropout, VariationalLSTM, word_tag_dropout


@dataclass
class ParserConfig(TokenFeatureConfig):
    lstm_hidden: int = 200
    lstm_layers: int = 2
    arc_mlp: int = 300
    rel_mlp: int = 100
    dropout: float = 0.33
    embed_dropout: float = 0.0  # whole-word and whole-tag dropout (thesis §5.4: 0.33); 0: none
    recurrent_dropout: float = 0.0  # the same mask at every step on the LSTM's recurrent connections (§6.3: 0.33);
    # above 0 the dropout on the LSTM's inputs and outputs keeps its mask over time too (``regularise``)

    def to_dict(self) -> dict:
        d = super().to_dict()
        for k in ("embed_dropout", "recurrent_dropout"):
            if not d.get(k):
                d.pop(k, None)  # a parser's config.json as before the option
        return d

    @property
    def tag_columns(self) -> slice:
        """The UPOS embedding's columns in what ``read_words`` gives (the rest is the word's)."""
        start = self.pretrained["d_model"] if self.pretrained and self.pretrained_mode == "replace" else \
            self.word_dim + self.char_hidden
        return slice(start, start + self.tag_dim)


class BiaffineParser(nn.Module):
    forgetbench_units = TOKEN_UNITS + [
        {"unit": "encoder.lstm", "module": "lstm"},
        {"unit": "mlp", "module": "mlp", "groups": {"arc": ["arc_*"], "rel": ["rel_*"]}},
        {"unit": "biaffine", "module": "scorer"},
    ]
    forgetbench_residual_blocks: list = []

    def __init__(self, cfg: ParserConfig):
        super().__init__()
        self.cfg = cfg
        units = word_inputs(self, cfg)
        if cfg.pretrained and cfg.pretrained_mode == "replace":  # the encoder replaces the BiLSTM: its states (⊕
            self.lstm, d = None, cfg.feature_dim                  # UPOS) feed the MLPs
            self.forgetbench_units = units + self.forgetbench_units[len(TOKEN_UNITS) + 1:]
        else:
            self.lstm = VariationalLSTM(cfg.built_dim, cfg.lstm_hidden, num_layers=cfg.lstm_layers, batch_first=True,
                                        bidirectional=True, dropout=cfg.dropout, recurrent_dropout=cfg.recurrent_dropout)
            d = 2 * cfg.lstm_hidden
            self.forgetbench_units = units + self.forgetbench_units[len(TOKEN_UNITS):]
        self.mlp, self.scorer = biaffine_heads(d, cfg.arc_mlp, cfg.rel_mlp, cfg.n_rels, cfg.dropout)
        self.drop = SharedDropout(cfg.dropout) if cfg.recurrent_dropout > 0 else nn.Dropout(cfg.dropout)
        beside_inputs(self, cfg, self.lstm)  # beside: the encoder's features join the BiLSTM's inputs

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
        h = word_tag_dropout(read_words(self, words, chars, tags), self.cfg.tag_columns, self.cfg.embed_dropout,
                             self.training)
        if self.lstm is not None:
            lengths = (words != 0).sum(-1).cpu()
            out, _ = self.lstm(nn.utils.rnn.pack_padded_sequence(self.drop(h), lengths, batch_first=True,
                                                                 enforce_sorted=False))
            h, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=L)
        return biaffine_scores(self.mlp, self.scorer, self.drop(h), words != 0)
