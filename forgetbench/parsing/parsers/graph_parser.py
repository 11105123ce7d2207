"""SynTr and RNGTr's refiner: a graph-input Transformer encoder with the biaffine decoder (docs/METHOD.md §4).

word + character + UPOS embeddings (as the biaffine parser) → linear projection to ``d_model`` →
``GraphEncoder`` (sinusoidal positions, pre-LN graph-input self-attention layers) → the biaffine
parser's four MLPs and two biaffine scorers (``modules.biaffine_heads``).

- ``graph: none`` is **SynTr**, the graph-free baseline of the study: plain self-attention.
- ``graph: labelled`` (or ``unlabelled``) is the **RNGTr** refiner: every layer attends with the
  relation ids of an input dependency graph (``parsing.structures.relations``), so
  ``Z^t = Encoder(W, P, G^{t-1})`` and ``G^t = Decoder(Z^t)``; iterating it is ``parsing.parsers.refine``.

Units for the compression hooks: embeddings (+ input projection), character encoder, each encoder
layer (attention / ffn groups; the relation embeddings are in the attention group), MLPs, biaffine.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from forgetbench.parsing.layers.graph_attention import ATTENTION_KINDS, ENCODER_LAYER_UNIT, GraphEncoder
from forgetbench.parsing.layers.modules import (
    TOKEN_UNITS,
    TokenFeatureConfig,
    beside_inputs,
    biaffine_heads,
    biaffine_scores,
    read_words,
    word_inputs,
)
from forgetbench.parsing.structures.relations import n_relation_ids

GRAPHS = ("none", "labelled", "unlabelled")


@dataclass
class GraphParserConfig(TokenFeatureConfig):
    graph: str = "none"  # none: SynTr; labelled / unlabelled: RNGTr refiner
    attention: str = "g2g"  # g2g | syng2g
    value_relations: bool = True
    relation_norm: bool = True
    d_model: int = 256
    layers: int = 4
    heads: int = 8
    ffn: int = 512
    arc_mlp: int = 300
    rel_mlp: int = 100
    dropout: float = 0.33  # embeddings and MLPs (as the biaffine parser)
    attention_dropout: float = 0.1  # inside the encoder

    def __post_init__(self):
        if self.graph not in GRAPHS:
            raise ValueError(f"graph {self.graph!r}: use one of {GRAPHS}")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention {self.attention!r}: use one of {ATTENTION_KINDS}")

    @property
    def n_relations(self) -> int:
        return 0 if self.graph == "none" else n_relation_ids(self.graph == "labelled", self.n_rels)


class GraphParser(nn.Module):
    forgetbench_units = TOKEN_UNITS + [
        {"unit": "input_projection", "module": "proj"},
        ENCODER_LAYER_UNIT,
        {"unit": "mlp", "module": "mlp", "groups": {"arc": ["arc_*"], "rel": ["rel_*"]}},
        {"unit": "biaffine", "module": "scorer"},
    ]
    forgetbench_residual_blocks = ["encoder.layers.*"]

    def __init__(self, cfg: GraphParserConfig):
        super().__init__()
        self.cfg = cfg
        units = word_inputs(self, cfg)
        if cfg.pretrained:  # the pre-trained encoder's states (⊕ UPOS) are, or join, the graph encoder's input
            self.forgetbench_units = units + self.forgetbench_units[len(TOKEN_UNITS):]
        self.proj = nn.Linear(cfg.built_dim, cfg.d_model)
        self.encoder = GraphEncoder(cfg.d_model, cfg.layers, cfg.heads, cfg.ffn, cfg.n_relations, cfg.attention,
                                    cfg.value_relations, cfg.relation_norm, cfg.attention_dropout)
        self.mlp, self.scorer = biaffine_heads(cfg.d_model, cfg.arc_mlp, cfg.rel_mlp, cfg.n_rels, cfg.dropout)
        self.drop = nn.Dropout(cfg.dropout)
        beside_inputs(self, cfg, self.proj)  # beside: the encoder's features join the projection's inputs

    @property
    def uses_graph(self) -> bool:
        return self.cfg.graph != "none"

    def forward(self, words, chars, tags, relations=None):
        """As ``BiaffineParser.forward``; ``relations`` [B, L, L] (``parsing.structures.relations``) for a refiner."""
        arc, rel_dep, rel_head = self.encode(words, chars, tags, relations)
        return arc, self.scorer["rel"](rel_dep, rel_head)

    def label_scores(self, rel_dep, rel_head, heads):
        return self.scorer["rel"].at_heads(rel_dep, rel_head, heads)

    def encode(self, words, chars, tags, relations=None):
        """Arc scores [B, L(dep), L(head)] and the label MLPs' outputs. A refiner needs ``relations``."""
        if self.uses_graph and relations is None:
            raise ValueError("this parser is an RNGTr refiner: give the input graph's relation ids")
        mask = words != 0
        x = self.proj(self.drop(read_words(self, words, chars, tags)))
        h = self.encoder(x, mask, relations if self.uses_graph else None)
        return biaffine_scores(self.mlp, self.scorer, self.drop(h), mask)
