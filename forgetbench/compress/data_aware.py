"""Data-aware pruning of one weight matrix: Wanda (Sun et al., 2024) and SparseGPT (Frantar & Alistarh, 2023).

Both see a linear map y = W x (W: [rows, cols]) and calibration inputs X ([cols, samples], the inputs the layer
receives). They differ in what they keep:

- **Wanda**: score S_ij = |W_ij| · ‖X_j‖₂ (``wanda_mask``); in each output row the k = ⌊p·cols⌉ (round half up)
  lowest scores are pruned, ties broken by column (the paper's per-output comparison group); or, over a
  layer-wise group of matrices (``lowest_over``: a matrix, a unit, its attention or FFN part), the ⌊p·n⌉ lowest
  scores of the group. Weights are not changed otherwise.
- **SparseGPT** (``sparsegpt``): with H = 2 X Xᵀ + λI (λ = ``damp`` · mean diag H; dead inputs, diag 0, get
  H_jj = 1 and their weights zeroed), the columns are processed in blocks of ``block`` (128); in each block the
  mask keeps, per the paper, the weights of largest w²/[H⁻¹]²_jj — here exactly k = ⌊p·n⌉ of the block's n
  weights pruned (ties by position), so sparsity is exact per block; then column by column the pruned weights
  are zeroed and the error (w − q)/[H⁻¹]_jj is spread over the later columns through the Cholesky factor of
  H⁻¹ (the optimal-brain-surgeon update), within and after the block.
- **N:M** (``n_m``: (N, M), e.g. (2, 4)): instead of a fraction, N of every M consecutive input columns of a row
  are pruned (Wanda: lowest scores; SparseGPT: lowest w²/[H⁻¹]²_jj, chosen when the group's first column is
  reached). Stored as zeros: no sparse kernel here.

Arithmetic (both): on the weight's own device, in float32 — the statistics, the scores, SparseGPT's weight updates —
with the one step that needs more, SparseGPT's Cholesky factorisations and inverse of the damped Hessian, in
float64 and its factor then rounded to float32 (as the paper's reference code computes in float32 on the GPU).

``tests/test_data_aware.py`` holds the same algorithm written the slow, explicit way (the inverse Hessian of
the remaining columns recomputed after each elimination, one column at a time) and compares the two.
"""

from __future__ import annotations

import torch

from forgetbench.compress.prune import num_to_prune  # k = ⌊p·n⌉, round half up, as magnitude pruning counts


def _lowest(scores: torch.Tensor, k: int) -> torch.Tensor:
    """A mask of the k lowest entries of each row, ties to the lower index (a stable sort)."""
    mask = torch.zeros_like(scores, dtype=torch.bool)
    if k > 0:
        order = torch.sort(scores, dim=1, stable=True).indices[:, :k]
        mask.scatter_(1, order, True)
    return mask


def _n_of_m(scores: torch.Tensor, n: int, m: int) -> torch.Tensor:
    """N lowest of every M consecutive columns of each row (a trailing group shorter than M keeps its ⌊n·len/m⌉)."""
    mask = torch.zeros_like(scores, dtype=torch.bool)
    for c in range(0, scores.shape[1], m):
        block = scores[:, c : c + m]
        mask[:, c : c + m] = _lowest(block, n if block.shape[1] == m else num_to_prune(n / m, block.shape[1]))
    return mask


def wanda_scores(weight: torch.Tensor, input_norm: torch.Tensor) -> torch.Tensor:
    """S_ij = |W_ij|·‖X_j‖₂."""
    return weight.detach().float().abs() * input_norm.to(weight.device).float().reshape(1, -1)


def lowest_over(scores: list[torch.Tensor], k: int) -> list[torch.Tensor]:
    """A mask per tensor: the k lowest entries over all of them together (Wanda over a layer-wise group), ties by
    position (tensor order, then flat index: a stable sort)."""
    flat = torch.cat([s.reshape(-1) for s in scores])
    mask = torch.zeros(flat.numel(), dtype=torch.bool, device=flat.device)
    if k > 0:
        mask[torch.sort(flat, stable=True).indices[:k]] = True
    return [m.reshape(s.shape) for m, s in zip(mask.split([s.numel() for s in scores]), scores, strict=True)]


def wanda_mask(weight: torch.Tensor, input_norm: torch.Tensor, sparsity: float = 0.5,
               n_m: tuple[int, int] | None = None) -> torch.Tensor:
    """The weights Wanda prunes (True): per output row, the lowest |W_ij|·‖X_j‖₂."""
    scores = wanda_scores(weight, input_norm)
    if n_m is not None:
        return _n_of_m(scores, *n_m)
    return _lowest(scores, num_to_prune(sparsity, weight.shape[1]))


def hessian_inverse_factor(H: torch.Tensor, weight: torch.Tensor, damp: float) -> torch.Tensor:
    """The upper Cholesky factor of (H + λI)⁻¹ after dead inputs are fixed (their weight columns zeroed in place),
    computed in float64 on ``weight``'s device and returned in ``weight``'s dtype."""
    H = H.to(weight.device, torch.float64, copy=True)
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    weight[:, dead] = 0
    H += damp * torch.mean(torch.diag(H)) * torch.eye(H.shape[0], dtype=H.dtype, device=H.device)
    L = torch.linalg.cholesky(H)
    return torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True).to(weight.dtype)


@torch.no_grad()
def sparsegpt(weight: torch.Tensor, H: torch.Tensor, sparsity: float = 0.5, block: int = 128, damp: float = 0.01,
              n_m: tuple[int, int] | None = None, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """The pruned and updated weight and its mask (True = pruned), on ``weight``'s device; ``H``: Σ x xᵀ over the
    calibration inputs (moved to that device); ``dtype``: the updates' arithmetic (float64 for exactness studies
    and ``benchmarks/data_aware_kernels.py``)."""
    W = weight.detach().to(dtype, copy=True)
    rows, cols = W.shape
    Hinv = hessian_inverse_factor(H, W, damp)
    mask = torch.zeros_like(W, dtype=torch.bool)
    for i1 in range(0, cols, block):
        i2 = min(i1 + block, cols)
        W1, Hinv1 = W[:, i1:i2].clone(), Hinv[i1:i2, i1:i2]
        Q1, Err1 = torch.zeros_like(W1), torch.zeros_like(W1)
        d = torch.diag(Hinv1)
        if n_m is None:
            flat = (W1**2 / d.reshape(1, -1) ** 2).flatten()
            k = num_to_prune(sparsity, flat.numel())
            m1 = torch.zeros(flat.numel(), dtype=torch.bool, device=W.device)
            m1[torch.sort(flat, stable=True).indices[:k]] = True
            m1 = m1.reshape(W1.shape)
        else:
            m1 = torch.zeros_like(W1, dtype=torch.bool)
        for i in range(i2 - i1):
            if n_m is not None and i % n_m[1] == 0:
                scores = W1[:, i : i + n_m[1]] ** 2 / d[i : i + n_m[1]].reshape(1, -1) ** 2
                m1[:, i : i + n_m[1]] = _n_of_m(scores, *n_m)
            w = W1[:, i]
            q = w.clone()
            q[m1[:, i]] = 0
            Q1[:, i] = q
            err = (w - q) / Hinv1[i, i]
            W1[:, i:] -= err.unsqueeze(1) @ Hinv1[i, i:].unsqueeze(0)
            Err1[:, i] = err
        W[:, i1:i2], mask[:, i1:i2] = Q1, m1
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    return W.to(weight.dtype), mask
