"""``forgetbench.models.load``: model + tokenizer + signature from a local folder or a hub id.

    model, tok, sig = load("facebook/m2m100_418M", dtype="bf16", device_map="auto",
                           max_memory={0: "20GiB", "cpu": "30GiB"}, offload_folder="offload")

Hub ids work on a user's machine; here tests use local folders. ``attn_implementation`` defaults
to "eager" because cross-attentions (λ) and the attention quantisation sites need it.
8-bit loading goes through bitsandbytes (``BitsAndBytesConfig(load_in_8bit=True)``), GPU only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.io import sha256_file
from forgetbench.models.tokenizers import SMALL100_MARKER, load_tokenizer, tokenizer_for_folder

DTYPES = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16, "float16": torch.float16,
          "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class ModelSignature:
    name: str
    config_sha256: str
    weights_sha256: str | None  # None for hub ids whose files we did not read

    def __str__(self) -> str:
        w = self.weights_sha256[:16] if self.weights_sha256 else "unhashed"
        return f"model:{self.name}|config:{self.config_sha256[:16]}|weights:{w}"

    def to_dict(self) -> dict:
        return asdict(self)


def config_sha256(config) -> str:
    d = config.to_dict()
    for k in ("_name_or_path", "transformers_version", "_attn_implementation_autoset", "attn_implementation",
              "_attn_implementation", "torch_dtype", "dtype"):
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def weights_sha256(folder: Path) -> str | None:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + sha256_file(f).encode())
    return h.hexdigest()


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def check_finite(model, where) -> None:
    """Refuse weights with NaN or infinity (they break ranking by magnitude and every score), naming the tensor."""
    for name, p in model.named_parameters():
        if p.device.type != "meta" and p.is_floating_point() and not torch.isfinite(p).all():
            raise ForgetbenchError(f"{where}: weight {name} contains NaN or infinite values; the checkpoint is damaged")


def bnb_config(load_in_8bit: bool):
    if not load_in_8bit:
        return None
    if not torch.cuda.is_available():
        raise ForgetbenchError("8-bit loading (bitsandbytes LLM.int8) needs a CUDA GPU; none is visible. "
                               "Use the fake-quant ptq-int8 recipe on CPU instead")
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_8bit=True)


def is_small100(name_or_dir: str | Path, config) -> bool:
    """SMaLL-100 (the target code on the encoder side) by its name or its config's marker."""
    return "small100" in str(name_or_dir).lower() or bool(getattr(config, SMALL100_MARKER, False))


def load(name_or_dir: str | Path, dtype: str | torch.dtype | None = None, device_map=None, max_memory: dict | None = None,
         offload_folder: str | Path | None = None, load_in_8bit: bool = False, attn_implementation: str = "eager",
         small100: bool | None = None, with_signature: bool = True, quantization_config=None):
    """Returns ``(model, tokenizer, ModelSignature)``; the model is in eval mode, fp32 unless ``dtype`` says otherwise
    (the shipped teacher is fp16 on disk: compression and scoring run in fp32). A local folder without tokenizer
    files gives tokenizer None. ``with_signature=False`` skips hashing the weights (signature None)."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    p = Path(str(name_or_dir))
    local = p.is_dir()
    if not local and (p.exists() or str(name_or_dir).startswith((".", "/"))):
        raise ForgetbenchError(f"{name_or_dir}: not a model folder")
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ForgetbenchError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
        dtype = DTYPES[dtype]
    try:
        config = AutoConfig.from_pretrained(str(name_or_dir))
    except OSError as e:
        raise ForgetbenchError(f"{name_or_dir}: no model config ({str(e).splitlines()[0]}); offline, give a local folder") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ForgetbenchError(f"{name_or_dir}/config.json: not a usable model config ({_first_line(e)})") from None
    kw = {"attn_implementation": attn_implementation, "dtype": dtype if dtype is not None else torch.float32}
    if device_map is not None:
        kw["device_map"] = device_map
    if max_memory is not None:
        kw["max_memory"] = max_memory
    if offload_folder is not None:
        kw["offload_folder"] = str(offload_folder)
    q = quantization_config or bnb_config(load_in_8bit)
    if q is not None:
        kw["quantization_config"] = q
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(str(name_or_dir), **kw).eval()  # dispatch leaves train mode on
    except ForgetbenchError:
        raise
    except Exception as e:  # truncated or foreign weight files, shapes that do not match config.json, ...
        from forgetbench.resources import exhausted

        if exhausted(e) is not None:  # memory (or disk) ran out: the files are fine; said as such by the CLI
            raise
        if "ignore_mismatched_sizes" in str(e):  # transformers' own report of which tensor is silenced (cli)
            raise ForgetbenchError(f"{name_or_dir}: the weights' shapes do not match config.json (a tensor of another "
                                   "size, e.g. vocab_size or d_model changed); restore the config.json saved with "
                                   "these weights") from None
        if "dispatched on the CPU or the disk" in str(e):  # bitsandbytes with a map that spilled off the GPUs
            raise ForgetbenchError(f"{name_or_dir}: the device map for the bitsandbytes variant puts modules on the CPU "
                                   f"or disk (max_memory {max_memory}), and bitsandbytes keeps every quantised weight on "
                                   "a GPU; give the GPUs more room (hardware.max_memory) or use a larger GPU") from None
        if "offload_folder" in str(e):
            raise ForgetbenchError(f"{name_or_dir}: the device map puts weights on disk and no offload folder is given; "
                                   "set hardware.offload_folder (--offload-folder) or give more max_memory") from None
        raise ForgetbenchError(f"{name_or_dir}: the weights cannot be loaded ({type(e).__name__}: {_first_line(e)}); "
                               "check that the model files are complete and match config.json") from None
    check_finite(model, name_or_dir)
    placement = set((getattr(model, "hf_device_map", None) or {}).values())
    if placement == {"disk"}:
        raise ForgetbenchError(f"{name_or_dir}: max_memory {max_memory} leaves nothing in memory (every module offloaded "
                               "to disk cannot run); give the CPU or a GPU room for at least the embeddings")
    if small100 is None:
        small100 = is_small100(name_or_dir, config)
    tok = tokenizer_for_folder(p, small100=small100) if local else load_tokenizer(name_or_dir, small100=small100)
    if not with_signature:
        return model, tok, None
    sig = ModelSignature(str(name_or_dir), config_sha256(config), weights_sha256(p) if local else None)
    return model, tok, sig
