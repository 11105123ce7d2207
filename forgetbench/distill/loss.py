"""Distillation losses (docs/METHOD.md §3). Every function returns per-position values; callers mask and average.

Word-level KD at temperature T, with q = softmax(z_T / T) (teacher) and p = softmax(z_S / T) (student):

    L_kd = −Σ_z q(z) log p(z)                 (cross-entropy form; KL = L_kd − H(q))
    L    = L_ce + α · T² · L_kd               (T² keeps the gradient scale of L_kd independent of T)

Cached targets (``teacher_targets``) keep, per position, the top-k teacher probabilities and m tokens drawn
with replacement from the teacher's *tail* q_tail(z) = q(z)/r over the tokens outside the top k, with
r = 1 − Σ_top-k q (the tail mass). Then

    L̂_kd = −Σ_{i≤k} q_i log p(z_i) − r · (1/m) Σ_{s≤m} log p(z_s)

is an unbiased estimate of L_kd (the second term's expectation is −Σ_{z∉top-k} q(z) log p(z)); each sample's
importance weight is r/m. Top-k alone (``kd_topk_only``: q renormalised over the top k) is biased: it
ignores the tail mass and over-weights the head. With the sampled tokens' log q stored too, KL is estimated
the same way.

Learned α (``LearnedAlpha``): a bare trainable α on a non-negative loss only lowers the loss by shrinking
α, so gradient descent drives it to 0 (or, unconstrained, to −∞, which rewards making L_kd large).
The option uses α = exp(−s) with the penalty + s (Kendall et al., 2018): minimising exp(−s)·L_kd + s
over s gives α = 1/L_kd, bounded to [alpha_min, alpha_max].
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def kd_online(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_kd, KL(q‖p)) per position against the teacher's full distribution."""
    logp = F.log_softmax(student_logits.float() / temperature, dim=-1)
    logq = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    q = logq.exp()
    ce = -(q * logp).sum(-1)
    return ce, ce + (q * logq).sum(-1)


@torch.no_grad()
def teacher_targets(teacher_logits: torch.Tensor, temperature: float, k: int, m: int,
                    generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """Cache entries for every position of ``teacher_logits`` [..., V]: ``top_ids``/``top_q`` [..., k],
    ``tail_ids``/``tail_logq`` [..., m] (draws from q_tail) and ``tail_mass`` [...]."""
    logq = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    q = logq.exp()
    top_q, top_ids = q.topk(k, dim=-1)
    mass = (1.0 - top_q.sum(-1)).clamp_min(0.0)
    w = q.scatter(-1, top_ids, 0.0)
    w = w + (w.sum(-1, keepdim=True) <= 0) * 1.0  # no tail mass left: any draw, weight r = 0
    w = w.scatter(-1, top_ids, 0.0)
    flat = w.reshape(-1, w.shape[-1])
    tail_ids = torch.multinomial(flat, m, replacement=True, generator=generator).reshape(*w.shape[:-1], m)
    return {"top_ids": top_ids, "top_q": top_q, "tail_ids": tail_ids, "tail_logq": logq.gather(-1, tail_ids),
            "tail_mass": mass}


def kd_cached(student_logits: torch.Tensor, t: dict[str, torch.Tensor], temperature: float = 1.0
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """(L̂_kd, KL̂) per position from cache entries (the estimator in this module's docstring)."""
    logp = F.log_softmax(student_logits.float() / temperature, dim=-1)
    top_q, mass = t["top_q"].float(), t["tail_mass"].float()
    head = -(top_q * logp.gather(-1, t["top_ids"].long())).sum(-1)
    tail = -mass * logp.gather(-1, t["tail_ids"].long()).mean(-1)
    neg_entropy = (top_q * top_q.clamp_min(1e-30).log()).sum(-1) + mass * t["tail_logq"].float().mean(-1)
    ce = head + tail
    return ce, ce + neg_entropy


def kd_topk_only(student_logits: torch.Tensor, t: dict[str, torch.Tensor], temperature: float = 1.0) -> torch.Tensor:
    """The biased estimate of top-k caches: the teacher renormalised over its top k, the tail dropped."""
    logp = F.log_softmax(student_logits.float() / temperature, dim=-1)
    q = t["top_q"].float()
    q = q / q.sum(-1, keepdim=True)
    return -(q * logp.gather(-1, t["top_ids"].long())).sum(-1)


def label_smoothed_ce(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Per-position label-smoothed cross-entropy (``torch.nn.CrossEntropyLoss`` semantics), 0 where label = -100."""
    flat = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100,
                           label_smoothing=smoothing, reduction="none")
    return flat.reshape(labels.shape)


class LearnedAlpha(torch.nn.Module):
    """α = exp(−s), trained with the penalty + s; s clamped so that α stays in [alpha_min, alpha_max]."""

    def __init__(self, alpha: float = 1.0, alpha_min: float = 0.01, alpha_max: float = 100.0):
        super().__init__()
        self.s = torch.nn.Parameter(torch.tensor(-math.log(alpha)))
        self.lo, self.hi = -math.log(alpha_max), -math.log(alpha_min)

    def forward(self, kd: torch.Tensor) -> torch.Tensor:
        s = self.s.clamp(self.lo, self.hi)
        return torch.exp(-s) * kd + s

    @property
    def alpha(self) -> float:
        return float(torch.exp(-self.s.detach().clamp(self.lo, self.hi)))
