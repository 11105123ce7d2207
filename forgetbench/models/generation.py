"""Translation helpers that hide the M2M-100 vs SMaLL-100 difference.

M2M-100: source ``__src__ tokens </s>``; generation forces ``__tgt__`` as the first decoder token.
SMaLL-100: source ``__tgt__ tokens </s>`` (target code on the encoder side); no forced BOS.
"""

from __future__ import annotations

import torch


def is_small100(tokenizer) -> bool:
    return bool(getattr(tokenizer, "forgetbench_small100", False))


def encode_sources(tokenizer, texts: list[str], src_lang: str, tgt_lang: str, max_length: int = 256):
    tokenizer.src_lang = tgt_lang if is_small100(tokenizer) else src_lang
    return tokenizer(texts, return_tensors="pt", padding=True, truncation=True, max_length=max_length)


def generation_kwargs(tokenizer, tgt_lang: str) -> dict:
    return {} if is_small100(tokenizer) else {"forced_bos_token_id": tokenizer.get_lang_id(tgt_lang)}


@torch.inference_mode()
def translate(model, tokenizer, texts: list[str], src_lang: str, tgt_lang: str, num_beams: int = 1,
              max_new_tokens: int = 128, max_length: int = 256) -> list[str]:
    enc = encode_sources(tokenizer, texts, src_lang, tgt_lang, max_length)
    device = next(model.parameters()).device
    out = model.generate(**{k: v.to(device) for k, v in enc.items()}, **generation_kwargs(tokenizer, tgt_lang),
                         num_beams=num_beams, do_sample=False, max_new_tokens=max_new_tokens)
    return [t.strip() for t in tokenizer.batch_decode(out, skip_special_tokens=True)]


def target_ids(tokenizer, hyps: list[str], tgt_lang: str, max_length: int = 256):
    """Labels for teacher forcing on hypotheses: ``__tgt__ tokens </s>`` (M2M) or ``tokens </s>`` (SMaLL-100)."""
    tokenizer.tgt_lang = tgt_lang
    enc = tokenizer(text_target=hyps, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
    ids = enc["input_ids"]
    if is_small100(tokenizer):
        ids = ids[:, 1:]
    return ids
