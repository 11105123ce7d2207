"""Cross-attention "relative alignment" variance for λ (docs/METHOD.md §2); ``eval.alignment`` aligns words with the same attention.

α = cross-attention averaged over all layers and heads, teacher-forced on the model's own output;
rows i over target positions, columns j over source positions (each row sums to 1):

    μ_i = Σ_j j·α_ij ;  var = 1/(|I||J|) Σ_i Σ_j α_ij (μ_i − j)² ;  λ = var_comp / var_base

**Decision:** λ is reported as the ratio of subset means, plus the per-sentence distribution.
Each sentence is teacher-forced alone (no padding; the layout rule of ``cross_attention``). Needs eager
attention (HF returns no cross-attentions under SDPA).
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
    """Per sentence: α [target tokens, source tokens] (rows renormalised), source ids, label ids.

    **Layout rule** (docs/METHOD.md §2.9): each sentence is teacher-forced alone, a batch of one with no padding,
    so its α is a function of its source, its hypothesis and the model, never of the sentences passed beside it:
    the same bits in any batch, process, rank or resumed run. ``states``: per sentence the encoder's states of its
    source tokens as the translation kept them (``generation.translate_rows(states=...)``, which encodes each kept
    source alone, as here): the encoder is not run again; a missing or mismatched one is computed."""
    if not srcs:  # e.g. every hypothesis of a batch filtered out: nothing to teacher-force
        return []
    if getattr(model.config, "_attn_implementation", "eager") != "eager":
        model.set_attn_implementation("eager")
    given = [None] * len(srcs) if states is None else states
    # tokenised together (each text on its own: the ids of one call per text), run one by one
    source_ids = encode_sources(tokenizer, srcs, src_lang, tgt_lang, max_length, return_tensors=None,
                                padding=False)["input_ids"]
    padded = target_ids(tokenizer, hyps, tgt_lang, max_length)
    label_ids = [row[: int((row != tokenizer.pad_token_id).sum())] for row in padded]
    return [_alone(model, torch.tensor([s]), lab[None], x, layers)
            for s, lab, x in zip(source_ids, label_ids, given, strict=True)]


def _alone(model, ids: torch.Tensor, labels: torch.Tensor, state, layers):
    """One sentence's α, source ids and label ids, from a batch of one (nothing padded, nothing masked). A hypothesis
    with no label token (an empty one in the SMaLL-100 format) has no attention row: α [0, source tokens]."""
    if labels.shape[1] == 0:
        return torch.zeros(0, ids.shape[1]), ids[0].tolist(), []
    dec_in = torch.empty_like(labels)
    dec_in[:, 0] = model.config.decoder_start_token_id
    dec_in[:, 1:] = labels[:, :-1]
    dev = input_device(model)
    given = {}
    if state is not None and state.shape[0] == ids.shape[1]:
        given = {"encoder_outputs": (state[None],)}
    # the base model (no LM head): the vocabulary projection is most of the cost and is not needed here
    out = getattr(model, "base_model", model)(input_ids=ids.to(dev), attention_mask=torch.ones_like(ids).to(dev),
                                               decoder_input_ids=dec_in.to(dev),
                                               decoder_attention_mask=torch.ones_like(dec_in).to(dev),
                                               output_attentions=True, use_cache=False, **given)
    chosen = select_layers(out.cross_attentions, layers)
    a = torch.stack([x.to("cpu", torch.float32) for x in chosen]).mean(dim=(0, 2))[0]  # [T, S]
    return a / a.sum(-1, keepdim=True), ids[0].tolist(), labels[0].tolist()


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
