"""MT-Gender (WinoMT) scores of given translations, nothing translated: a system's outputs in the official
``src ||| tgt`` format, scored as the published WinoMT tables are (accuracy, ΔG, ΔS) with forgetbench's ψ and ψ*.

    forgetbench gender-score translations/google/en-de.txt --lang de [--data data/mt_gender] [--out scores.json]

Rules:

1. *Lines.* One translation per row of the MT-Gender ``en.txt`` (gold gender, the profession's word index,
   sentence, profession), in its order. A line whose source is not that row's sentence (the official
   translations were made before two en.txt sentences were corrected: their gold no longer fits) is left out
   of the scores and counted (``sources_differ``, with its line numbers); more than 1 % of them is refused in
   one line (another order or another set).
2. *Tokens.* Words and punctuation marks are split apart on both sides ("плотника," and "плотника" are one
   word to the aligner and the reader); an apostrophe inside a word stays (``l'enfant``).
3. *Links.* The profession (en.txt's whitespace-word index, on the tokenised source) is linked to a target word
   by fast_align's model (``alignment.fastalign_align``, deterministic) trained on the whole file at once, as
   the official pipeline aligns the whole test set; the link rate is the share of items that get a link.
4. *Reading.* ``gender_readers.read_gender`` on the linked word, given the word linked to the sentence's pronoun
   (Viterbi links only; none where the translation drops it) (no profession link: "unknown"); metrics from
   ``gender_metrics.gender_scores`` (a "neutral" or "unknown" prediction counts as wrong, as in the official
   evaluation); accuracy, F1 and ΔG in percent as the WinoMT tables print them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.alignment import tokens
from forgetbench.eval.bias import GenderRow, profession_links, read_mt_gender
from forgetbench.eval.gender_metrics import GenderItem, gender_scores
from forgetbench.eval.gender_readers import COVERED, read_gender
from forgetbench.io import read_text


def read_translations(path: Path, rows: list[GenderRow]) -> tuple[list[str], list[int]]:
    """Rule 1: the target side of each line, and the (1-based) lines whose source is not ``rows``' sentence."""
    if not path.is_file():
        raise ForgetbenchError(f"gender-score: {path} not found; give a file of 'source ||| translation' lines")
    lines = read_text(path, "translations file").splitlines()
    if len(lines) != len(rows):
        raise ForgetbenchError(f"{path}: {len(lines)} lines, the MT-Gender set has {len(rows)}; give one translation per "
                               "en.txt row, in its order")
    out, differ = [], []
    for n, (line, row) in enumerate(zip(lines, rows, strict=True), 1):
        src, sep, tgt = line.partition(" ||| ")
        if not sep:
            raise ForgetbenchError(f"{path}:{n}: no ' ||| ' separator; lines are 'source ||| translation'")
        if " ".join(src.split()) != " ".join(row.sentence.split()):
            differ.append(n)
        out.append(tgt.strip())
    if len(differ) > 0.01 * len(rows):
        raise ForgetbenchError(f"{path}: {len(differ)} sources differ from en.txt's sentences (first: line {differ[0]}, "
                               f"{rows[differ[0] - 1].sentence[:60]!r}); the translations must follow en.txt's order")
    return out, differ


def score_translations(path: str | Path, lang: str, data: str | Path, best_target: bool = True) -> dict:
    """Rules 1-4 for the translations in ``path`` into ``lang``; MT-Gender's files from the folder ``data``."""
    if lang not in COVERED:
        raise ForgetbenchError(f"gender-score --lang {lang}: no gender reader for it; covered: {', '.join(COVERED)}")
    rows = read_mt_gender(Path(data))
    hyps, differ = read_translations(Path(path), rows)
    tgts = [tokens(h) for h in hyps]
    links = profession_links(rows, tgts, best_target=best_target)
    items, read, left_out = [], Counter(), set(differ)
    for n, (r, t, (j, pj)) in enumerate(zip(rows, tgts, links, strict=True), 1):
        if n in left_out:
            continue
        g = read_gender(lang, t, j, pronoun=pj) if j is not None else "unknown"
        read[g] += 1
        items.append(GenderItem(r.gold, g, r.stereotype))
    s = gender_scores(items).to_dict()
    pct = {k: (None if s[k] is None else round(100 * s[k], 2)) for k in ("accuracy", "f1_male", "f1_female",
                                                                          "delta_g", "delta_s")}
    linked = sum(j is not None for n, (j, _) in enumerate(links, 1) if n not in left_out)
    return {"translations": str(path), "lang": lang, "items": len(items), "sources_differ": differ,
            "link_rate": round(linked / len(items), 4),
            "predicted": dict(read), **pct, "psi": s["psi"], "psi_star": s["psi_star"],
            "aligner": "fast_align model (IBM 2, diagonal prior) over the whole file", "tokens": "words and "
            "punctuation split"}
