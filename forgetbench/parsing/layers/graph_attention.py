"""Graph-input self-attention and the Transformer encoder built from it (docs/METHOD.md §4).

With ``q_i = x_i W^Q``, ``k_j = x_j W^K``, ``v_j = x_j W^V`` per head (size d) and the relation
``p_ij`` of the input graph (``parsing.structures.relations``) embedded per layer as ``r^K_ij`` (key side) and
``r^V_ij`` (value side), shared by the heads:

- ``g2g`` (G2GTr / RNGTr): ``e_ij = q_i · (k_j + LN?(r^K_ij)) / √d`` and
  ``z_i = Σ_j α_ij (v_j + r^V_ij)``; the value-side term is switchable (``value_relations``) and
  the LayerNorm on the key-side relation embedding is a real switch (``relation_norm``) — the
  released RNGTr computed it into a misspelled variable and never used it.
- ``syng2g`` (SynG2G-Tr): the relation interacts with query and key, not value:
  ``e_ij = (q_i · k_j + q_i · r^K_ij + r^K_ij · k_j) / √d``, ``z_i = Σ_j α_ij v_j``.
- no graph (``relations=None``): plain scaled dot-product attention. An all-NONE graph whose
  relation embeddings are zero gives exactly the plain attention (tested).

The projections are named ``q_proj``/``k_proj``/``v_proj``/``out_proj`` and ``q·kᵀ`` and ``α·v`` are
the block's only two matmuls, so PTQ's attention sites (``compress.sites``) apply unchanged; the
relation terms (einsum) stay in floating point. Layers are pre-LayerNorm (stable from scratch on
small treebanks); the encoder ends with a LayerNorm.
"""

from __future__ import annotations

import math

import torch
from torch import nn

ATTENTION_KINDS = ("g2g", "syng2g")
ENCODER_LAYER_UNIT = {"unit": "encoder.layers.{0}", "module": "encoder.layers.*",  # for ``forgetbench_units``
                      "groups": {"attention": ["self_attn.*", "attn_norm.*"], "ffn": ["fc1.*", "fc2.*", "ffn_norm.*"]}}


class GraphSelfAttention(nn.Module):
    def __init__(self, d_model: int, heads: int, n_relations: int = 0, kind: str = "g2g", value_relations: bool = True,
                 relation_norm: bool = False, dropout: float = 0.1):
        super().__init__()
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"attention kind {kind!r}: use one of {ATTENTION_KINDS}")
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.heads, self.d_head, self.kind = heads, d_model // heads, kind
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))
        self.rel_key = nn.Embedding(n_relations, self.d_head) if n_relations else None
        self.rel_value = (nn.Embedding(n_relations, self.d_head)
                          if n_relations and value_relations and kind == "g2g" else None)
        self.rel_norm = nn.LayerNorm(self.d_head) if n_relations and relation_norm else None
        self.drop = nn.Dropout(dropout)
        for emb in (self.rel_key, self.rel_value):
            if emb is not None:  # small, like the projections' scale: a warm-started refiner starts near its SynTr
                nn.init.normal_(emb.weight, std=0.02)

    def _split(self, x):
        B, L, _ = x.shape
        return x.view(B, L, self.heads, self.d_head).transpose(1, 2)  # [B, H, L, d]

    def forward(self, x, mask, relations=None, return_weights: bool = False):
        """x [B, L, D]; mask [B, L] True at real tokens (keys); relations [B, L, L] ids or None."""
        q, k, v = self._split(self.q_proj(x)), self._split(self.k_proj(x)), self._split(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(-1, -2))
        if relations is not None and self.rel_key is not None:
            rk = self.rel_key(relations)  # [B, L, L, d]
            if self.rel_norm is not None:
                rk = self.rel_norm(rk)
            scores = scores + torch.einsum("bhid,bijd->bhij", q, rk)
            if self.kind == "syng2g":
                scores = scores + torch.einsum("bijd,bhjd->bhij", rk, k)
        scores = scores / math.sqrt(self.d_head)
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        a = self.drop(weights)
        z = torch.matmul(a, v)
        if relations is not None and self.rel_value is not None:
            z = z + torch.einsum("bhij,bijd->bhid", a, self.rel_value(relations))
        B, H, L, d = z.shape
        out = self.out_proj(z.transpose(1, 2).reshape(B, L, H * d))
        return (out, weights) if return_weights else out


class GraphEncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn: int, n_relations: int, kind: str, value_relations: bool,
                 relation_norm: bool, dropout: float):
        super().__init__()
        self.attn_norm, self.ffn_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.self_attn = GraphSelfAttention(d_model, heads, n_relations, kind, value_relations, relation_norm, dropout)
        self.fc1, self.fc2 = nn.Linear(d_model, ffn), nn.Linear(ffn, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask, relations=None):
        x = x + self.drop(self.self_attn(self.attn_norm(x), mask, relations))
        return x + self.drop(self.fc2(self.drop(nn.functional.gelu(self.fc1(self.ffn_norm(x))))))


class GraphEncoder(nn.Module):
    """A stack of ``GraphEncoderLayer`` with sinusoidal positions added to the input and a final LayerNorm."""

    def __init__(self, d_model: int, layers: int, heads: int, ffn: int, n_relations: int = 0, kind: str = "g2g",
                 value_relations: bool = True, relation_norm: bool = False, dropout: float = 0.1):
        super().__init__()
        self.layers = nn.ModuleList(GraphEncoderLayer(d_model, heads, ffn, n_relations, kind, value_relations,
                                                      relation_norm, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.d_model = d_model

    def positions(self, L: int) -> torch.Tensor:
        pos = torch.arange(L, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, self.d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / self.d_model))
        pe = torch.zeros(L, self.d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        return pe

    def forward(self, x, mask, relations=None):
        x = x + self.positions(x.shape[1]).to(x.device, x.dtype)
        for layer in self.layers:
            x = layer(x, mask, relations)
        return self.norm(x)
