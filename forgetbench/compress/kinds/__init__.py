"""The recipe step kinds, one module each (its options, their check, its help line, what it refuses on a path and
what it does: ``compress.step_kind.StepKind``), and the one registry ``compress.recipe`` and ``compress.apply``
read. A new kind is a new module here and one ``register`` line below.
"""

from __future__ import annotations

from forgetbench.compress.kinds import bitsandbytes, prune, quantize, smooth
from forgetbench.compress.step_kind import StepKind

KINDS: dict[str, StepKind] = {}


def register(kind: StepKind) -> None:
    """Make recipes accept ``kind.name`` steps (its options, parse, check and run)."""
    KINDS[kind.name] = kind


register(prune.KIND)
register(smooth.KIND)
register(quantize.KIND)
register(bitsandbytes.KIND)
