"""CoNLL-U reading and writing with ``conllu``; multi-word tokens and empty nodes are kept on write
and skipped for parsing (gold tokenisation: the syntactic words)."""

from __future__ import annotations

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


def read_conllu(path: str | Path) -> list[Sentence]:
    p = Path(path)
    if not p.is_file():
        raise ForgetbenchError(f"{p}: CoNLL-U file not found")
    out = []
    with open(p, encoding="utf-8") as f:
        for n, tl in enumerate(conllu.parse_incr(f), 1):
            words = [t for t in tl if isinstance(t["id"], int)]
            if not words:
                raise ForgetbenchError(f"{p}: sentence {n} has no words")
            ids = [w["id"] for w in words]
            if ids != list(range(1, len(words) + 1)):
                raise ForgetbenchError(f"{p}: sentence {n}: word ids are not 1..{len(words)}")
            out.append(Sentence(tl, words))
    return out


def with_predictions(s: Sentence, heads: list[int], deprels: list[str]) -> conllu.TokenList:
    tl = conllu.TokenList([dict(t) for t in s.tokens], metadata=s.tokens.metadata)
    k = 0
    for t in tl:
        if isinstance(t["id"], int):
            t["head"], t["deprel"] = int(heads[k]), deprels[k]
            k += 1
    return tl


def write_conllu(path: str | Path, sentences: list[conllu.TokenList]) -> None:
    from forgetbench.io import atomic_write_text

    atomic_write_text(path, "".join(s.serialize() for s in sentences))
