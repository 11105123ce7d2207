"""The few descriptive statistics every report uses, each with one formula (docs/METHOD.md §6).

- ``mean(xs)``: arithmetic mean of the values that are not None (``statistics.fmean``, correctly
  rounded summation); None when nothing is left.
- ``rel(comp, base)``: relative change in percent, ``(comp − base) / |base| · 100``; None when
  either side is None or ``base`` is 0. The absolute value keeps the sign meaningful for measures
  that can be negative (gender bias ψ); for scores ≥ 0 (spBLEU, chrF, LAS) it is the thesis's
  ``(comp − base) / base · 100``.
- ``pct(num, den)``: ``100 · num / den``; None when ``den`` is 0.
- ``delta_class(delta, threshold)``: a sentence whose score fell by more than ``threshold`` (ΔchrF < −threshold)
  is a *loser*, one that rose by more (ΔchrF > +threshold) a *winner*, else *neither* (the thesis's losers and
  winners, METHOD §2; the report's loser/winner shares, its movement table and its example attention maps).
- ``SMALL``: a relative change of at most 10 % in magnitude is *small* (METHOD §2.11's decision: the Findings' "the
  average drop is small" and a family ladder's knee, ``eval.families`` rule 2).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

SMALL = 10.0  # % relative change


def mean(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def rel(comp: float | None, base: float | None) -> float | None:
    if comp is None or base is None or base == 0:
        return None
    return (comp - base) / abs(base) * 100


def pct(num: int, den: int) -> float | None:
    return 100.0 * num / den if den else None


def delta_class(delta: float, threshold: float) -> str:
    return "loser" if delta < -threshold else "winner" if delta > threshold else "neither"
