"""Evaluation: benchmarks, translation runs, per-sentence metrics and analyses."""
