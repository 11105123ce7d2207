"""UAS, LAS and CLAS as defined by the CoNLL 2018 shared task evaluation (on gold tokenisation).

Deprel subtypes are stripped ("nmod:poss" → "nmod"); punctuation is included. With gold
tokenisation every word is aligned, so UAS and LAS are accuracies; CLAS counts only content
relations: precision over system content words, recall over gold content words,
F1 = 2·correct / (gold + system), a word being correct when its gold deprel is a content relation
and both head and (stripped) deprel match. Invalid system trees (no root, several roots, a cycle)
are counted and reported.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTENT_DEPRELS = frozenset({
    "nsubj", "obj", "iobj", "csubj", "ccomp", "xcomp", "obl", "vocative", "expl", "dislocated", "advcl", "advmod",
    "discourse", "nmod", "appos", "nummod", "acl", "amod", "conj", "fixed", "flat", "compound", "list", "parataxis",
    "orphan", "goeswith", "reparandum", "root", "dep"})


def strip(deprel: str) -> str:
    return deprel.split(":")[0]


def tree_problems(heads: list[int]) -> str | None:
    """None for a valid single-root tree over words 1..n (heads 1-based, 0 = root)."""
    n = len(heads)
    roots = [i for i, h in enumerate(heads, 1) if h == 0]
    if len(roots) != 1:
        return f"{len(roots)} roots"
    if any(not 0 <= h <= n or h == i for i, h in enumerate(heads, 1)):
        return "head out of range or self-loop"
    for i in range(1, n + 1):
        seen, j = set(), i
        while j != 0:
            if j in seen:
                return "cycle"
            seen.add(j)
            j = heads[j - 1]
    return None


@dataclass
class ParseScores:
    words: int
    uas: float
    las: float
    clas: float
    invalid_trees: int
    sentences: int

    def to_dict(self) -> dict:
        return self.__dict__.copy()


def score(gold: list[tuple[list[int], list[str]]], system: list[tuple[list[int], list[str]]]) -> ParseScores:
    """``gold`` and ``system``: per sentence (heads, deprels), same tokenisation."""
    if len(gold) != len(system):
        raise ValueError(f"{len(gold)} gold vs {len(system)} system sentences")
    n = ua = la = cl_correct = cl_gold = cl_sys = invalid = 0
    for (gh, gd), (sh, sd) in zip(gold, system, strict=True):
        if len(gh) != len(sh):
            raise ValueError("gold and system tokenisation differ")
        invalid += tree_problems(sh) is not None
        for a, b, c, d in zip(gh, gd, sh, sd, strict=True):
            g_rel, s_rel = strip(b), strip(d)
            n += 1
            ua += a == c
            la += a == c and g_rel == s_rel
            g_content, s_content = g_rel in CONTENT_DEPRELS, s_rel in CONTENT_DEPRELS
            cl_gold += g_content
            cl_sys += s_content
            cl_correct += g_content and a == c and g_rel == s_rel
    return ParseScores(n, 100 * ua / n, 100 * la / n, 100 * 2 * cl_correct / (cl_gold + cl_sys) if cl_gold + cl_sys else 0.0,
                       invalid, len(gold))


def sentence_las_counts(gold: list[tuple[list[int], list[str]]],
                        system: list[tuple[list[int], list[str]]]) -> list[tuple[int, int]]:
    """(words with the right head and stripped deprel, words) per sentence."""
    return [(sum(a == c and strip(b) == strip(d) for a, b, c, d in zip(gh, gd, ph, pd, strict=True)), len(gh))
            for (gh, gd), (ph, pd) in zip(gold, system, strict=True)]


def sentence_las(gold: list[tuple[list[int], list[str]]], system: list[tuple[list[int], list[str]]]) -> list[float]:
    """LAS per sentence (percent of words with the right head and stripped deprel): the parsing analogue
    of ΔchrF per sentence in the compression report."""
    return [100.0 * ok / n for ok, n in sentence_las_counts(gold, system)]


# UD's own grouping of its relations (universaldependencies.org/u/dep: the table's rows), with the function
# words, coordination and multiword expressions apart; subtypes are stripped first.
RELATION_CLASSES = {
    "core": {"nsubj", "obj", "iobj", "csubj", "ccomp", "xcomp"},
    "non-core": {"obl", "vocative", "expl", "dislocated", "advcl", "advmod", "discourse"},
    "nominal": {"nmod", "appos", "nummod", "acl", "amod"},
    "function": {"aux", "cop", "mark", "det", "clf", "case"},
    "coordination": {"conj", "cc"},
    "mwe": {"fixed", "flat", "compound"},
    "other": {"list", "parataxis", "orphan", "goeswith", "reparandum", "punct", "root", "dep"},
}
CLASS_OF = {r: k for k, rs in RELATION_CLASSES.items() for r in rs}


def relation_class(deprel: str) -> str:
    return CLASS_OF.get(strip(deprel), "other")


def class_las_counts(gold: list[tuple[list[int], list[str]]], system: list[tuple[list[int], list[str]]]
                     ) -> dict[str, list[tuple[int, int]]]:
    """Per relation class (of the gold relation), per sentence: (words of that class attached right with the right
    stripped relation, words of that class)."""
    out = {k: [] for k in RELATION_CLASSES}
    for (gh, gd), (ph, pd) in zip(gold, system, strict=True):
        ok = {k: 0 for k in RELATION_CLASSES}
        n = {k: 0 for k in RELATION_CLASSES}
        for a, b, c, d in zip(gh, gd, ph, pd, strict=True):
            k = relation_class(b)
            n[k] += 1
            ok[k] += a == c and strip(b) == strip(d)
        for k in RELATION_CLASSES:
            out[k].append((ok[k], n[k]))
    return out
