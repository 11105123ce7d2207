"""The histogram calibrators against independent transcriptions of the published algorithms.

Each reference below is written loop by loop from the published procedure, not from ``compress.calibrators``:
pytorch-quantization's ``_compute_amax_percentile`` and ``_compute_amax_mse`` (``calib/histogram.py``, the code
Wu et al.'s int8 PTQ was published with) and ``_compute_amax_entropy``, TensorRT's KL method ("8-bit Inference
with TensorRT", Migacz 2017): signed 8 bits, stride 1, start bin 128."""

import math
from collections import Counter

import numpy as np
import pytest
import torch

from forgetbench.compress.calibrators import HistogramCalibrator, entropy_amax, mse_amax, percentile_amax


def ref_percentile(hist, edges, percentile):
    total, running = sum(hist), 0.0
    for idx, count in enumerate(hist):
        running += count / total
        if running >= percentile / 100:
            return float(edges[idx])
    return float(edges[len(hist)])


def ref_mse(hist, edges, start_bin=128):
    centres = [(edges[k] + edges[k + 1]) / 2 for k in range(len(hist))]
    errors, arguments = [], []
    for i in range(start_bin, len(centres)):
        amax = centres[i]
        scale = 127 / amax
        err = 0.0
        for c, n in zip(centres, hist, strict=True):
            q = min(max(round(c * scale), -127), 127) / scale
            err += (q - c) ** 2 * n
        errors.append(err)
        arguments.append(i)
    return float(centres[arguments[int(np.argmin(errors))]])


def _kl(p, q):
    """scipy.stats.entropy(p, q): both normalised; inf where p > 0 and q = 0."""
    sp, sq = sum(p), sum(q)
    total = 0.0
    for a, b in zip(p, q, strict=True):
        if a > 0:
            if b == 0:
                return math.inf
            total += a / sp * math.log((a / sp) / (b / sq))
    return total


def ref_entropy(hist, edges, start_bin=128, nbins=128):
    bins = list(hist)
    bins[0] = bins[1]
    divergences, arguments = [], []
    for i in range(start_bin, len(bins) + 1):
        space = np.linspace(0, i, num=nbins + 1)
        digitized = list(np.digitize(range(i), space) - 1)
        for j in range(i):
            if bins[j] == 0:
                digitized[j] = -1
        density_counts = [0.0] * nbins
        for j, d in enumerate(digitized):
            if d != -1:
                density_counts[d] += bins[j]
        for key, val in Counter(digitized).items():
            if key != -1:
                density_counts[key] /= val
        candidate = [density_counts[d] if d != -1 else 0.0 for d in digitized]
        reference = bins[:i]
        reference[-1] += sum(bins[i:])
        divergences.append(_kl(reference, candidate))
        arguments.append(i)
    last_argmin = len(divergences) - 1 - int(np.argmin(divergences[::-1]))
    return float(edges[arguments[last_argmin]])


def _histogram(values: torch.Tensor, num_bins: int) -> tuple[np.ndarray, np.ndarray]:
    cal = HistogramCalibrator("mse", num_bins=num_bins)
    for chunk in values.split(max(1, len(values) // 4)):  # widening batches: the histogram grows
        cal.collect(chunk)
    return cal.hist.numpy().copy(), cal.edges.numpy().copy()


def _cases():
    g = torch.Generator().manual_seed(7)
    gauss = torch.randn(60_000, generator=g)
    student = torch.distributions.StudentT(3.0).sample((60_000,))
    relu = torch.relu(torch.randn(60_000, generator=g)) * 3
    outlier = torch.cat([torch.randn(60_000, generator=g), torch.tensor([25.0])])
    return {"gaussian": gauss, "student-t": student, "relu-zeros": relu, "far-outlier": outlier}


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_every_calibrator_equals_the_reference_algorithm(name):
    torch.manual_seed(0)
    hist, edges = _histogram(CASES[name], 320)
    for p in (99.0, 99.9, 99.99):
        assert percentile_amax(hist, edges, p) == pytest.approx(ref_percentile(hist, edges, p), rel=1e-6)
    assert mse_amax(hist, edges, 128) == pytest.approx(ref_mse(hist, edges, 128), rel=1e-6)
    assert entropy_amax(hist, edges, 128) == pytest.approx(ref_entropy(hist, edges, 128), rel=1e-6)


def test_percentile_is_the_lower_edge_and_mse_a_bin_centre():
    hist = np.array([0, 0, 0, 0, 10, 0, 0, 1], dtype=np.float64)
    edges = np.arange(9, dtype=np.float64)
    assert percentile_amax(hist, edges, 50) == 4.0  # the bin holding the 50th percentile starts at 4
    assert mse_amax(hist, edges, 2) in {(k + k + 1) / 2 for k in range(8)}


def test_entropy_on_a_gaussian_keeps_most_of_its_range():
    """The acceptance case: N(0, 1), 10^6 values, torch seed 0: the reference algorithm gives 4.51 of a
    maximum |x| of 4.76; the degenerate Q-from-clipped-P rule gave 0.30."""
    torch.manual_seed(0)
    x = torch.randn(1_000_000)
    cal = HistogramCalibrator("entropy")
    for chunk in x.split(131_072):
        cal.collect(chunk)
    top = float(x.abs().max())
    assert 0.8 * top <= cal.compute_amax() <= top
