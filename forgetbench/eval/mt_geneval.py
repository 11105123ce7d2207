"""MT-GenEval's gender accuracy (Currey et al., EMNLP 2022; docs/METHOD.md §2.7a): natural Wikipedia sentences with
human translations in both genders.

Rules (the paper's automatic metric, decision for decision):

1. **Cleaning**: a line is lower-cased, every ASCII punctuation character (Python's ``string.punctuation``) becomes
   a space, and the ends are stripped; its words are the set of its whitespace-separated tokens. Lines are read
   as Python's text files read them (universal newlines, UTF-8).
2. **Decision**: a translation is *correct* unless it contains a word of the other gender's reference that the
   correct reference lacks (hypothesis words ∩ (wrong − right) = ∅). A translation with no gendered word at all,
   or an empty one, is correct by this rule (the paper's; the report says how many were empty).
3. **Counterfactual set**: each English source in its feminine and its masculine form; the feminine translation is
   judged against the feminine reference (right) and the masculine one (wrong), and the other way round. Accuracy
   per gender; the pair is correct when both are (the paper's combined accuracy); the gender gap = masculine −
   feminine accuracy.
4. **Contextual set**: the second of two sentences (``first <sep> second``), whose person's gender only the first
   fixes; its translation judged against the original reference (right) and the flipped one (wrong). The files
   carry no gender label, so this set gives one accuracy. (Which part of a two-sentence translation is judged is
   the translating suite's rule: the words of the first sentence's translation must not be read against the
   second's references.)

Files (``path``, the upstream layout): ``sentences/test/geneval-sentences-{feminine,masculine}-test.en_XX.{en,XX}``
and ``context/geneval-context-wikiprofessions-{2to1,original,flipped}-test.en_XX.{en,XX}``. A missing file or a
line count that differs between files that must align is refused in one line naming the file.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path

from forgetbench.errors import ForgetbenchError

LANGUAGES = ("ar", "de", "es", "fr", "hi", "it", "pt", "ru")  # the paper's metric; nl has the contextual set only
CONTEXT_ONLY = ("nl",)
SETS = ("counterfactual", "contextual")
GENDERS = ("feminine", "masculine")
_PUNCT = str.maketrans(string.punctuation, " " * len(string.punctuation))


def clean(line: str) -> str:
    """Rule 1."""
    return line.lower().translate(_PUNCT).strip()


def words(line: str) -> set[str]:
    return set(clean(line).split())


def correct(hyp: str, right: str, wrong: str) -> bool:
    """Rule 2: no word of ``wrong`` that ``right`` lacks appears in ``hyp``."""
    r, w = words(right), words(wrong)
    return not (words(hyp) & (w - r))


def read_lines(path: str | Path) -> list[str]:
    """The lines of a file as the paper's script reads them (universal newlines, ``\\n`` removed)."""
    p = Path(path)
    if not p.is_file():
        raise ForgetbenchError(f"MT-GenEval: {p} not found (the MT-GenEval test split's layout: sentences/test/ and "
                               "context/ under bias.mt_geneval.path)")
    with open(p, encoding="utf-8") as f:
        return [ln[:-1] if ln.endswith("\n") else ln for ln in f]


def counterfactual_files(path: str | Path, lang: str) -> dict[str, Path]:
    base = Path(path) / "sentences" / "test"
    return {f"{g}.{side}": base / f"geneval-sentences-{g}-test.en_{lang}.{side}" for g in GENDERS for side in ("en", lang)}


def context_files(path: str | Path, lang: str) -> dict[str, Path]:
    base = Path(path) / "context"
    return {"source": base / f"geneval-context-wikiprofessions-2to1-test.en_{lang}.en",
            "original": base / f"geneval-context-wikiprofessions-original-test.en_{lang}.{lang}",
            "flipped": base / f"geneval-context-wikiprofessions-flipped-test.en_{lang}.{lang}"}


def _aligned(files: dict[str, Path]) -> dict[str, list[str]]:
    lines = {k: read_lines(f) for k, f in files.items()}
    n = {k: len(v) for k, v in lines.items()}
    if len(set(n.values())) != 1:
        first = next(iter(files))
        odd = next(k for k in files if n[k] != n[first])
        raise ForgetbenchError(f"MT-GenEval: {files[odd]} has {n[odd]} lines and {files[first]} {n[first]}; the "
                               "files of one set must align line by line")
    return lines


@dataclass(frozen=True)
class Item:
    """One translation to make and judge: its source, the right and the wrong reference."""

    set: str
    gender: str | None  # counterfactual: feminine | masculine; contextual: None
    index: int  # the line (the pair, for counterfactual)
    source: str
    right: str
    wrong: str


def items(path: str | Path, lang: str, sets: tuple[str, ...] = SETS, limit: int | None = None) -> list[Item]:
    """The items of ``lang`` in ``sets``, the first ``limit`` lines (pairs) of each set (None: all)."""
    if lang not in LANGUAGES + CONTEXT_ONLY:
        raise ForgetbenchError(f"MT-GenEval has no {lang!r}; its languages: {', '.join(LANGUAGES + CONTEXT_ONLY)}")
    out: list[Item] = []
    if "counterfactual" in sets and lang in LANGUAGES:
        c = _aligned(counterfactual_files(path, lang))
        for i in range(len(c[f"feminine.{lang}"]) if limit is None else min(limit, len(c[f"feminine.{lang}"]))):
            for g, other in (("feminine", "masculine"), ("masculine", "feminine")):
                out.append(Item("counterfactual", g, i, c[f"{g}.en"][i], c[f"{g}.{lang}"][i], c[f"{other}.{lang}"][i]))
    if "contextual" in sets:
        c = _aligned(context_files(path, lang))
        for i in range(len(c["source"]) if limit is None else min(limit, len(c["source"]))):
            out.append(Item("contextual", None, i, c["source"][i], c["original"][i], c["flipped"][i]))
    return out


def scores(judged: list[tuple[Item, bool]]) -> dict:
    """Rules 3-4 over judged items: per set, accuracy (%) per gender, the combined pair accuracy and the gap."""
    out: dict = {}
    cf = [(it, ok) for it, ok in judged if it.set == "counterfactual"]
    if cf:
        by = {g: {it.index: ok for it, ok in cf if it.gender == g} for g in GENDERS}
        pairs = sorted(set(by["feminine"]) & set(by["masculine"]))
        acc = {g: 100.0 * sum(by[g].values()) / len(by[g]) for g in GENDERS}
        out["counterfactual"] = {"pairs": len(pairs), "feminine": acc["feminine"], "masculine": acc["masculine"],
                                 "combined": 100.0 * sum(by["feminine"][i] and by["masculine"][i] for i in pairs)
                                 / max(len(pairs), 1),
                                 "gap": acc["masculine"] - acc["feminine"]}
    cx = [ok for it, ok in judged if it.set == "contextual"]
    if cx:
        out["contextual"] = {"items": len(cx), "accuracy": 100.0 * sum(cx) / len(cx)}
    return out
