"""BERT's masked-language-model corruption (Devlin et al. 2019), the MLM objective of the pre-trained encoders.

Rules, for token ids ``ids`` [B, N] and a boolean ``special`` [B, N] (``<s>``, ``</s>``, padding, language tags):

1. Each non-special position is chosen independently with probability ``rate`` (0.15).
2. A chosen position becomes ``mask_id`` with probability 0.8, a token drawn uniformly from
   ``[first_normal, vocab_size)`` with probability 0.1, and stays as it is with probability 0.1.
3. Labels: the original id at chosen positions, ``IGNORE`` (−100) elsewhere; the loss is their cross-entropy.
4. All draws come from the given ``torch.Generator``: the same seed masks the same positions.
"""

from __future__ import annotations

import torch

IGNORE = -100


def mask_tokens(ids: torch.Tensor, special: torch.Tensor, mask_id: int, vocab_size: int, first_normal: int,
                generator: torch.Generator, rate: float = 0.15) -> tuple[torch.Tensor, torch.Tensor]:
    """(corrupted ids, labels) by rules 1–4."""
    u = torch.rand(ids.shape, generator=generator)
    chosen = (u < rate) & ~special
    how = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(first_normal, vocab_size, ids.shape, generator=generator)
    out = ids.clone()
    out[chosen & (how < 0.8)] = mask_id
    swap = chosen & (how >= 0.8) & (how < 0.9)
    out[swap] = random_ids[swap]
    return out, torch.where(chosen, ids, torch.full_like(ids, IGNORE))
