"""Wanda and SparseGPT on single matrices: the formula by hand, SparseGPT against a slow explicit reference and
against magnitude pruning on the reconstruction error, exact counts, N:M patterns."""

import math

import torch

from forgetbench.compress.data_aware import sparsegpt, wanda_mask
from forgetbench.compress.prune import num_to_prune as count


@torch.no_grad()
def reference_sparsegpt(weight: torch.Tensor, H: torch.Tensor, sparsity: float = 0.5, block: int = 128,
                        damp: float = 0.01) -> torch.Tensor:
    """The same algorithm the slow way: for each column in order, the inverse Hessian of the columns not yet
    processed is recomputed explicitly; the block masks are chosen as ``sparsegpt`` chooses them (from the
    inverse Hessian of the columns remaining at the block's start)."""
    W = weight.detach().clone().double()
    cols = W.shape[1]
    Hd = H.clone().double()
    dead = torch.diag(Hd) == 0
    Hd[dead, dead] = 1
    W[:, dead] = 0
    Hd += damp * torch.mean(torch.diag(Hd)) * torch.eye(cols, dtype=Hd.dtype)
    mask = torch.zeros_like(W, dtype=torch.bool)
    for i1 in range(0, cols, block):
        i2 = min(i1 + block, cols)
        # the Cholesky factor of H⁻¹ at column j: sqrt of the first diagonal entry of the remaining columns' inverse
        d = torch.tensor([math.sqrt(torch.linalg.inv(Hd[j:, j:])[0, 0].item()) for j in range(i1, i2)], dtype=W.dtype)
        flat = (W[:, i1:i2] ** 2 / d.reshape(1, -1) ** 2).flatten()
        m1 = torch.zeros(flat.numel(), dtype=torch.bool)
        m1[torch.sort(flat, stable=True).indices[: count(sparsity, flat.numel())]] = True
        mask[:, i1:i2] = m1.reshape(-1, i2 - i1)
        for j in range(i1, i2):
            Hinv = torch.linalg.inv(Hd[j:, j:])  # explicit inverse over the columns j … end
            w = W[:, j].clone()
            q = torch.where(mask[:, j], torch.zeros_like(w), w)
            err = (w - q) / Hinv[0, 0]
            W[:, j:] -= err.unsqueeze(1) @ Hinv[0:1, :]  # the OBS update of every later column
            W[:, j] = q
    return W.to(weight.dtype)


def test_wanda_prunes_the_lowest_weight_times_input_norm_per_row():
    W = torch.tensor([[1.0, -2.0, 3.0, 0.5], [4.0, 1.0, -1.0, 2.0]])
    norms = torch.tensor([1.0, 0.5, 0.1, 4.0])
    # scores: row 0 = [1, 1, 0.3, 2] (a tie between columns 0 and 1: the lower index goes), row 1 = [4, 0.5, 0.1, 8]
    assert wanda_mask(W, norms, 0.5).tolist() == [[True, False, True, False], [False, True, True, False]]
    assert wanda_mask(W, norms, 0.25).tolist() == [[False, False, True, False], [False, False, True, False]]
    # N:M 1:2 — one of each pair of columns: row 0 pairs (1, 1) → 0, (0.3, 2) → 2
    assert wanda_mask(W, norms, n_m=(1, 2)).tolist() == [[True, False, True, False], [False, True, True, False]]


def _layer(rows=24, cols=48, samples=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    scales = torch.linspace(0.2, 3.0, cols)[torch.randperm(cols, generator=g)]  # uneven input scales, in any column
    X = torch.randn(cols, samples, generator=g) * scales.reshape(-1, 1)
    W = torch.randn(rows, cols, generator=g)
    return W, X, X @ X.T


def test_sparsegpt_equals_the_explicit_reference():
    W, X, H = _layer()
    fast, mask = sparsegpt(W, H, 0.5, block=16)
    slow = reference_sparsegpt(W, H, 0.5, block=16)
    assert torch.allclose(fast, slow, atol=1e-4) and (fast[mask] == 0).all()


def test_sparsegpt_reconstructs_the_layer_better_than_magnitude_and_counts_exactly():
    W, X, H = _layer(cols=160, seed=1)
    for p in (0.3, 0.5, 0.7):
        new, mask = sparsegpt(W, H, p)  # blocks of 128 columns: 128 and 32
        for c in range(0, W.shape[1], 128):  # exact per block
            assert int(mask[:, c : c + 128].sum()) == count(p, mask[:, c : c + 128].numel())
        k = count(p, W.numel())
        mag = W.clone().flatten()
        mag[torch.sort(W.abs().flatten(), stable=True).indices[:k]] = 0
        err = lambda V: float(torch.linalg.norm(W @ X - V @ X))  # noqa: E731
        assert err(new) < err(mag.reshape(W.shape)), (p, err(new), err(mag.reshape(W.shape)))
        wanda = W.masked_fill(wanda_mask(W, torch.linalg.norm(X, dim=1), p), 0)
        assert err(new) < err(wanda)  # the weight update: better than the best mask alone


def test_n_of_m_patterns_hold_in_every_group():
    W, X, H = _layer(seed=2)
    for mask in (sparsegpt(W, H, n_m=(2, 4), block=16)[1], wanda_mask(W, torch.linalg.norm(X, dim=1), n_m=(2, 4))):
        groups = mask.reshape(W.shape[0], -1, 4).sum(-1)
        assert (groups == 2).all()
