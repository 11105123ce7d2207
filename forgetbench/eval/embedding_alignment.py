"""Cross-lingual embedding alignment: how close a model's embeddings of translation-equivalent subwords are
(GraphMerge's claim, Wu & Monz 2023, their Tables 4-5 in spirit).

Rules:

1. Held-out English–x sentence pairs (e.g. FLORES-101 devtest) are tokenised with the model's tokenizer and
   aligned at the subword level, all pairs of a language together, by ``aligner``: ``fast_align``
   (``alignment.ibm2_links``: IBM Model 2 both ways, intersected) or ``eflomal`` (``alignment.eflomal_links``).
   Links between two occurrences of the same subword id are left out (a shared token is trivially aligned with
   itself) and so are special tokens and language codes. **Not circular:** the pairs come from held-out text,
   and a GraphMerge model is measured with the aligner that did *not* build its graph (``independent_aligner``;
   the paper uses MUSE dictionaries, §5.1, whose licence forbids shipping them here), its baseline with the same.
2. Per language, the mean cosine similarity of the embedding rows of the linked (English, x) subword pairs, each
   distinct pair counted once (``pairs``), with a 95 % bootstrap interval over those pairs; beside it the
   **isotropy control** of the paper's Appendix A.6: for each English subword of those pairs, the mean cosine to
   50 subwords drawn uniformly from the whole vocabulary (special tokens and language codes excepted), averaged
   over the English subwords (``isotropy``; near 0 for an isotropic table; a similarity is read against it).
3. Script pairs: English's script (Latin) with x's script, the Unicode script of most letters of x's sentences
   (``script_of``); the per-script-pair mean pools the languages' pairs.
4. **Edges and non-edges** (``edges``: a GraphMerge graph's off-diagonal links, either direction): per language,
   the share of the linked pairs that are graph edges, and the cosine above the isotropy floor (mean cosine −
   ``isotropy``) on the edge pairs and on the others separately — an edge's similarity partly shows that A·H
   mixed the two rows; a non-edge's is what the model learnt beyond the graph. The same split applies to any
   model's table (the baseline's, split by the other arm's graph).
5. **Pivot test** (the paper's Table 5 in spirit): two non-English languages x, y whose subwords are linked to
   the same English subword (x_id, y_id through e); per language pair, the mean cosine of those (x_id, y_id)
   pairs (identical ids and specials left out), each distinct pair once, and its share that are graph edges
   (x and y are never linked directly: the graph's links run through English).
"""

from __future__ import annotations

import unicodedata
from collections import Counter

import numpy as np
import torch


def script_of(texts: list[str]) -> str:
    """The Unicode script (first word of the letters' character names: LATIN, CYRILLIC, ARABIC, …) of most letters;
    CJK ideographs are CJK."""
    c: Counter = Counter()
    for t in texts:
        for ch in t:
            if ch.isalpha():
                name = unicodedata.name(ch, "")
                c["CJK" if name.startswith("CJK") else (name.split(" ")[0] or "UNKNOWN")] += 1
    return c.most_common(1)[0][0].title() if c else "Unknown"


def _ids(tok, texts: list[str], lang: str) -> list[list[int]]:
    tok.src_lang = lang
    return tok(texts, add_special_tokens=False)["input_ids"]


ISOTROPY_SAMPLES = 50


def independent_aligner(graph_aligner: str | None) -> str:
    """The aligner that measures a model whose graph ``graph_aligner`` built (None: no graph): the other one;
    fast_align where eflomal would be needed and is not installed (the card then says the measure shares the
    graph's aligner)."""
    if graph_aligner == "fast_align":
        try:
            import eflomal  # noqa: F401
        except ImportError:
            return "fast_align"
        return "eflomal"
    return "fast_align"


def _special(tok) -> set[int]:
    return set(tok.all_special_ids) | set(getattr(tok, "lang_code_to_id", {}).values())


def aligned_pairs(tok, pairs: list[tuple[str, str]], lang: str, aligner: str = "fast_align") -> set[tuple[int, int]]:
    """Rule 1: distinct (English subword id, x subword id) pairs linked in the held-out ``pairs`` (English, x)."""
    from forgetbench.eval.alignment import eflomal_links, ibm2_links

    en, xx = _ids(tok, [e for e, _ in pairs], "en"), _ids(tok, [x for _, x in pairs], lang)
    special = _special(tok)
    out = set()
    link = eflomal_links if aligner == "eflomal" else ibm2_links
    for a, b, links in zip(en, xx, link(list(zip(en, xx, strict=True))), strict=True):
        for i, j in links:
            if a[i] != b[j] and a[i] not in special and b[j] not in special:
                out.add((a[i], b[j]))
    return out


def isotropy(E: torch.Tensor, words: list[int], candidates: np.ndarray, rng, samples: int = ISOTROPY_SAMPLES) -> float:
    """Rule 2's control on a row-normalised table ``E``: the mean over ``words`` of each one's mean cosine to
    ``samples`` ids drawn uniformly (with replacement) from ``candidates``."""
    if not words:
        return float("nan")
    drawn = torch.from_numpy(candidates[rng.integers(0, len(candidates), (len(words), samples))])
    return float((E[torch.tensor(words)][:, None, :] * E[drawn]).sum(-1).mean(1).mean())


def edge_split(E: torch.Tensor, links: list[tuple[int, int]], edges: set[tuple[int, int]], floor: float) -> dict:
    """Rule 4 on a row-normalised table: the share of ``links`` that are ``edges`` (either direction) and the mean
    cosine above ``floor`` of the edge and the non-edge links."""
    on = [(a, b) for a, b in links if (a, b) in edges or (b, a) in edges]
    off = [(a, b) for a, b in links if (a, b) not in edges and (b, a) not in edges]

    def above(ps):
        if not ps:
            return None
        idx = torch.tensor(ps, dtype=torch.long)
        return round(float((E[idx[:, 0]] * E[idx[:, 1]]).sum(1).mean()) - floor, 4)

    return {"edge_share": round(len(on) / len(links), 4) if links else None, "edge_pairs": len(on),
            "non_edge_pairs": len(off), "edge_above_floor": above(on), "non_edge_above_floor": above(off)}


def pivot_pairs(links: dict[str, list[tuple[int, int]]], special: set[int] = frozenset()) -> dict[str, list]:
    """Rule 5: per pair of languages x < y, the distinct (x id, y id) pairs linked to a common English subword."""
    by_en = {x: {} for x in links}
    for x, ls in links.items():
        for e, i in ls:
            by_en[x].setdefault(e, set()).add(i)
    out = {}
    langs = sorted(links)
    for k, x in enumerate(langs):
        for y in langs[k + 1:]:
            pairs = {(i, j) for e in by_en[x].keys() & by_en[y].keys() for i in by_en[x][e] for j in by_en[y][e]
                     if i != j and i not in special and j not in special}
            out[f"{x}-{y}"] = sorted(pairs)
    return out


def graph_edges(indices: np.ndarray) -> set[tuple[int, int]]:
    """The off-diagonal links of a graph's COO ``indices`` [2, nnz]."""
    return {(int(a), int(b)) for a, b in zip(indices[0], indices[1], strict=True) if a != b}


def alignment_scores(model, tok, bitext: dict[str, list[tuple[str, str]]], resamples: int = 1000,
                     seed: int = 12345, aligner: str = "fast_align", edges: set[tuple[int, int]] | None = None) -> dict:
    """Rules 2-5 for the model's input embedding table: per language and per script pair, mean cosine [interval]
    and the isotropy control; ``aligner`` links the held-out pairs (rule 1); with a graph's ``edges``, the edge
    and non-edge split per language and the pivot test."""
    E = model.get_input_embeddings().weight.detach().float()
    E = E / E.norm(dim=1, keepdim=True).clamp_min(1e-12)
    rng = np.random.default_rng(seed)
    special = _special(tok)
    candidates = np.array([i for i in range(min(len(tok), len(E))) if i not in special], dtype=np.int64)
    langs, pooled = {}, {}

    def summary(cos: np.ndarray) -> dict:
        if not len(cos):
            return {"pairs": 0, "mean_cosine": None, "ci95": None}
        boot = cos[rng.integers(0, len(cos), (resamples, len(cos)))].mean(1)
        return {"pairs": int(len(cos)), "mean_cosine": round(float(cos.mean()), 4),
                "ci95": [round(float(np.percentile(boot, 2.5)), 4), round(float(np.percentile(boot, 97.5)), 4)]}

    all_links = {}
    for lang, pairs in bitext.items():
        links = sorted(aligned_pairs(tok, pairs, lang, aligner))
        all_links[lang] = links
        idx = torch.tensor(links, dtype=torch.long).reshape(-1, 2)
        cos = (E[idx[:, 0]] * E[idx[:, 1]]).sum(1).numpy() if len(links) else np.zeros(0)
        script = f"Latin–{script_of([x for _, x in pairs])}"
        iso = isotropy(E, sorted({a for a, _ in links}), candidates, rng)
        langs[lang] = summary(cos) | {"script_pair": script, "isotropy": None if np.isnan(iso) else round(iso, 4)}
        if edges is not None and not np.isnan(iso):
            langs[lang] |= edge_split(E, links, edges, iso)
        pooled.setdefault(script, []).append(cos)
    scripts = {s: summary(np.concatenate(v)) for s, v in sorted(pooled.items())}
    out = {"languages": langs, "script_pairs": scripts, "aligner": aligner, "isotropy_samples": ISOTROPY_SAMPLES}
    if edges is not None:
        out["pivot"] = {}
        for key, ps in pivot_pairs(all_links, special).items():
            idx = torch.tensor(ps, dtype=torch.long).reshape(-1, 2)
            out["pivot"][key] = summary((E[idx[:, 0]] * E[idx[:, 1]]).sum(1).numpy() if ps else np.zeros(0)) | {
                "edge_share": round(sum((a, b) in edges or (b, a) in edges for a, b in ps) / len(ps), 4) if ps else None}
    return out
