"""How the report writes a number: rounded (``num``), its interval (``interval``), both (``num_interval``), and the
sign marks of significantly worse or better pairs."""

from __future__ import annotations

import math


def num(x, nd=2, pct=False):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "undefined" if pct else "–"
    return f"{x:.{nd}f}{' %' if pct else ''}"


def interval(ci, nd=2) -> str:
    """An interval as text: ``[lo, hi]``."""
    if not ci or ci[0] is None:
        return "[–]"
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


def num_interval(x, ci, nd=2) -> str:
    """A value with its 95 % interval."""
    return num(x, nd) if ci is None else f"{num(x, nd)} {interval(ci, nd)}"


MARK = {"worse": "▼", "better": "▲", "n.s.": ""}
