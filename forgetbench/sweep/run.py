"""Running a sweep: compress the variants, then every model pass (translation, cross-attention,
gender alignment) and every store pass (language identification, the second aligner), into the run store.

The run directory holds ``store.sqlite``, ``variants/<name>/`` (compressed models) and
``config.yaml``. A rerun resumes: variants already compressed are reused, rows and statistics
already stored are skipped. After ``run_sweep`` the store holds everything ``summarise`` reads.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import torch
import yaml

from forgetbench.compress.pipeline import compress_dir, load_compressed, load_model_dir
from forgetbench.eval import bias as biasmod
from forgetbench.eval.sentence_stats import lid_pass, xattn_pass
from forgetbench.eval.speed import batch1_speed
from forgetbench.eval.store import Store
from forgetbench.eval.translate import run_variant
from forgetbench.io import atomic_write_text
from forgetbench.models.load import weights_sha256
from forgetbench.sweep.config import SweepConfig
from forgetbench.sweep.summarise import summarise


def prepare_variants(cfg: SweepConfig, run_dir: Path, store: Store, progress: bool = True) -> None:
    vdir = run_dir / "variants"
    vdir.mkdir(parents=True, exist_ok=True)
    for name, recipe in cfg.variants.items():
        model = cfg.model_of(name)
        record_signals(store, name, model)
        if recipe is None:
            if name not in store.variants():
                store.add_variant(name, str(model), weights_sha256(model), {"recipe": None, "sizes": {
                    "dense_bytes": sum(f.stat().st_size for f in model.glob("*.safetensors")), "nominal_ratio": 1.0}})
            continue
        out = vdir / name
        if not (out / "compression.json").is_file():
            if out.exists():
                shutil.rmtree(out)
            compress_dir(model, recipe, out, progress=progress)
        if name not in store.variants():
            rep = json.loads((out / "compression.json").read_text())
            store.add_variant(name, str(out), weights_sha256(out), {"recipe": recipe.name, "sizes": rep["sizes"]})


def record_signals(store: Store, name: str, model: Path) -> None:
    """A distilled student's first and last probe (``signals.jsonl``, exported beside its weights: teacher–student KL
    and CE per pair group) into the store, so the report can set who forgets beside the distillation signal."""
    f = model / "signals.jsonl"
    if store.meta(f"signals:{name}") is not None or not f.is_file():
        return
    probes = [r for r in map(json.loads, f.read_text(encoding="utf-8").splitlines()) if r.get("split") == "probe"]
    if probes:
        store.set_meta(f"signals:{name}", {"first": probes[0], "last": probes[-1]})


def load_variant(cfg: SweepConfig, run_dir: Path, name: str):
    if cfg.variants[name] is None:
        return load_model_dir(cfg.model_of(name))
    model, tok, _ = load_compressed(run_dir / "variants" / name)
    return model, tok


def run_sweep(cfg: SweepConfig, run_dir: str | Path, progress: bool = True, rank: int = 0, world: int = 1,
              barrier=None) -> dict:
    """Compress, translate, run every pass and summarise; returns the summary (rank 0; {} elsewhere). The run
    record holds the wall time of each stage (rank 0's share where processes split the pairs)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    stages = dict.fromkeys(("compress", "translate", "cross_attention", "bias", "speed", "lid", "second_aligner", "summarise"), 0.0)
    if rank == 0:  # rank 0 creates the store (schema, WAL) before any other process opens it
        store = Store(run_dir / "store.sqlite")
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(cfg.raw, sort_keys=False, allow_unicode=True))
        prepare_variants(cfg, run_dir, store, progress)
        store.set_meta("config_source", str(cfg.source))
    stages["compress"] = time.perf_counter() - t0
    if barrier:
        barrier()
    if rank != 0:
        store = Store(run_dir / "store.sqlite")
    my_jobs = cfg.jobs[rank::world]
    timings = {}
    for name in cfg.variants:
        model, tok = load_variant(cfg, run_dir, name)
        t1 = time.perf_counter()
        n = run_variant(store, name, model, tok, my_jobs, cfg.generation["batch_size"], cfg.generation["num_beams"],
                        cfg.generation["max_new_tokens"], progress)
        t2 = time.perf_counter()
        if len(cfg.variants) > 1:  # λ compares a variant with the base; a base-only run (eval) needs no attention pass
            xattn_pass(store, name, model, tok, my_jobs, cfg.generation["batch_size"], progress)
        t3 = time.perf_counter()
        bias_jobs = biasmod.jobs(cfg.bias)[rank::world]
        if bias_jobs:
            run_variant(store, name, model, tok, bias_jobs, cfg.generation["batch_size"], cfg.generation["num_beams"],
                        cfg.generation["max_new_tokens"], progress)
            if cfg.bias.gender_jobs:
                biasmod.gender_pass(store, name, model, tok, cfg.bias, cfg.generation["batch_size"], progress)
        t4 = time.perf_counter()
        if rank == 0 and cfg.speed_sentences and store.meta(f"speed:{name}") is None:
            store.set_meta(f"speed:{name}", batch1_speed(model, tok, cfg.jobs[0], cfg.speed_sentences,
                                                          cfg.generation["max_new_tokens"]))
        stages["speed"] += time.perf_counter() - t4
        stages["translate"] += t2 - t1
        stages["cross_attention"] += t3 - t2
        stages["bias"] += t4 - t3
        timings[name] = {"translated": n, "translate_s": round(t2 - t1, 2), "xattn_s": round(t3 - t2, 2),
                         "bias_s": round(t4 - t3, 2)}
        del model
    if barrier:
        barrier()
    if rank != 0:
        store.close()
        return {}
    # passes over stored text (no model): language identity of every hypothesis and reference, fast_align
    t5 = time.perf_counter()
    lid_pass(store, list(cfg.variants), cfg.jobs)
    t6 = time.perf_counter()
    biasmod.fastalign_gender_pass(store, list(cfg.variants), cfg.bias)
    stages["lid"], stages["second_aligner"] = t6 - t5, time.perf_counter() - t6
    store.close()
    t7 = time.perf_counter()
    summary = summarise(cfg, run_dir, {"processes": world, "timings_rank0": timings})
    stages["summarise"] = time.perf_counter() - t7
    summary["run"] |= {"seconds": round(time.perf_counter() - t0, 1), "stages": {k: round(v, 1) for k, v in stages.items()}}
    return summary
