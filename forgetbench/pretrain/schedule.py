"""Algorithm 1 of UD-PrLM (Sun, Li, Zhao §3.6): which losses each pre-training step optimises.

Rules, for step s (1-based) of a run with seed ``seed``:

1. Phase 1, s ≤ ``joint_steps`` (the paper's m): ``JOINT`` — the USL loss on H^(L) and the MLM loss on H^(L)
   summed, the USI layer unused (Algorithm 1 line 4).
2. Phase 2, s > m: u = the first draw of ``numpy.random.default_rng(seed · 1,000,003 + s)`` (the step's own
   generator, so a resumed run draws the same); ``USL_MLM`` when u < ``p`` — the USL loss plus the MLM loss through
   USI, one optimiser step (line 7) — else ``MLM`` — the MLM loss through USI alone (line 9). MLM runs every step.
3. The kind depends on the step only, so the four variants of one config take the same draws; what a kind computes
   depends on the variant (``losses``): the USL loss only for variants trained on trees (UD-PrLM and the
   w/o-US-Integration ablation ``usl-mlm``), the MLM loss through USI only for variants with USI (UD-PrLM and the
   w/o-UD-pre-training ablation ``usi-mlm``, whose USL and USI layers learn from MLM alone); MLM-only encoders take
   the MLM loss on H^(L) every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

JOINT, USL_MLM, MLM = "joint", "usl+mlm", "mlm"


@dataclass(frozen=True)
class Schedule:
    joint_steps: int = 0
    p: float = 0.8
    seed: int = 1

    def kind(self, step: int) -> str:
        if step <= self.joint_steps:
            return JOINT
        return USL_MLM if np.random.default_rng(self.seed * 1_000_003 + step).random() < self.p else MLM


def losses(kind: str, variant: str) -> tuple[bool, bool]:
    """(the USL loss taken, the MLM loss read through USI) for a step of ``kind`` of a ``variant`` encoder (rule 3)."""
    usl = variant in ("usl-mlm", "ud-prlm") and kind in (JOINT, USL_MLM)
    through_usi = variant in ("usi-mlm", "ud-prlm") and kind != JOINT
    return usl, through_usi
