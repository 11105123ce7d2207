"""GraphMerge's word-equivalence graph (Wu & Monz, EMNLP 2023, §3.1) from the training bitext, over the shared
subword vocabulary.

Rules:

1. **Links.** For each training language x, its English–x pairs of the prepared training ids (all of them, the
   paper's whole bitext; or the first ``pairs_per_language`` of the seeded order, ``graphmerge.graph_chunks``)
   are aligned at the subword level, ``chunk`` pairs per aligner call, streamed (memory bounded by a chunk and
   the link counts, never the bitext): ``eflomal`` (the paper's aligner, §4.1 and Table 3: fast_align costs
   0.2 BLEU there; the optional extra ``graphmerge``; its sampler is seeded from the system, so a graph is
   built once per run and kept), intersected both ways; ``fast_align`` = IBM Model 2 with a diagonal prior both
   ways, intersected (``eval.alignment.ibm2_links``, deterministic); ``auto`` (the default) = eflomal where
   installed, else fast_align — the record says which ran.
2. **Transfer ratios.** Per direction s→t (both en→x and x→en, from the same links), c(i, j) = how often
   subword i of s is linked to subword j of t; counts below ``min_count`` are dropped (10: the authors' code,
   ``util/graph_merge_v2_sparse.py``, keeps counts ≥ 10); then
   T_{s→t}[i, j] = c(i, j) / Σ_k c(i, k) (``transfer_ratios``). **Rare rows** (``rare``): a subword i none of
   whose counts reaches ``min_count`` keeps every link at its raw count c(i, j), unnormalised (``authors``: what
   their code does — its per-token filter ``continue``s on an empty row and leaves the raw counts in place, which
   the merged row's normalisation then weighs against the other directions' ratios), or loses them all
   (``strict``: the row stays identity unless another direction links it).
3. **Merged adjacency.** R = Σ_{s→t} T_{s→t}, English the pivot; each row of R with links is normalised to sum 1
   and scaled by ``alpha``; a row with links gets 1 − ``alpha`` on its diagonal, a row without links (and every
   special token and language code) gets 1 (``merged_adjacency``). A is row-stochastic.
4. The graph is built once per run (``graph.npz`` beside the prepared data: indices, values, shape), its SHA-256
   in the run record; its size, density, aligner, build time and the process's peak memory go to the card.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forgetbench.errors import ForgetbenchError

ALIGNERS = ("auto", "eflomal", "fast_align")
MODES = ("gnn", "weighted-sum")
MAX_HOPS = 5


INITS = ("identity", "torch")
RARE = ("authors", "strict")


@dataclass(frozen=True)
class GraphSettings:
    """``model.embeddings.graphmerge`` of a train-mt config."""

    hops: int = 2
    mode: str = "gnn"  # gnn (W_self, W_nb per hop) | weighted-sum (no parameters)
    aligner: str = "auto"
    symmetrisation: str = "intersect"
    min_count: int = 10
    alpha: float = 1.0
    pairs_per_language: int | None = None  # None: the whole bitext
    chunk: int = 20000  # pairs per aligner call
    tie: bool = True  # the output projection is T (the paper's main setting); False: "w/o Tie", the original table
    dropout: float = 0.1
    init: str = "identity"  # the hop layers at step 0: identity (T ≈ E, METHOD §5b) | torch (nn.Linear's default)
    rare: str = "authors"  # rows with no count >= min_count: authors (raw counts kept, rule 2) | strict (dropped)

    def check(self, where: str) -> GraphSettings:
        if not isinstance(self.hops, int) or not 1 <= self.hops <= MAX_HOPS:
            raise ForgetbenchError(f"{where}.hops: {self.hops!r}; GraphMerge takes 1 to {MAX_HOPS} hops (the paper: "
                                   "best 2 on EC30, 3 on IWSLT14)")
        if not isinstance(self.tie, bool):
            raise ForgetbenchError(f"{where}.tie: {self.tie!r}; true (the output projection is the graph's table) or "
                                   "false (the paper's w/o Tie: the original table)")
        if not isinstance(self.chunk, int) or self.chunk < 1:
            raise ForgetbenchError(f"{where}.chunk: {self.chunk!r}; pairs per aligner call, at least 1")
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
        if self.pairs_per_language is not None and (not isinstance(self.pairs_per_language, int)
                                                    or self.pairs_per_language < 1):
            raise ForgetbenchError(f"{where}.pairs_per_language: {self.pairs_per_language!r}; at least 1, or leave it "
                                   "out for the whole bitext")
        if not 0 <= float(self.dropout) < 1:
            raise ForgetbenchError(f"{where}.dropout: {self.dropout!r}; in [0, 1)")
        if self.rare not in RARE:
            raise ForgetbenchError(f"{where}.rare: {self.rare!r}; authors (a row without a count >= min_count keeps its "
                                   "raw counts, as the authors' code) or strict (drops them)")
        if self.init not in INITS:
            raise ForgetbenchError(f"{where}.init: {self.init!r}; identity (the table starts as the model's own) or "
                                   "torch (nn.Linear's default: the earlier, collapsed start)")
        return self


def resolved_aligner(aligner: str) -> str:
    """``auto``: eflomal where the package imports, else fast_align."""
    if aligner != "auto":
        return aligner
    try:
        import eflomal  # noqa: F401
    except ImportError:
        return "fast_align"
    return "eflomal"


def link_counts(pairs: list[tuple[list[int], list[int]]], links: list[set[tuple[int, int]]]) -> Counter:
    """c(i, j) over the pairs: source subword i linked to target subword j (rule 2)."""
    c: Counter = Counter()
    for (src, tgt), ls in zip(pairs, links, strict=True):
        for i, j in ls:
            c[(src[i], tgt[j])] += 1
    return c


def transfer_ratios(counts: Counter, min_count: int, rare: str = "strict") -> dict[int, dict[int, float]]:
    """Rule 2: T[i][j] = c(i, j) / Σ_k c(i, k), counts below ``min_count`` dropped first; a row with none left keeps
    its raw counts where ``rare`` is ``authors``."""
    rows: dict[int, dict[int, float]] = {}
    for (i, j), n in counts.items():
        rows.setdefault(i, {})[j] = float(n)
    out = {}
    for i, r in rows.items():
        kept = {j: n for j, n in r.items() if n >= min_count}
        if kept:
            out[i] = {j: n / sum(kept.values()) for j, n in kept.items()}
        elif rare == "authors":
            out[i] = dict(r)
    return out


def rare_rows(counts: Counter, min_count: int) -> tuple[int, int]:
    """The rows (subwords) none of whose counts reaches ``min_count``, and their links: what ``authors`` keeps."""
    best: dict[int, int] = {}
    links: Counter = Counter()
    for (i, _), n in counts.items():
        best[i] = max(best.get(i, 0), n)
        links[i] += 1
    rare = [i for i, b in best.items() if b < min_count]
    return len(rare), sum(links[i] for i in rare)


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
    from forgetbench.eval.alignment import eflomal_links, ibm2_links

    return eflomal_links(pairs) if resolved_aligner(aligner) == "eflomal" else ibm2_links(pairs)


def build_graph(by_language: dict[str, list[tuple[list[int], list[int]]]], size: int, settings: GraphSettings,
                fixed: set[int], log=print) -> dict:
    """Rules 1-3 over English–x pairs held in memory per language (English on the source side): the streaming build
    (``build_graph_streamed``) over the same pairs, ``settings.chunk`` at a time."""
    def chunks():
        for lang, pairs in by_language.items():
            pairs = pairs[: settings.pairs_per_language]
            for k in range(0, len(pairs), settings.chunk):
                yield lang, pairs[k: k + settings.chunk]

    return build_graph_streamed(chunks(), list(by_language), size, settings, fixed, log)


def build_graph_streamed(chunks: Iterable[tuple[str, list]], languages: list[str], size: int,
                         settings: GraphSettings, fixed: set[int], log=print) -> dict:
    """Rules 1-3 from ``(language, pairs)`` chunks, each aligned on its own and counted, the counts summed per
    language (as int64 keys i·size + j); returns the graph and its record (size, edges, density, aligner, links
    per language, seconds, the process's peak resident memory)."""
    import resource

    aligner = resolved_aligner(settings.aligner)
    t0, keys, per_lang = time.perf_counter(), {x: [] for x in languages}, {x: {"pairs": 0, "links": 0} for x in languages}
    for lang, pairs in chunks:
        links = align(pairs, aligner)
        k = [src[i] * size + tgt[j] for (src, tgt), ls in zip(pairs, links, strict=True) for i, j in ls]
        keys[lang].append(np.asarray(k, dtype=np.int64))
        per_lang[lang]["pairs"] += len(pairs)
        per_lang[lang]["links"] += len(k)
        log(f"graphmerge: en-{lang}: {per_lang[lang]['pairs']:,} pairs aligned ({aligner}), "
            f"{per_lang[lang]['links']:,} links")
    missing = [x for x in languages if not per_lang[x]["pairs"]]
    if missing:
        raise ForgetbenchError(f"model.embeddings.graphmerge: no bitext for {missing} to align; every training "
                               "language needs English pairs")
    ratios = []
    for lang in languages:
        uniq, n = np.unique(np.concatenate(keys.pop(lang)), return_counts=True)
        # strict: the threshold of both directions at once (c(j, i) = c(i, j)); authors: rows decide (rule 2)
        keep = n >= settings.min_count if settings.rare == "strict" else np.ones(len(n), dtype=bool)
        counts = Counter({(int(u // size), int(u % size)): int(c) for u, c in zip(uniq[keep], n[keep], strict=True)})
        reverse = Counter({(j, i): c for (i, j), c in counts.items()})
        ratios += [transfer_ratios(counts, settings.min_count, settings.rare),
                   transfer_ratios(reverse, settings.min_count, settings.rare)]
        per_lang[lang]["kept_pairs"] = int((n >= settings.min_count).sum())
        if settings.rare == "authors":
            fwd, bwd = rare_rows(counts, settings.min_count), rare_rows(reverse, settings.min_count)
            per_lang[lang]["rare_rows"] = {"en": fwd[0], lang: bwd[0]}  # rows kept at raw counts, per side
            per_lang[lang]["rare_links"] = fwd[1] + bwd[1]
    idx, val, shape = merged_adjacency(ratios, size, settings.alpha, fixed)
    off = int((idx[0] != idx[1]).sum())
    return {"indices": idx, "values": val, "shape": shape,
            "record": {"vocabulary": size, "edges": int(len(val)), "cross_edges": off,
                       "density": round(len(val) / (size * size), 8), "aligner": aligner, "chunk": settings.chunk,
                       "languages": per_lang, "seconds": round(time.perf_counter() - t0, 1),
                       "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}}


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
