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


def alignment_scores(model, tok, bitext: dict[str, list[tuple[str, str]]], resamples: int = 1000,
                     seed: int = 12345, aligner: str = "fast_align") -> dict:
    """Rules 2-3 for the model's input embedding table: per language and per script pair, mean cosine [interval]
    and the isotropy control; ``aligner`` links the held-out pairs (rule 1)."""
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

    for lang, pairs in bitext.items():
        links = sorted(aligned_pairs(tok, pairs, lang, aligner))
        idx = torch.tensor(links, dtype=torch.long).reshape(-1, 2)
        cos = (E[idx[:, 0]] * E[idx[:, 1]]).sum(1).numpy() if len(links) else np.zeros(0)
        script = f"Latin–{script_of([x for _, x in pairs])}"
        iso = isotropy(E, sorted({a for a, _ in links}), candidates, rng)
        langs[lang] = summary(cos) | {"script_pair": script, "isotropy": None if np.isnan(iso) else round(iso, 4)}
        pooled.setdefault(script, []).append(cos)
    scripts = {s: summary(np.concatenate(v)) for s, v in sorted(pooled.items())}
    return {"languages": langs, "script_pairs": scripts, "aligner": aligner,
            "isotropy_samples": ISOTROPY_SAMPLES}
