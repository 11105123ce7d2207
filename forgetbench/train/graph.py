"""GraphMerge's word-equivalence graph (Wu & Monz, EMNLP 2023, §3.1) from the training bitext, over the shared
subword vocabulary.

Rules:

1. **Links.** For each training language x, up to ``pairs_per_language`` English–x pairs of the prepared
   training ids (the first ones of the seeded order, ``graph_pairs``) are aligned at the subword level:
   ``fast_align`` = IBM Model 2 with a diagonal prior both ways, intersected (``eval.alignment.ibm2_links``,
   deterministic); ``eflomal`` = the eflomal package (if installed), intersected likewise.
2. **Transfer ratios.** Per direction s→t (both en→x and x→en, from the same links), c(i, j) = how often
   subword i of s is linked to subword j of t; counts below ``min_count`` are dropped; then
   T_{s→t}[i, j] = c(i, j) / Σ_k c(i, k) (``transfer_ratios``).
3. **Merged adjacency.** R = Σ_{s→t} T_{s→t}, English the pivot; each row of R with links is normalised to sum 1
   and scaled by ``alpha``; a row with links gets 1 − ``alpha`` on its diagonal, a row without links (and every
   special token and language code) gets 1 (``merged_adjacency``). A is row-stochastic.
4. The graph is built once per run (``graph.npz`` beside the prepared data: indices, values, shape), its SHA-256
   in the run record; its size, density and build time go to the card.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forgetbench.errors import ForgetbenchError

ALIGNERS = ("fast_align", "eflomal")
MODES = ("gnn", "weighted-sum")


@dataclass(frozen=True)
class GraphSettings:
    """``model.embeddings.graphmerge`` of a train-mt config."""

    hops: int = 2
    mode: str = "gnn"  # gnn (W_self, W_nb per hop) | weighted-sum (no parameters)
    aligner: str = "fast_align"
    symmetrisation: str = "intersect"
    min_count: int = 10
    alpha: float = 1.0
    pairs_per_language: int = 5000
    dropout: float = 0.1

    def check(self, where: str) -> GraphSettings:
        if not isinstance(self.hops, int) or not 1 <= self.hops <= 3:
            raise ForgetbenchError(f"{where}.hops: {self.hops!r}; GraphMerge takes 1 to 3 hops (the paper: 2 on EC30, "
                                   "3 on IWSLT14)")
        if self.mode not in MODES:
            raise ForgetbenchError(f"{where}.mode: {self.mode!r}; choose {' or '.join(MODES)}")
        if self.aligner not in ALIGNERS:
            raise ForgetbenchError(f"{where}.aligner: {self.aligner!r}; choose {' or '.join(ALIGNERS)}")
        if self.aligner == "eflomal":
            try:
                import eflomal  # noqa: F401
            except ImportError:
                raise ForgetbenchError(f"{where}.aligner: eflomal is not installed (pip install eflomal), or use "
                                       "aligner: fast_align") from None
        if self.symmetrisation != "intersect":
            raise ForgetbenchError(f"{where}.symmetrisation: {self.symmetrisation!r}; only intersect (the paper's)")
        if not isinstance(self.min_count, int) or self.min_count < 1:
            raise ForgetbenchError(f"{where}.min_count: {self.min_count!r}; a link count of at least 1")
        if not 0 < float(self.alpha) <= 1:
            raise ForgetbenchError(f"{where}.alpha: {self.alpha!r}; a weight in (0, 1]")
        if not isinstance(self.pairs_per_language, int) or self.pairs_per_language < 1:
            raise ForgetbenchError(f"{where}.pairs_per_language: {self.pairs_per_language!r}; at least 1")
        if not 0 <= float(self.dropout) < 1:
            raise ForgetbenchError(f"{where}.dropout: {self.dropout!r}; in [0, 1)")
        return self


def link_counts(pairs: list[tuple[list[int], list[int]]], links: list[set[tuple[int, int]]]) -> Counter:
    """c(i, j) over the pairs: source subword i linked to target subword j (rule 2)."""
    c: Counter = Counter()
    for (src, tgt), ls in zip(pairs, links, strict=True):
        for i, j in ls:
            c[(src[i], tgt[j])] += 1
    return c


def transfer_ratios(counts: Counter, min_count: int) -> dict[int, dict[int, float]]:
    """Rule 2: T[i][j] = c(i, j) / Σ_k c(i, k), counts below ``min_count`` dropped first."""
    rows: dict[int, dict[int, float]] = {}
    for (i, j), n in counts.items():
        if n >= min_count:
            rows.setdefault(i, {})[j] = float(n)
    return {i: {j: n / sum(r.values()) for j, n in r.items()} for i, r in rows.items()}


def merged_adjacency(ratios: list[dict[int, dict[int, float]]], size: int, alpha: float = 1.0,
                     fixed: set[int] = frozenset()) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Rule 3: A as COO (indices [2, nnz], values [nnz], shape), rows sorted."""
    R: dict[int, dict[int, float]] = {}
    for T in ratios:
        for i, row in T.items():
            if i in fixed:
                continue
            acc = R.setdefault(i, {})
            for j, v in row.items():
                if j not in fixed:
                    acc[j] = acc.get(j, 0.0) + v
    entries: dict[tuple[int, int], float] = {}
    for i in range(size):
        row = R.get(i)
        total = sum(row.values()) if row else 0.0
        if not total:
            entries[(i, i)] = 1.0
            continue
        for j, v in row.items():
            entries[(i, j)] = entries.get((i, j), 0.0) + alpha * v / total
        if alpha < 1:
            entries[(i, i)] = entries.get((i, i), 0.0) + (1 - alpha)
    keys = sorted(entries)
    idx = np.array(keys, dtype=np.int64).T.reshape(2, -1)
    return idx, np.array([entries[k] for k in keys], dtype=np.float32), (size, size)


def align(pairs: list[tuple[list[int], list[int]]], aligner: str) -> list[set[tuple[int, int]]]:
    """Rule 1: symmetrised (intersected) subword links of each pair."""
    if aligner == "eflomal":
        return _eflomal_links(pairs)
    from forgetbench.eval.alignment import ibm2_links

    return ibm2_links(pairs)


def _eflomal_links(pairs):
    import tempfile

    import eflomal

    with tempfile.TemporaryDirectory() as d:
        src = [" ".join(map(str, s)) for s, _ in pairs]
        tgt = [" ".join(map(str, t)) for _, t in pairs]
        fwd, rev = Path(d) / "fwd", Path(d) / "rev"
        eflomal.Aligner().align(src, tgt, links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
        out = []
        for a, b in zip(fwd.read_text().splitlines(), rev.read_text().splitlines(), strict=True):
            fa = {tuple(map(int, x.split("-"))) for x in a.split()}
            fb = {tuple(map(int, x.split("-"))) for x in b.split()}
            out.append(fa & fb)
        return out


def build_graph(by_language: dict[str, list[tuple[list[int], list[int]]]], size: int, settings: GraphSettings,
                fixed: set[int], log=print) -> dict:
    """Rules 1-3 over English–x pairs per language (English on the source side); returns the graph and its record
    (size, edges, density, links per language, seconds)."""
    missing = [x for x, pairs in by_language.items() if not pairs]
    if missing:
        raise ForgetbenchError(f"model.embeddings.graphmerge: no bitext for {missing} to align; every training "
                               "language needs English pairs")
    t0, ratios, per_lang = time.perf_counter(), [], {}
    for lang, pairs in by_language.items():
        pairs = pairs[: settings.pairs_per_language]
        links = align(pairs, settings.aligner)
        counts = link_counts(pairs, links)
        reverse = Counter({(j, i): n for (i, j), n in counts.items()})
        ratios += [transfer_ratios(counts, settings.min_count), transfer_ratios(reverse, settings.min_count)]
        per_lang[lang] = {"pairs": len(pairs), "links": int(sum(counts.values())),
                          "kept_pairs": sum(n >= settings.min_count for n in counts.values())}
        log(f"graphmerge: en-{lang}: {len(pairs):,} pairs, {per_lang[lang]['links']:,} links")
    idx, val, shape = merged_adjacency(ratios, size, settings.alpha, fixed)
    off = int((idx[0] != idx[1]).sum())
    return {"indices": idx, "values": val, "shape": shape,
            "record": {"vocabulary": size, "edges": int(len(val)), "cross_edges": off,
                       "density": round(len(val) / (size * size), 8), "languages": per_lang,
                       "seconds": round(time.perf_counter() - t0, 1)}}


def save_graph(graph: dict, path: Path) -> str:
    """``graph.npz`` (no pickle) written atomically; returns its SHA-256."""
    import io

    from forgetbench.io import atomic_write_bytes

    buf = io.BytesIO()
    np.savez(buf, indices=graph["indices"], values=graph["values"], shape=np.array(graph["shape"], dtype=np.int64))
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    return hashlib.sha256(data).hexdigest()


def load_graph(path: Path):
    """The adjacency as a torch sparse COO tensor (float32)."""
    import torch

    with np.load(path, allow_pickle=False) as z:
        idx, val, shape = z["indices"], z["values"], tuple(int(x) for x in z["shape"])
    return torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(val), shape, check_invariants=True).coalesce()
