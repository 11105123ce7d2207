"""Before any work: will the sweep's outputs fit on the disk of ``--out``, and its models in memory?

Rules (``check_resources``; numbers from ``forgetbench.resources``):

1. Disk: the plan is every compressed variant not yet written (``variants/<name>``, one per target language for
   a routed variant) plus the store and the report. A variant whose recipe only prunes (magnitude, Wanda) is
   stored in its source's dtype (``compress.pipeline.keep_source_dtype``): dense + sparse ≤ 2 × the source's
   bytes; any other is stored in float32 with its int8 or sparse artefact: 1.5 × the float32 bytes. The store:
   2 KiB per translated sentence and series; the report: 16 MiB. More than the free space → refused with the
   numbers; within 10 % of it → a warning (the estimate is an estimate).
2. Memory: a model loaded in float32 on the CPU without a device map needs its parameters × 4 bytes, × 1.5
   while loading and compressing (the state dict beside the model), per worker process; more than the system's
   available memory → refused, naming the way out (processes: 1, a device map with disk offload,
   compress-stream). The parameters are counted on the meta device (``models.device_map``), as plan-devices does.
3. Address space (``check_address_space``, before rule 1 and before the run folder is made): under an
   address-space limit (``ulimit -v``; ``resources`` rule 5), a CPU sweep process needs
   ``resources.SWEEP_ADDRESS_SPACE`` for its own mappings plus its model as rule 2 counts it plus the checkpoint's bytes (mapped while loading);
   less → refused with the limit, the need and the fix. A GPU run is left to CUDA, whose context alone maps more
   than such limits allow.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.resources import SWEEP_ADDRESS_SPACE, available_memory, check_address_space, free_disk, size

STORE_BYTES_PER_ROW = 2048
REPORT_BYTES = 16 * 2**20
LOAD_FACTOR = 1.5


@functools.cache
def source_size(model_dir: Path) -> tuple[int, int]:
    """(the checkpoint's bytes, its parameters) — the parameters from the config on the meta device; once per
    folder and process."""
    from forgetbench.compress.pipeline import source_bytes
    from forgetbench.models.device_map import empty_model, load_config

    return source_bytes(model_dir), sum(p.numel() for p in empty_model(load_config(str(model_dir))).parameters())


def disk_plan(cfg, run_dir: Path) -> int:
    """Rule 1's bytes still to be written for ``cfg`` in ``run_dir``."""
    need = REPORT_BYTES
    for v, recipe in cfg.variants.items():
        if recipe is None or recipe.load_quantisation is not None:
            continue
        members = cfg.routed(v) or [None]
        todo = [m for m in members if not (run_dir / "variants" / v / (m or "")).is_dir()]
        if not todo:
            continue
        src_bytes, params = source_size(cfg.model_of(v))
        prune_only = all(s.kind == "prune" and getattr(s.config, "method", "magnitude") in ("magnitude", "wanda")
                         for s in recipe.steps)
        need += len(todo) * int(2 * src_bytes if prune_only else LOAD_FACTOR * 4 * params)
    sentences = sum(len(j.lines()[0]) for j in cfg.jobs)
    series = sum(len(cfg.series(v)) for v in cfg.variants)
    return need + STORE_BYTES_PER_ROW * sentences * series


def check_address_space_of(cfg) -> None:
    """Rule 3: a CPU sweep's process against the address-space limit, before anything is written."""
    from forgetbench.models.hardware import place

    placement = place(cfg.hardware, f"{cfg.source}: hardware")
    if placement.device != "cpu" or placement.device_map is not None:
        return
    src_bytes, params = source_size(cfg.model)
    check_address_space(SWEEP_ADDRESS_SPACE + int(LOAD_FACTOR * 4 * params) + src_bytes,
                        f"a sweep process with {cfg.model} ({params / 1e6:.1f} M parameters)")


def check_resources(cfg, run_dir: Path, processes: int) -> None:
    """Rules 1–2 before any work: one line with the numbers when it cannot fit."""
    need, free = disk_plan(cfg, run_dir), free_disk(run_dir)
    if free is not None and need > free:
        raise ForgetbenchError(f"{run_dir}: the sweep still has about {size(need)} to write (variants, store, report) "
                               f"and its filesystem has {size(free)} free; free space or choose an --out on another "
                               "disk")
    if free is not None and need > 0.9 * free:
        print(f"forgetbench: warning: {run_dir}: the sweep's outputs (about {size(need)}) nearly fill its filesystem "
              f"({size(free)} free); the estimate may be short", file=sys.stderr)
    from forgetbench.models.hardware import place

    placement = place(cfg.hardware, f"{cfg.source}: hardware")
    if placement.device != "cpu" or placement.device_map is not None:
        return  # GPUs and device maps: plan-devices and the map's own max_memory decide
    _, params = source_size(cfg.model)
    per_process = int(LOAD_FACTOR * 4 * params)
    avail = available_memory()
    if avail is not None and per_process * processes > avail:
        raise ForgetbenchError(f"{cfg.source}: {processes} process(es) each loading {cfg.model} in float32 need about "
                               f"{size(per_process * processes)} of memory and {size(avail)} is available; use "
                               "processes: 1, a device map with disk offload (hardware.device_map, offload_folder), "
                               "or compress-stream for compression")
