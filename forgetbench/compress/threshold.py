"""Exact k-th smallest |w| over many tensors, in bounded memory.

``torch.quantile`` refuses tensors over 16 M elements and ``kthvalue`` on a 525 M-element
embedding needs ~8 GB; this radix select reads the float32 bit pattern of |w| (monotone for
non-negative floats) in two streaming passes of chunked ``bincount``: the top 17 bits, then the
low 15 bits inside the selected bucket. Exact for float32/float16/bfloat16 (converted losslessly).
Measured on this machine: 525 M elements in 6.5 s with +200 MiB, vs ``kthvalue`` 31 s, +8 GB.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch

CHUNK = 1 << 22
_LOW_BITS = 15


def _abs_bits(chunk: torch.Tensor) -> torch.Tensor:
    a = chunk.detach().reshape(-1).to(torch.float32).abs()
    if torch.isnan(a).any():
        raise ValueError("NaN in a weight tensor: cannot rank magnitudes")
    return a.view(torch.int32)


def iter_chunks(tensors: Iterable[torch.Tensor], chunk: int = CHUNK) -> Iterator[torch.Tensor]:
    for t in tensors:
        flat = t.detach().reshape(-1)
        for s in range(0, flat.numel(), chunk):
            yield flat[s : s + chunk]


def kth_smallest_abs(tensors: list[torch.Tensor], k: int, chunk: int = CHUNK) -> float:
    """The k-th smallest |x| (1-based) over all elements of ``tensors``, exactly."""
    return kth_smallest_abs_and_rank(tensors, k, chunk)[0]


def kth_smallest_abs_and_rank(tensors: list[torch.Tensor], k: int, chunk: int = CHUNK) -> tuple[float, int]:
    """``(t, n_less)``: the k-th smallest |x| and how many elements are strictly smaller (from the histograms)."""
    n = sum(t.numel() for t in tensors)
    if not 1 <= k <= n:
        raise ValueError(f"k={k} outside 1..{n}")
    hist = torch.zeros(1 << (32 - _LOW_BITS), dtype=torch.int64)
    for c in iter_chunks(tensors, chunk):
        hist += torch.bincount(_abs_bits(c) >> _LOW_BITS, minlength=hist.numel()).cpu()  # chunks on any device
    cum = hist.cumsum(0)
    hi = int(torch.searchsorted(cum, torch.tensor(k)))
    below = int(cum[hi - 1]) if hi > 0 else 0
    hist2 = torch.zeros(1 << _LOW_BITS, dtype=torch.int64)
    for c in iter_chunks(tensors, chunk):
        b = _abs_bits(c)
        hist2 += torch.bincount(b[(b >> _LOW_BITS) == hi] & ((1 << _LOW_BITS) - 1), minlength=hist2.numel()).cpu()
    cum2 = hist2.cumsum(0)
    lo = int(torch.searchsorted(cum2, torch.tensor(k - below)))
    n_less = below + (int(cum2[lo - 1]) if lo > 0 else 0)
    return float(torch.tensor([(hi << _LOW_BITS) | lo], dtype=torch.int32).view(torch.float32)[0]), n_less
