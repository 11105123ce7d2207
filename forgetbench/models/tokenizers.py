"""M2M-100 and SMaLL-100 tokenizers that behave on transformers 5.

- The ``__xx__`` language codes are registered as special tokens, else they leak into decoded
  text with ``skip_special_tokens=True`` (ids are unchanged).
- SMaLL-100 (Mohammadshahi et al. 2022): source = ``__tgt__ tokens </s>`` (the *target* code on
  the encoder side), target = ``tokens </s>``, no forced BOS at generation. Its published
  tokenizer file breaks on transformers ≥ 4.34; this class reads the same files
  (``vocab.json`` + ``sentencepiece.bpe.model``) with the installed ``M2M100Tokenizer``.
"""

from __future__ import annotations

from pathlib import Path

from transformers import M2M100Tokenizer

from forgetbench.errors import ForgetbenchError

SMALL100_MARKER = "forgetbench_small100"  # attribute set on SMaLL-100 tokenizers and configs


def _lang_tokens(language_codes: str = "m2m100") -> list[str]:
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    return [f"__{c}__" for c in FAIRSEQ_LANGUAGE_CODES[language_codes]]


class Small100Tokenizer(M2M100Tokenizer):
    """SMaLL-100 format: ``src_lang`` is ignored for the prefix; set ``tgt_lang`` before encoding sources."""

    forgetbench_small100 = True  # = SMALL100_MARKER (a class attribute needs its literal name)

    def set_src_lang_special_tokens(self, src_lang: str) -> None:
        lang = getattr(self, "tgt_lang", None) or src_lang
        self.cur_lang_id = self.get_lang_id(lang)
        self.prefix_tokens = [self.cur_lang_id]
        self.suffix_tokens = [self.eos_token_id]

    def set_tgt_lang_special_tokens(self, tgt_lang: str) -> None:
        self.cur_lang_id = self.get_lang_id(tgt_lang)
        self.prefix_tokens = []
        self.suffix_tokens = [self.eos_token_id]


def load_tokenizer(path: str | Path, small100: bool = False, **kwargs):
    """M2M-100 (or SMaLL-100) tokenizer from a folder or hub id with ``vocab.json`` + ``sentencepiece.bpe.model``."""
    cls = Small100Tokenizer if small100 else M2M100Tokenizer
    try:
        tok = cls.from_pretrained(str(path), extra_special_tokens=_lang_tokens(), **kwargs)
    except (OSError, ValueError) as e:
        raise ForgetbenchError(f"{path}: cannot load an M2M-100 tokenizer (vocab.json + sentencepiece.bpe.model): "
                               f"{str(e).splitlines()[0]}") from None
    if small100:
        setattr(tok, SMALL100_MARKER, True)
    return tok


def tokenizer_for_folder(path: str | Path, small100: bool = False):
    """The tokenizer saved in a model folder: M2M-100/SMaLL-100 when it has ``vocab.json`` +
    ``sentencepiece.bpe.model``, else whatever ``AutoTokenizer`` finds, else None (weights-only folders)."""
    from transformers import AutoTokenizer

    d = Path(path)
    if (d / "vocab.json").is_file() and (d / "sentencepiece.bpe.model").is_file():
        return load_tokenizer(d, small100=small100)
    try:
        return AutoTokenizer.from_pretrained(str(d))
    except (OSError, ValueError, TypeError):
        return None
