"""The environment record written beside every timing and artefact: torch and Python versions,
torch threads, the 1-minute load average, the CPU model, its core count and the instruction-set
flags that decide int8 speed (AVX-512, VNNI, AMX)."""

from __future__ import annotations

import functools
import os
import platform

CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16")


@functools.cache
def cpu() -> dict:
    """``lscpu``'s model name and the flags of ``CPU_FLAGS`` this CPU has (from /proc/cpuinfo on Linux)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model in ("", platform.machine(), platform.processor()):
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count(), "flags": [f for f in CPU_FLAGS if f in flags]}


def environment() -> dict:
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return {"torch": torch.__version__, "python": platform.python_version(), "threads": torch.get_num_threads(),
            "loadavg": os.getloadavg()[0], "cpu": cpu()} | ({"gpus": gpus} if gpus else {})
