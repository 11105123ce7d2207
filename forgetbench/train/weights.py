"""A model's weights as safetensors stores them: every tied tensor once, contiguous, on the CPU (the checkpoints and
snapshots of ``train.loop``, ``train.early_stop`` and ``pretrain.run``, and the shipped encoders)."""

from __future__ import annotations

import torch


def unique_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict with every tied tensor once (its first name), as safetensors requires."""
    out, seen = {}, set()
    for k, v in model.state_dict().items():
        key = (v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape)) if v.numel() else None
        if key is not None and key in seen:
            continue
        seen.add(key)
        out[k] = v.detach().cpu().contiguous()  # a CUDA run's checkpoint is read back anywhere
    return out
