"""The parsers' scoring layers: MLP, biaffine scorer, the four-MLP/two-biaffine decoder the graph parsers share and
UD-PrLM's USL heads (as SuPar's ``supar.modules``). Below both the parsers (``parsing.layers.modules``, ``model``,
``graph_parser``) and the pre-trained encoder (``parsing.layers.pretrained``), so neither imports the other for them."""

from __future__ import annotations

import torch
from torch import nn


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
        """[B, O, D(dep), H(head)]: a view of ``scores_last``'s contiguous [B, D, H, O]."""
        return self.scores_last(dep, head).permute(0, 3, 1, 2)

    def scores_last(self, dep, head):
        """s as [B, D(dep), H(head), O], contiguous. Computed head side first, as two dense products: T[b, h, o, i]
        = Σ_j W_o[i, j]·y[b, h, j] in one matrix product over every (b, h), then s[b, d, h, o] = Σ_i x[b, d, i]·T[b,
        h, o, i] in one product per sentence (x, y: the dependent and head vectors with their bias 1). The same sums
        as x W_o yᵀ per output, to float rounding; ≈ 2.3× faster forward and backward than a product per (sentence,
        output) for UD-PrLM's label scorer (59 outputs, 65 × 129, 102 × 40 positions, one CPU thread;
        ``benchmarks.biaffine_scores``), and no more operations wherever the dependent side is no wider than the
        head side (every scorer here)."""
        dep = torch.cat([dep, torch.ones_like(dep[..., :1])], -1)
        head = torch.cat([head, torch.ones_like(head[..., :1])], -1)
        (b, n_dep, d_dep), (n_head, d_head), n_out = dep.shape, head.shape[1:], self.n_out
        t = head.reshape(b * n_head, d_head) @ self.weight.permute(2, 0, 1).reshape(d_head, n_out * d_dep)
        t = t.view(b, n_head, n_out, d_dep).permute(0, 3, 1, 2).reshape(b, d_dep, n_head * n_out)
        return torch.bmm(dep, t).view(b, n_dep, n_head, n_out)

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
