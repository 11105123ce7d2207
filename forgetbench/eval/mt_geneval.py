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


def committed(hyp: str, right: str, wrong: str) -> bool:
    """Whether ``hyp`` holds a word unique to either reference: the translation commits to a gender (a diagnostic
    beside rule 2, which counts a translation without any such word as correct)."""
    r, w = words(right), words(wrong)
    return bool(words(hyp) & (r ^ w))


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
    """The items of ``lang`` in ``sets``, the first ``limit`` lines (pairs) of each set (None: all), line by line:
    line i's feminine and masculine counterfactual items, then its contextual item, so that the items of a smaller
    ``limit`` are the start of a larger one's."""
    if lang not in LANGUAGES + CONTEXT_ONLY:
        raise ForgetbenchError(f"MT-GenEval has no {lang!r}; its languages: {', '.join(LANGUAGES + CONTEXT_ONLY)}")
    c = _aligned(counterfactual_files(path, lang)) if "counterfactual" in sets and lang in LANGUAGES else None
    x = _aligned(context_files(path, lang)) if "contextual" in sets else None
    n_c, n_x = len(c[f"feminine.{lang}"]) if c else 0, len(x["source"]) if x else 0
    out: list[Item] = []
    for i in range(max(n_c, n_x) if limit is None else min(limit, max(n_c, n_x))):
        if i < n_c:
            for g, other in (("feminine", "masculine"), ("masculine", "feminine")):
                out.append(Item("counterfactual", g, i, c[f"{g}.en"][i], c[f"{g}.{lang}"][i], c[f"{other}.{lang}"][i]))
        if i < n_x:
            out.append(Item("contextual", None, i, x["source"][i], x["original"][i], x["flipped"][i]))
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


def score_files(path: str | Path, lang: str, feminine: str | None = None, masculine: str | None = None,
                contextual: str | None = None, resamples: int = 1000, seed: int = 12345) -> dict:
    """``gender-score --mt-geneval``: translations made elsewhere, one line per line of the test split (the paper's
    files: the feminine and the masculine English sources' translations; the contextual set's second sentences),
    judged by rules 1-4; each accuracy with its 95 % bootstrap interval (pairs resampled together)."""
    import numpy as np

    from forgetbench.eval import bootstrap as bs

    if (feminine is None) != (masculine is None) or (feminine is None and contextual is None):
        raise ForgetbenchError("gender-score --mt-geneval: give --feminine and --masculine (the counterfactual set), "
                               "--contextual, or all three")
    sets = (("counterfactual",) if feminine else ()) + (("contextual",) if contextual else ())
    its = items(path, lang, sets)
    given = {"feminine": feminine, "masculine": masculine, "contextual": contextual}
    hyps = {}
    for name, f in given.items():
        if f is None:
            continue
        want = sum(1 for it in its if (it.gender or "contextual") == name)
        hyps[name] = read_lines(f)
        if len(hyps[name]) != want:
            raise ForgetbenchError(f"gender-score --mt-geneval: {f} has {len(hyps[name])} lines; the {lang} {name} "
                                   f"references have {want} (one translation per line, in the files' order)")
    judged = [(it, correct(hyps[it.gender or "contextual"][it.index], it.right, it.wrong)) for it in its]
    out = {"language": lang, "data": str(path), "rule": "MT-GenEval accuracy_metric (Currey et al. 2022)",
           "empty": {k: sum(not h.strip() for h in v) for k, v in hyps.items()}} | scores(judged)
    rng = np.random.default_rng(seed)
    if "counterfactual" in out:
        n = out["counterfactual"]["pairs"]
        w = bs.tally(rng.integers(0, n, size=(resamples, n)), n)
        by = {g: np.array([float(ok) for it, ok in judged if it.gender == g]) for g in GENDERS}
        draws = {g: 100 * bs.resample_mean(by[g], w) for g in GENDERS}
        draws["combined"] = 100 * bs.resample_mean(by["feminine"] * by["masculine"], w)
        draws["gap"] = draws["masculine"] - draws["feminine"]
        out["counterfactual"] |= {f"{k}_ci": bs.percentile_interval(x).to_dict() for k, x in draws.items()}
    if "contextual" in out:
        c = np.array([float(ok) for it, ok in judged if it.set == "contextual"])
        w = bs.tally(rng.integers(0, len(c), size=(resamples, len(c))), len(c))
        out["contextual"]["accuracy_ci"] = bs.percentile_interval(100 * bs.resample_mean(c, w)).to_dict()
    return out
