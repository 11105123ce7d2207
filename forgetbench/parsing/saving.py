"""Parsers and taggers saved like Hugging Face models: ``config.json`` (with ``model_type``) + ``model.safetensors``."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file, save_file
from torch import nn

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json


def save_module_dir(module: nn.Module, model_type: str, cfg: dict, out_dir: Path) -> None:
    """HF-style folder: ``config.json`` (with ``model_type``) + ``model.safetensors``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}, str(out_dir / "model.safetensors"))
    atomic_write_json(out_dir / "config.json", {"model_type": model_type, **cfg})


def load_module_dir(d: str | Path, model_type: str, build, what: str) -> nn.Module:
    """Inverse of ``save_module_dir``: ``build(config_dict)`` makes the module; the weights are loaded, eval mode."""
    d = Path(d)
    if not (d / "config.json").is_file():
        raise ForgetbenchError(f"{d}: not a {what} folder (no config.json)")
    cfg = json.loads((d / "config.json").read_text())
    if cfg.pop("model_type", None) != model_type:
        raise ForgetbenchError(f"{d}: config.json is not a forgetbench {what}")
    module = build(cfg)
    module.load_state_dict(load_file(str(d / "model.safetensors")))
    return module.eval()
