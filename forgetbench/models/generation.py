"""Translation helpers that hide the M2M-100 vs SMaLL-100 difference.

M2M-100: source ``__src__ tokens </s>``; generation forces ``__tgt__`` as the first decoder token.
SMaLL-100: source ``__tgt__ tokens </s>`` (target code on the encoder side); no forced BOS.
"""

from __future__ import annotations

import torch

from forgetbench.models.decoder_step import DirectStep, HFStep, direct_supported
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


ENCODER_ROWS = 16  # rows per encoder call in encode_by_length
COMPACT_FRACTION = 8  # ended rows leave the batch once they are 1/COMPACT_FRACTION of it


def encode_by_length(encoder, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: int = ENCODER_ROWS) -> torch.Tensor:
    """The encoder's states for a right-padded batch, computed in groups of ``rows`` sources of similar length,
    each cut to its own longest source: a batch padded to its longest sentence spends most encoder work on
    padding (a 64-sentence FLORES batch: 2.5× less encoder time here). The states of real tokens equal those of
    one call over the whole batch (padding is masked out of every attention: tested bit for bit); what padding
    positions hold (a group's padded states, zeros past its longest source) the decoder's cross-attention masks
    out, as before. A left-padded batch, or one that fits in a group, takes a single call."""
    lengths = attention_mask.sum(1)
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    right_padded = bool((attention_mask.bool() == (positions < lengths[:, None])).all())
    if input_ids.shape[0] <= rows or not right_padded:
        return encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    order = torch.argsort(lengths.cpu(), stable=True).to(input_ids.device)
    hidden = None
    for k in range(0, len(order), rows):
        idx = order[k : k + rows]
        n = int(lengths[idx].max())
        h = encoder(input_ids=input_ids[idx, :n], attention_mask=attention_mask[idx, :n]).last_hidden_state
        if hidden is None:
            hidden = h.new_zeros(input_ids.shape[0], input_ids.shape[1], h.shape[-1])
        hidden[idx, :n] = h
    return hidden


@torch.no_grad()
def greedy_generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    forced_bos_token_id: int | torch.Tensor | None, max_new_tokens: int,
                    direct: bool | None = None, encoded: list | None = None) -> list[list[int]]:
    """Greedy decoding in which ended rows leave the batch (and the caches), in groups of an eighth of it.

    Gives the tokens of ``model.generate(num_beams=1, do_sample=False)`` (one list per row, ending at EOS
    or at ``max_new_tokens``; ``forced_bos_token_id``: one code for every row, or a tensor of one per row),
    without spending compute on rows that already ended: in a batch sorted by
    source length the longest (often looping) hypothesis otherwise holds every row until it stops. Rows leave
    in groups because re-indexing every cache at each ended row cost more than a few extra rows for a few steps.
    Each step is ``decoder_step.DirectStep`` where ``direct_supported(model)`` (the same logits, bit for bit,
    with less per-step work), else the model's own ``forward`` (``HFStep``); ``direct=False`` forces the latter.
    ``encoded``: a list the encoder's states (``[rows, source length, d]``) are appended to, for a later pass.
    """
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    hidden = encode_by_length(model.get_encoder(), input_ids, attention_mask)
    if encoded is not None:
        encoded.append(hidden)
    use_direct = direct_supported(model) if direct is None else direct
    step = DirectStep(model, hidden, attention_mask, max_new_tokens) if use_direct else HFStep(model, hidden, attention_mask)
    rows = list(range(input_ids.shape[0]))  # the input row of each row still in the batch
    forced = None if forced_bos_token_id is None else torch.as_tensor(
        forced_bos_token_id, device=input_ids.device).expand(len(rows)).clone()
    done = [False] * len(rows)  # rows that ended but are still in the batch (they leave it in groups)
    out: list[list[int]] = [[] for _ in rows]
    tokens = torch.full((len(rows),), model.config.decoder_start_token_id, device=input_ids.device)
    for t in range(max_new_tokens):
        logits = step(tokens)
        if t == 0 and forced is not None:
            tokens = forced
        else:
            tokens = logits.argmax(-1)
        for k, tok in enumerate(tokens.tolist()):
            if not done[k]:
                out[rows[k]].append(tok)
                done[k] = tok in eos
        n_done = sum(done)
        if n_done == len(rows):
            break
        if n_done * COMPACT_FRACTION >= len(rows):  # copying the caches at every ended row costs more than it saves
            keep = [k for k, d in enumerate(done) if not d]
            rows, done = [rows[k] for k in keep], [False] * len(keep)
            idx = torch.tensor(keep, device=input_ids.device)
            tokens = tokens[idx]
            step.select(idx)
    return out


def by_pair(rows: list[tuple[str, str, str]]) -> dict[tuple[str, str], list[int]]:
    """The row indices of each (source, target) pair of ``rows`` ((text, src, tgt) each), in row order."""
    out: dict[tuple[str, str], list[int]] = {}
    for i, (_, s, t) in enumerate(rows):
        out.setdefault((s, t), []).append(i)
    return out


def encode_rows(tokenizer, rows: list[tuple[str, str, str]], max_length: int = 256) -> dict:
    """Source ids of rows of several pairs (each encoded with its own language code), padded together as the
    tokenizer pads one batch: for rows of one pair, ``encode_sources(..., padding=True)`` exactly (tested)."""
    ids: list = [None] * len(rows)
    for (s, t), idx in by_pair(rows).items():
        enc = encode_sources(tokenizer, [rows[i][0] for i in idx], s, t, max_length, return_tensors=None, padding=False)
        for i, x in zip(idx, enc["input_ids"], strict=True):
            ids[i] = x
    return tokenizer.pad({"input_ids": ids}, padding=True, return_tensors="pt", return_attention_mask=True)


@torch.no_grad()  # not inference_mode: PTQ sites reuse results for unchanged tensors, which needs version counters
def translate_rows(model, tokenizer, rows: list[tuple[str, str, str]], num_beams: int = 1, max_new_tokens: int = 128,
                   max_length: int = 256, greedy_loop: bool = True, states: dict | None = None) -> list[str]:
    """Decoded hypotheses of rows ``(text, src, tgt)`` that may belong to different pairs (one batch: a sweep
    fills its batches across the pairs of a unit). Greedy decoding goes through ``greedy_generate`` with each
    row's own forced target code; where it cannot (``greedy_loop=False``, beam search, a generation config that
    needs logits processors) Hugging Face ``generate`` runs once per pair, since it forces one code per call.
    ``states``: a dict that receives, per row of the greedy loop, the encoder's states of its real source tokens
    (key: the row), so a teacher-forced pass on the same sources can skip the encoder (``hallucination.cross_attention``)."""
    if not rows:
        return []
    device = next(model.parameters()).device
    if greedy_loop and num_beams == 1 and greedy_supported(model):
        enc = encode_rows(tokenizer, rows, max_length)
        forced = None if is_small100(tokenizer) else torch.tensor([tokenizer.get_lang_id(t) for _, _, t in rows])
        mask, encoded = enc["attention_mask"].to(device), []
        out = greedy_generate(model, enc["input_ids"].to(device), mask, None if forced is None else forced.to(device),
                              max_new_tokens, encoded=encoded)
        if states is not None:
            for k, row in enumerate(rows):
                states[row] = encoded[0][k, mask[k].bool()].clone()
    else:
        out = [None] * len(rows)
        for (s, t), idx in by_pair(rows).items():
            enc = encode_sources(tokenizer, [rows[i][0] for i in idx], s, t, max_length)
            res = model.generate(**{k: v.to(device) for k, v in enc.items()}, **generation_kwargs(tokenizer, t),
                                 num_beams=num_beams, do_sample=False, max_new_tokens=max_new_tokens)
            for i, r in zip(idx, res.tolist(), strict=True):
                out[i] = r
    return [t.strip() for t in tokenizer.batch_decode(out, skip_special_tokens=True)]


def translate(model, tokenizer, texts: list[str], src_lang: str, tgt_lang: str, num_beams: int = 1,
              max_new_tokens: int = 128, max_length: int = 256, greedy_loop: bool = True) -> list[str]:
    """``translate_rows`` for texts of one pair."""
    return translate_rows(model, tokenizer, [(x, src_lang, tgt_lang) for x in texts], num_beams, max_new_tokens,
                          max_length, greedy_loop)


def target_ids(tokenizer, hyps: list[str], tgt_lang: str, max_length: int = 256):
    """Labels for teacher forcing on hypotheses: ``__tgt__ tokens </s>`` (M2M) or ``tokens </s>`` (SMaLL-100)."""
    tokenizer.tgt_lang = tgt_lang
    enc = tokenizer(text_target=hyps, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
    ids = enc["input_ids"]
    if is_small100(tokenizer):
        ids = ids[:, 1:]
    return ids
