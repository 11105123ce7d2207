"""M2M-100 configurations for the models this project builds (teacher, students, tiny test models)."""

from __future__ import annotations


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
