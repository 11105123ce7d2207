"""The units of work of a sweep and how its processes share them: each takes the next ready unit.

Units, in this order (``units``):

1. ``prepare:<variant>`` for every variant, costliest first (a quantize step calibrates: cost 5; pruning 1; none
   for a variant without a recipe): compress it (unless ``compression.json`` is there), register its
   translation series in the store, convert it for CTranslate2 where a series uses that backend.
2. Per variant in config order, per translation series: per group of jobs ``pairs:<series>:<g>`` (translate the
   group's sentences, batches filled across its jobs: ``translate.row_batches``); where the series is compared
   (λ), per job ``xattn:<series>:<i>`` (the cross-attention pass, for the pairs whose sentences the analysis reads:
   ``analysis.sentences_analysed`` on the base's translations); then per group of bias jobs ``bias:<series>:<g>``
   (translate, then both gender aligners on its MT-GENDER jobs). A group (``job_groups``) is consecutive jobs of
   at least ``UNIT_BATCHES`` full batches together (by their ``sentences`` limit); a job without a limit is a
   group alone.

Rules:

- A unit of step 2 is *ready* once the units it ``needs`` are done: its variant's ``prepare``; for ``xattn``
  also the group holding the job, translated by the series and by the base (whose spBLEU decides). A process takes the first unit in
  order that is ready and that nobody has claimed (``Store.claim``: exactly one process wins), so a process
  translates the base while another one calibrates PTQ, and processes finish within one unit of each other
  (a static split of the pairs left one idle while the other compressed, then waited on the slower share).
- When no unit is ready but some are unclaimed, the process polls every ``POLL_S``; it stops with
  ``SweepAborted`` when ``aborted()`` says another process failed (``sweep.parallel``'s barrier).
- Any process may take a ``prepare`` unit (``may_prepare=False`` keeps one from them): the variant's folder is
  written atomically and its translation units wait until the unit is done, on one machine or several.
- The split does not change what is computed, only the batches: a unit's batches hold its group's pending
  sentences (a row's tokens do not depend on the rows beside it beyond float rounding; on the demo every
  hypothesis came out the same), and stored rows are skipped, so a rerun resumes unit by unit.
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
UNIT_BATCHES = 4  # a translation unit holds about this many full batches


class SweepAborted(RuntimeError):
    """Another process of the run failed while this one waited for a unit."""


@dataclass(frozen=True)
class Unit:
    key: str  # prepare:<variant> | pairs:<series>:<i> | xattn:<series>:<i> | bias:<series>:<i>
    kind: str
    variant: str
    series: str | None = None
    backend: str | None = None
    index: int | None = None  # the group (pairs, bias) or the job (xattn)
    needs: tuple[str, ...] = ()
    jobs: tuple[int, ...] = ()  # positions in cfg.jobs (pairs, xattn) or in the bias jobs (bias)


def job_groups(jobs, batch_size: int) -> list[tuple[int, ...]]:
    """Consecutive job positions in groups of at least ``UNIT_BATCHES * batch_size`` sentences by their limits;
    a job without a limit (a whole test set) is a group alone."""
    groups, cur, n = [], [], 0
    for i, job in enumerate(jobs):
        if job.limit is None:
            groups += [tuple(cur)] if cur else []
            groups.append((i,))
            cur, n = [], 0
            continue
        cur.append(i)
        n += job.limit
        if n >= UNIT_BATCHES * batch_size:
            groups.append(tuple(cur))
            cur, n = [], 0
    return groups + ([tuple(cur)] if cur else [])


def prepare_cost(cfg: SweepConfig, name: str) -> int:
    recipe = cfg.variants[name]
    return 0 if recipe is None else 5 if fake_quantised(recipe) else 1


def units(cfg: SweepConfig) -> list[Unit]:
    out = [Unit(f"prepare:{n}", "prepare", n) for n in sorted(cfg.variants, key=lambda n: -prepare_cost(cfg, n))]
    size = cfg.generation.batch_size
    groups, bias_groups = job_groups(cfg.jobs, size), job_groups(biasmod.jobs(cfg.bias), size)
    group_of = {i: g for g, group in enumerate(groups) for i in group}
    for name in cfg.variants:
        ready = (f"prepare:{name}",)
        for series, backend in cfg.series(name):
            out += [Unit(f"pairs:{series}:{g}", "pairs", name, series, backend, g, ready, group)
                    for g, group in enumerate(groups)]
            if series in cfg.compared_series:
                out += [Unit(f"xattn:{series}:{i}", "xattn", name, series, backend, i, tuple(dict.fromkeys(
                    (*ready, f"pairs:{series}:{group_of[i]}", f"pairs:{cfg.base}:{group_of[i]}"))), (i,))
                    for i in range(len(cfg.jobs))]
            out += [Unit(f"bias:{series}:{g}", "bias", name, series, backend, g, ready, group)
                    for g, group in enumerate(bias_groups)]
    return out


def next_unit(store: Store, todo: list[Unit], owner: int, may_prepare: bool = True,
              aborted: Callable[[], bool] = lambda: False, until_done: bool = False) -> Unit | None:
    """Claim and return the first ready unclaimed unit of ``todo``; wait while none is ready; None when every
    unit is claimed (by anyone) — with ``until_done`` (several machines, ``sweep.distributed``), when every unit
    is done: a unit claimed by a rank that is lost reappears unclaimed meanwhile."""
    while True:
        claims = store.claims()
        ready = [u for u in todo if u.key not in claims]
        if not ready:
            if not until_done or all(done for _, done in claims.values()):
                return None
            if aborted():
                raise SweepAborted("another sweep process failed")
            time.sleep(POLL_S)
            continue
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
