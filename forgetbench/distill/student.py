"""Students built from any M2M100-architecture model (docs/METHOD.md §3).

The student keeps the initialising model's width, vocabulary and embeddings and takes a subset of its
layers: the first k (``copy: first``, as the SMaLL-100 study took the first 3 decoder layers of M2M-100
418M) or k evenly spaced ones including the first and the last (``copy: strided``, as Hugging Face's
seq2seq distiller's 12→3 = [0, 6, 11]). Format ``small100`` puts the target-language code on the
encoder side (the config is marked so ``models.load`` gives it the SMaLL-100 tokenizer and generation
forces no first token); ``m2m`` keeps M2M-100's forced target code.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.models.tokenizers import SMALL100_MARKER


def layer_indices(available: int, wanted: int, how: str) -> list[int]:
    """Which of ``available`` layers a ``wanted``-layer stack copies."""
    if wanted > available:
        raise ForgetbenchError(f"the student asks for {wanted} layers but the initialising model has {available}: "
                               "a student copies layers, it cannot invent them")
    if how == "first":
        return list(range(wanted))
    if wanted == 1:
        return [0]
    return [int(i) for i in np.linspace(0, available - 1, wanted).round()]


def build_student(init, encoder_layers: int, decoder_layers: int, copy_how: str = "first", fmt: str = "small100"):
    """A new model: ``init``'s embeddings, norms and the chosen layers (deep copies), in the student format."""
    from transformers import M2M100ForConditionalGeneration

    if not isinstance(init, M2M100ForConditionalGeneration):
        raise ForgetbenchError(f"student.init is a {type(init).__name__}; students are built from M2M100-architecture "
                               "models (M2M100ForConditionalGeneration)")
    enc_idx = layer_indices(init.config.encoder_layers, encoder_layers, copy_how)
    dec_idx = layer_indices(init.config.decoder_layers, decoder_layers, copy_how)
    conf = copy.deepcopy(init.config)
    conf.encoder_layers, conf.decoder_layers = encoder_layers, decoder_layers
    conf.forgetbench_student = {"encoder_from": enc_idx, "decoder_from": dec_idx, "format": fmt}
    if fmt == "small100":
        setattr(conf, SMALL100_MARKER, True)
    elif hasattr(conf, SMALL100_MARKER):
        delattr(conf, SMALL100_MARKER)
    student = M2M100ForConditionalGeneration(conf)
    state = init.state_dict()
    new = {}
    for name in student.state_dict():
        src = name
        for part, idx in (("encoder", enc_idx), ("decoder", dec_idx)):
            prefix = f"model.{part}.layers."
            if name.startswith(prefix):
                k, rest = name[len(prefix):].split(".", 1)
                src = f"{prefix}{idx[int(k)]}.{rest}"
        new[name] = state[src].detach().clone()
    student.load_state_dict(new, strict=True)
    student.tie_weights()
    gc = copy.deepcopy(init.generation_config)
    gc.decoder_start_token_id = init.config.decoder_start_token_id
    gc.forced_bos_token_id = None
    student.generation_config = gc
    return student


def parameter_count(model: torch.nn.Module) -> int:
    """Stored parameters (tied tensors counted once)."""
    seen, n = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            n += p.numel()
    return n
