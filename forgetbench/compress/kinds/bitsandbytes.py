"""The ``bitsandbytes`` step: 8-bit or 4-bit weights when the model is loaded, on a GPU (``compress.bnb``); the
last step of a recipe, never beside ``quantize``.

    - bitsandbytes: {method: llm.int8, threshold: 6.0}
"""

from __future__ import annotations

from forgetbench.compress.bnb import KEYS as BNB_KEYS
from forgetbench.compress.bnb import BnbConfig
from forgetbench.compress.step_kind import ParseContext, Step, StepKind, fail

KEYS = frozenset(BNB_KEYS)


def parse(opts: dict, where: str, ctx: ParseContext) -> Step:
    if ctx.index != len(ctx.steps) or any("quantize" in x for x in ctx.steps if isinstance(x, dict)):
        fail(where, "bitsandbytes quantises at load time: it must be the last step, and not beside a "
                    "quantize step (compress.bnb rule 1)")
    return Step("bitsandbytes", BnbConfig(**opts))


def check(step, streamed, calibrate):
    return ("bitsandbytes quantises when a model is loaded, on a GPU; there is no folder to write (compress.bnb "
            "rule 2): use the recipe as a sweep variant")


KIND = StepKind("bitsandbytes", BnbConfig, KEYS, "bitsandbytes 8-/4-bit weights at load time (a sweep variant, on a GPU)",
                parse, check, lambda target, step, calibrate: ({}, None))
