"""MT-Gender / WinoMT metrics (docs/METHOD.md §2) from per-item gold and predicted genders.

Per language: accuracy; F1 of male and female gold entities (a prediction of "neutral" or
"unknown" counts as wrong); ΔG = F1_m − F1_f; ΔS = Acc_pro − Acc_anti;
ψ = (F1_m − F1_f) / (F1_m + F1_f) (+1 all male, −1 all female, 0 unbiased) and
ψ* = |ψ_anti − ψ_pro| over the anti- and pro-stereotypical subsets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class GenderItem:
    gold: str  # "male" | "female"
    predicted: str  # "male" | "female" | "neutral" | "unknown"
    stereotype: str | None = None  # "pro" | "anti" | None


def _f1(items: list[GenderItem], g: str) -> float:
    tp = sum(1 for x in items if x.gold == g and x.predicted == g)
    pred = sum(1 for x in items if x.predicted == g)
    gold = sum(1 for x in items if x.gold == g)
    if tp == 0:
        return 0.0
    p, r = tp / pred, tp / gold
    return 2 * p * r / (p + r)


def _acc(items: list[GenderItem]) -> float | None:
    return sum(x.gold == x.predicted for x in items) / len(items) if items else None


def psi(items: list[GenderItem]) -> float | None:
    fm, ff = _f1(items, "male"), _f1(items, "female")
    return (fm - ff) / (fm + ff) if fm + ff else None


@dataclass
class GenderScores:
    n: int
    accuracy: float | None
    f1_male: float
    f1_female: float
    delta_g: float
    delta_s: float | None
    psi: float | None
    psi_star: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def gender_scores(items: list[GenderItem]) -> GenderScores:
    pro = [x for x in items if x.stereotype == "pro"]
    anti = [x for x in items if x.stereotype == "anti"]
    fm, ff = _f1(items, "male"), _f1(items, "female")
    acc_pro, acc_anti = _acc(pro), _acc(anti)
    p_pro, p_anti = psi(pro), psi(anti)
    return GenderScores(len(items), _acc(items), fm, ff, fm - ff,
                        None if acc_pro is None or acc_anti is None else acc_pro - acc_anti,
                        psi(items), None if p_pro is None or p_anti is None else abs(p_anti - p_pro))


def _f1_rows(tp: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        p, r = tp / pred, tp / gold
        return np.where(tp == 0, 0.0, 2 * p * r / (p + r))


def _psi_rows(w: np.ndarray, gold: np.ndarray, pred: np.ndarray, subset: np.ndarray) -> np.ndarray:
    def n(mask):
        return w @ (mask & subset).astype(np.float64)

    fm = _f1_rows(n((gold == "male") & (pred == "male")), n(pred == "male"), n(gold == "male"))
    ff = _f1_rows(n((gold == "female") & (pred == "female")), n(pred == "female"), n(gold == "female"))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(fm + ff != 0, (fm - ff) / (fm + ff), np.nan)


def resampled_scores(items: list[GenderItem], weights: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, ψ and ψ* of every resample at once; ``weights`` [R, n]: how often each item is drawn (from
    ``bootstrap.tally``). Row r equals ``gender_scores`` of resample r's items (NaN where it gives None): the same
    operations on the same counts, which are exact integers in float64."""
    gold, pred = np.array([x.gold for x in items]), np.array([x.predicted for x in items])
    stereotype = np.array([str(x.stereotype) for x in items])
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = (weights @ (gold == pred).astype(np.float64)) / weights.sum(1)
    p_pro = _psi_rows(weights, gold, pred, stereotype == "pro")
    p_anti = _psi_rows(weights, gold, pred, stereotype == "anti")
    return {"accuracy": acc, "psi": _psi_rows(weights, gold, pred, np.ones(len(items), dtype=bool)),
            "psi_star": np.abs(p_anti - p_pro)}
