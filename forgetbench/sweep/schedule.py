"""The units of work of a sweep and how its processes share them: each takes the next ready unit.

Units, in this order (``units``):

1. ``prepare:<variant>`` for every variant, costliest first (a quantize step calibrates: cost 5; pruning 1; none
   for a variant without a recipe): compress it (unless ``compression.json`` is there), register its
   translation series in the store, convert it for CTranslate2 where a series uses that backend.
2. Per variant in config order, per translation series: per job ``pairs:<series>:<i>`` (translate the job's
   sentences); where the series is compared (λ), per job ``xattn:<series>:<i>`` (the cross-attention pass, for
   the pairs whose sentences the analysis reads: ``analysis.sentences_analysed`` on the base's translations);
   then per bias job ``bias:<series>:<i>`` (translate, then both gender aligners where it is an MT-GENDER job).

Rules:

- A unit of step 2 is *ready* once the units it ``needs`` are done: its variant's ``prepare``; for ``xattn``
  also the job's translation by the series and by the base (whose spBLEU decides). A process takes the first unit in
  order that is ready and that nobody has claimed (``Store.claim``: exactly one process wins), so a process
  translates the base while another one calibrates PTQ, and processes finish within one unit of each other
  (a static split of the pairs left one idle while the other compressed, then waited on the slower share).
- When no unit is ready but some are unclaimed, the process polls every ``POLL_S``; it stops with
  ``SweepAborted`` when ``aborted()`` says another process failed (``sweep.parallel``'s barrier).
- Under a launcher (``accelerate launch``) ``prepare`` units are rank 0's alone: transformers' ``save_pretrained``
  writes on rank 0 only.
- The split does not change a number: each unit's work is that of the job alone (its batches are the job's
  sentences, as before), and stored rows are skipped, so a rerun resumes unit by unit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from forgetbench.eval import bias as biasmod
from forgetbench.eval.backends import fake_quantised
from forgetbench.eval.store import Store
from forgetbench.sweep.config import SweepConfig

POLL_S = 0.2


class SweepAborted(RuntimeError):
    """Another process of the run failed while this one waited for a unit."""


@dataclass(frozen=True)
class Unit:
    key: str  # prepare:<variant> | pairs:<series>:<i> | xattn:<series>:<i> | bias:<series>:<i>
    kind: str
    variant: str
    series: str | None = None
    backend: str | None = None
    index: int | None = None
    needs: tuple[str, ...] = ()


def prepare_cost(cfg: SweepConfig, name: str) -> int:
    recipe = cfg.variants[name]
    return 0 if recipe is None else 5 if fake_quantised(recipe) else 1


def units(cfg: SweepConfig) -> list[Unit]:
    out = [Unit(f"prepare:{n}", "prepare", n) for n in sorted(cfg.variants, key=lambda n: -prepare_cost(cfg, n))]
    n_bias, jobs = len(biasmod.jobs(cfg.bias)), range(len(cfg.jobs))
    for name in cfg.variants:
        ready = (f"prepare:{name}",)
        for series, backend in cfg.series(name):
            out += [Unit(f"pairs:{series}:{i}", "pairs", name, series, backend, i, ready) for i in jobs]
            if series in cfg.compared_series:
                out += [Unit(f"xattn:{series}:{i}", "xattn", name, series, backend, i,
                             tuple(dict.fromkeys((*ready, f"pairs:{series}:{i}", f"pairs:{cfg.base}:{i}")))) for i in jobs]
            out += [Unit(f"bias:{series}:{i}", "bias", name, series, backend, i, ready) for i in range(n_bias)]
    return out


def next_unit(store: Store, todo: list[Unit], owner: int, may_prepare: bool = True,
              aborted: Callable[[], bool] = lambda: False) -> Unit | None:
    """Claim and return the first ready unclaimed unit of ``todo``; wait while none is ready; None when every
    unit is claimed (by anyone)."""
    while True:
        claims = store.claims()
        ready = [u for u in todo if u.key not in claims]
        if not ready:
            return None
        ready = [u for u in ready if (may_prepare or u.kind != "prepare")
                 and all(claims.get(n, (0, False))[1] for n in u.needs)]
        if ready:
            if store.claim(ready[0].key, owner):
                return ready[0]
            continue  # another process took it between the read and the claim: read again
        if aborted():
            raise SweepAborted("another sweep process failed")
        time.sleep(POLL_S)


def done_count(store: Store) -> int:
    return sum(done for _, done in store.claims().values())
