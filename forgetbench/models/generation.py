"""Translation helpers that hide the M2M-100 vs SMaLL-100 difference.

M2M-100: source ``__src__ tokens </s>``; generation forces ``__tgt__`` as the first decoder token.
SMaLL-100: source ``__tgt__ tokens </s>`` (target code on the encoder side); no forced BOS.
"""

from __future__ import annotations

import torch

from forgetbench.models.tokenizers import SMALL100_MARKER


def is_small100(tokenizer) -> bool:
    return bool(getattr(tokenizer, SMALL100_MARKER, False))


def set_source_language(tokenizer, src_lang: str, tgt_lang: str) -> None:
    """The code the source starts with: ``src_lang`` (M2M-100) or ``tgt_lang`` (SMaLL-100)."""
    tokenizer.src_lang = tgt_lang if is_small100(tokenizer) else src_lang


def encode_sources(tokenizer, texts: list[str], src_lang: str, tgt_lang: str, max_length: int = 256, **kw):
    """Source ids for ``texts`` (padded tensors; ``return_tensors=None, padding=False``: one list per text)."""
    set_source_language(tokenizer, src_lang, tgt_lang)
    return tokenizer(texts, **({"return_tensors": "pt", "padding": True} | kw), truncation=True, max_length=max_length)


def generation_kwargs(tokenizer, tgt_lang: str) -> dict:
    return {} if is_small100(tokenizer) else {"forced_bos_token_id": tokenizer.get_lang_id(tgt_lang)}


# generation-config fields that would add a logits processor; the fast greedy loop needs them neutral
_NEUTRAL = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0, "min_length": 0,
            "min_new_tokens": None, "bad_words_ids": None, "forced_eos_token_id": None, "suppress_tokens": None,
            "begin_suppress_tokens": None, "sequence_bias": None, "do_sample": False}


def greedy_supported(model) -> bool:
    gc = getattr(model, "generation_config", None)
    return (gc is not None and getattr(model.config, "is_encoder_decoder", False)
            and all(getattr(gc, k, None) in (None, v) for k, v in _NEUTRAL.items()))  # transformers 5: unset is None


@torch.no_grad()
def greedy_generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, forced_bos_token_id: int | None,
                    max_new_tokens: int) -> list[list[int]]:
    """Greedy decoding that drops finished rows from the batch (and the KV cache) at every step.

    Gives the tokens of ``model.generate(num_beams=1, do_sample=False)`` (one list per row, ending at EOS
    or at ``max_new_tokens``), without spending compute on rows that already ended: in a batch sorted by
    source length the longest (often looping) hypothesis otherwise holds every row until it stops.
    """
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    hidden = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    mask = attention_mask
    alive = torch.arange(input_ids.shape[0])
    out: list[list[int]] = [[] for _ in range(input_ids.shape[0])]
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    step_in = torch.full((input_ids.shape[0], 1), model.config.decoder_start_token_id, device=input_ids.device)
    for step in range(max_new_tokens):
        o = model(encoder_outputs=(hidden,), attention_mask=mask, decoder_input_ids=step_in, past_key_values=cache,
                  use_cache=True)
        cache = o.past_key_values
        if step == 0 and forced_bos_token_id is not None:
            nxt = torch.full((len(alive),), forced_bos_token_id, device=input_ids.device)
        else:
            nxt = o.logits[:, -1].argmax(-1)
        toks = nxt.tolist()
        for r, t in zip(alive.tolist(), toks, strict=True):
            out[r].append(t)
        keep = [k for k, t in enumerate(toks) if t not in eos]
        if not keep:
            break
        if len(keep) < len(toks):
            idx = torch.tensor(keep, device=input_ids.device)
            alive, hidden, mask, nxt = alive[idx.cpu()], hidden[idx], mask[idx], nxt[idx]
            cache.batch_select_indices(idx)
        step_in = nxt[:, None]
    return out


@torch.no_grad()  # not inference_mode: PTQ sites reuse results for unchanged tensors, which needs version counters
def translate(model, tokenizer, texts: list[str], src_lang: str, tgt_lang: str, num_beams: int = 1,
              max_new_tokens: int = 128, max_length: int = 256, greedy_loop: bool = True) -> list[str]:
    """Decoded hypotheses; greedy decoding goes through ``greedy_generate`` unless ``greedy_loop=False``
    (or the model's generation config needs logits processors), else Hugging Face ``generate``."""
    enc = encode_sources(tokenizer, texts, src_lang, tgt_lang, max_length)
    device = next(model.parameters()).device
    enc = {k: v.to(device) for k, v in enc.items()}
    kw = generation_kwargs(tokenizer, tgt_lang)
    if greedy_loop and num_beams == 1 and greedy_supported(model):
        out = greedy_generate(model, enc["input_ids"], enc["attention_mask"], kw.get("forced_bos_token_id"),
                              max_new_tokens)
    else:
        out = model.generate(**enc, **kw, num_beams=num_beams, do_sample=False, max_new_tokens=max_new_tokens)
    return [t.strip() for t in tokenizer.batch_decode(out, skip_special_tokens=True)]


def target_ids(tokenizer, hyps: list[str], tgt_lang: str, max_length: int = 256):
    """Labels for teacher forcing on hypotheses: ``__tgt__ tokens </s>`` (M2M) or ``tokens </s>`` (SMaLL-100)."""
    tokenizer.tgt_lang = tgt_lang
    enc = tokenizer(text_target=hyps, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
    ids = enc["input_ids"]
    if is_small100(tokenizer):
        ids = ids[:, 1:]
    return ids
