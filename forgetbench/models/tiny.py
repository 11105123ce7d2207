"""Tiny M2M-100 models with a real SentencePiece vocabulary, for tests and placeholders.

The vocabulary follows M2M-100's format exactly (``vocab.json`` = fairseq dictionary with
``<s> <pad> </s> <unk>`` then the SPM pieces; ``sentencepiece.bpe.model``; 100 language tokens
and 8 made-up words appended by ``M2M100Tokenizer``), so that ``M2M100Tokenizer`` and
``M2M100ForConditionalGeneration`` load it like a real checkpoint.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm
import torch

M2M_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]
N_LANG_TOKENS = 100
N_MADEUP = 8


def train_spm(sentences: list[str], vocab_size: int, model_type: str = "bpe", character_coverage: float = 0.9995,
              seed_sentencepiece_size: int = 1_000_000) -> bytes:
    """Train a SentencePiece model in memory (deterministic: one thread) and return its bytes."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=buf, vocab_size=vocab_size, model_type=model_type,
        character_coverage=character_coverage, num_threads=1, unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,
        hard_vocab_limit=False, seed_sentencepiece_size=seed_sentencepiece_size, minloglevel=2,
    )
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


def m2m100_config(vocab_size: int, d_model: int = 32, layers: int = 2, decoder_layers: int | None = None,
                  heads: int = 4, ffn: int = 64, max_positions: int = 256, **overrides):
    from transformers import M2M100Config

    kw = dict(
        vocab_size=vocab_size, d_model=d_model, encoder_layers=layers,
        decoder_layers=layers if decoder_layers is None else decoder_layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn,
        max_position_embeddings=max_positions, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        encoder_layerdrop=0.0, decoder_layerdrop=0.0, scale_embedding=True, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=2, tie_word_embeddings=True,
    )
    kw.update(overrides)
    return M2M100Config(**kw)


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
