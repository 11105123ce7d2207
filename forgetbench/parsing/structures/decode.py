"""Tree decoders over arc scores ``S[h, d]`` (head h, dependent d; position 0 is the root).

- ``mst``: maximum spanning arborescence with exactly one child of the root (non-projective):
  Chu-Liu/Edmonds with cycle contraction; when the unconstrained tree has several root children,
  every root child is tried (Zmigrod et al. 2020). Our own code: ``ufal.chu_liu_edmonds`` is GPLv3.
- ``eisner``: best projective tree with a single root child, first-order Eisner, batched over
  sentences (padded score tensors + lengths).
Both return heads as a list over words 1..n (0 = root).
"""

from __future__ import annotations

import numpy as np
import torch

NEG = -1e30


def _find_cycle(heads: np.ndarray) -> list[int] | None:
    n = len(heads)
    color = np.zeros(n, dtype=np.int8)  # 0 new, 1 on stack, 2 done
    for s in range(1, n):
        if color[s]:
            continue
        path, v = [], s
        while v > 0 and color[v] == 0:
            color[v] = 1
            path.append(v)
            v = heads[v]
        if v > 0 and color[v] == 1:
            return path[path.index(v):]
        for p in path:
            color[p] = 2
    return None


def _cle(S: np.ndarray) -> np.ndarray:
    S = S.copy()
    np.fill_diagonal(S, NEG)
    S[:, 0] = NEG
    heads = S.argmax(axis=0)
    heads[0] = -1
    cycle = _find_cycle(heads)
    if cycle is None:
        return heads
    in_cycle = np.zeros(len(S), dtype=bool)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)  # includes the root 0
    cyc = np.array(cycle)
    m = len(rest)
    S2 = np.full((m + 1, m + 1), NEG)
    S_rest = S[rest]
    S2[:m, :m] = S_rest[:, rest]
    enter = S_rest[:, cyc] - S[heads[cyc], cyc][None, :]  # u -> v in cycle, replacing v's cycle arc
    enter_best = enter.argmax(axis=1)
    S2[:m, m] = enter[np.arange(m), enter_best]
    leave = S[cyc][:, rest]  # v in cycle -> u
    leave_best = leave.argmax(axis=0)
    S2[m, :m] = leave[leave_best, np.arange(m)]
    h2 = _cle(S2)
    result = heads.copy()
    for j, v in enumerate(rest):
        if v == 0:
            continue
        result[v] = cyc[leave_best[j]] if h2[j] == m else rest[h2[j]]
    u = h2[m]
    result[cyc[enter_best[u]]] = rest[u]
    return result


def tree_score(S: np.ndarray, heads: np.ndarray) -> float:
    return float(sum(S[heads[d], d] for d in range(1, len(heads))))


def mst(scores) -> list[int]:
    """Best single-root non-projective tree for one sentence; ``scores`` [n+1, n+1]."""
    S = np.asarray(scores, dtype=np.float64)
    heads = _cle(S)
    if int((heads[1:] == 0).sum()) == 1:
        return heads[1:].tolist()
    # Exact single-root search over every root child r, best bound first (branch and bound): a tree with
    # root child r scores at most S[0, r] + Σ_{d≠r} max_{h∉{0,d}} S[h, d]; stop when no bound beats the best.
    inner = S.copy()
    np.fill_diagonal(inner, NEG)
    inner[0, :] = NEG
    col_best = inner[:, 1:].max(axis=0)  # best non-root head of each word
    bounds = S[0, 1:] + (col_best.sum() - col_best)
    best, best_heads = -np.inf, None
    for i in np.argsort(-bounds, kind="stable"):
        if bounds[i] <= best:
            break
        r = int(i) + 1
        S2 = S.copy()
        S2[0, :] = NEG
        S2[0, r] = S[0, r]
        h = _cle(S2)
        sc = tree_score(S, h)
        if sc > best:
            best, best_heads = sc, h
    return best_heads[1:].tolist()


@torch.no_grad()
def eisner(scores: torch.Tensor, lengths: list[int] | torch.Tensor) -> list[list[int]]:
    """Best single-root projective trees. ``scores`` [B, N+1, N+1] (padded), ``lengths`` words per sentence."""
    S = scores.double()
    B, N1, _ = S.shape
    N = N1 - 1
    lengths = [int(x) for x in lengths]
    CR = torch.full((B, N1, N1), NEG, dtype=torch.float64)  # complete, headed at left end
    CL = torch.full((B, N1, N1), NEG, dtype=torch.float64)  # complete, headed at right end
    IR = torch.full((B, N1, N1), NEG, dtype=torch.float64)  # incomplete, arc left -> right
    IL = torch.full((B, N1, N1), NEG, dtype=torch.float64)  # incomplete, arc right -> left
    bp = {k: torch.zeros((B, N1, N1), dtype=torch.long) for k in ("IR", "IL", "CR", "CL")}
    idx = torch.arange(1, N1)
    CR[:, idx, idx] = 0
    CL[:, idx, idx] = 0
    for w in range(1, N):
        for i in range(1, N1 - w):
            j = i + w
            ks = torch.arange(i, j)
            inner = CR[:, i, i:j] + CL[:, i + 1 : j + 1, j]  # k = i..j-1
            best, arg = inner.max(dim=1)
            IR[:, i, j] = best + S[:, i, j]
            IL[:, i, j] = best + S[:, j, i]
            bp["IR"][:, i, j] = bp["IL"][:, i, j] = ks[arg]
            cr = IR[:, i, i + 1 : j + 1] + CR[:, i + 1 : j + 1, j]  # k = i+1..j
            best, arg = cr.max(dim=1)
            CR[:, i, j] = best
            bp["CR"][:, i, j] = torch.arange(i + 1, j + 1)[arg]
            cl = CL[:, i, i:j] + IL[:, i:j, j]  # k = i..j-1
            best, arg = cl.max(dim=1)
            CL[:, i, j] = best
            bp["CL"][:, i, j] = ks[arg]
    out = []
    for b in range(B):
        n = lengths[b]
        r = int(torch.argmax(S[b, 0, 1 : n + 1] + CL[b, 1, 1 : n + 1] + CR[b, 1 : n + 1, n])) + 1
        heads = [0] * (n + 1)
        heads[r] = 0
        stack = [("CL", 1, r), ("CR", r, n)]
        while stack:
            kind, i, j = stack.pop()
            if i == j:
                continue
            k = int(bp[kind][b, i, j])
            if kind == "CR":
                stack += [("IR", i, k), ("CR", k, j)]
            elif kind == "CL":
                stack += [("CL", i, k), ("IL", k, j)]
            elif kind == "IR":
                heads[j] = i
                stack += [("CR", i, k), ("CL", k + 1, j)]
            else:
                heads[i] = j
                stack += [("CR", i, k), ("CL", k + 1, j)]
        out.append(heads[1:])
    return out
