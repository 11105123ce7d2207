"""Cross-attention "relative alignment" variance for λ (docs/METHOD.md §2); ``eval.alignment`` aligns words with the same attention.

α = cross-attention averaged over all layers and heads, teacher-forced on the model's own output;
rows i over target positions, columns j over source positions (each row sums to 1):

    μ_i = Σ_j j·α_ij ;  var = 1/(|I||J|) Σ_i Σ_j α_ij (μ_i − j)² ;  λ = var_comp / var_base

**Decision:** λ is reported as the ratio of subset means, plus the per-sentence distribution.
Padding rows and columns are excluded. Needs eager attention (HF returns no cross-attentions
under SDPA).
"""

from __future__ import annotations

import torch

from forgetbench.models.generation import encode_sources, target_ids
from forgetbench.models.hardware import input_device


def alignment_variance(alpha: torch.Tensor) -> float:
    """var of one sentence's cross-attention ``alpha`` [|I|, |J|] (rows sum to 1)."""
    alpha = alpha.double()
    n_tgt, n_src = alpha.shape
    j = torch.arange(n_src, dtype=torch.float64)
    mu = (alpha * j).sum(-1, keepdim=True)
    return float((alpha * (mu - j) ** 2).sum() / (n_tgt * n_src))


@torch.inference_mode()
def cross_attention(model, tokenizer, srcs: list[str], hyps: list[str], src_lang: str, tgt_lang: str,
                    max_length: int = 256, states: list | None = None,
                    layers: str | list[int] = "all") -> list[tuple[torch.Tensor, list[int], list[int]]]:
    """Per sentence: α [target tokens, source tokens] (padding removed, rows renormalised), source ids, label ids.
    ``states``: per sentence the encoder's states of its source tokens, as the translation computed them
    (``generation.translate_rows(states=...)``): the encoder is not run again. A row's states do not depend on the
    rows encoded beside it (padding is masked; tested bit for bit), so λ is the same either way."""
    if not srcs:  # e.g. every hypothesis of a batch filtered out: nothing to teacher-force
        return []
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        model.set_attn_implementation("eager")
    enc = encode_sources(tokenizer, srcs, src_lang, tgt_lang, max_length)
    labels = target_ids(tokenizer, hyps, tgt_lang, max_length)
    pad = tokenizer.pad_token_id
    dec_in = torch.full_like(labels, pad)
    dec_in[:, 0] = model.config.decoder_start_token_id
    dec_in[:, 1:] = labels[:, :-1]
    dec_mask = (labels != pad).long()
    lengths = enc["attention_mask"].sum(1).tolist()
    given = {}
    if states is not None and all(x is not None and x.shape[0] == n for x, n in zip(states, lengths, strict=True)):
        hidden = states[0].new_zeros(len(srcs), enc["input_ids"].shape[1], states[0].shape[-1])
        for b, x in enumerate(states):
            hidden[b, enc["attention_mask"][b].bool().to(x.device)] = x
        given = {"encoder_outputs": (hidden,)}
    # the base model (no LM head): the vocabulary projection is most of the cost and is not needed here
    dev = input_device(model)
    out = getattr(model, "base_model", model)(input_ids=enc["input_ids"].to(dev),
                                               attention_mask=enc["attention_mask"].to(dev),
                                               decoder_input_ids=dec_in.to(dev), decoder_attention_mask=dec_mask.to(dev),
                                               output_attentions=True, use_cache=False, **given)
    chosen = select_layers(out.cross_attentions, layers)
    att = torch.stack([a.to("cpu", torch.float32) for a in chosen]).mean(dim=(0, 2))  # [B, T, S]
    res = []
    for b in range(att.shape[0]):
        n_tgt, n_src = int(dec_mask[b].sum()), int(enc["attention_mask"][b].sum())
        a = att[b, :n_tgt, :n_src]
        res.append((a / a.sum(-1, keepdim=True), enc["input_ids"][b, :n_src].tolist(), labels[b, :n_tgt].tolist()))
    return res


def select_layers(per_layer, layers: str | list[int] = "all"):
    """The decoder layers whose cross-attention is averaged: all (λ, the study's choice), the last, or given ones."""
    if layers == "all":
        return per_layer
    if layers == "last":
        return per_layer[-1:]
    return [per_layer[i] for i in layers]


def cross_attention_variance(model, tokenizer, srcs, hyps, src_lang, tgt_lang, max_length: int = 256,
                             states: list | None = None) -> list[float]:
    return [alignment_variance(a) for a, _, _ in cross_attention(model, tokenizer, srcs, hyps, src_lang, tgt_lang,
                                                                 max_length, states)]
