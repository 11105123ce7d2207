"""Tiny random M2M-100 models with a real SentencePiece vocabulary, for tests and placeholders."""

from __future__ import annotations

from pathlib import Path

import torch

from forgetbench.models.architecture import m2m100_config
from forgetbench.models.vocabulary import train_spm, write_m2m_vocab


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
