"""UD-PrLM's universal structure integration (USI; Sun, Li, Zhao §3.4): how a dependency structure the encoder
predicts becomes a representation (docs/METHOD.md §5c).

Shapes: B sentences, N positions, H = ``d_model``, D labels.

1. S_US[b, i, j, k] = S_arc[b, i, j] · S_label[b, i, j, k] (§3.4's "dot product" of the two score tensors, each a
   softmax: S_arc over the heads j of dependent i, S_label over the labels k of the pair (i, j)): the probability
   that j heads i with label k.
2. **paper form** (``StructureIntegration``): Ĥ[b, i, h, k] = Σ_j S_US[b, i, j, k] · H^(L)[b, j, h];
   H_O[b, i, m, k] = Σ_h Ĥ[b, i, h, k] · W[k, h, m], one H × H map W_k per label; H_O flattened to H·D values per
   position in (m, k) order (index m·D + k); H_US = GELU(Linear(H_O)) (Linear: H·D → H, with bias).
3. **expected-label form** (``ExpectedLabelIntegration``, a named ablation kept so that encoders made with it
   still load): H_US[b, i] = Σ_{j,k} S_US[b, i, j, k] · (W_h H^(L)[b, j] + E_k), one shared H × H map and a table
   of D label embeddings, no Linear, no GELU.

Either way H^(L+1) = LayerNorm(Transformer layer(H_US + H^(L))) (``pretrained.PretrainedEncoder.integrate``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

FORMS = ("paper", "expected-label")


def structure_tensor(arc: torch.Tensor, rel: torch.Tensor) -> torch.Tensor:
    """S_US [B, N, N, D] from arc scores [B, N(dep), N(head)] and label scores [B, N(dep), N(head), D] (rule 1)."""
    return arc.softmax(-1).unsqueeze(-1) * rel.softmax(-1)


class StructureIntegration(nn.Module):
    """Rule 2: ``maps`` W [D, H, H] and ``linear`` (H·D → H); 2·D·H² + H parameters."""

    def __init__(self, d: int, n_rels: int):
        super().__init__()
        self.maps = nn.Parameter(torch.empty(n_rels, d, d))
        nn.init.uniform_(self.maps, -1 / math.sqrt(d), 1 / math.sqrt(d))  # each W_k as an H → H Linear's weight
        self.linear = nn.Linear(d * n_rels, d)
        self.linear.forgetbench_fused = True  # ``forward`` reads its weight: no input to calibrate on (compression)
        self.input = nn.Identity()  # H^(L) as the maps read it: PTQ's activation site (``compress.sites``)
        self.input.forgetbench_site = "linear_input"
        self.forgetbench_weight_matrices = {"maps": -1}  # PTQ's weight site: each label's map, per output channel

    def forward(self, s_us: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """S_US [B, N, N, D], H^(L) [B, N, H] → H_US [B, N, H].

        Computed in the other order: W and the Linear's weight L are two linear maps with nothing between them, so
        Σ_{m,k} L[n, m·D+k] · Σ_h Ĥ[i,h,k] W[k,h,m] = Σ_{j,k} S_US[i,j,k] · Σ_h H[j,h] V[k,h,n] with
        V[k,h,n] = Σ_m W[k,h,m] L[n, m·D+k]: two dense matrix products instead of D small ones and the copies of
        Ĥ and H_O (2.7× faster at B 100, N 41, H 128, D 59 on one CPU thread); the parameters, and so their
        gradients, are the paper's W and Linear (``reference`` is rule 2 term by term; the tests hold the two
        equal)."""
        h = self.input(h)
        B, N, H = h.shape
        D = self.maps.shape[0]
        v = torch.einsum("khm,nmk->hkn", self.maps, self.linear.weight.view(H, H, D)).reshape(H, D * H)
        p = (h.reshape(B * N, H) @ v).view(B, N * D, H)  # P[b, j·D + k, n] = Σ_h H[b, j, h] V[k, h, n]
        return nn.functional.gelu(torch.bmm(s_us.reshape(B, N, N * D), p) + self.linear.bias)

    def reference(self, s_us: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """Rule 2 as written: Ĥ, H_O, the flatten, Linear, GELU."""
        h_hat = torch.einsum("bijk,bjh->bihk", s_us, self.input(h))
        h_o = torch.einsum("bihk,khm->bimk", h_hat, self.maps)
        return nn.functional.gelu(self.linear(h_o.flatten(2)))


class ExpectedLabelIntegration(nn.Module):
    """Rule 3: ``head`` W_h (H × H, no bias) and ``labels`` E (D × H)."""

    def __init__(self, d: int, n_rels: int):
        super().__init__()
        self.head = nn.Linear(d, d, bias=False)
        self.labels = nn.Embedding(n_rels, d)

    def forward(self, s_us: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return (torch.einsum("bij,bjd->bid", s_us.sum(-1), self.head(h))
                + torch.einsum("bil,ld->bid", s_us.sum(2), self.labels.weight))


def integration(form: str, d: int, n_rels: int) -> nn.Module:
    if form == "paper":
        return StructureIntegration(d, n_rels)
    if form == "expected-label":
        return ExpectedLabelIntegration(d, n_rels)
    raise ValueError(f"USI form {form!r}: use one of {FORMS}")


def legacy_names(state_dict: dict, prefix: str) -> None:
    """Rename an expected-label encoder's keys as stored before the form had its own module (``usi_head.*``,
    ``usi_labels.*`` → ``usi.head.*``, ``usi.labels.*``), in place."""
    for old, new in (("usi_head.", "usi.head."), ("usi_labels.", "usi.labels.")):
        for k in [k for k in state_dict if k.startswith(prefix + old)]:
            state_dict[prefix + new + k[len(prefix + old):]] = state_dict.pop(k)
