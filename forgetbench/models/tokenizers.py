"""M2M-100, SMaLL-100 and NLLB-200 tokenizers that behave on transformers 5.

- The ``__xx__`` language codes are registered as special tokens, else they leak into decoded
  text with ``skip_special_tokens=True`` (ids are unchanged).
- SMaLL-100 (Mohammadshahi et al. 2022): source = ``__tgt__ tokens </s>`` (the *target* code on
  the encoder side), target = ``tokens </s>``, no forced BOS at generation. Its published
  tokenizer file breaks on transformers ≥ 4.34; this class reads the same files
  (``vocab.json`` + ``sentencepiece.bpe.model``) with the installed ``M2M100Tokenizer``.
- NLLB-200 (``NllbCodesTokenizer``): transformers' ``NllbTokenizer`` that takes the project's language names
  (``de``) wherever it takes a code (``src_lang``, ``tgt_lang``, ``get_lang_id``), mapped by
  ``models.nllb_codes``. Its source layout is the tokenizer's own: ``code tokens </s>``, or with
  ``legacy_behaviour=True`` ``tokens </s> code``; generation forces the target code as M2M-100 does. In the
  SMaLL-100 format (students distilled from NLLB) the source starts with the *target* code and the target has
  no code. Saved folders say ``tokenizer_class: NllbTokenizer``, so any transformers program reads them.
- Every tokenizer here answers ``get_lang_id(lang)``, ``get_lang_token(lang)`` and ``language_tokens``.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import M2M100Tokenizer, NllbTokenizer

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_text
from forgetbench.models.nllb_codes import NAME_OF, NLLB_CODES, nllb_code

SMALL100_MARKER = "forgetbench_small100"  # attribute set on SMaLL-100 tokenizers and configs
NLLB_MARKER = "forgetbench_nllb"  # attribute of NLLB-200 tokenizers
NLLB_CLASSES = ("NllbTokenizer", "NllbTokenizerFast")


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


class NllbCodesTokenizer(NllbTokenizer):
    """NLLB-200's tokenizer speaking the project's language names; ``forgetbench_small100`` (set by
    ``load_nllb_tokenizer``) switches to the SMaLL-100 format."""

    forgetbench_nllb = True  # = NLLB_MARKER

    def code_of(self, lang: str) -> str:
        """The NLLB code of ``lang`` (``models.nllb_codes``); refused in one line when the vocabulary lacks it."""
        code = nllb_code(lang)
        if self.convert_tokens_to_ids(code) in (None, self.unk_token_id):
            raise ForgetbenchError(f"language {lang!r}: this NLLB tokenizer has no code {code} (its vocabulary holds "
                                   f"{len(self.language_tokens)} language codes); choose a language the model has")
        return code

    def get_lang_token(self, lang: str) -> str:
        return self.code_of(lang)

    def get_lang_id(self, lang: str) -> int:
        return self.convert_tokens_to_ids(self.code_of(lang))

    @property
    def language_tokens(self) -> dict[str, int]:
        """Every NLLB code the tokenizer holds, with its id."""
        from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

        unk = self.unk_token_id
        ids = {t: self.convert_tokens_to_ids(t) for t in FAIRSEQ_LANGUAGE_CODES}
        return {t: i for t, i in ids.items() if i is not None and i != unk}

    @property
    def lang_code_to_id(self) -> dict[str, int]:
        """Project names and NLLB codes alike → id (as ``M2M100Tokenizer.lang_code_to_id`` maps ``de``)."""
        codes = self.language_tokens
        return codes | {NAME_OF[c]: i for c, i in codes.items() if c in NAME_OF}

    def set_src_lang_special_tokens(self, src_lang) -> None:
        super().set_src_lang_special_tokens(nllb_code(src_lang) if src_lang in NLLB_CODES else src_lang)

    def set_tgt_lang_special_tokens(self, lang: str) -> None:
        super().set_tgt_lang_special_tokens(nllb_code(lang) if lang in NLLB_CODES else lang)

    def save_pretrained(self, save_directory, *args, **kwargs):
        files = super().save_pretrained(save_directory, *args, **kwargs)
        cfg = Path(save_directory) / "tokenizer_config.json"
        d = json.loads(cfg.read_text(encoding="utf-8"))
        d["tokenizer_class"] = "NllbTokenizer"  # the installed class: transformers programs read the folder
        atomic_write_text(cfg, json.dumps(d, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return files


def is_nllb_folder(path: str | Path) -> bool:
    """Whether a folder's tokenizer (or model config) names NLLB's tokenizer class."""
    for name in ("tokenizer_config.json", "config.json"):
        try:
            if json.loads((Path(path) / name).read_text(encoding="utf-8")).get("tokenizer_class") in NLLB_CLASSES:
                return True
        except (OSError, ValueError, AttributeError):
            continue
    return False


def load_nllb_tokenizer(path: str | Path, small100: bool = False, **kwargs):
    """NLLB-200 tokenizer from a folder or hub id (``tokenizer.json`` or ``sentencepiece.bpe.model``)."""
    try:
        tok = NllbCodesTokenizer.from_pretrained(str(path), **kwargs)
    except (OSError, ValueError, TypeError) as e:
        raise ForgetbenchError(f"{path}: cannot load an NLLB-200 tokenizer (tokenizer.json or "
                               f"sentencepiece.bpe.model): {str(e).splitlines()[0]}") from None
    if not tok.language_tokens:
        raise ForgetbenchError(f"{path}: the NLLB tokenizer holds none of NLLB's language codes (eng_Latn, …); "
                               "its tokenizer files are incomplete")
    if small100:
        setattr(tok, SMALL100_MARKER, True)
        tok.set_src_lang_special_tokens(tok.src_lang)
    return tok


def load_tokenizer(path: str | Path, small100: bool = False, **kwargs):
    """M2M-100 (or SMaLL-100) tokenizer from a folder or hub id with ``vocab.json`` + ``sentencepiece.bpe.model``;
    NLLB-200's when the folder says so or the hub id names NLLB."""
    if "nllb" in str(path).lower() or is_nllb_folder(path):
        return load_nllb_tokenizer(path, small100, **kwargs)
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
    """The tokenizer saved in a model folder: NLLB-200 when its files say so, M2M-100/SMaLL-100 when it has
    ``vocab.json`` + ``sentencepiece.bpe.model``, else whatever ``AutoTokenizer`` finds, else None (weights-only
    folders)."""
    from transformers import AutoTokenizer

    d = Path(path)
    if is_nllb_folder(d) and ((d / "tokenizer.json").is_file() or (d / "sentencepiece.bpe.model").is_file()):
        return load_nllb_tokenizer(d, small100=small100)
    if (d / "vocab.json").is_file() and (d / "sentencepiece.bpe.model").is_file():
        return load_tokenizer(d, small100=small100)
    try:
        return AutoTokenizer.from_pretrained(str(d))
    except (OSError, ValueError, TypeError):
        return None


def language_tokens(tokenizer) -> dict[str, int]:
    """Every language-code token the tokenizer holds (``__de__`` or ``deu_Latn``) → id."""
    if getattr(tokenizer, NLLB_MARKER, False):
        return tokenizer.language_tokens
    ids = getattr(tokenizer, "lang_code_to_id", None) or {}
    if not ids and hasattr(tokenizer, "lang_token_to_id"):
        ids = tokenizer.lang_token_to_id
    return {(t if t.startswith("__") else f"__{t}__"): int(i) for t, i in dict(ids).items()}


def is_nllb(tokenizer) -> bool:
    return bool(getattr(tokenizer, NLLB_MARKER, False))
