"""Word alignment for the gender pass: the model's own cross-attention (``align_words``), and fast_align's
statistical model (``fastalign_align``, deterministic) as a second, model-independent aligner to compare with.

For a source word (its SentencePiece pieces), the aligned target word is the one containing the
target piece that attends most to those pieces (attention averaged over layers and heads,
teacher-forced on the hypothesis). Words are whitespace tokens; SentencePiece marks each
word's first piece with "▁", which gives the piece → word map on both sides.
"""

from __future__ import annotations

import re

from forgetbench.eval.hallucination import cross_attention

_SPACE = "\u2581"


_TOKEN = re.compile(r"[\u05d0-\u05ea]+[\"\u05f4][\u05d0-\u05ea]+|\w+(?:['’]\w+)*['’]?|[^\w\s]", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Words (apostrophes inside kept: ``l'enfant``; a Hebrew acronym's gershayim too: ``מנכ"ל``) and punctuation
    marks, in order: what the statistical aligner and the gender readers see ("плотника," and "плотника" are one
    word)."""
    return _TOKEN.findall(text)


def source_index(sentence: str, word_index: int) -> int | None:
    """The token position (``tokens``) of the ``word_index``-th whitespace word of ``sentence`` (its first word
    token): MT-Gender's profession index is over whitespace words."""
    words = sentence.split()
    if not 0 <= word_index < len(words):
        return None
    before = sum(len(tokens(w)) for w in words[:word_index])
    own = tokens(words[word_index])
    lead = next((k for k, t in enumerate(own) if re.match(r"\w", t)), None)
    return None if lead is None else before + lead


def piece_words(tokenizer, ids: list[int]) -> list[int | None]:
    """Word index of each token id (None for language codes, </s>, padding)."""
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "lang_code_to_id", {}).values())
    out, w = [], -1
    for t in ids:
        if t in special:
            out.append(None)
            continue
        piece = tokenizer.convert_ids_to_tokens(t)
        if piece.startswith(_SPACE) or w < 0:
            w += 1
        out.append(w)
    return out


def find_word(words: list[str], word: str) -> int | None:
    target = word.lower()
    for i, w in enumerate(words):
        if re.sub(r"[\W_]+", "", w.lower()) == target:
            return i
    for i, w in enumerate(words):
        if w.lower().startswith(target):
            return i
    return None


def align_words(model, tokenizer, srcs: list[str], hyps: list[str], src_lang: str, tgt_lang: str,
                src_word_index: list[int | None], states: list | None = None) -> list[int | None]:
    """For each sentence, the index of the hypothesis word aligned to ``srcs[k].split()[src_word_index[k]]``
    (``states``: the encoder states its translation kept, per sentence, as ``cross_attention`` takes them)."""
    return [links[0] for links in attention_links(model, tokenizer, srcs, hyps, src_lang, tgt_lang,
                                                  [(wi,) for wi in src_word_index], states)]


def attention_links(model, tokenizer, srcs: list[str], hyps: list[str], src_lang: str, tgt_lang: str,
                    src_word_indices: list[tuple[int | None, ...]], states: list | None = None) -> list[tuple]:
    """``align_words`` for several source words of each sentence from one attention pass: per sentence, the
    hypothesis word aligned to each of its ``src_word_indices`` (None where a word has no pieces)."""
    out = []
    for (alpha, s_ids, t_ids), wis in zip(cross_attention(model, tokenizer, srcs, hyps, src_lang, tgt_lang,
                                                          states=states), src_word_indices, strict=True):
        s_words, t_words = piece_words(tokenizer, s_ids), piece_words(tokenizer, t_ids)
        rows = [i for i, w in enumerate(t_words) if w is not None]
        links = []
        for wi in wis:
            cols = [j for j, w in enumerate(s_words) if w is not None and w == wi]
            if wi is None or not cols or not rows:
                links.append(None)
                continue
            score = alpha[rows][:, cols].sum(-1)
            links.append(t_words[rows[int(score.argmax())]])
        out.append(tuple(links))
    return out


def ibm2_scores(pairs: list[tuple[list, list]], iterations: int = 5, p_null: float = 0.08,
                tension: float = 4.0) -> list:
    """fast_align's model (Dyer et al. 2013), reimplemented in numpy: IBM Model 2 with a diagonal prior,
    p(a_j = i) ∝ exp(−tension · |i/m − j/n|) for source tokens i = 1..m (NULL: p_null), lexical probabilities
    t(f | e) by EM over the tokens (any hashable: words, subword ids) of every pair. Deterministic (no sampling,
    no seed). Returns per pair its unnormalised posterior scores, an array [n, m + 1] (column 0: NULL), or None
    for a pair with an empty side."""
    import numpy as np

    e_ids: dict = {}
    f_ids: dict = {}
    rows_e, rows_f, rows_prior, blocks = [], [], [], []  # one row per (sentence, target j, source i incl. NULL)
    for src, tgt in pairs:
        m, n = len(src), len(tgt)
        blocks.append((m, n))
        if not m or not n:
            continue
        e = np.array([0] + [e_ids.setdefault(w, len(e_ids) + 1) for w in src])
        f = np.array([f_ids.setdefault(w, len(f_ids)) for w in tgt])
        i = np.arange(1, m + 1) / m
        j = np.arange(1, n + 1) / n
        diag = np.exp(-tension * np.abs(i[None, :] - j[:, None]))  # [n, m]
        prior = np.concatenate([np.full((n, 1), p_null), (1 - p_null) * diag / diag.sum(1, keepdims=True)], 1)
        rows_e.append(np.broadcast_to(e, (n, m + 1)).reshape(-1))
        rows_f.append(np.repeat(f, m + 1))
        rows_prior.append(prior.reshape(-1))
    if not rows_e:
        return [None] * len(pairs)
    E, F, prior = np.concatenate(rows_e), np.concatenate(rows_f), np.concatenate(rows_prior)
    width = np.concatenate([np.full(n, m + 1) for m, n in blocks if m and n])  # rows per target word
    starts = np.concatenate([[0], np.cumsum(width)[:-1]])
    key = E.astype(np.int64) * max(len(f_ids), 1) + F
    uniq, u = np.unique(key, return_inverse=True)
    u_e = uniq // max(len(f_ids), 1)
    t = np.ones(len(uniq))
    for _ in range(iterations):
        score = prior * t[u]
        post = score / np.repeat(np.add.reduceat(score, starts), width)
        counts = np.bincount(u, weights=post, minlength=len(uniq))
        t = counts / np.bincount(u_e, weights=counts)[u_e]
    score = prior * t[u]
    out, row = [], 0
    for m, n in blocks:
        if not m or not n:
            out.append(None)
            continue
        out.append(score[row: row + n * (m + 1)].reshape(n, m + 1))
        row += n * (m + 1)
    return out


def eflomal_links(pairs: list[tuple[list, list]]) -> list[set[tuple[int, int]]]:
    """Symmetrised links (i, j) of each pair by eflomal (Östling and Tiedemann 2016; the optional package: its
    sampler is seeded from the system, so two runs may differ), forward and reverse intersected."""
    import tempfile
    from pathlib import Path

    import eflomal

    with tempfile.TemporaryDirectory() as d:
        fwd, rev = Path(d) / "fwd", Path(d) / "rev"
        eflomal.Aligner().align([" ".join(map(str, s)) for s, _ in pairs], [" ".join(map(str, t)) for _, t in pairs],
                                links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
        out = []
        for a, b in zip(fwd.read_text().splitlines(), rev.read_text().splitlines(), strict=True):
            out.append({tuple(map(int, x.split("-"))) for x in a.split()} & {tuple(map(int, x.split("-"))) for x in b.split()})
        return out


def ibm2_links(pairs: list[tuple[list, list]], iterations: int = 5, p_null: float = 0.08,
               tension: float = 4.0) -> list[set[tuple[int, int]]]:
    """Symmetrised links (i, j) (source position, target position, 0-based) of each pair: the Viterbi links of
    ``ibm2_scores`` trained source→target and target→source, intersected (the links both directions choose)."""
    fwd = ibm2_scores(pairs, iterations, p_null, tension)
    rev = ibm2_scores([(t, s) for s, t in pairs], iterations, p_null, tension)
    out = []
    for f, r in zip(fwd, rev, strict=True):
        if f is None or r is None:
            out.append(set())
            continue
        a = {(int(i) - 1, j) for j, i in enumerate(f.argmax(1)) if i}  # target j → source i
        b = {(i, int(j) - 1) for i, j in enumerate(r.argmax(1)) if j}  # source i → target j
        out.append(a & b)
    return out


def fastalign_align(srcs: list[str], hyps: list[str], src_word_index: list[int | None],
                    context: list[tuple[str, str]] = (), iterations: int = 5, p_null: float = 0.08,
                    tension: float = 4.0, best_target: bool = False) -> list[int | None]:
    """The target word aligned to ``src_word_index`` in each (source, hypothesis), by fast_align's model
    (``ibm2_scores``; the aligner of the MT-Gender reference pipeline) over lower-cased whitespace tokens.
    ``context`` (parallel sentences of the same pair, e.g. FLORES-101 devtest: raw text only) gives the
    co-occurrence statistics; only the sentences' links are returned. A target word j is linked to its Viterbi
    source word; the first target word linked to the given source word is returned (None: none is; with
    ``best_target``, the target word whose posterior of being aligned to the given source word is highest
    instead: every sentence with words gets a link)."""
    return [links[0] for links in fastalign_links(srcs, hyps, [(wi,) for wi in src_word_index], context, iterations,
                                                  p_null, tension, (best_target,))]


def fastalign_links(srcs: list[str], hyps: list[str], src_word_indices: list[tuple[int | None, ...]],
                    context: list[tuple[str, str]] = (), iterations: int = 5, p_null: float = 0.08,
                    tension: float = 4.0, best_target: tuple[bool, ...] = (False,)) -> list[tuple]:
    """``fastalign_align`` for several source words of each sentence from one trained model: per sentence, the
    link of each of its ``src_word_indices``; ``best_target[k]`` says whether the k-th word of every sentence
    gets the posterior fallback (a profession: yes; a pronoun a language may drop: no)."""
    pairs = [(s.lower().split(), h.lower().split()) for s, h in [*context, *zip(srcs, hyps, strict=True)]]
    blocks = ibm2_scores(pairs, iterations, p_null, tension)[len(context):]
    out = []
    for block, wis in zip(blocks, src_word_indices, strict=True):
        out.append(tuple(_fastalign_link(block, wi, best_target[min(k, len(best_target) - 1)])
                         for k, wi in enumerate(wis)))
    return out


def _fastalign_link(block, wi: int | None, best_target: bool) -> int | None:
    if block is None or wi is None:
        return None
    m = block.shape[1] - 1
    viterbi = block.argmax(1)  # 0 = NULL, else source word i (1-based)
    hits = [k for k, v in enumerate(viterbi) if v == wi + 1]
    if hits or not best_target or wi + 1 > m:
        return hits[0] if hits else None
    return int((block[:, wi + 1] / block.sum(1)).argmax())  # no word chose it: the highest posterior
