"""Relation ids of an input graph for graph-input attention (docs/METHOD.md §4, G2GTr/RNGTr).

For every ordered token pair (i, j) of a sentence (position 0 is the root) the graph gives one id
``P[i, j]``, read from token i's side:

- unlabelled (G2GTr): ``NONE = 0``; ``HEAD = 1`` when j is i's head (the arc j → i);
  ``DEPENDENT = 2`` when j is i's dependent (the arc i → j). The two directions are the
  "left/right" of the study, written from the attending token.
- labelled (RNGTr): ``NONE = 0``; ``1 + 2·r`` when j is i's head and the arc is labelled r;
  ``2 + 2·r`` when j is i's dependent through label r. ``n_ids = 1 + 2·n_rels``.

A word whose head is unknown (``-1``, e.g. not yet attached in a transition system, or an empty
initial graph) contributes no arc; padding positions are NONE. ``P[i, i]`` is NONE.
"""

from __future__ import annotations

import torch

NONE, HEAD, DEPENDENT = 0, 1, 2


def n_relation_ids(labelled: bool, n_rels: int) -> int:
    return 1 + 2 * n_rels if labelled else 3


def relation_ids(heads: torch.Tensor, rels: torch.Tensor | None = None) -> torch.Tensor:
    """``heads`` [B, L] (position 0 = root, entry d = head of d, ``-1`` = no arc; root and padding entries -1 or
    -100), ``rels`` [B, L] label ids (None: unlabelled) → relation ids [B, L, L] (long)."""
    B, L = heads.shape
    valid = (heads >= 0) & (heads < L)
    valid[:, 0] = False  # the root has no head
    h = heads.clamp(0, L - 1)
    if rels is None:
        up = torch.full_like(heads, HEAD)
        down = torch.full_like(heads, DEPENDENT)
    else:
        r = rels.clamp(min=0)
        up, down = 1 + 2 * r, 2 + 2 * r
    P = torch.zeros(B, L, L, dtype=torch.long, device=heads.device)
    b, d = valid.nonzero(as_tuple=True)
    P[b, d, h[b, d]] = up[b, d]  # from the dependent's side: its head
    P[b, h[b, d], d] = down[b, d]  # from the head's side: its dependent
    return P


def graph_of(P: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of ``relation_ids`` for a labelled graph: (heads, rels) [B, L], ``-1`` where a word has no head."""
    B, L, _ = P.shape
    up = (P > 0) & (P % 2 == 1)
    has = up.any(-1)
    none = torch.full((B, L), -1, device=P.device)
    heads = torch.where(has, up.long().argmax(-1), none)
    rels = torch.where(has, (P.gather(-1, heads.clamp(min=0).unsqueeze(-1)).squeeze(-1) - 1) // 2, none)
    return heads, rels
