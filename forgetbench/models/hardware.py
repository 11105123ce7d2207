"""Where a model runs: the ``hardware`` block of sweep and distill configs (and the CLI flags that override it).

    hardware:
      device: auto              # auto | cpu | cuda | cuda:N        (default cpu; auto: CUDA when present)
      dtype: bfloat16           # float32 | bfloat16 | float16      (default float32)
      device_map: auto          # auto | balanced | sequential | PLAN.json (``plan-devices --out``); default none
      max_memory: {0: 20GiB, cpu: 60GiB}   # per device, for the accelerate map
      offload_folder: offload   # where a map may put the modules that fit nowhere else ("disk")

Rules:

1. Syntax first (``parse_hardware``: keys, values, the plan file's form), then the machine (``place``):
   ``cuda`` without a CUDA GPU, ``cuda:N`` past the GPUs there are, a plan naming more GPUs than exist, a plan
   that puts the tied ``shared`` / ``embed_tokens`` / ``lm_head`` matrices on different devices, a map that
   may offload to disk without ``offload_folder`` — each refused in one line before any work.
2. The default (cpu, float32, no map) gives exactly the load of a config without the block: the same
   ``from_pretrained`` call, the same numbers.
3. Under a launcher with several processes on one machine (``accelerate launch --num_processes N``), the
   machine's GPUs are divided between them: process r of N on G GPUs uses GPUs ``r·G/N … (r+1)·G/N − 1`` —
   its own GPU (data parallel), or its own share of them for a device map (model parallel inside data
   parallel: 2 processes × 2 GPUs for 12B on 4 GPUs). A plan's GPU numbers are then read relative to the
   process's share. On several machines the same holds per machine (``LOCAL_RANK`` / ``LOCAL_WORLD_SIZE``, or
   SLURM's ``SLURM_LOCALID`` / ``SLURM_NTASKS_PER_NODE``); the sweep's store is then sharded per rank
   (``sweep.distributed``).
4. ``describe`` is the run record's account of where a series ran: devices used, dtype, GPU model and
   driver, torch and CUDA versions. ``numerics`` is the part that decides the numbers (device kind and GPU
   model, dtype): a run resumed with other numerics is refused, as a changed backend is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from forgetbench.configs import known_keys
from forgetbench.errors import ForgetbenchError
from forgetbench.models.load import DTYPES

DTYPE_NAMES = {k: str(v).removeprefix("torch.") for k, v in DTYPES.items()}  # fp32 / float32 -> "float32", …
MAP_NAMES = ("auto", "balanced", "sequential")
KEYS = ("device", "dtype", "device_map", "max_memory", "offload_folder")
TIED = ("model.shared", "model.encoder.embed_tokens", "model.decoder.embed_tokens", "lm_head")
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


@dataclass(frozen=True)
class Hardware:
    """The validated ``hardware`` block (syntax only; ``place`` checks it against the machine)."""

    device: str = "cpu"
    dtype: str = "float32"
    device_map: str | None = None  # a MAP_NAMES name or the path of a plan-devices JSON
    max_memory: dict = field(default_factory=dict)  # device ("cpu", "disk" or a GPU number) -> bytes
    offload_folder: str | None = None
    plan: dict | None = field(default=None, compare=False)  # the plan file's device_map, read once

    @property
    def is_default(self) -> bool:
        return (self.device, self.dtype, self.device_map, self.max_memory, self.offload_folder) == (
            "cpu", "float32", None, {}, None)


@dataclass(frozen=True)
class Placement:
    """A ``Hardware`` resolved on this machine for one process: what ``models.load.load`` is given."""

    hardware: Hardware
    device: str  # "cpu" or "cuda:N" (the process's first device)
    gpus: tuple[int, ...] = ()  # the GPUs this process may use
    device_map: object = None  # None, a name, or a module -> device dict
    max_memory: dict | None = None

    def load_kwargs(self) -> dict:
        """Keyword arguments of ``models.load.load`` (rule 2: the default adds only ``dtype: float32``)."""
        kw: dict = {"dtype": self.hardware.dtype}
        if self.device_map is not None:
            kw["device_map"] = self.device_map
        if self.max_memory:
            kw["max_memory"] = self.max_memory
        if self.hardware.offload_folder:
            kw["offload_folder"] = self.hardware.offload_folder
        return kw

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")


def parse_size(s) -> int:
    from forgetbench.models.device_map import parse_size as parse

    return s if isinstance(s, int) and not isinstance(s, bool) and s > 0 else parse(str(s))


def parse_hardware(spec, where: str, base_dir: Path | None = None) -> Hardware:
    """The block's syntax (rule 1, first half); relative paths resolve against ``base_dir``."""
    if spec is None:
        return Hardware()
    if not isinstance(spec, dict):
        raise ForgetbenchError(f"{where}: must be a mapping with keys {', '.join(KEYS)}; got {spec!r}")
    known_keys(spec, KEYS, where)
    return with_overrides(Hardware(), where, base_dir, **spec)


def _label(where: str | None, key: str) -> str:
    return f"--{key.replace('_', '-')}" if where is None else f"{where}.{key}"


def with_overrides(hw: Hardware, where: str | None, base_dir: Path | None = None, **values) -> Hardware:
    """``hw`` with the given settings checked and set; None values are left out. ``where``: the config block's
    name for errors; None: the settings are command-line flags (``--device`` …), paths relative to the current
    folder."""
    values = {k: v for k, v in values.items() if v is not None}
    device = str(values.get("device", hw.device))
    if not _DEVICE.fullmatch(device):
        raise ForgetbenchError(f"{_label(where, 'device')}: unknown device {device!r}; choose auto, cpu, cuda or cuda:N")
    dtype = DTYPE_NAMES.get(str(values.get("dtype", hw.dtype)))
    if dtype is None:
        raise ForgetbenchError(f"{_label(where, 'dtype')}: unknown dtype {values['dtype']!r}; choose float32, bfloat16 or float16")
    device_map, plan = hw.device_map, hw.plan
    if "device_map" in values:
        device_map, plan = str(values["device_map"]), None
        if device_map not in MAP_NAMES:
            p = Path(device_map)
            if not p.is_absolute() and base_dir is not None:
                p = (base_dir / p).resolve()
            if p.suffix != ".json":
                raise ForgetbenchError(f"{_label(where, 'device_map')}: {device_map!r} is neither {', '.join(MAP_NAMES)} nor a "
                                       "plan file (.json, from plan-devices --out)")
            device_map, plan = str(p), read_plan(p, f"{_label(where, 'device_map')}")
    max_memory = hw.max_memory
    if "max_memory" in values:
        mm = values["max_memory"]
        if not isinstance(mm, dict) or not mm:
            raise ForgetbenchError(f"{_label(where, 'max_memory')}: a mapping device -> size, e.g. {{0: 20GiB, cpu: 60GiB}}; "
                                   f"got {mm!r}")
        max_memory = {}
        for k, v in mm.items():
            key = int(k) if str(k).isdigit() else str(k)
            if not isinstance(key, int) and key not in ("cpu", "disk"):
                raise ForgetbenchError(f"{_label(where, 'max_memory')}: device {k!r}: use a GPU number, cpu or disk")
            max_memory[key] = parse_size(v)
    offload = values.get("offload_folder", hw.offload_folder)
    if offload is not None:
        p = Path(str(offload))
        offload = str(p if p.is_absolute() or base_dir is None else (base_dir / p).resolve())
    return replace(hw, device=device, dtype=dtype, device_map=device_map, plan=plan, max_memory=max_memory,
                   offload_folder=offload)


def read_plan(path: Path, where: str) -> dict:
    """The ``device_map`` of a ``plan-devices --out`` file: module -> GPU number, "cpu" or "disk"; the tied
    matrices on one device (rule 1)."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ForgetbenchError(f"{where}: plan file {path} not found (write one with plan-devices --out)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ForgetbenchError(f"{where}: {path} is not JSON ({e})") from None
    dmap = d.get("device_map") if isinstance(d, dict) else None
    if not isinstance(dmap, dict) or not dmap:
        raise ForgetbenchError(f"{where}: {path} has no device_map (write the plan with forgetbench plan-devices --out)")
    for m, dev in dmap.items():
        if not (isinstance(dev, int) and not isinstance(dev, bool) and dev >= 0) and dev not in ("cpu", "disk"):
            raise ForgetbenchError(f"{where}: {path}: module {m!r} is placed on {dev!r}; use a GPU number, cpu or disk")
    tied = {t: _device_of(dmap, f"{t}.weight") for t in TIED}
    if len({str(v) for v in tied.values() if v is not None}) > 1:
        raise ForgetbenchError(f"{where}: {path} puts the tied embedding/output matrices on different devices "
                               f"({', '.join(f'{k}: {v}' for k, v in tied.items())}); they share one tensor: place "
                               "them together (plan-devices keeps them together)")
    return dmap


def _device_of(dmap: dict, name: str):
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in dmap:
            return dmap[".".join(parts[:k])]
    return dmap.get("")


def cuda_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def process_share(count: int, rank: int = 0, local_world: int = 1) -> tuple[int, ...]:
    """Rule 3: the GPUs of local process ``rank`` of ``local_world`` on a machine with ``count`` GPUs."""
    if local_world <= 1:
        return tuple(range(count))
    if count < local_world:
        raise ForgetbenchError(f"{local_world} processes on this machine but {count} CUDA GPU(s): give each process "
                               "a GPU (accelerate launch --num_processes at most the GPU count) or use device: cpu")
    per = count // local_world
    return tuple(range(rank * per, (rank + 1) * per))


def place(hw: Hardware, where: str, rank: int = 0, local_world: int = 1, count: int | None = None) -> Placement:
    """Rule 1 against this machine (``count``: its CUDA GPUs, for tests), for local process ``rank``."""
    count = cuda_count() if count is None else count
    device = hw.device
    if device == "auto":
        device = "cuda" if count else "cpu"
    if device.startswith("cuda") and not count:
        raise ForgetbenchError(f"{_label(where, 'device')}: {hw.device} but torch sees no CUDA GPU here (torch {torch.__version__}, "
                               f"CUDA build {torch.version.cuda or 'none'}); use device: cpu or auto")
    if device == "cpu":
        gpus: tuple[int, ...] = ()
    elif ":" in device:  # GPU N of this process's share (the machine's GPUs when it runs alone)
        n, share = int(device.split(":")[1]), process_share(count, rank, local_world)
        if n >= len(share):
            raise ForgetbenchError(f"{_label(where, 'device')}: {device}, but "
                                   f"{'this process has' if local_world > 1 else 'this machine has'} {len(share)} CUDA "
                                   f"GPU(s) (0 … {len(share) - 1})")
        gpus = (share[n],)
    else:
        gpus = process_share(count, rank, local_world)
        if hw.device_map is None:
            gpus = gpus[:1]
    dmap, max_memory = hw.device_map, None
    if hw.plan is not None:
        named = sorted({d for d in hw.plan.values() if isinstance(d, int)})
        if named and (device == "cpu" or named[-1] >= len(gpus)):
            raise ForgetbenchError(f"{_label(where, 'device_map')}: {hw.device_map} places modules on GPU(s) {named}, but "
                                   f"{'this process has' if local_world > 1 else 'this machine has'} {len(gpus)} CUDA "
                                   "GPU(s); plan for the GPUs there are (plan-devices --gpus)")
        dmap = {m: (gpus[d] if isinstance(d, int) else d) for m, d in hw.plan.items()}
        offloads = "disk" in hw.plan.values()
    elif dmap is not None:
        bad = [g for g in hw.max_memory if isinstance(g, int) and g >= count]
        if bad:
            raise ForgetbenchError(f"{_label(where, 'max_memory')} names GPU(s) {bad}, but this machine has {count} CUDA GPU(s)")
        rest = {k: v for k, v in hw.max_memory.items() if isinstance(k, str)}
        from accelerate.utils import get_max_memory

        if gpus:  # the process's GPUs only (rule 3), the CPU as accelerate would count it
            max_memory = {g: hw.max_memory.get(g) or _free(g) for g in gpus} | {"cpu": get_max_memory()["cpu"]} | rest
        else:  # device: cpu: a named map spreads over the CPU (and disk) only, never over GPUs the machine has
            max_memory = {"cpu": get_max_memory()["cpu"]} | rest if count else (rest or None)
        offloads = "disk" in rest
    else:
        dmap = {"": gpus[0]} if gpus else None
        offloads = False
    if offloads and hw.offload_folder is None:
        raise ForgetbenchError(f"{where}: the device map puts modules on disk but no offload_folder is given; set "
                               "hardware.offload_folder (a folder for the offloaded weights) or give more max_memory")
    first = f"cuda:{gpus[0]}" if gpus else "cpu"
    return Placement(hw, first, gpus, dmap, max_memory)


def resolve_device(device: str) -> str:
    """A command's ``--device`` for one network on one device (cpu, cuda, cuda:N or auto) checked against this
    machine: ``cpu`` or ``cuda:N``, one line where it cannot be used (no GPU torch sees, a GPU past the machine's)."""
    return place(with_overrides(Hardware(), None, device=device), None).device


def activate(placement: Placement) -> None:
    """Make the process's first GPU its current CUDA device (``torch.cuda.set_device``), so that anything allocated
    on plain ``cuda`` lands on this process's share, not on GPU 0; nothing on the CPU."""
    if placement.gpus:
        torch.cuda.set_device(placement.gpus[0])


def _free(gpu: int) -> int:
    free, _ = torch.cuda.mem_get_info(gpu)
    return int(free * 0.9)


def input_device(model) -> torch.device:
    """Where a model's inputs go: the first GPU of its device map (accelerate's hooks move activations between
    devices), else its first parameter's device; never ``meta`` (offloaded weights are loaded by the hooks)."""
    dmap = getattr(model, "hf_device_map", None)
    if dmap:
        gpus = [d for d in dmap.values() if d not in ("cpu", "disk")]
        if gpus:
            return torch.device(f"cuda:{gpus[0]}" if isinstance(gpus[0], int) else gpus[0])
        return torch.device("cpu")
    return next(model.parameters()).device


def devices_of(model) -> list[str]:
    dmap = getattr(model, "hf_device_map", None)
    if dmap:
        return sorted({f"cuda:{d}" if isinstance(d, int) else str(d) for d in dmap.values()})
    return sorted({str(p.device) for p in model.parameters()})


def gpu_names(gpus) -> list[str]:
    return [torch.cuda.get_device_name(g) for g in gpus]


def driver_version() -> str | None:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def numerics(placement: Placement) -> dict:
    """Rule 4: what decides the numbers a series gets."""
    return {"device": "cuda" if placement.cuda else "cpu", "dtype": placement.hardware.dtype,
            "gpu": sorted(set(gpu_names(placement.gpus))) if placement.cuda else []}


def describe(placement: Placement, model=None) -> dict:
    """Rule 4: the run record's account of where a model ran."""
    hw = placement.hardware
    d = {"device": placement.device, "dtype": hw.dtype, "device_map": hw.device_map,
         "devices": devices_of(model) if model is not None else [placement.device],
         "torch": torch.__version__, "cuda": torch.version.cuda}
    if placement.cuda:
        d |= {"gpus": gpu_names(placement.gpus), "driver": driver_version()}
    return d
