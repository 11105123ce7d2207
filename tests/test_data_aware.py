"""Wanda and SparseGPT on single matrices: the formula by hand, SparseGPT against a slow explicit reference and
against magnitude pruning on the reconstruction error, exact counts, N:M patterns."""

import torch

from forgetbench.compress.data_aware import count, reference_sparsegpt, sparsegpt, wanda_mask


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
