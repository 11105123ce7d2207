"""Algorithm 1 of UD-PrLM (Sun, Li, Zhao): which objective each pre-training step optimises.

Rules, for step s (1-based) in epoch e (0-based) of a run with seed ``seed``:

1. While e < ``joint_epochs`` (the paper's m): ``JOINT`` — the USL loss and the MLM loss summed, both on the
   shared encoder's last layer H^(L), the USI layer unused.
2. After that: u = the first draw of ``numpy.random.default_rng(seed · 1,000,003 + s)`` (the step's own
   generator, so a resumed run draws the same); ``USL`` when u < ``p`` (the USL loss on H^(L)), else ``MLM`` (the
   MLM loss on H^(L+1), through the USI layer).
3. An encoder without USI (the ablation) or without USL (MLM only) has no choice to make: every step is
   ``JOINT`` resp. ``MLM``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

JOINT, USL, MLM = "joint", "usl", "mlm"


@dataclass(frozen=True)
class Schedule:
    joint_epochs: int = 1
    p: float = 0.5
    seed: int = 1
    usl: bool = True
    usi: bool = True

    def kind(self, step: int, epoch: int) -> str:
        if not self.usl:
            return MLM
        if not self.usi or epoch < self.joint_epochs:
            return JOINT
        return USL if np.random.default_rng(self.seed * 1_000_003 + step).random() < self.p else MLM
