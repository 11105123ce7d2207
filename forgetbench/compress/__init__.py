"""Compression hooks shared by every model: layer-wise magnitude pruning and Wu et al. int8 PTQ.

    from forgetbench.compress import prune, PruneConfig, quantize, QuantConfig, apply_recipe
    report = prune(model, PruneConfig(sparsity=0.3, scope="layer"))
    state = quantize(model, QuantConfig(calibrator="mse"), calibrate=run_forwards)
    report, state = apply_recipe(model, load_recipe("ptq-int8"), calibrate=Seq2SeqCalibration(tokenizer))
"""

from forgetbench.compress.apply import Target, apply_recipe, check_recipe
from forgetbench.compress.prune import PruneConfig, PruneReport, prune
from forgetbench.compress.ptq import QuantConfig, QuantState, attach, quantize
from forgetbench.compress.units import resolve_units, seq2seq_unit_map

__all__ = ["PruneConfig", "PruneReport", "prune", "QuantConfig", "QuantState", "attach", "quantize",
           "resolve_units", "seq2seq_unit_map", "Target", "apply_recipe", "check_recipe"]
