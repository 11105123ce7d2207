"""Word alignment for the gender pass: the model's own cross-attention (``align_words``), and eflomal
(``eflomal_align``) as a second, model-independent aligner to compare with.

For a source word (its SentencePiece pieces), the aligned target word is the one containing the
target piece that attends most to those pieces (attention averaged over layers and heads,
teacher-forced on the hypothesis). Words are whitespace tokens; SentencePiece marks each
word's first piece with "▁", which gives the piece → word map on both sides.
"""

from __future__ import annotations

import re

from forgetbench.eval.hallucination import cross_attention

_SPACE = "\u2581"


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
                src_word_index: list[int | None]) -> list[int | None]:
    """For each sentence, the index of the hypothesis word aligned to ``srcs[k].split()[src_word_index[k]]``."""
    out = []
    for (alpha, s_ids, t_ids), wi in zip(cross_attention(model, tokenizer, srcs, hyps, src_lang, tgt_lang),
                                         src_word_index, strict=True):
        s_words, t_words = piece_words(tokenizer, s_ids), piece_words(tokenizer, t_ids)
        cols = [j for j, w in enumerate(s_words) if w is not None and w == wi]
        rows = [i for i, w in enumerate(t_words) if w is not None]
        if wi is None or not cols or not rows:
            out.append(None)
            continue
        score = alpha[rows][:, cols].sum(-1)
        out.append(t_words[rows[int(score.argmax())]])
    return out


def eflomal_align(srcs: list[str], hyps: list[str], src_word_index: list[int | None],
                  context: list[tuple[str, str]] = ()) -> list[int | None]:
    """The same alignment with eflomal (Östling & Tiedemann 2016), unsupervised over whitespace tokens.

    eflomal needs co-occurrence statistics, so ``context`` (parallel sentences of the same
    language pair, e.g. the FLORES-101 devtest pair: raw text only, no labels) is aligned
    together with the sentences; only their links are returned.
    """
    import io

    import eflomal

    pairs = [(s.lower(), h.lower()) for s, h in [*context, *zip(srcs, hyps, strict=True)]]
    src_text = "".join((s.strip() or "_") + "\n" for s, _ in pairs)
    tgt_text = "".join((t.strip() or "_") + "\n" for _, t in pairs)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        fwd = Path(d) / "fwd"
        eflomal.Aligner().align(io.StringIO(src_text), io.StringIO(tgt_text), links_filename_fwd=str(fwd), quiet=True)
        links = fwd.read_text().splitlines()[len(context):]
    out = []
    for line, wi in zip(links, src_word_index, strict=True):
        hits = sorted(int(t) for s, t in (x.split("-") for x in line.split()) if int(s) == wi) if wi is not None else []
        out.append(hits[0] if hits else None)
    return out
