"""CoNLL-U reading and writing with ``conllu``; multi-word tokens and empty nodes are kept on write
and skipped for parsing (gold tokenisation: the syntactic words).

Every file is validated line by line before parsing (``validate``), and a problem is reported with
its file and line: ten tab-separated columns; ids ``n``, ``n-m`` or ``n.k``; words numbered 1..n in
each sentence; HEAD an integer in 0..n for every word, exactly one word attached to the root, no
cycles; a file with no sentence is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import conllu

from forgetbench.errors import ForgetbenchError


@dataclass
class Sentence:
    tokens: conllu.TokenList  # everything, for writing back
    words: list[dict]  # syntactic words only (integer ids)

    @property
    def forms(self) -> list[str]:
        return [w["form"] for w in self.words]

    @property
    def upos(self) -> list[str]:
        return [w["upos"] for w in self.words]

    @property
    def heads(self) -> list[int]:
        return [int(w["head"]) if w["head"] is not None else -1 for w in self.words]

    @property
    def deprels(self) -> list[str]:
        return [w["deprel"] or "_" for w in self.words]


_ID = re.compile(r"^(\d+)(?:-(\d+)|\.(\d+))?$")


def _check_sentence(p: Path, start: int, rows: list[tuple[int, str, str]]) -> None:
    """rows: (line number, id, head) of the sentence's syntactic words."""
    if not rows:
        raise ForgetbenchError(f"{p}:{start}: sentence has no words (only comments, multi-word tokens or empty nodes)")
    n = len(rows)
    heads = []
    for k, (line, wid, head) in enumerate(rows, 1):
        if int(wid) != k:
            raise ForgetbenchError(f"{p}:{line}: word id {wid} where {k} was expected (words are numbered 1..n)")
        if not head.isdigit():
            raise ForgetbenchError(f"{p}:{line}: HEAD {head!r} is not an integer (0 = root, else a word id)")
        if int(head) > n:
            raise ForgetbenchError(f"{p}:{line}: HEAD {head} is out of range (the sentence has {n} words)")
        heads.append(int(head))
    from forgetbench.parsing.metrics import tree_problems

    problem = tree_problems(heads)
    if problem:
        raise ForgetbenchError(f"{p}:{start}: the sentence's tree is invalid ({problem}); each sentence needs exactly "
                               "one word attached to the root and no cycles")


def validate(p: Path, text: str) -> None:
    """Line-level checks of a CoNLL-U text (see the module docstring); raises with ``file:line``."""
    rows: list[tuple[int, str, str]] = []
    start, tokens, sentences = 1, 0, 0
    for i, raw in enumerate(text.splitlines() + [""], 1):
        line = raw.rstrip("\r")
        if not line.strip():
            if tokens:  # a block of comments only is not a sentence
                _check_sentence(p, start, rows)
                sentences += 1
            rows, start, tokens = [], i + 1, 0
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ForgetbenchError(f"{p}:{i}: {len(cols)} tab-separated columns where CoNLL-U has 10 "
                                   "(ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)")
        m = _ID.match(cols[0])
        if not m:
            raise ForgetbenchError(f"{p}:{i}: ID {cols[0]!r} is not n, n-m or n.k")
        tokens += 1
        if m.group(2) is None and m.group(3) is None:
            rows.append((i, cols[0], cols[6]))
    if sentences == 0:
        raise ForgetbenchError(f"{p}: no sentence found; give a CoNLL-U file with at least one sentence")


def read_conllu(path: str | Path) -> list[Sentence]:
    """The sentences of a validated CoNLL-U file."""
    from forgetbench.io import read_text

    p = Path(path)
    if not p.is_file():
        raise ForgetbenchError(f"{p}: CoNLL-U file not found")
    text = read_text(p, "CoNLL-U")
    validate(p, text)
    out = []
    for tl in conllu.parse(text):
        words = [t for t in tl if isinstance(t["id"], int)]
        if words:
            out.append(Sentence(tl, words))
    return out


def with_predictions(s: Sentence, heads: list[int], deprels: list[str], upos: list[str] | None = None) -> conllu.TokenList:
    """The sentence with the predicted heads, deprels and UPOS (``_`` when not predicted); LEMMA, XPOS, FEATS
    and DEPS are not predicted and written as ``_``; FORM, MISC, comments, multi-word tokens and empty
    nodes are kept."""
    tl = conllu.TokenList([dict(t) for t in s.tokens], metadata=s.tokens.metadata)
    k = 0
    for t in tl:
        if isinstance(t["id"], int):
            t["head"], t["deprel"] = int(heads[k]), deprels[k]
            t["upos"] = upos[k] if upos is not None else None
            t["lemma"] = t["xpos"] = t["feats"] = t["deps"] = None
            k += 1
    return tl


def write_conllu(path: str | Path, sentences: list[conllu.TokenList]) -> None:
    from forgetbench.io import atomic_write_text

    atomic_write_text(path, "".join(s.serialize() for s in sentences))
