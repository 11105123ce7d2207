"""Dozat's regularisation (thesis §5.4 and §6.3): whole-word and whole-tag dropout, and the same dropout mask at
every time step (Gal & Ghahramani's variational dropout) on an LSTM's inputs and recurrent connections.

``word_tag_dropout``: per token, the word part (word ⊕ characters ⊕ an encoder's features) and the tag part (UPOS)
are dropped independently with probability p; when one is dropped the other is scaled by 2, when both are the
token's input is zeros (scale = 2 / number kept, §5.4). ``SharedDropout``: one mask per sequence and feature,
broadcast over time. ``VariationalLSTM``: an ``nn.LSTM`` (same parameters, names and compression units) whose
training forward, when ``recurrent_dropout`` > 0, runs the gates step by step with one input mask and one recurrent
mask per sequence, layer and direction; in evaluation (or without dropout) it is ``nn.LSTM``'s own forward, so a
trained parser parses, and is compressed, exactly as one with a plain LSTM.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence


def word_tag_dropout(h: torch.Tensor, tag: slice, p: float, training: bool = True) -> torch.Tensor:
    """``h`` [B, L, D] with the columns ``tag`` the UPOS embedding and the rest the word's; returns ``h`` with each
    token's word part and tag part dropped independently at rate ``p`` and rescaled by 2 / (parts kept)."""
    if not training or p <= 0:
        return h
    B, L, _ = h.shape
    keep_w = (torch.rand(B, L, 1, device=h.device) >= p).to(h.dtype)
    keep_t = (torch.rand(B, L, 1, device=h.device) >= p).to(h.dtype)
    scale = 2.0 / (keep_w + keep_t).clamp(min=1.0)
    col = torch.zeros(h.shape[-1], dtype=torch.bool, device=h.device)
    col[tag] = True
    return h * torch.where(col, keep_t * scale, keep_w * scale)


def shared_mask(batch: int, size: int, p: float, like: torch.Tensor) -> torch.Tensor:
    """One inverted-dropout mask per sequence, [batch, size]: 0 at rate ``p``, else 1 / (1 − p)."""
    return (torch.rand(batch, size, device=like.device) >= p).to(like.dtype) / (1.0 - p)


class SharedDropout(nn.Module):
    """Dropout whose mask, drawn per sequence and feature, is the same at every time step ([B, L, D] inputs)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p <= 0:
            return x
        return x * shared_mask(x.shape[0], x.shape[-1], self.p, x).unsqueeze(1)


def _reverse_within(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Each sequence of ``x`` [B, L, D] reversed within its length (the padding stays at the end)."""
    B, L = x.shape[:2]
    t = torch.arange(L, device=x.device).expand(B, L)
    n = lengths.to(x.device).unsqueeze(1)
    idx = torch.where(t < n, n - 1 - t, t)
    return x.gather(1, idx.unsqueeze(-1).expand_as(x))


class VariationalLSTM(nn.LSTM):
    """``nn.LSTM`` (batch-first, packed input) with same-mask input and recurrent dropout in training."""

    def __init__(self, *args, recurrent_dropout: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.recurrent_dropout = recurrent_dropout
        self.last_masks: list[dict] = []  # the masks of the last training forward, per layer and direction

    def forward(self, input, hx=None):
        if not (self.training and self.recurrent_dropout > 0) or hx is not None:
            return super().forward(input, hx)
        if not isinstance(input, PackedSequence) or not self.batch_first or self.proj_size:
            raise ValueError("VariationalLSTM's dropout path takes a batch-first PackedSequence without projections")
        x, lengths = pad_packed_sequence(input, batch_first=True)
        self.last_masks = []
        p_in = self.dropout  # between layers (and on the first layer's input): the same mask over time
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(["", "_reverse"][: 1 + self.bidirectional]):
                w_ih, w_hh, b_ih, b_hh = (getattr(self, f"{n}_l{layer}{suffix}")
                                          for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
                xin = x if d == 0 else _reverse_within(x, lengths)
                m_in = shared_mask(x.shape[0], x.shape[-1], p_in, x) if layer > 0 and p_in > 0 else None
                m_h = shared_mask(x.shape[0], self.hidden_size, self.recurrent_dropout, x)
                self.last_masks.append({"layer": layer, "direction": d, "input": m_in, "recurrent": m_h})
                if m_in is not None:
                    xin = xin * m_in.unsqueeze(1)
                out = self._run(xin @ w_ih.T + b_ih + b_hh, w_hh, m_h)
                outs.append(out if d == 0 else _reverse_within(out, lengths))
            x = torch.cat(outs, -1)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return packed, None  # final states are not computed on this path (the parsers read the outputs only)

    def _run(self, gates_x: torch.Tensor, w_hh: torch.Tensor, m_h: torch.Tensor) -> torch.Tensor:
        """The recurrence over ``gates_x`` [B, L, 4H] (the inputs' part of the gates), the recurrent mask ``m_h``
        [B, H] the same at every step; returns the hidden states [B, L, H]."""
        B, L, _ = gates_x.shape
        h = gates_x.new_zeros(B, self.hidden_size)
        c = gates_x.new_zeros(B, self.hidden_size)
        out = []
        for t in range(L):
            i, f, g, o = (gates_x[:, t] + (h * m_h) @ w_hh.T).chunk(4, -1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            out.append(h)
        return torch.stack(out, 1)
