"""bitsandbytes quantisation as a recipe step: LLM.int8 (Dettmers et al., 2022) and NF4 (Dettmers et al., 2023).

    name: llm-int8
    steps:
      - bitsandbytes: {method: llm.int8, threshold: 6.0}     # or {method: nf4, compute_dtype: bfloat16}

Rules:

1. bitsandbytes quantises while the model is *loaded* (``BitsAndBytesConfig`` given to ``from_pretrained``),
   on a CUDA GPU: the step is the recipe's last, after any prune steps (whose output folder is what is
   loaded), and never beside a fake-quantisation ``quantize`` step (two quantisations of one weight).
2. ``check_available`` refuses it, before any work, where CUDA or the ``bitsandbytes`` package is missing, or the
   installed bitsandbytes is older than the installed transformers requires (``bnb_floor``, named in the line);
   ``forgetbench compress`` refuses it too (nothing to write: the quantised weights exist in GPU memory only),
   so it runs as a sweep variant, reported like every other (size in memory, speed, every fairness table).
3. Nominal size: LLM.int8 stores weights in 8 bits (0.25 of fp32), NF4 in 4 bits (0.125); the measured size
   is the loaded model's ``get_memory_footprint()``.
4. Every quantised weight stays on a GPU: a placement that puts modules on the CPU or disk — a device-map plan
   naming ``cpu``/``disk``, ``max_memory`` with ``cpu``/``disk`` budgets, an ``offload_folder`` — is refused
   before any work (``check_placement``); a named map (``auto``) that spills at load is refused there in one
   line (``models.load``), not later.
5. Arithmetic (``arithmetic``, in the run record): LLM.int8 multiplies int8 weights by activations quantised to
   int8 from float16, its outlier columns in float16 (bitsandbytes casts the inputs to float16); NF4 dequantises
   its weights to ``compute_dtype`` and multiplies there; the modules left unquantised (embeddings, layer norms,
   the output projection) compute in the placement's dtype.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from forgetbench.errors import ForgetbenchError

METHODS = {"llm.int8": 0.25, "nf4": 0.125}  # nominal size relative to fp32 (rule 3)
KEYS = {"method", "threshold", "compute_dtype"}


@dataclass(frozen=True)
class BnbConfig:
    method: str = "llm.int8"
    threshold: float = 6.0  # LLM.int8's outlier threshold (llm_int8_threshold)
    compute_dtype: str = "bfloat16"  # NF4's matmul dtype (bnb_4bit_compute_dtype)

    def __post_init__(self):
        if self.method not in METHODS:
            raise ForgetbenchError(f"bitsandbytes method {self.method!r}; choose {' or '.join(METHODS)}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) or self.threshold <= 0:
            raise ForgetbenchError(f"bitsandbytes threshold must be a number > 0, got {self.threshold!r}")
        if self.compute_dtype not in ("bfloat16", "float16", "float32"):
            raise ForgetbenchError(f"bitsandbytes compute_dtype {self.compute_dtype!r}; choose bfloat16, float16 or "
                                   "float32")

    @property
    def nominal_ratio(self) -> float:
        return METHODS[self.method]

    def to_dict(self) -> dict:
        return {"method": self.method, "threshold": self.threshold, "compute_dtype": self.compute_dtype}


def check_available(where: str, cuda: bool | None = None) -> None:
    """Rule 2: CUDA and the bitsandbytes package, or one line."""
    import torch

    if not (torch.cuda.is_available() if cuda is None else cuda):
        raise ForgetbenchError(f"{where}: bitsandbytes (LLM.int8 / NF4) runs on a CUDA GPU and torch sees none here; "
                               "use the fake-quant ptq-int8 recipe on CPU, or run on a GPU machine")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ForgetbenchError(f"{where}: the bitsandbytes package is not installed; pip install -e \".[gpu]\" "
                               f"(bitsandbytes>={bnb_floor()})")
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import Version

    try:
        have = version("bitsandbytes")
    except PackageNotFoundError:
        have = "unknown"
    if have == "unknown" or Version(have) < Version(bnb_floor()):
        raise ForgetbenchError(f"{where}: bitsandbytes {have} is installed and the installed transformers needs "
                               f">= {bnb_floor()}; pip install -U \"bitsandbytes>={bnb_floor()}\"")


def check_placement(where: str, placement) -> None:
    """Rule 4: one line where the placement (``models.hardware.Placement``) would put weights off the GPUs."""
    hw = placement.hardware
    off = sorted({str(d) for d in (hw.plan or {}).values() if d in ("cpu", "disk")})
    off += sorted(k for k in (hw.max_memory or {}) if k in ("cpu", "disk") and k not in off)
    if placement.device == "cpu" or off or hw.offload_folder:
        what = ("device: cpu" if placement.device == "cpu" else f"its device map offloads to {' and '.join(off)}"
                if off else f"offload_folder {hw.offload_folder} lets its device map offload to disk")
        raise ForgetbenchError(f"{where}: bitsandbytes keeps every quantised weight on a GPU, and this placement "
                               f"({what}) does not; give the GPUs room for the model (hardware.max_memory with GPU "
                               "budgets only, no offload_folder) or run the variant on a larger GPU")


def arithmetic(cfg: BnbConfig, dtype: str) -> dict:
    """Rule 5: what a bitsandbytes variant stores and computes in; ``dtype``: the placement's (unquantised
    modules)."""
    if cfg.method == "llm.int8":
        return {"weights": "int8", "compute_dtype": "float16", "note": "int8 matmul of activations quantised from "
                "float16; outlier columns in float16", "unquantised_modules": dtype}
    return {"weights": "nf4", "compute_dtype": cfg.compute_dtype, "note": f"weights dequantised to "
            f"{cfg.compute_dtype} per matmul", "unquantised_modules": dtype}


def bnb_floor() -> str:
    """The bitsandbytes version the installed transformers requires (its own constant; 0.46.1 in 5.x)."""
    try:
        from transformers.utils.import_utils import BITSANDBYTES_MIN_VERSION
    except ImportError:
        return "0.46.1"
    return str(BITSANDBYTES_MIN_VERSION)


def quantization_config(cfg: BnbConfig):
    """The ``BitsAndBytesConfig`` that ``from_pretrained`` applies (rule 1)."""
    import torch
    from transformers import BitsAndBytesConfig

    if cfg.method == "llm.int8":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_threshold=float(cfg.threshold))
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_compute_dtype=getattr(torch, cfg.compute_dtype))
