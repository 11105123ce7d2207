"""chrF3 and spBLEU with signatures (docs/METHOD.md §2).

- chrF3 = sacrebleu ``CHRF(char_order=6, word_order=0, beta=3)``, 0–100, always by keyword
  (in sacrebleu 2.x the third positional argument of ``sentence_chrf`` is ``word_order``).
- spBLEU = sacrebleu BLEU with ``tokenize="none"`` on text we segment ourselves with a
  SentencePiece model file: sacrebleu's own ``flores101`` tokenizer downloads its model and,
  given a local copy, still signs it as "flores" without a hash. The SPM's SHA-256 is in the
  signature; a non-FLORES SPM is named ``spBLEU-local``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import sentencepiece as spm
from sacrebleu.metrics import BLEU, CHRF

from forgetbench.errors import ForgetbenchError
from forgetbench.io import sha256_file

CHRF3 = CHRF(char_order=6, word_order=0, beta=3)
CHRF3.corpus_score(["x"], [["x"]])  # sacrebleu fills its signature's reference count on first use


def chrf_signature() -> str:
    """sacrebleu's chrF signature plus β, which it omits (chrF3 could not be told from chrF2)."""
    return f"{CHRF3.get_signature()}|beta:{CHRF3.beta}"


def sentence_chrf(hyp: str, ref: str) -> float:
    return CHRF3.sentence_score(hyp, [ref]).score


def corpus_chrf(hyps: list[str], refs: list[str]) -> float:
    return CHRF3.corpus_score(hyps, [refs]).score


@dataclass
class SpBLEU:
    spm_path: Path
    official: bool = False  # True only when the user supplies the FLORES-101 SPM itself

    def __post_init__(self):
        self.spm_path = Path(self.spm_path)
        if not self.spm_path.is_file():
            raise ForgetbenchError(f"spBLEU: SentencePiece model {self.spm_path} not found")
        self.sp = spm.SentencePieceProcessor(model_file=str(self.spm_path))
        self.bleu = BLEU(tokenize="none", force=True)  # our SPM pieces are tokenised on purpose
        self.bleu.corpus_score(["x"], [["x"]])  # fixes the signature's reference count (one reference)

    @cached_property
    def sha256(self) -> str:
        return sha256_file(self.spm_path)

    @property
    def name(self) -> str:
        return "spBLEU" if self.official else "spBLEU-local"

    def segment(self, texts: list[str]) -> list[str]:
        return [" ".join(p) for p in self.sp.encode(texts, out_type=str)]

    def corpus(self, hyps: list[str], refs: list[str]) -> float:
        return self.bleu.corpus_score(self.segment(hyps), [self.segment(refs)]).score

    def signature(self) -> str:
        return f"{self.name}|spm:{self.sha256[:16]}|{self.bleu.get_signature()}"
