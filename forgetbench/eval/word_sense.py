"""Word-sense bias scorers: DiBiMT metrics on user-supplied data, and MuCoW (open) scoring.

DiBiMT (docs/METHOD.md §2; closed benchmark, so the scorer reads data a licensed user supplies as
JSONL, one item per line: ``{"id", "word", "gold": σ, "senses": [σ ordered by frequency],
"good": [lemmas], "bad": {lemma: σ'}}``, and for a sweep also ``"sentence"`` (the English source) and
``"lang"`` (the target language of its GOOD/BAD lemmas)). A translation is GOOD if it contains a GOOD lemma, BAD if
it contains a BAD lemma (and no GOOD one), else MISS. With C(σ) the 1-based index of σ in the
frequency-ordered sense list and polysemy degree |senses|:

- accuracy = GOOD / (GOOD + BAD)
- SFII = error rate BAD/(GOOD+BAD) per sense-frequency index C(σ), averaged over the indices
- SPDI = error rate per polysemy degree, averaged over the degrees
- MFS = share of BAD items whose produced sense is more frequent than the gold: C(σ') < C(σ)
- MFS⁺ = share of BAD items whose produced sense is the most frequent: C(σ') = 1

MuCoW (Raganato et al. 2019; keys give correct- and wrong-sense target lemmas): CORRECT if a
correct-sense lemma is found and no wrong-sense one, WRONG if the reverse, BOTH, or MISS.
accuracy = CORRECT / (CORRECT + WRONG); wrong-sense rate = WRONG / N; miss rate = MISS / N.
Lemma matching per language: German matches a lemma anywhere inside a token (compounds:
"Teilchenbeschleuniger"); Slavic, Finnic and Baltic targets match a stem prefix (the lemma minus
its last 2 letters when ≥ 5 letters long, to admit case endings); others match a whole token or a
token that starts with the lemma.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.io import read_text

_WORD = re.compile(r"\w+", re.UNICODE)
STEM_LANGS = {"ru", "uk", "cs", "pl", "fi", "et", "lt", "lv", "sk", "sl", "hr", "sr", "bg"}


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def lemma_matches(lemma: str, toks: list[str], lang: str) -> bool:
    lemma = lemma.lower()
    if "_" in lemma or " " in lemma:  # multi-word lemma: every part must match in order of appearance
        parts = re.split(r"[_ ]", lemma)
        return all(lemma_matches(p, toks, lang) for p in parts if p)
    if lang == "de":
        return any(lemma in t for t in toks)
    if lang in STEM_LANGS:
        stem = lemma[:-2] if len(lemma) >= 5 else lemma
        return any(t.startswith(stem) for t in toks)
    return any(t == lemma or t.startswith(lemma) for t in toks)


# ---------------------------------------------------------------- MuCoW

@dataclass(frozen=True)
class MucowItem:
    id: str
    corpus: str
    word: str
    correct: tuple[str, ...]
    wrong: tuple[str, ...]


def read_mucow(folder: str | Path, pair: str) -> tuple[list[str], list[str], list[MucowItem]]:
    d = Path(folder)
    files = {k: d / f"{pair}.{k}.txt" for k in ("text", "ref", "key")}
    for f in files.values():
        if not f.is_file():
            raise ForgetbenchError(f"MuCoW {pair}: missing {f}")
    from forgetbench.io import read_text

    src = read_text(files["text"]).splitlines()
    ref = read_text(files["ref"]).splitlines()
    items = []
    for n, line in enumerate(read_text(files["key"]).splitlines(), 1):
        cols = line.split("\t")
        if len(cols) != 5:
            raise ForgetbenchError(f"{files['key']}:{n}: expected 5 tab-separated columns")
        items.append(MucowItem(cols[0], cols[1], cols[2], tuple(cols[3].split()), tuple(cols[4].split())))
    if not len(src) == len(ref) == len(items):
        raise ForgetbenchError(f"MuCoW {pair}: text/ref/key line counts differ ({len(src)}/{len(ref)}/{len(items)})")
    return src, ref, items


def mucow_outcome(item: MucowItem, hyp: str, lang: str) -> str:
    toks = tokens(hyp)
    c = any(lemma_matches(x, toks, lang) for x in item.correct)
    w = any(lemma_matches(x, toks, lang) for x in item.wrong)
    return "both" if c and w else "correct" if c else "wrong" if w else "miss"


def mucow_scores(items: list[MucowItem], hyps: list[str], lang: str) -> dict:
    out = [mucow_outcome(i, h, lang) for i, h in zip(items, hyps, strict=True)]
    n = len(out)
    c, w, b, m = (out.count(k) for k in ("correct", "wrong", "both", "miss"))
    return {"n": n, "correct": c, "wrong": w, "both": b, "miss": m,
            "accuracy": c / (c + w) if c + w else None, "wrong_rate": w / n if n else None,
            "miss_rate": m / n if n else None, "outcomes": out}


# ---------------------------------------------------------------- DiBiMT

@dataclass(frozen=True)
class DibimtItem:
    id: str
    word: str
    gold: str
    senses: tuple[str, ...]
    good: tuple[str, ...]
    bad: dict
    sentence: str = ""  # the English source (a sweep translates it)
    lang: str = ""  # the target language of ``good`` and ``bad``

    @property
    def gold_index(self) -> int:
        return self.senses.index(self.gold) + 1


def read_dibimt(path: str | Path, sources: bool = False) -> list[DibimtItem]:
    """The items of a DiBiMT JSONL file; ``sources``: each must carry ``sentence`` and ``lang`` (a sweep). Every
    problem is one line naming file:line."""
    p = Path(path)
    if not p.is_file():
        raise ForgetbenchError(f"DiBiMT data {p} not found (DiBiMT is closed: supply your licensed copy as JSONL)")
    items = []
    for n, line in enumerate(read_text(p).splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise ForgetbenchError(f"{p}:{n}: not valid JSON ({e.msg}); one JSON object per line") from None
        if not isinstance(d, dict):
            raise ForgetbenchError(f"{p}:{n}: expected a JSON object, got {type(d).__name__}")
        try:
            it = DibimtItem(str(d["id"]), d["word"], d["gold"], tuple(d["senses"]), tuple(d["good"]), dict(d["bad"]),
                            *((str(d["sentence"]), str(d["lang"])) if sources else ()))
        except KeyError as e:
            raise ForgetbenchError(f"{p}:{n}: missing key {e}") from None
        except (TypeError, ValueError):
            raise ForgetbenchError(f"{p}:{n}: senses and good must be lists, bad a mapping lemma -> sense") from None
        unknown = [s for s in (it.gold, *it.bad.values()) if s not in it.senses]
        if unknown:
            raise ForgetbenchError(f"{p}:{n}: unknown sense id {unknown[0]!r}: the gold and BAD senses must be among "
                                   f"'senses' {list(it.senses)[:6]}")
        if sources and not it.sentence.strip():
            raise ForgetbenchError(f"{p}:{n}: empty 'sentence' (the English source to translate)")
        items.append(it)
    return items


def dibimt_outcome(item: DibimtItem, hyp: str, lang: str) -> tuple[str, str | None]:
    toks = tokens(hyp)
    if any(lemma_matches(x, toks, lang) for x in item.good):
        return "good", None
    for lemma, sense in item.bad.items():
        if lemma_matches(lemma, toks, lang):
            return "bad", sense
    return "miss", None


def dibimt_scores(items: list[DibimtItem], hyps: list[str], lang: str) -> dict:
    return dibimt_metrics([(it, *dibimt_outcome(it, h, lang)) for it, h in zip(items, hyps, strict=True)])


DIBIMT_METRICS = ("accuracy", "SFII", "SPDI", "MFS", "MFS+")


def dibimt_metrics(res: list[tuple[DibimtItem, str, str | None]]) -> dict:
    """The metrics of judged items ``(item, outcome, produced sense)`` (``dibimt_outcome``'s results): a resample
    of items reuses their outcomes."""
    items = [it for it, _, _ in res]
    judged = [(it, o, s) for it, o, s in res if o != "miss"]
    good = sum(1 for _, o, _ in judged if o == "good")
    bad = [(it, s) for it, o, s in judged if o == "bad"]

    def err_rate(group):
        return sum(1 for _, o, _ in group if o == "bad") / len(group)

    by_index, by_degree = {}, {}
    for x in judged:
        by_index.setdefault(x[0].gold_index, []).append(x)
        by_degree.setdefault(len(x[0].senses), []).append(x)
    return {
        "n": len(items), "good": good, "bad": len(bad), "miss": len(items) - len(judged),
        "accuracy": good / len(judged) if judged else None,
        "SFII": statistics.fmean(err_rate(g) for g in by_index.values()) if by_index else None,
        "SPDI": statistics.fmean(err_rate(g) for g in by_degree.values()) if by_degree else None,
        "MFS": sum(1 for it, s in bad if it.senses.index(s) + 1 < it.gold_index) / len(bad) if bad else None,
        "MFS+": sum(1 for it, s in bad if it.senses.index(s) == 0) / len(bad) if bad else None,
    }
