"""Running a sweep: compress the variants, then every model pass (translation, cross-attention,
gender alignment) and every store pass (language identification, the second aligner), into the run store.

The run directory holds ``store.sqlite``, ``variants/<name>/`` (compressed models), ``ctranslate2/`` (converted
models, backend ``ctranslate2`` and deployment speed) and ``config.yaml``. A rerun resumes: variants already
compressed or converted are reused, rows and statistics already stored are skipped. After ``run_sweep`` the
store holds everything ``summarise`` reads.

Stages, with ``world`` processes (``sweep.parallel`` or ``accelerate launch``): (1) every process compresses
its share of the variants (``compress_share``: the costliest first, each to the least-loaded process);
(2) rank 0 registers every translation series and converts the CTranslate2 ones; (3) every process runs the
model passes on its share of the pairs; (4) rank 0 alone, on a quiet machine, measures each variant's
deployable form (``deployment_pass``), then the store passes and the summary.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import torch
import yaml

from forgetbench.compress.pipeline import compress_dir, load_compressed, load_model_dir
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bias as biasmod
from forgetbench.eval.backends import TorchTranslator, fake_quantised
from forgetbench.eval.sentence_stats import lid_pass, xattn_pass
from forgetbench.eval.speed import batch1_speed, batched_speed
from forgetbench.eval.store import Store
from forgetbench.eval.translate import run_variant
from forgetbench.io import atomic_write_text
from forgetbench.models import ct2
from forgetbench.models.load import weights_sha256
from forgetbench.sweep.config import SweepConfig
from forgetbench.sweep.summarise import summarise


def compress_share(cfg: SweepConfig, run_dir: Path, rank: int, world: int) -> list[str]:
    """The variants this process compresses and that are not compressed yet. The split depends on the config
    alone, so every process computes the same one: costliest first (a quantize step calibrates: cost 5; pruning:
    1), each to the least-loaded process. Under ``accelerate launch`` rank 0 compresses them all."""
    todo = [n for n, r in cfg.variants.items() if r is not None]
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        world = 1  # under a launcher, transformers' save_pretrained writes on rank 0 only: it compresses all
        if rank != 0:
            return []
    cost = {n: 5 if fake_quantised(cfg.variants[n]) else 1 for n in todo}
    load, mine = [0] * world, []
    for n in sorted(todo, key=lambda n: -cost[n]):
        r = load.index(min(load))
        load[r] += cost[n]
        if r == rank and not (run_dir / "variants" / n / "compression.json").is_file():
            mine.append(n)
    return mine


def compress_variants(cfg: SweepConfig, run_dir: Path, names: list[str], progress: bool = True) -> None:
    for name in names:
        out = run_dir / "variants" / name
        if out.exists():
            shutil.rmtree(out)
        compress_dir(cfg.model_of(name), cfg.variants[name], out, progress=progress)


def register_series(cfg: SweepConfig, run_dir: Path, store: Store) -> None:
    """Every translation series in the store (with its backend, recipe and sizes); CTranslate2 conversions."""
    known = store.variants()
    for name, recipe in cfg.variants.items():
        model = cfg.model_of(name)
        record_signals(store, name, model)
        if recipe is None:
            folder, info = model, {"recipe": None, "sizes": {
                "dense_bytes": sum(f.stat().st_size for f in model.glob("*.safetensors")), "nominal_ratio": 1.0}}
        else:
            folder = run_dir / "variants" / name
            info = {"recipe": recipe.name, "sizes": json.loads((folder / "compression.json").read_text())["sizes"]}
        sha = known[name]["model_sha256"] if name in known else weights_sha256(folder)
        for series, backend in cfg.series(name):
            label = backend_label(cfg, backend)
            if series not in known:
                store.add_variant(series, str(folder), sha, info | {"variant": name, "backend": label})
            elif known[series].get("backend", "torch") != label:  # resuming with another backend would mix them
                raise ForgetbenchError(f"{run_dir}: {series} was translated with backend {known[series].get('backend', 'torch')}"
                                       f", the config now says {label}; use a new --out for another backend")
            if backend == "ctranslate2":
                ct2.cached_conversion(lambda n=name: load_variant(cfg, run_dir, n), ct2_folder(cfg, run_dir, name),
                                      cfg.backend.compute_type, sha)


def backend_label(cfg: SweepConfig, backend: str) -> str:
    return cfg.backend.describe() if backend == cfg.backend.name else backend


def ct2_folder(cfg: SweepConfig, run_dir: Path, name: str, compute_type: str | None = None) -> Path:
    return run_dir / "ctranslate2" / f"{name}-{compute_type or cfg.backend.compute_type}"


def translator_for(cfg: SweepConfig, run_dir: Path, name: str, backend: str, model, tok):
    if backend == "ctranslate2":
        return ct2.Ct2Translator(ct2_folder(cfg, run_dir, name), tok, cfg.backend.device, cfg.backend.compute_type,
                                 cfg.threads)
    return TorchTranslator(model, tok)


def deployment_pass(cfg: SweepConfig, run_dir: Path, store: Store) -> None:
    """Per variant, once (``speed:<variant>`` in the store): its deployable form — CTranslate2 int8 where
    CTranslate2 is installed and the variant is not fake-quantised (a fake-quantised model has no deployable
    form: it is timed as the torch emulation it is) — its size on disk (CTranslate2 stores a pruned model's
    zeros densely; the sparse artefact's size is the variants table's) and its batch-1 and batched speed on
    the first pair's first sentences."""
    have_ct2, gen, known = ct2.available(), cfg.generation, store.variants()
    for name in cfg.variants:
        if store.meta(f"speed:{name}") is not None:
            continue
        model, tok = load_variant(cfg, run_dir, name)
        fq = fake_quantised(cfg.variants[name])
        if have_ct2 and not fq and type(model).__name__ == ct2.ARCHITECTURE:
            folder = ct2.cached_conversion(lambda m=model, t=tok: (m, t), ct2_folder(cfg, run_dir, name, "int8"), "int8",
                                           known[name]["model_sha256"])
            tr, form, size = ct2.Ct2Translator(folder, tok, "cpu", "int8", cfg.threads), "ctranslate2 int8", ct2.disk_bytes(folder)
        else:
            sizes = known[name].get("sizes", {})  # a fake-quantised variant: its real int8 artefact
            tr, size = TorchTranslator(model, tok), sizes.get("int8_bytes") if fq else sizes.get("dense_bytes")
            form = "torch, fake-quantised (an emulation, not a deployment form)" if fq else "torch fp32"
        rec = {"form": form, "disk_bytes": size,
               **batch1_speed(tr, tok, cfg.jobs[0], cfg.speed_sentences, gen["max_new_tokens"]),
               "batched": batched_speed(tr, cfg.jobs[0], max(cfg.speed_sentences, gen["batch_size"]), gen["batch_size"],
                                        gen["max_new_tokens"])}
        store.set_meta(f"speed:{name}", rec)
        del tr, model


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
    stages = dict.fromkeys(("compress", "translate", "cross_attention", "bias", "speed", "lid", "second_aligner",
                            "summarise"), 0.0)
    wait = barrier or (lambda: None)
    if rank == 0:  # rank 0 creates the store (schema, WAL) before any other process opens it
        store = Store(run_dir / "store.sqlite")
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(cfg.raw, sort_keys=False, allow_unicode=True))
        store.set_meta("config_source", str(cfg.source))
    (run_dir / "variants").mkdir(exist_ok=True)
    compress_variants(cfg, run_dir, compress_share(cfg, run_dir, rank, world), progress and rank == 0)
    wait()
    if rank == 0:
        register_series(cfg, run_dir, store)
    stages["compress"] = time.perf_counter() - t0
    wait()
    if rank != 0:
        store = Store(run_dir / "store.sqlite")
    my_jobs = cfg.jobs[rank::world]
    bias_jobs = biasmod.jobs(cfg.bias)[rank::world]
    gen = cfg.generation
    compared = cfg.compared_series  # λ compares a variant with its base; a base-only run (eval) needs no attention pass
    timings = {}
    for name in cfg.variants:
        model, tok = load_variant(cfg, run_dir, name)
        for series, backend in cfg.series(name):
            translator = translator_for(cfg, run_dir, name, backend, model, tok)
            t1 = time.perf_counter()
            n = run_variant(store, series, translator, my_jobs, gen["batch_size"], gen["num_beams"],
                            gen["max_new_tokens"], progress)
            t2 = time.perf_counter()
            if series in compared:  # the attention of the torch model, teacher-forced on the series' own hypotheses
                xattn_pass(store, series, model, tok, my_jobs, gen["batch_size"], progress)
            t3 = time.perf_counter()
            if bias_jobs:
                run_variant(store, series, translator, bias_jobs, gen["batch_size"], gen["num_beams"],
                            gen["max_new_tokens"], progress)
                if cfg.bias.gender_jobs:
                    biasmod.gender_pass(store, series, model, tok, cfg.bias, gen["batch_size"], progress, bias_jobs)
            t4 = time.perf_counter()
            stages["translate"] += t2 - t1
            stages["cross_attention"] += t3 - t2
            stages["bias"] += t4 - t3
            timings[series] = {"backend": backend, "translated": n, "translate_s": round(t2 - t1, 2),
                               "xattn_s": round(t3 - t2, 2), "bias_s": round(t4 - t3, 2)}
            del translator
        del model
    wait()
    if rank != 0:
        store.close()
        return {}
    t4 = time.perf_counter()
    if cfg.speed_sentences:  # alone on the machine: the other processes are done
        deployment_pass(cfg, run_dir, store)
    # passes over stored text (no model): language identity of every hypothesis and reference, fast_align
    t5 = time.perf_counter()
    lid_pass(store, cfg.series_names, cfg.jobs)
    t6 = time.perf_counter()
    biasmod.fastalign_gender_pass(store, cfg.series_names, cfg.bias)
    stages["speed"], stages["lid"], stages["second_aligner"] = t5 - t4, t6 - t5, time.perf_counter() - t6
    store.close()
    t7 = time.perf_counter()
    summary = summarise(cfg, run_dir, {"processes": world, "timings_rank0": timings})
    stages["summarise"] = time.perf_counter() - t7
    summary["run"] |= {"seconds": round(time.perf_counter() - t0, 1), "stages": {k: round(v, 1) for k, v in stages.items()}}
    return summary
