"""Sweeps: model + variants (recipes) + benchmarks/pairs/limits + metrics -> run store -> analysis.

    name: demo
    model: ../artifacts/teacher            # paths resolve against this file's folder
    variants: {base: null, prune-30: prune-30, ptq-int8: ptq-int8}
    benchmarks: [{name: flores101, kind: flores101, path: ../data/flores101}]
    languages: [de, fr, hi, sw]
    pairs: english-centric                 # english-centric | all | [en-de, de-en, ...]
    sentences: 100                         # per pair (first N lines)
    generation: {num_beams: 1, max_new_tokens: 128, batch_size: 64}
    metrics: {spm: null, spm_official: false}   # null: the model's own sentencepiece.bpe.model
    analysis: {bleu_filter: 12, delta: 0.5, exclude_two_script: true}
    tiers: {training: {counts: ../artifacts/teacher/training.json, thresholds: [1000, 10000, 30000]}}

Everything is validated before any work starts; the run directory holds ``store.sqlite``,
``variants/<name>/`` (compressed models) and ``config.yaml``. A rerun resumes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from forgetbench.compress.pipeline import compress_dir, load_compressed, load_model_dir
from forgetbench.compress.recipe import Recipe, load_recipe
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bias as biasmod
from forgetbench.eval.analysis import Thresholds, TierView, analyse
from forgetbench.eval.benchmarks import Benchmark, open_benchmark
from forgetbench.eval.languages import TIERS, language
from forgetbench.eval.metrics import SpBLEU
from forgetbench.eval.sentence_stats import lid_pass, xattn_pass
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job, run_variant
from forgetbench.models.load import weights_sha256

TOP_KEYS = {"name", "model", "variants", "benchmarks", "languages", "pairs", "sentences", "generation", "metrics",
            "analysis", "tiers", "threads", "base", "bias"}


@dataclass
class SweepConfig:
    name: str
    model: Path
    variants: dict[str, Recipe | None]
    base: str
    jobs: list[Job]
    generation: dict
    spm: Path
    spm_official: bool
    thresholds: Thresholds
    tier_views: list[TierView]
    threads: int
    source: Path
    raw: dict = field(default_factory=dict)
    bias: biasmod.BiasConfig | None = None


def _err(src, msg):
    raise ForgetbenchError(f"{src}: {msg}")


def _path(base: Path, p) -> Path:
    p = Path(str(p))
    return p if p.is_absolute() else (base / p).resolve()


def _pairs(spec, langs: list[str], src) -> list[tuple[str, str]]:
    if spec in (None, "english-centric"):
        return [p for x in langs if x != "en" for p in (("en", x), (x, "en"))]
    if spec == "all":
        ls = sorted(set(langs) | {"en"})
        return [(a, b) for a in ls for b in ls if a != b]
    if isinstance(spec, list):
        out = []
        for s in spec:
            parts = str(s).split("-")
            if len(parts) != 2:
                _err(src, f"pair {s!r} is not of the form src-tgt (M2M-100 codes, e.g. en-de)")
            out.append((parts[0], parts[1]))
        return out
    _err(src, f"pairs must be english-centric, all, or a list; got {spec!r}")


def training_tiers(counts_file: Path, thresholds: list[int]) -> dict[str, str]:
    """Tiers from the project's own training-pair counts: < t0 Very-Low, < t1 Low, < t2 Medium, else High."""
    d = json.loads(counts_file.read_text())
    counts = d.get("corpus", d).get("train", d.get("train", {}))
    if not counts:
        raise ForgetbenchError(f"{counts_file}: no corpus.train counts")
    out = {"en": "High"}
    for lang, n in counts.items():
        out[lang] = TIERS[sum(n >= t for t in thresholds)]
    return out


def load_sweep(path: str | Path) -> SweepConfig:
    src = Path(path)
    if not src.is_file():
        raise ForgetbenchError(f"sweep config {src} not found")
    try:
        raw = yaml.safe_load(src.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ForgetbenchError(f"{src}: not valid YAML ({getattr(e, 'problem', e)})") from None
    extra = set(raw) - TOP_KEYS
    if extra:
        _err(src, f"unknown key(s) {sorted(extra)}; allowed: {', '.join(sorted(TOP_KEYS))}")
    base_dir = src.parent.resolve()
    if "model" not in raw:
        _err(src, "'model' (a model folder) is required")
    model = _path(base_dir, raw["model"])
    if not (model / "config.json").is_file():
        _err(src, f"model {model} is not a model folder (no config.json)")
    variants_raw = raw.get("variants") or {"base": None}
    if not isinstance(variants_raw, dict):
        _err(src, "variants must be a mapping name -> recipe (null for the uncompressed base)")
    variants: dict[str, Recipe | None] = {}
    for name, r in variants_raw.items():
        if not str(name).replace("-", "").replace("_", "").isalnum():
            _err(src, f"variant name {name!r}: use letters, digits, - and _")
        variants[str(name)] = None if r is None else load_recipe(str(_path(base_dir, r)) if Path(str(r)).suffix else str(r))
    base = raw.get("base") or next((n for n, r in variants.items() if r is None), None)
    if base not in variants or variants[base] is not None:
        _err(src, "one variant must be the uncompressed base (recipe null)")
    langs = [str(x) for x in raw.get("languages") or []]
    for c in langs:
        language(c)
    pairs = _pairs(raw.get("pairs"), langs, src)
    if not pairs:
        _err(src, "no language pairs: give 'languages' and/or 'pairs'")
    for s, t in pairs:
        language(s), language(t)
    limit = raw.get("sentences")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        _err(src, f"sentences must be a positive integer, got {limit!r}")
    benches: list[Benchmark] = []
    for b in raw.get("benchmarks") or []:
        if not isinstance(b, dict) or not {"name", "kind", "path"} <= set(b):
            _err(src, "each benchmark needs name, kind and path")
        benches.append(open_benchmark(b["name"], b["kind"], _path(base_dir, b["path"])))
    if not benches:
        _err(src, "no benchmarks")
    jobs = []
    for bench in benches:
        for s, t in pairs:
            bench.pair(s, t)  # validates files and line counts now
            jobs.append(Job(bench, s, t, limit))
    gen = {"num_beams": 1, "max_new_tokens": 128, "batch_size": 64} | (raw.get("generation") or {})
    for k in ("num_beams", "max_new_tokens", "batch_size"):
        if not isinstance(gen[k], int) or gen[k] < 1:
            _err(src, f"generation.{k} must be a positive integer")
    metrics = raw.get("metrics") or {}
    spm = _path(base_dir, metrics["spm"]) if metrics.get("spm") else model / "sentencepiece.bpe.model"
    if not spm.is_file():
        _err(src, f"SentencePiece model for spBLEU {spm} not found (metrics.spm)")
    an = raw.get("analysis") or {}
    try:
        th = Thresholds(**an)
    except TypeError as e:
        _err(src, f"analysis: {e}")
    if not isinstance(th.bleu_filter, (int, float)) or th.bleu_filter < 0:
        _err(src, f"analysis.bleu_filter must be a number >= 0, got {th.bleu_filter!r}")
    if not isinstance(th.delta, (int, float)) or th.delta < 0:
        _err(src, f"analysis.delta must be a number >= 0, got {th.delta!r}")
    views = [TierView("thesis")]
    for vname, spec in (raw.get("tiers") or {}).items():
        counts = _path(base_dir, spec["counts"])
        if not counts.is_file():
            _err(src, f"tiers.{vname}.counts: {counts} not found")
        views.append(TierView(vname, training_tiers(counts, spec.get("thresholds", [1000, 10000, 30000]))))
    bias = biasmod.load_bias(raw.get("bias"), base_dir, _path)
    return SweepConfig(str(raw.get("name") or src.stem), model, variants, base, jobs, gen, spm,
                       bool(metrics.get("spm_official", False)), th, views, int(raw.get("threads") or 1), src, raw, bias)


def prepare_variants(cfg: SweepConfig, run_dir: Path, store: Store, progress: bool = True) -> None:
    vdir = run_dir / "variants"
    vdir.mkdir(parents=True, exist_ok=True)
    for name, recipe in cfg.variants.items():
        if recipe is None:
            if name not in store.variants():
                store.add_variant(name, str(cfg.model), weights_sha256(cfg.model), {"recipe": None, "sizes": {
                    "dense_bytes": sum(f.stat().st_size for f in cfg.model.glob("*.safetensors")), "nominal_ratio": 1.0}})
            continue
        out = vdir / name
        if not (out / "compression.json").is_file():
            if out.exists():
                shutil.rmtree(out)
            compress_dir(cfg.model, recipe, out, progress=progress)
        if name not in store.variants():
            rep = json.loads((out / "compression.json").read_text())
            store.add_variant(name, str(out), weights_sha256(out), {"recipe": recipe.name, "sizes": rep["sizes"]})


def load_variant(cfg: SweepConfig, run_dir: Path, name: str):
    if cfg.variants[name] is None:
        return load_model_dir(cfg.model)
    model, tok, _ = load_compressed(run_dir / "variants" / name)
    return model, tok


def run_sweep(cfg: SweepConfig, run_dir: str | Path, progress: bool = True, rank: int = 0, world: int = 1,
              barrier=None) -> dict:
    """Translate, score and analyse; returns the analysis as a dict (the report's summary)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    if rank == 0:  # rank 0 creates the store (schema, WAL) before any other process opens it
        store = Store(run_dir / "store.sqlite")
        (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.raw, sort_keys=False, allow_unicode=True))
        prepare_variants(cfg, run_dir, store, progress)
        store.set_meta("config_source", str(cfg.source))
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
        bias_jobs = biasmod.jobs(cfg.bias)[rank::world]
        if bias_jobs:
            run_variant(store, name, model, tok, bias_jobs, cfg.generation["batch_size"], cfg.generation["num_beams"],
                        cfg.generation["max_new_tokens"], progress)
            if cfg.bias.gender_jobs:
                biasmod.gender_pass(store, name, model, tok, cfg.bias, cfg.generation["batch_size"], progress)
        timings[name] = {"translated": n, "translate_s": round(t2 - t1, 2), "xattn_s": round(time.perf_counter() - t2, 2)}
        del model
    if barrier:
        barrier()
    store.close()
    if rank != 0:
        return {}
    return summarise(cfg, run_dir, {"seconds": round(time.perf_counter() - t0, 1), "processes": world,
                                    "timings_rank0": timings})


def summarise(cfg: SweepConfig, run_dir: str | Path, run_info: dict | None = None) -> dict:
    """LID pass + analysis of a run store; the report's summary. Needs no model."""
    run_dir = Path(run_dir)
    if not (run_dir / "store.sqlite").is_file():
        raise ForgetbenchError(f"{run_dir}: no store.sqlite; run `forgetbench sweep` first")
    store = Store(run_dir / "store.sqlite")
    missing = [v for v in cfg.variants if v not in store.variants()]
    if missing:
        raise ForgetbenchError(f"{run_dir}: variants {missing} have no results yet; rerun the sweep to finish them")
    lid_pass(store, list(cfg.variants), cfg.jobs)
    spb = SpBLEU(cfg.spm, official=cfg.spm_official)
    A = analyse(store, cfg.jobs, cfg.base, list(cfg.variants), spb, cfg.thresholds, cfg.tier_views)
    biasmod.eflomal_gender_pass(store, list(cfg.variants), cfg.bias)
    bias_summary = biasmod.analyse_bias(store, cfg.bias, cfg.base, list(cfg.variants))
    store.close()
    run = {"threads": cfg.threads, "loadavg": os.getloadavg()[0], "generation": cfg.generation,
           "torch": torch.__version__, "seconds": None, "processes": None} | (run_info or {})
    return A.to_dict() | {"bias": bias_summary, "name": cfg.name, "model": str(cfg.model),
                          "tier_views": {v.name: v.tiers for v in cfg.tier_views}, "run": run}
