"""The pre-trained encoder's Transformer layer, with every weight matrix an ``nn.Linear`` that compression sees.

``nn.TransformerEncoderLayer`` keeps its query, key and value maps in one packed ``in_proj_weight`` that is not a
module, and its ``nn.MultiheadAttention`` applies ``out_proj`` without calling it: pruning and int8 weight
quantisation (``compress.ptq.weight_matrices``: Linear and LSTM matrices) never see the first, and no forward hook
fires on the second, so neither data-aware pruning nor activation quantisation of a parser on a pre-trained
encoder could reach them. This layer computes the same function with its own modules:

- ``EncoderLayer`` (pre-norm, GELU; ``nn.TransformerEncoderLayer(norm_first=True)``'s parameter names):
  x + dropout1(self_attn(norm1(x))), then x + dropout2(linear2(dropout(gelu(linear1(norm2(x)))))).
- ``SelfAttention``: ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``; per head softmax(Q Kᵀ / √d_head) V with the
  padded keys at −∞, dropout on the attention weights; both products with ``torch.matmul``, so the attention
  sites of ``compress.sites`` (Q·Kᵀ, softmax·V) apply as in the MT models' eager attention.
- A state dict written by ``nn.TransformerEncoderLayer`` (``self_attn.in_proj_weight`` / ``in_proj_bias``) loads:
  a load hook splits the packed rows into q, k and v, in that order.
"""

from __future__ import annotations

import torch
from torch import nn


def _unpack_in_proj(module, state_dict, prefix, *_args) -> None:
    for kind in ("weight", "bias"):
        packed = state_dict.pop(f"{prefix}in_proj_{kind}", None)
        if packed is not None:
            for name, part in zip(("q_proj", "k_proj", "v_proj"), packed.chunk(3), strict=True):
                state_dict[f"{prefix}{name}.{kind}"] = part


class SelfAttention(nn.Module):
    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model) for _ in range(4))
        self.drop = nn.Dropout(dropout)
        self.register_load_state_dict_pre_hook(_unpack_in_proj)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        """x [B, N, d], padding [B, N] (True at padded positions) → [B, N, d]."""
        B, N, d = x.shape

        def split(t):
            return t.view(B, N, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (d // self.heads) ** -0.5
        weights = self.drop(scores.masked_fill(padding[:, None, None, :], float("-inf")).softmax(-1))
        return self.out_proj(torch.matmul(weights, v).transpose(1, 2).reshape(B, N, d))


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn: int, dropout: float):
        super().__init__()
        self.self_attn = SelfAttention(d_model, heads, dropout)
        self.linear1, self.linear2 = nn.Linear(d_model, ffn), nn.Linear(ffn, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout, self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_key_padding_mask: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout1(self.self_attn(self.norm1(x), src_key_padding_mask))
        return x + self.dropout2(self.linear2(self.dropout(nn.functional.gelu(self.linear1(self.norm2(x))))))
