"""Tiny random M2M-100 and NLLB-200-shaped models with a real SentencePiece vocabulary, for tests and placeholders."""

from __future__ import annotations

from pathlib import Path

import torch

from forgetbench.models.architecture import m2m100_config
from forgetbench.models.vocabulary import train_spm, write_m2m_vocab, write_nllb_tokenizer


def build_tiny_m2m100(out_dir: str | Path, sentences: list[str], spm_vocab: int = 200, seed: int = 0,
                      **config_kwargs):
    """Build, save and return ``(model, tokenizer)``: a random tiny M2M-100 with its own SPM vocabulary."""
    from transformers import M2M100ForConditionalGeneration, M2M100Tokenizer

    out = Path(out_dir)
    vocab_size = write_m2m_vocab(train_spm(sentences, spm_vocab), out)
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(m2m100_config(vocab_size, **config_kwargs)).eval()
    tok = M2M100Tokenizer(str(out / "vocab.json"), str(out / "sentencepiece.bpe.model"))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return model, tok


NLLB_SPARE_ROWS = 2  # the released NLLB-200 configs have vocab_size 256206 for 256204 tokens


def build_tiny_nllb(out_dir: str | Path, sentences: list[str], spm_vocab: int = 200, seed: int = 0, **config_kwargs):
    """Build, save and return ``(model, tokenizer)``: a random tiny NLLB-200-shaped model (M2M100 architecture,
    NLLB's token layout and 202 codes, ``tokenizer_class: NllbTokenizer`` in its config)."""
    from transformers import M2M100ForConditionalGeneration

    from forgetbench.models.tokenizers import load_nllb_tokenizer

    out = Path(out_dir)
    n = write_nllb_tokenizer(train_spm(sentences, spm_vocab, nllb=True), out)
    torch.manual_seed(seed)
    config = m2m100_config(n + NLLB_SPARE_ROWS, **config_kwargs)
    config.tokenizer_class = "NllbTokenizer"
    model = M2M100ForConditionalGeneration(config).eval()
    model.save_pretrained(out)
    return model, load_nllb_tokenizer(out)
