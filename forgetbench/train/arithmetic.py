"""Where and in what arithmetic ``train-mt`` trains: the device and the autocast dtype, chosen from the hardware.

Rules (``choose``):

1. ``train.device``: ``auto`` (CUDA when torch sees a GPU, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``. A run
   may resume on another device (the device is not in the checkpoint fingerprint: a CPU run can be continued on
   a lent GPU); each segment's device is logged and recorded.
2. ``train.bf16``: ``auto`` (the default), ``true`` or ``false``. ``auto`` autocasts to bfloat16 on CUDA and on a
   CPU with AMX (``amx_bf16`` in its flags), and trains in float32 elsewhere: without AMX, bfloat16 matmuls
   run emulated and a training step is *slower* than float32 — on an AVX2-only AMD EPYC a step of the
   20 M-parameter teacher shape under CPU autocast took over 10× the float32 step (docs/BENCHMARKS.md). Measured
   on an AMX Xeon (``benchmarks/train_step.py``, 1 thread): 1.4–1.6× (8 M parameters) and 1.6–1.9× (36 M) faster
   than float32. ``distill`` follows the same rule (its ``train.bf16``).
3. The weights and the optimiser stay float32 either way (autocast computes the matmuls in bfloat16); the
   choice and its reason go to the log and to ``training.json`` (``arithmetic``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from forgetbench.errors import ForgetbenchError


def valid_bf16(value) -> bool:
    return isinstance(value, bool) or value == "auto"


@dataclass(frozen=True)
class Arithmetic:
    device: str  # cpu | cuda | cuda:N
    bf16: bool
    reason: str

    @property
    def device_type(self) -> str:
        return "cuda" if self.device.startswith("cuda") else "cpu"

    def autocast(self):
        return torch.autocast(self.device_type, dtype=torch.bfloat16, enabled=self.bf16)

    @property
    def autocast_name(self) -> str:
        return "bfloat16" if self.bf16 else "none (float32)"

    def describe(self) -> str:
        """The run log's line: device, autocast and why."""
        return f"{self.device}, {self.autocast_name} ({self.reason})"

    def record(self) -> dict:
        return {"device": self.device, "autocast": self.autocast_name, "why": self.reason}


def cpu_has_amx() -> bool:
    from forgetbench.env import cpu

    return "amx_bf16" in cpu()["flags"]


def choose(device: str, bf16, where: str = "train") -> Arithmetic:
    """The device and autocast of a training run (module rules 1–2); one line for a value that cannot be used."""
    if not valid_bf16(bf16):
        raise ForgetbenchError(f"{where}.bf16: {bf16!r}; choose auto, true or false")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device != "cpu" and not (device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        raise ForgetbenchError(f"{where}.device: {device!r}; choose auto, cpu, cuda or cuda:N")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ForgetbenchError(f"{where}.device: {device} but torch sees no CUDA GPU here; use device: auto or cpu")
    if bf16 == "auto":
        if device.startswith("cuda"):
            return Arithmetic(device, True, "auto: bfloat16 autocast on CUDA")
        if cpu_has_amx():
            return Arithmetic(device, True, "auto: bfloat16 autocast on a CPU with AMX")
        return Arithmetic(device, False, "auto: float32 on a CPU without AMX (bfloat16 runs emulated, slower)")
    return Arithmetic(device, bool(bf16), f"bf16: {str(bf16).lower()} in the config")
