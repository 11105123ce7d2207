"""Language-balanced sampling over translation directions (docs/METHOD.md §3).

- ``uniform`` (the SMaLL-100 study): every direction gets the same budget B. A corpus of n ≥ B
  examples is subsampled without replacement; a smaller one is repeated ⌊B/n⌋ times whole, plus
  B mod n examples drawn without replacement, so no example repeats more than once more than any other.
- ``temperature`` T (the usual alternative): p_d ∝ n_d^(1/T) over directions d, and the same total
  (B × directions) is spread by p, largest remainders rounding; T = 1 is proportional to size,
  T → ∞ uniform. Each direction's quota is then realised as above.

``plan`` returns the realised sample: one (direction, row) entry per example, in a seeded order
that does not depend on the other directions' sizes.
"""

from __future__ import annotations

import numpy as np

from forgetbench.errors import ForgetbenchError


def quotas(sizes: dict[str, int], mode: str, budget: int, temperature: float = 5.0) -> dict[str, int]:
    """Examples per direction. ``sizes`` maps direction → corpus size (> 0)."""
    empty = [d for d, n in sizes.items() if n < 1]
    if empty:
        raise ForgetbenchError(f"no training examples for {empty}: every sampled direction needs a corpus")
    if mode == "uniform":
        return dict.fromkeys(sizes, budget)
    if mode != "temperature":
        raise ForgetbenchError(f"sampling must be uniform or temperature, got {mode!r}")
    names = list(sizes)
    w = np.array([sizes[d] for d in names], dtype=np.float64) ** (1.0 / temperature)
    p = w / w.sum()
    total = budget * len(names)
    raw = p * total
    q = np.floor(raw).astype(np.int64)
    for i in np.argsort(-(raw - q), kind="stable")[: total - int(q.sum())]:
        q[i] += 1
    return {d: int(n) for d, n in zip(names, q, strict=True)}


def realise(n: int, quota: int, rng: np.random.Generator) -> np.ndarray:
    """``quota`` row indices into a corpus of ``n`` rows: whole repeats, then a subsample without replacement."""
    reps, rest = divmod(quota, n)
    parts = [rng.permutation(n) for _ in range(reps)] + [rng.choice(n, size=rest, replace=False)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def plan(sizes: dict[str, int], mode: str, budget: int, temperature: float, seed: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """(direction index, row) arrays of the realised sample and the record written to the run folder."""
    q = quotas(sizes, mode, budget, temperature)
    dirs, rows, record = [], [], {}
    for k, (d, n) in enumerate(sizes.items()):
        rng = np.random.default_rng([seed, k])  # per direction: its draw does not depend on the others
        r = realise(n, q[d], rng)
        dirs.append(np.full(len(r), k, np.int32))
        rows.append(r)
        record[d] = {"corpus": n, "quota": q[d], "unique": int(len(np.unique(r))), "repeats": round(q[d] / n, 3)}
    return np.concatenate(dirs), np.concatenate(rows), record
