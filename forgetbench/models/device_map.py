"""Device planning on the meta device: which layers go on which GPU, before anything is loaded.

    forgetbench plan-devices m2m100_12B --gpus 4 --gpu-memory 40GiB --dtype bf16

The model is built with ``init_empty_weights``; ``tie_weights()`` is called *before*
``infer_auto_device_map`` (else ``init_empty_weights`` leaves M2M-100's embeddings untied and the
tied matrices land on different GPUs); memory is balanced across GPUs (``get_balanced_memory``);
encoder/decoder layers are never split (``_no_split_modules``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.models.load import DTYPES

KNOWN = Path(__file__).parent / "known_configs"


def known_configs() -> list[str]:
    return sorted(p.stem for p in KNOWN.glob("*.json"))


def load_config(model_or_known: str):
    from transformers import AutoConfig, M2M100Config

    p = Path(model_or_known)
    if (KNOWN / f"{model_or_known}.json").is_file():
        d = json.loads((KNOWN / f"{model_or_known}.json").read_text())
        d.pop("model_type", None)
        d.pop("architectures", None)
        return M2M100Config(**d)
    if p.is_dir() and (p / "config.json").is_file():
        return AutoConfig.from_pretrained(str(p))
    raise ForgetbenchError(f"{model_or_known}: neither a model folder nor a known config ({', '.join(known_configs())})")


def empty_model(config, attn_implementation: str | None = None, dtype=None):
    """The model of ``config`` on the meta device (buffers real), tied; ``attn_implementation`` and ``dtype`` as when
    loading (a config's own ``dtype`` otherwise: the buffers, such as sinusoidal positions, are made in it)."""
    from accelerate import init_empty_weights
    from transformers import AutoModelForSeq2SeqLM

    kw = {"attn_implementation": attn_implementation} if attn_implementation else {}
    kw |= {"dtype": dtype} if dtype is not None else {}
    with init_empty_weights():
        model = AutoModelForSeq2SeqLM.from_config(config, **kw)
    model.tie_weights()
    return model


def parse_size(s: str) -> int:
    m = re.fullmatch(r"\s*([\d.]+)\s*(GiB|MiB|GB|MB|KiB|KB|B)?\s*", str(s))
    if not m:
        raise ForgetbenchError(f"memory size {s!r}: use e.g. 40GiB or 80GB")
    mult = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "GB": 10**9, "MB": 10**6, "KB": 10**3, "B": 1, None: 1}[m.group(2)]
    try:
        n = int(float(m.group(1)) * mult)
    except ValueError:
        raise ForgetbenchError(f"memory size {s!r}: use e.g. 40GiB or 80GB") from None
    if n <= 0:
        raise ForgetbenchError(f"memory size {s!r} must be more than zero")
    return n


def plan(model_or_known: str, gpus: int, gpu_memory: str, dtype: str = "bf16", cpu_memory: str | None = None) -> dict:
    from accelerate.utils import get_balanced_memory, infer_auto_device_map

    if gpus < 1:
        raise ForgetbenchError("--gpus must be >= 1")
    if dtype not in DTYPES:
        raise ForgetbenchError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    torch_dtype = DTYPES[dtype]
    config = load_config(model_or_known)
    model = empty_model(config)
    n_params = sum(p.numel() for p in model.parameters())  # tied storage counted once
    max_memory = {i: parse_size(gpu_memory) for i in range(gpus)}
    if cpu_memory:
        max_memory["cpu"] = parse_size(cpu_memory)
    no_split = list(getattr(model, "_no_split_modules", []) or [])
    import logging

    quiet = logging.getLogger("accelerate.utils.modeling")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # "Device 0 is not available": planning for GPUs this machine does not have
    try:
        if gpus > 1:
            max_memory = get_balanced_memory(model, max_memory=max_memory, no_split_module_classes=no_split,
                                             dtype=torch_dtype)
        dmap = infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=no_split, dtype=torch_dtype)
    finally:
        quiet.setLevel(level)
    tied = ["model.shared", "model.encoder.embed_tokens", "model.decoder.embed_tokens", "lm_head"]

    def device_of(name: str):
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            prefix = ".".join(parts[:k])
            if prefix in dmap:
                return dmap[prefix]
        return dmap.get("", None)

    bytes_per = torch.tensor([], dtype=torch_dtype).element_size()
    per_device: dict[str, int] = {}
    for name, p in model.named_parameters():
        d = str(device_of(name))
        per_device[d] = per_device.get(d, 0) + p.numel() * bytes_per
    off = {str(d) for d in dmap.values()} - {str(i) for i in range(gpus)} - ({"cpu"} if cpu_memory else set())
    if off:
        need = n_params * bytes_per / 2**30
        have = gpus * parse_size(gpu_memory) / 2**30 + (parse_size(cpu_memory) / 2**30 if cpu_memory else 0)
        raise ForgetbenchError(f"{model_or_known} in {dtype} does not fit: the plan puts modules on {sorted(off)} "
                               f"({need:.1f} GiB of weights, {have:.1f} GiB given); give more --gpus, more "
                               "--gpu-memory or --cpu-memory")
    return {"model": model_or_known, "parameters": n_params, "dtype": dtype, "gpus": gpus, "gpu_memory": gpu_memory,
            "device_map": {k: (v if isinstance(v, (int, str)) else str(v)) for k, v in dmap.items()},
            "tied_devices": {t: device_of(f"{t}.weight") for t in tied},
            "bytes_per_device": per_device}
