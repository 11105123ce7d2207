"""Translation helpers that hide the M2M-100 vs SMaLL-100 vs NLLB-200 difference.

M2M-100: source ``__src__ tokens </s>``; generation forces ``__tgt__`` as the first decoder token.
SMaLL-100: source ``__tgt__ tokens </s>`` (target code on the encoder side); no forced BOS.
NLLB-200: as M2M-100 with codes like ``deu_Latn`` (the tokenizer maps the project's ``de``); the source
layout is the tokenizer's (``legacy_behaviour``: ``tokens </s> code``); labels are always ``code tokens </s>``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from forgetbench.models.decoder_step import DirectStep, HFStep, direct_supported
from forgetbench.models.hardware import input_device
from forgetbench.models.tokenizers import SMALL100_MARKER, is_nllb


def is_small100(tokenizer) -> bool:
    return bool(getattr(tokenizer, SMALL100_MARKER, False))


def set_source_language(tokenizer, src_lang: str, tgt_lang: str) -> None:
    """The code the source starts with: ``src_lang`` (M2M-100) or ``tgt_lang`` (SMaLL-100). A SMaLL-100 tokenizer
    reads its ``tgt_lang`` when it builds the source prefix, so that is set first: left at an earlier pair's target
    (``target_ids`` sets it), it would prefix this pair's sources with that pair's code."""
    if is_small100(tokenizer):
        tokenizer.tgt_lang = tgt_lang
        tokenizer.src_lang = tgt_lang
    else:
        tokenizer.src_lang = src_lang


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


ENCODER_ROWS = 8  # rows per encoder call in encode_by_length (docs/METHOD.md §2.9b: the fastest of 2-16)
COMPACT_FRACTION = 8  # ended rows leave the batch once they are 1/COMPACT_FRACTION of it


def _right_padded(attention_mask: torch.Tensor) -> bool:
    lengths = attention_mask.sum(1)
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return bool((attention_mask.bool() == (positions < lengths[:, None])).all())


def encoder_states(encoder, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The encoder's last hidden states on the inputs' device: under a multi-GPU device map the encoder may end on
    another GPU than the one the decoding loop keeps its tensors on (accelerate's hooks move a module's inputs, not
    what it returns)."""
    return encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.to(input_ids.device)


def encode_by_length(encoder, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     rows: int = ENCODER_ROWS) -> torch.Tensor:
    """The encoder's states for a right-padded batch, computed in groups of ``rows`` sources of similar length,
    each cut to its own longest source: a batch padded to its longest sentence spends most encoder work on
    padding (a 64-sentence FLORES batch: 2.5× less encoder time). The states of real tokens equal those of
    one call over the whole batch (padding is masked out of every attention: tested bit for bit); what padding
    positions hold (a group's padded states, zeros past its longest source) the decoder's cross-attention masks
    out. A left-padded batch, or one that fits in a group, takes a single call."""
    if input_ids.shape[0] <= rows or not _right_padded(attention_mask):
        return encoder_states(encoder, input_ids, attention_mask)
    lengths = attention_mask.sum(1)
    order = torch.argsort(lengths.cpu(), stable=True).to(input_ids.device)
    hidden = None
    for k in range(0, len(order), rows):
        idx = order[k : k + rows]
        n = int(lengths[idx].max())
        h = encoder_states(encoder, input_ids[idx, :n], attention_mask[idx, :n])
        if hidden is None:
            hidden = h.new_zeros(input_ids.shape[0], input_ids.shape[1], h.shape[-1])
        hidden[idx, :n] = h
    return hidden


def encode_alone(encoder, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 rows: list[int] | None = None) -> torch.Tensor:
    """The encoder's states for a padded batch, each of ``rows`` (None: every row) encoded alone (a batch of one, its
    real tokens only): bit for bit what a teacher-forced pass computes for that source (the layout rule of
    ``hallucination.cross_attention``), whatever the batch; the other rows together by ``encode_by_length``. Zeros
    at padding. Alone costs ≈ 1 ms a sentence more than ``encode_by_length`` on the teacher (docs/METHOD.md §2.9)."""
    n = input_ids.shape[0]
    rows = list(range(n)) if rows is None else rows
    hidden = None
    others = sorted(set(range(n)) - set(rows))
    if others:
        idx = torch.tensor(others, device=input_ids.device)
        mask = attention_mask[idx]
        own = int(mask.sum(1).max()) if _right_padded(mask) else mask.shape[1]
        h = encode_by_length(encoder, input_ids[idx, :own], mask[:, :own])
        hidden = h.new_zeros(n, input_ids.shape[1], h.shape[-1])
        hidden[idx, :own] = h
    right = _right_padded(attention_mask)
    lengths = attention_mask.sum(1).tolist()
    for k in rows:
        real = slice(0, lengths[k]) if right else attention_mask[k].bool()
        ids = input_ids[k, real][None]
        h = encoder_states(encoder, ids, torch.ones_like(ids))
        if hidden is None:
            hidden = h.new_zeros(n, input_ids.shape[1], h.shape[-1])
        hidden[k, real] = h[0]
    return hidden


def first_argmax(logits: torch.Tensor) -> torch.Tensor:
    """``logits.argmax(-1)`` (the first maximum; a NaN counts as the maximum), through numpy for float CPU logits:
    the same indices (tested, ties and NaN included), 10x faster here on a [64, 8111] batch, where torch's
    argmax took 4 % of the decoding time."""
    if logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float64):
        return torch.from_numpy(logits.numpy().argmax(-1))
    return logits.argmax(-1)


ADMIT_FRACTION = 4  # a stream admits new rows once a quarter of its width is free


def _encode_cohort(encoder, input_ids, attention_mask, a: int, e: int, width: int, cut: bool, lengths: list[int],
                   states: dict | None, keep: set[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder states and mask of rows ``a..e-1``, padded as their nominal batch (of ``width`` rows) is padded:
    to its longest source, or the given width for a single batch or left padding; the encoder runs on the rows cut
    to their own longest source (``encode_by_length``: the same states of real tokens)."""
    n, b0 = input_ids.shape[0], a - a % width
    padded = max(lengths[b0 : b0 + width]) if cut and width < n else attention_mask.shape[1]
    own = max(lengths[a:e]) if cut else padded
    mask = attention_mask[a:e, :padded]
    kept = [] if states is None else [k for k in range(e - a) if keep is None or a + k in keep]
    if kept:  # for a teacher-forced pass, which encodes each source alone: so are these (the same bits)
        hidden = encode_alone(encoder, input_ids[a:e, :own], mask[:, :own], kept)
    else:
        hidden = encode_by_length(encoder, input_ids[a:e, :own], mask[:, :own])
    if own < padded:
        hidden = torch.cat([hidden, hidden.new_zeros(e - a, padded - own, hidden.shape[-1])], dim=1)
    for k in kept:
        states[a + k] = hidden[k, mask[k].bool()]
    return hidden, mask


def _leave(step, rows: list[int], done: list[bool], tokens: torch.Tensor):
    """The batch without its ended rows: rows, done flags, last tokens, and the step's caches."""
    idx = torch.tensor([k for k, d in enumerate(done) if not d], dtype=torch.long, device=tokens.device)
    step.select(idx)
    return [rows[k] for k in idx.tolist()], [False] * len(idx), tokens.index_select(0, idx)


@torch.no_grad()
def greedy_stream(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  forced_bos_token_id: int | torch.Tensor | None, max_new_tokens: int, width: int | None = None,
                  direct: bool | None = None, states: dict | None = None,
                  keep: set[int] | None = None) -> Iterator[tuple[int, list[int]]]:
    """Greedy decoding of every row, yielding ``(row, tokens)`` as each row ends (at EOS or ``max_new_tokens``).

    The rows form *nominal batches* of ``width`` (None: one batch of all rows), each padded to its own longest
    source (the whole given width for a single batch): what ``generate`` on each nominal batch computes. Ended
    rows leave the batch in groups of an eighth of it (re-indexing every cache at each ended row cost more than a
    few extra rows for a few steps). With ``decoder_step.DirectStep`` (``direct_supported``; ``direct=False``
    forces the model's own ``forward``, ``HFStep``), the next rows join as soon as a quarter of the width is free
    (``DirectStep.add``: their own cohort, padded as their nominal batch), so the batch stays full instead of
    running each nominal batch's tail of long, often looping, hypotheses with a few rows; a cohort's logits are
    those of its rows decoded alone, so each row's tokens are those of ``generate`` on its nominal batch (up to
    the few-row kernels of rule 4, ``decoder_step``). ``forced_bos_token_id``: one code for every row, or a tensor
    of one per row. ``states``: a dict that receives, per row (of ``keep``, the row indices; None: every row), the
    encoder's states of its real source tokens, each such source then encoded alone (``encode_alone``)."""
    n = input_ids.shape[0]
    width = n if width is None else max(1, width)
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    encoder = model.get_encoder()
    use_direct = direct_supported(model) if direct is None else direct
    cut = _right_padded(attention_mask)
    lengths = attention_mask.sum(1).tolist()
    forced = None if forced_bos_token_id is None else torch.as_tensor(
        forced_bos_token_id, device=input_ids.device).expand(n)
    start = model.config.decoder_start_token_id
    step, nxt = None, 0
    rows: list[int] = []  # the input row of each row in the batch
    done: list[bool] = []  # rows that ended but are still in the batch (they leave it in groups)
    out: dict[int, list[int]] = {}
    joined: dict[int, int] = {}  # the step each row joined at: a cohort's step count is the steps since
    steps = 0
    tokens = input_ids.new_empty(0)
    while nxt < n or rows:
        live = len(rows) - sum(done)
        fresh = 0
        if nxt < n and (live == 0 or (use_direct and width - live >= min(width // ADMIT_FRACTION or 1, n - nxt))):
            if live < len(rows):  # the ended rows leave first
                rows, done, tokens = _leave(step, rows, done, tokens)
            end = min(n, nxt + width - len(rows))
            while nxt < end:  # one cohort per nominal batch it reaches into
                e = min(end, nxt - nxt % width + width)
                hidden, mask = _encode_cohort(encoder, input_ids, attention_mask, nxt, e, width, cut, lengths, states,
                                              keep)
                if step is None:
                    step = (DirectStep(model, hidden, mask, max_new_tokens) if use_direct
                            else HFStep(model, hidden, mask))
                else:
                    step.add(hidden, mask)
                rows += range(nxt, e)
                joined |= dict.fromkeys(range(nxt, e), steps)
                done += [False] * (e - nxt)
                fresh += e - nxt
                nxt = e
            tokens = torch.cat([tokens, tokens.new_full((fresh,), start)])
        logits = step(tokens)
        steps += 1
        tokens = first_argmax(logits) if len(rows) > fresh or forced is None else None
        if fresh and forced is not None:  # a cohort's first token is its forced target code
            first = forced[rows[len(rows) - fresh] : rows[-1] + 1]
            tokens = first if tokens is None else torch.cat([tokens[: len(rows) - fresh], first])
        expired = False  # a cohort reached max_new_tokens: its rows ended, they must leave before the next step
        for k, tok in enumerate(tokens.tolist()):
            if not done[k]:
                r = rows[k]
                seq = out.setdefault(r, [])
                seq.append(tok)
                if tok in eos or len(seq) == max_new_tokens:
                    done[k] = True
                    expired |= len(seq) == max_new_tokens
                    yield r, out.pop(r)
        n_done = sum(done)
        # rows that ended early wait for compaction, but not past their cohort's last step (max_new_tokens steps):
        # rows stay in joining order, so the first is the oldest, and once it is that old every such row is done
        expired |= bool(rows) and steps - joined[rows[0]] >= max_new_tokens
        if n_done == len(rows):  # the next rows start a new batch
            rows, done, tokens, step = [], [], tokens[:0], None
        elif expired or n_done * COMPACT_FRACTION >= len(rows):  # copying the caches at every ended row costs more
            rows, done, tokens = _leave(step, rows, done, tokens)


def greedy_generate(model, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    forced_bos_token_id: int | torch.Tensor | None, max_new_tokens: int,
                    direct: bool | None = None, states: dict | None = None) -> list[list[int]]:
    """The tokens of ``model.generate(num_beams=1, do_sample=False)`` on this batch, one list per row:
    ``greedy_stream`` over one nominal batch (ended rows leave the batch; no row joins it)."""
    out: list = [None] * input_ids.shape[0]
    for r, seq in greedy_stream(model, input_ids, attention_mask, forced_bos_token_id, max_new_tokens,
                                direct=direct, states=states):
        out[r] = seq
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


def greedy_rows_supported(model, num_beams: int = 1, greedy_loop: bool = True) -> bool:
    """Whether ``stream_rows`` can translate with this model and setting (else ``generate`` per pair)."""
    return greedy_loop and num_beams == 1 and greedy_supported(model)


@torch.no_grad()  # not inference_mode: PTQ sites reuse results for unchanged tensors, which needs version counters
def stream_rows(model, tokenizer, rows: list[tuple[str, str, str]], max_new_tokens: int = 128,
                max_length: int = 256, width: int | None = None, states: dict | None = None,
                keep: Callable[[tuple[str, str, str]], bool] | None = None) -> Iterator[tuple[int, str]]:
    """Greedy hypotheses of rows ``(text, src, tgt)`` (of any pairs, each with its own forced target code), yielded
    as ``(index, hypothesis)`` when each row ends: ``greedy_stream`` over nominal batches of ``width`` rows in the
    given order (a sweep passes rows sorted by source length). ``states``: a dict that receives, per row (key:
    the row), the encoder's states of its real source tokens, so a teacher-forced pass on the same sources can
    skip the encoder (``hallucination.cross_attention``); ``keep``: the rows whose states are wanted (None: all;
    only those are encoded alone). Needs ``greedy_rows_supported``."""
    if not rows:
        return
    device = input_device(model)
    enc = encode_rows(tokenizer, rows, max_length)
    forced = None if is_small100(tokenizer) else torch.tensor([tokenizer.get_lang_id(t) for _, _, t in rows])
    kept: dict | None = None if states is None else {}
    wanted = None if keep is None or states is None else {k for k, r in enumerate(rows) if keep(r)}
    for k, seq in greedy_stream(model, enc["input_ids"].to(device), enc["attention_mask"].to(device),
                                None if forced is None else forced.to(device), max_new_tokens, width, states=kept,
                                keep=wanted):
        if kept is not None and k in kept:
            states[rows[k]] = kept.pop(k)
        yield k, tokenizer.decode(seq, skip_special_tokens=True).strip()


def translate_rows(model, tokenizer, rows: list[tuple[str, str, str]], num_beams: int = 1, max_new_tokens: int = 128,
                   max_length: int = 256, greedy_loop: bool = True, states: dict | None = None,
                   width: int | None = None, keep: Callable[[tuple[str, str, str]], bool] | None = None) -> list[str]:
    """Decoded hypotheses of rows ``(text, src, tgt)`` that may belong to different pairs: ``stream_rows`` (one
    nominal batch unless ``width``), in row order. Where greedy decoding cannot run there
    (``greedy_loop=False``, beam search, a generation config that needs logits processors) Hugging Face
    ``generate`` runs once per pair, since it forces one code per call."""
    if not rows:
        return []
    if greedy_rows_supported(model, num_beams, greedy_loop):
        hyps = dict(stream_rows(model, tokenizer, rows, max_new_tokens, max_length, width, states, keep))
        return [hyps[k] for k in range(len(rows))]
    device = input_device(model)
    out = [None] * len(rows)
    with torch.no_grad():
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
    """Labels for teacher forcing on hypotheses: ``__tgt__ tokens </s>`` (M2M, NLLB whatever its source layout)
    or ``tokens </s>`` (SMaLL-100 format)."""
    if is_nllb(tokenizer):
        head = [] if is_small100(tokenizer) else [tokenizer.get_lang_id(tgt_lang)]
        body = tokenizer(hyps, add_special_tokens=False, truncation=True,
                         max_length=max_length - len(head) - 1)["input_ids"]
        rows = [head + b + [tokenizer.eos_token_id] for b in body]
        width = max(map(len, rows))
        return torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    tokenizer.tgt_lang = tgt_lang
    enc = tokenizer(text_target=hyps, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
    ids = enc["input_ids"]
    if is_small100(tokenizer):
        ids = ids[:, 1:]
    return ids
