"""M2M-100's vocabulary format, built from a SentencePiece model this project trains.

``vocab.json`` = the fairseq dictionary (``<s> <pad> </s> <unk>``, then the SPM pieces) beside
``sentencepiece.bpe.model``; ``M2M100Tokenizer`` appends the 100 language tokens and 8 made-up
words, so a folder written here loads like a real M2M-100 checkpoint's tokenizer.

NLLB-200's format (``write_nllb_tokenizer``): the SPM model has ``<unk> <s> </s>`` at 0-2 (as NLLB's
does); the fairseq ids are ``<s> <pad> </s> <unk>``, SPM piece i ≥ 3 at id i + 1, then the 202 language
codes (``ace_Arab`` … ``zul_Latn``, transformers' order) from len(SPM) + 1, then ``<mask>`` — NLLB's own
layout (``eng_Latn`` = len(SPM) + 47, as 256047 in the released checkpoints). It is written as
``tokenizer.json`` + ``tokenizer_config.json`` (tokenizer_class ``NllbTokenizer``), as the hub's NLLB folders.
"""


from __future__ import annotations

import io
import json
import re
from pathlib import Path

import sentencepiece as spm

from forgetbench.errors import ForgetbenchError

M2M_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
N_LANG_TOKENS = 100
N_MADEUP = 8


def train_spm(sentences: list[str], vocab_size: int, model_type: str = "bpe", character_coverage: float = 0.9995,
              seed_sentencepiece_size: int | None = 1_000_000, nllb: bool = False, ids: dict[str, int] | None = None,
              user_defined_symbols: tuple[str, ...] = (), shuffle_input_sentence: bool = True) -> bytes:
    """Train a SentencePiece model in memory (deterministic: one thread) and return its bytes: every vocabulary
    forgetbench trains (the MT models', the tiny test models', the pre-trained encoders'). A vocabulary smaller
    than the characters the text needs at ``character_coverage`` is refused in one line. ``nllb``: ``<s>``/``</s>``
    at SPM ids 1 and 2, as NLLB's SPM has them; ``ids``: the special pieces' ids (``unk_id``, ``bos_id``,
    ``eos_id``, ``pad_id``) instead; ``user_defined_symbols``: pieces kept whole (an encoder's ``<mask>``); ``seed_sentencepiece_size`` None: the
    trainer's default (the encoders' vocabularies were made so)."""
    buf = io.BytesIO()
    opts = ids if ids is not None else {"unk_id": 0, "bos_id": 1 if nllb else -1, "eos_id": 2 if nllb else -1,
                                        "pad_id": -1}
    # passed only where set: an empty symbol list or an explicit default changes the trainer's flags, and its model
    if user_defined_symbols:
        opts = opts | {"user_defined_symbols": list(user_defined_symbols)}
    if not shuffle_input_sentence:
        opts = opts | {"shuffle_input_sentence": False}
    if seed_sentencepiece_size is not None:  # None: the trainer's own default, which is not the same model
        opts = opts | {"seed_sentencepiece_size": seed_sentencepiece_size}
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=buf, vocab_size=vocab_size, model_type=model_type,
            character_coverage=character_coverage, num_threads=1, **opts,
            hard_vocab_limit=False, minloglevel=2,
        )
    except RuntimeError as e:
        need = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(e))
        if need is None:
            raise
        raise ForgetbenchError(f"SentencePiece vocabulary size {vocab_size} is smaller than the {need.group(1)} "
                               f"characters the text needs at character coverage {character_coverage}; raise it "
                               f"(make-tiny --vocab, the config's spm.vocab_size) above {need.group(1)}") from None
    return buf.getvalue()


def write_m2m_vocab(spm_bytes: bytes, out_dir: str | Path) -> int:
    """Write ``sentencepiece.bpe.model`` and a fairseq-style ``vocab.json``; returns the model vocab size."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sentencepiece.bpe.model").write_bytes(spm_bytes)
    sp = spm.SentencePieceProcessor(model_proto=spm_bytes)
    vocab = {tok: i for i, tok in enumerate(M2M_SPECIALS)}
    for i in range(sp.get_piece_size()):
        if sp.is_control(i) or sp.is_unknown(i):
            continue
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, indent=0), encoding="utf-8")
    return len(vocab) + N_LANG_TOKENS + N_MADEUP


def write_nllb_tokenizer(spm_bytes: bytes, out_dir: str | Path) -> int:
    """Write an NLLB-200-format tokenizer of ``spm_bytes`` (trained with ``nllb=True``) to ``out_dir``; returns its
    size (SPM pieces + 1 + 202 codes + ``<mask>``)."""
    import tempfile

    from transformers import NllbTokenizer
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    sp = spm.SentencePieceProcessor(model_proto=spm_bytes)
    if [sp.id_to_piece(i) for i in range(3)] != ["<unk>", "<s>", "</s>"]:
        raise ForgetbenchError("write_nllb_tokenizer: the SPM model must have <unk> <s> </s> at ids 0-2 "
                               "(train_spm(..., nllb=True))")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:  # transformers converts the SPM model; ids are then placed
        (Path(tmp) / "sentencepiece.bpe.model").write_bytes(spm_bytes)
        try:
            tok = NllbTokenizer.from_pretrained(tmp, extra_special_tokens=list(FAIRSEQ_LANGUAGE_CODES))
        except (ValueError, ImportError) as e:  # no protobuf: transformers tries tiktoken and says so
            raise ForgetbenchError(f"cannot convert the SentencePiece model into an NLLB-200 tokenizer "
                                   f"({str(e).splitlines()[0][:120]}); install protobuf (pip install protobuf)") from None
        tok.save_pretrained(out)
    j = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    n = sp.get_piece_size() + 1
    place = {c: n + k for k, c in enumerate(FAIRSEQ_LANGUAGE_CODES)} | {"<mask>": n + len(FAIRSEQ_LANGUAGE_CODES)}
    for a in j["added_tokens"]:
        a["id"] = place.get(a["content"], a["id"])
    j["added_tokens"].sort(key=lambda a: a["id"])
    (out / "tokenizer.json").write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    c = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    for k in ("is_local", "local_files_only"):
        c.pop(k, None)
    (out / "tokenizer_config.json").write_text(json.dumps(c, indent=2, ensure_ascii=False), encoding="utf-8")
    (out / "sentencepiece.bpe.model").write_bytes(spm_bytes)
    return n + len(FAIRSEQ_LANGUAGE_CODES) + 1
