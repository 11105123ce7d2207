"""Running a sweep: compress the variants, then every model pass (translation, cross-attention,
gender alignment) and every store pass (language identification, the second aligner), into the run store.

The run directory holds ``store.sqlite``, ``variants/<name>/`` (compressed models), ``ctranslate2/`` (converted
models, backend ``ctranslate2`` and deployment speed) and ``config.yaml``. A rerun resumes: variants already
compressed or converted are reused, rows and statistics already stored are skipped. After ``run_sweep`` the
store holds everything ``summarise`` reads.

With ``world`` processes (``sweep.parallel`` or ``accelerate launch``): (1) rank 0 prepares the run
(``prepare_run``: the store, its config, the claims of a new attempt); (2) every process takes the next ready
unit of work (``sweep.schedule``: compress and register a variant, or one job of one series) until none is left;
(3) rank 0 alone, on a quiet machine, measures each variant's deployable form (``deployment_pass``), then the
store passes (those left: each bias unit has run fast_align on its own items already) and the summary. The
run record holds rank 0's seconds per stage and every process's seconds per kind of unit (``unit_seconds``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
import yaml

from forgetbench.compress.bnb import arithmetic
from forgetbench.compress.pipeline import compress_dir, load_compressed, load_model_dir, nominal_ratio
from forgetbench.console import Console, as_console
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bias as biasmod
from forgetbench.eval.analysis import is_two_script_excluded, sentences_analysed
from forgetbench.eval.attention_maps import attention_map, pick_examples
from forgetbench.eval.backends import RoutedTranslator, TorchTranslator, fake_quantised
from forgetbench.eval.metrics import SpBLEU
from forgetbench.eval.sentence_stats import lid_pass, xattn_pass
from forgetbench.eval.speed import batch1_speed, batched_speed, interleaved
from forgetbench.eval.store import Store
from forgetbench.eval.summary import Summary
from forgetbench.eval.translate import run_variant
from forgetbench.io import atomic_write_text, sha256_file
from forgetbench.models import ct2
from forgetbench.models.decoder_step import direct_unsupported
from forgetbench.models.generation import greedy_supported
from forgetbench.models.hardware import Placement, activate, describe, numerics, place
from forgetbench.models.load import weights_sha256
from forgetbench.sweep.config import SweepConfig
from forgetbench.sweep.plan import source_size
from forgetbench.sweep.schedule import Unit, done_count, next_unit, units
from forgetbench.sweep.summarise import summarise


def variant_arithmetic(recipe, placement: Placement | None) -> dict:
    """What a variant's weights are stored in and its matmuls compute in: bitsandbytes by its rule 5
    (``compress.bnb.arithmetic``), every other variant in the placement's dtype (fake-quantised int8 values
    included: they are computed in it)."""
    dtype = placement.hardware.dtype if placement is not None else "float32"
    q = None if recipe is None else recipe.load_quantisation
    return arithmetic(q, dtype) if q is not None else {"weights": dtype, "compute_dtype": dtype}


def model_sizes(folder: Path, sweep_model: Path, recipe) -> dict:
    """The sizes of a model folder translated as it is (the base, a student, a bitsandbytes variant): a compress
    output's own record (``compression.json``: its artefacts and nominal size; the artefacts beside the dense file
    not counted as weights); else its weights files, and for a model other than the sweep's (a student) its
    parameters over the sweep model's as its nominal size; a load-time recipe's ratio multiplied in."""
    sizes = None
    if (folder / "compression.json").is_file():
        try:
            sizes = dict(json.loads((folder / "compression.json").read_text())["sizes"])
        except (OSError, ValueError, KeyError, TypeError):
            sizes = None
    if sizes is None:
        src_bytes, params = source_size(folder)
        sizes = {"dense_bytes": src_bytes, "parameters": params, "nominal_ratio": 1.0}
        if Path(folder).resolve() != Path(sweep_model).resolve():
            base = source_size(sweep_model)[1]
            sizes |= {"base_parameters": base, "nominal_ratio": params / base}
    if recipe is not None:
        sizes["nominal_ratio"] = sizes.get("nominal_ratio", 1.0) * nominal_ratio(recipe)
    return sizes


def prepare_variant(cfg: SweepConfig, run_dir: Path, store: Store, name: str, placement: Placement | None = None) -> None:
    """A ``prepare`` unit: compress ``name`` (unless done; loaded as ``placement`` says), register its translation
    series (backend, recipe, sizes), convert it for the CTranslate2 series."""
    model, recipe = cfg.model_of(name), cfg.variants[name]
    record_signals(store, name, model)
    langs = cfg.routed(name)
    if langs:  # one model per target language (eval.backends rule 4)
        folder = run_dir / "variants" / name
        folder.mkdir(parents=True, exist_ok=True)
        for lang in langs:
            _compress(model, recipe.for_target(lang), folder / lang, placement)
        sizes = json.loads((folder / langs[0] / "compression.json").read_text())["sizes"]
        info = {"recipe": recipe.name, "sizes": sizes, "routed": langs}
    elif recipe is None or not recipe.written_steps:  # the base, or bitsandbytes alone (quantised when loaded)
        folder, info = model, {"recipe": None if recipe is None else recipe.name,
                               "sizes": model_sizes(model, cfg.model, recipe)}
    else:
        folder = run_dir / "variants" / name
        _compress(model, recipe, folder, placement)
        sizes = json.loads((folder / "compression.json").read_text())["sizes"]
        info = {"recipe": recipe.name, "sizes": sizes}
    info["arithmetic"] = variant_arithmetic(recipe, placement)
    calibration = calibration_record(recipe)
    if calibration:
        info["calibration"] = calibration
    known = store.variants()
    if name in known:
        sha = known[name]["model_sha256"]
    elif langs:  # the members' hashes, in language order
        sha = hashlib.sha256(" ".join(weights_sha256(folder / x) for x in langs).encode()).hexdigest()
    else:
        sha = weights_sha256(folder)
    for series, backend in cfg.series(name):
        if series not in known:
            store.add_variant(series, str(folder), sha, info | {"variant": name, "backend": backend_label(cfg, backend)})
        if backend == "ctranslate2":
            ct2.cached_conversion(lambda n=name: load_variant(cfg, run_dir, n), ct2_folder(cfg, run_dir, name),
                                  cfg.backend.compute_type, sha)


def _compress(model: Path, recipe, folder: Path, placement: Placement | None) -> None:
    """``recipe``'s written steps applied to ``model`` into ``folder``, unless a finished one is there."""
    if not (folder / "compression.json").is_file():
        if folder.exists():
            shutil.rmtree(folder)
        compress_dir(model, dataclasses.replace(recipe, steps=recipe.written_steps), folder, progress=False,
                     placement=placement)


def calibration_record(recipe) -> dict | None:
    """A data-aware prune step's method, sparsity, scope, embeddings and calibration choice (for the Findings on
    calibration: a choice is compared with the English-only calibration of an otherwise identical step)."""
    for st in (recipe.steps if recipe is not None else ()):
        if st.kind == "prune" and getattr(st.config, "needs_calibration", False):
            c = st.calibration
            return {"method": st.config.method, "sparsity": st.config.sparsity, "scope": st.config.scope,
                    "include_embeddings": st.config.include_embeddings, "choice": c.choice, "language": c.language}
    return None


def backend_label(cfg: SweepConfig, backend: str) -> str:
    return cfg.backend.describe() if backend == cfg.backend.name else backend


def ct2_folder(cfg: SweepConfig, run_dir: Path, name: str, compute_type: str | None = None) -> Path:
    return run_dir / "ctranslate2" / f"{name}-{compute_type or cfg.backend.compute_type}"


def translator_for(cfg: SweepConfig, run_dir: Path, name: str, backend: str, model, tok,
                   placement: Placement | None = None):
    if backend == "ctranslate2":
        device = cfg.backend.device
        if device.startswith("cuda") and ":" not in device and placement is not None and placement.gpus:
            device = f"cuda:{placement.gpus[0]}"  # this process's GPU, not every process on GPU 0
        return ct2.Ct2Translator(ct2_folder(cfg, run_dir, name), tok, device, cfg.backend.compute_type, cfg.threads)
    return TorchTranslator(model, tok)


def _deployable(cfg: SweepConfig, run_dir: Path, name: str, placement: Placement | None, have_ct2: bool,
                known: dict):
    """A variant's deployable form: (translator, tokenizer, form, bytes on disk)."""
    on_cpu = placement is None or not placement.cuda  # CTranslate2 int8 is the CPU deployment form
    model, tok = load_variant(cfg, run_dir, name, None if on_cpu else placement, cfg.jobs[0].tgt)
    if on_cpu and have_ct2 and type(model).__name__ == ct2.ARCHITECTURE:
        folder = ct2.cached_conversion(lambda m=model, t=tok: (m, t), ct2_folder(cfg, run_dir, name, "int8"), "int8",
                                       known[name]["model_sha256"])
        return ct2.Ct2Translator(folder, tok, "cpu", "int8", cfg.threads), tok, "ctranslate2 int8", ct2.disk_bytes(folder)
    form = "torch fp32" if placement is None or placement.hardware.is_default else \
        f"torch {placement.hardware.dtype} ({placement.device})"
    return TorchTranslator(model, tok), tok, form, known[name].get("sizes", {}).get("dense_bytes")


def deployment_pass(cfg: SweepConfig, run_dir: Path, store: Store, placement: Placement | None = None) -> None:
    """Per variant, once (``speed:<variant>`` in the store): its deployable form — CTranslate2 int8 where
    CTranslate2 is installed, else torch fp32 — its size on disk (CTranslate2 stores a pruned model's zeros
    densely; the sparse artefact's size is the variants table's) and its batch-1 and batched speed on the first
    pair's first sentences: ``speed.rounds`` timings each, every other variant's interleaved with the base's
    (``eval.speed`` rule 2: the speed-up with its interval), the base's alone only where no variant is timed
    (else one alone, for its record: its row pools every timing of it). A fake-quantised variant's form is
    its int8 artefact (static scales), which no runtime here executes: its size only (timing the torch emulation
    would set an emulation's speed beside deployment speeds; ``benchmarks/backends.py`` measures its decode cost
    against the base's torch loop)."""
    have_ct2, gen, known = ct2.available(), cfg.generation, store.variants()
    job, n, rounds, bs, new = cfg.jobs[0], cfg.speed_sentences, cfg.speed_rounds, gen.batch_size, gen.max_new_tokens
    base = None  # the base's deployable form, loaded once
    base_timed = not fake_quantised(cfg.variants.get(cfg.base))  # else no variant has a base to be timed beside
    beside = base_timed and any(v != cfg.base and not fake_quantised(r) for v, r in cfg.variants.items())

    def one(tr, tok):
        return batch1_speed(tr, tok, job, n, new)

    def batched(tr):
        return batched_speed(tr, job, max(n, bs), bs, new)

    for name in cfg.variants:
        if store.meta(f"speed:{name}") is not None:
            continue
        if fake_quantised(cfg.variants[name]):  # its real int8 artefact, which no runtime here executes: not timed
            store.set_meta(f"speed:{name}", {"form": "int8 artefact, static scales (no runtime here)",
                                             "disk_bytes": known[name].get("sizes", {}).get("int8_bytes")})
            continue
        tr, tok, form, size = _deployable(cfg, run_dir, name, placement, have_ct2, known)
        runs: dict[str, list[dict]] = {"one": [], "batched": []}  # this variant's timings, whole records

        def own(kind, t=tr, k=tok, runs=runs):
            runs[kind].append(one(t, k) if kind == "one" else batched(t))
            return runs[kind][-1]["seconds"]

        extra, extra_b = {}, {}
        if name == cfg.base:  # its rounds alone; one where variants are timed beside it (pooled with theirs)
            alone = 1 if beside else rounds
            times = [own("one") for _ in range(alone)]
            times_b = [own("batched") for _ in range(alone)]
            extra, extra_b = {"rounds": alone, "round_seconds": times}, {"round_seconds": times_b}
        elif base_timed:
            if base is None:
                base = _deployable(cfg, run_dir, cfg.base, placement, have_ct2, known)[:2]
            b_tr, b_tok = base
            vs = interleaved(lambda t=b_tr, k=b_tok: one(t, k)["seconds"], lambda: own("one"), rounds)
            vs_b = interleaved(lambda t=b_tr: batched(t)["seconds"], lambda: own("batched"), rounds)
            times, times_b, extra, extra_b = vs["seconds"], vs_b["seconds"], {"vs_base": vs}, {"vs_base": vs_b}
        else:
            times, times_b = [own("one")], [own("batched")]
        first, first_b = runs["one"][0], runs["batched"][0]
        med, med_b = statistics.median(times), statistics.median(times_b)
        rec = {"form": form, "disk_bytes": size, **first, **extra, "batched": first_b | extra_b}
        if med:  # the variant's own speed: the median over its timings
            rec |= {"sentences_per_s": round(first["sentences"] / med, 3), "tokens_per_s": round(first["tokens"] / med, 1)}
        if med_b:
            rec["batched"]["sentences_per_s"] = round(first_b["sentences"] / med_b, 3)
        store.set_meta(f"speed:{name}", rec)
        tr = None  # the variant's translator released before the next is loaded
    pool_base_timings(cfg, store)


def pool_base_timings(cfg: SweepConfig, store: Store) -> None:
    """The base's row from every timing of it — its own rounds and those interleaved with each variant — so its
    speed is measured over the same moments as the variants' (their rows: their interleaved rounds' medians)."""
    rec = store.meta(f"speed:{cfg.base}")
    if not rec or not rec.get("round_seconds"):
        return
    others = [r for v in cfg.variants if v != cfg.base and (r := store.meta(f"speed:{v}")) and r.get("vs_base")]
    one = list(rec["round_seconds"]) + [x for r in others for x in r["vs_base"]["base_seconds"]]
    many = list(rec["batched"].get("round_seconds", [])) + [x for r in others for x in r["batched"]["vs_base"]["base_seconds"]]
    med, med_b = statistics.median(one), statistics.median(many) if many else None
    rec |= {"timings": len(one), "sentences_per_s": round(rec["sentences"] / med, 3)}
    if rec.get("tokens") is not None:
        rec["tokens_per_s"] = round(rec["tokens"] / med, 1)
    if med_b:
        rec["batched"] |= {"sentences_per_s": round(rec["batched"]["sentences"] / med_b, 3), "timings": len(many)}
    store.set_meta(f"speed:{cfg.base}", rec)


def record_signals(store: Store, name: str, model: Path) -> None:
    """A distilled student's first and last probe (``signals.jsonl``, exported beside its weights: teacher–student KL
    and CE per pair group) into the store, so the report can set who forgets beside the distillation signal."""
    f = model / "signals.jsonl"
    if store.meta(f"signals:{name}") is not None or not f.is_file():
        return
    probes = [r for r in map(json.loads, f.read_text(encoding="utf-8").splitlines()) if r.get("split") == "probe"]
    if probes:
        store.set_meta(f"signals:{name}", {"first": probes[0], "last": probes[-1]})


def load_variant(cfg: SweepConfig, run_dir: Path, name: str, placement: Placement | None = None,
                 tgt: str | None = None):
    """A variant's model and tokenizer, fp32 on the CPU or where ``placement`` says (bitsandbytes variants
    quantised as they load); for a variant routed by target language, the model of target language ``tgt``."""
    recipe, folder, langs = cfg.variants[name], run_dir / "variants" / name, cfg.routed(name)
    if langs and tgt not in langs:
        raise ForgetbenchError(f"{name}: one model per target language ({', '.join(langs)}); no model for target {tgt!r}")
    if not langs and (recipe is None or recipe.load_quantisation is not None):
        folder = cfg.model_of(name) if recipe is None or not recipe.written_steps else folder
        return load_model_dir(folder, placement=placement, quantisation=recipe and recipe.load_quantisation)
    model, tok, _ = load_compressed(folder / tgt if langs else folder, placement=placement)
    return model, tok


def prepare_run(cfg: SweepConfig, run_dir: Path, placement: Placement | None = None) -> None:
    """Rank 0, before any other process opens the store: the store (schema, WAL), the config, a new attempt. A run
    resumed on other numerics (device kind, GPU model, dtype: ``models.hardware`` rule 4) is refused; gender
    readings made by other readers are deleted, to be read again (``bias.renew_readings``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "variants").mkdir(exist_ok=True)
    store = Store(run_dir / "store.sqlite")
    try:
        known = store.variants()
        for name in cfg.variants:
            for series, backend in cfg.series(name):
                was, now = known.get(series, {}).get("backend", "torch"), backend_label(cfg, backend)
                if series in known and was != now:  # resuming with another backend would mix them
                    raise ForgetbenchError(f"{run_dir}: {series} was translated with backend {was}, the config now "
                                           f"says {now}; use a new --out for another backend")
        now = numerics(placement or place(cfg.hardware, f"{cfg.source}: hardware"))
        stored = store.meta("numerics")
        if stored is not None and stored != now and known:
            raise ForgetbenchError(f"{run_dir}: its series come from {_numerics_text(stored)}, the settings now say "
                                   f"{_numerics_text(now)}; the series would mix numerics: use a new --out, or the "
                                   "same hardware settings to resume")
        store.set_meta("numerics", now)
        _check_same_work(cfg, run_dir, store.meta("work"), bool(known))
        if changed := changed_weights(cfg, run_dir, known):
            raise ForgetbenchError(f"{run_dir}: the weights of {', '.join(changed)} changed since the run stored their "
                                   "translations; resuming would mix two models under one name: use a new --out")
        store.set_meta("work", work_settings(cfg.raw))
        if dropped := biasmod.renew_readings(store):
            print(f"forgetbench: note: {run_dir}: the gender readers changed since its MT-Gender items were read; "
                  f"reading them again ({dropped} readings)", file=sys.stderr)
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(cfg.raw, sort_keys=False, allow_unicode=True))
        store.set_meta("config_source", str(cfg.source))
        store.set_meta("quick_look", cfg.quick_look)
        store.reset_claims()
    finally:
        store.close()


def changed_weights(cfg: SweepConfig, run_dir: Path, known: dict) -> list[str]:
    """The variants with stored rows whose model folder holds other weights now (a student retrained in place): a
    model translated as it is, by the SHA-256 the run stored; a compressed one, by the input hashes of its
    ``compression.json``. Models given by hub name are not checked."""
    out = []
    for name, recipe in cfg.variants.items():
        stored = next((known[s]["model_sha256"] for s, _ in cfg.series(name) if s in known), None)
        model = Path(cfg.model_of(name))
        if stored is None or not model.is_dir():
            continue
        langs = cfg.routed(name)
        if langs or (recipe is not None and recipe.written_steps):
            recs = [run_dir / "variants" / name / x / "compression.json" for x in langs] if langs else \
                [run_dir / "variants" / name / "compression.json"]
            inputs = {f: h for r in recs if r.is_file() for f, h in json.loads(r.read_text()).get("inputs_sha256", {}).items()
                      if f.endswith((".safetensors", ".bin"))}
            if any(not (model / f).is_file() or sha256_file(model / f) != h for f, h in inputs.items()):
                out.append(name)
        elif weights_sha256(model) != stored:
            out.append(name)
    return out


# the config keys that decide what a run's stored rows are (the models, the sentences, how they are translated
# and scored); the others (analysis, bias, report sections, processes, threads) may change between reruns
WORK_KEYS = ("model", "variants", "benchmarks", "languages", "pairs", "sentences", "generation", "backend", "metrics")


def work_settings(raw: dict) -> dict:
    return {k: raw.get(k) for k in WORK_KEYS}


def _check_same_work(cfg: SweepConfig, run_dir: Path, stored: dict | None, has_rows: bool) -> None:
    """A rerun resumes the same work; a config whose work keys changed extends the run only with ``--extend``."""
    if stored is None or not has_rows or cfg.extend:
        return
    changed = [k for k in WORK_KEYS if stored.get(k) != cfg.raw.get(k)]
    if changed:
        raise ForgetbenchError(f"{run_dir}: made with another config ({', '.join(changed)} changed since); rerun the "
                               "same config to resume, add --extend to grow this run with the changed one, or use a "
                               "new --out")


def _numerics_text(n: dict) -> str:
    return f"{n.get('device')} {', '.join(n.get('gpu') or [])} {n.get('dtype')}".replace("  ", " ")


STAGE = {"prepare": "compress", "pairs": "translate", "xattn": "cross_attention", "bias": "bias"}  # a unit's stage


class _Worker:
    """One process's units: the loaded variant (one at a time) and its translators."""

    def __init__(self, cfg: SweepConfig, run_dir: Path, store: Store, owner: int = 0,
                 placement: Placement | None = None):
        self.cfg, self.run_dir, self.store, self.owner, self.placement = cfg, run_dir, store, owner, placement
        self.name, self.model, self.tok, self.translators = None, None, None, {}
        self.bias_jobs = biasmod.jobs(cfg.bias)
        self.spbleu = SpBLEU(cfg.spm, official=cfg.spm_official)

    def load(self, name: str, tgt: str | None = None):
        """The model of ``name`` (of its target language ``tgt`` where the variant is routed), one at a time."""
        key = (name, tgt if self.cfg.routed(name) else None)
        if self.name != key:
            self.name, self.model, self.tok, self.translators = None, None, None, {}
            self.model, self.tok = load_variant(self.cfg, self.run_dir, name, self.placement, tgt)
            self.name = key
            if self.placement is not None and self.store.meta(f"hardware:{name}") is None:
                self.store.set_meta(f"hardware:{name}", describe(self.placement, self.model)
                                    | {"memory_bytes": self.model.get_memory_footprint(),
                                       "direct_step": direct_unsupported(self.model) if greedy_supported(self.model)
                                       else None})
        return self.model, self.tok

    def batch_size(self, series: str) -> int:
        """The series' batch size: the config's, or the last one halved to out of device memory (then kept)."""
        return (self.store.meta(f"batch_size:{series}") or {}).get("size", self.cfg.generation.batch_size)

    def halved(self, series: str, size: int) -> None:
        rec = self.store.meta(f"batch_size:{series}") or {"configured": self.cfg.generation.batch_size, "halvings": 0}
        self.store.set_meta(f"batch_size:{series}", rec | {"size": size, "halvings": rec["halvings"] + 1})

    def translator(self, unit: Unit):
        if self.cfg.routed(unit.variant):  # a member loaded per target language (eval.backends rule 4)
            return RoutedTranslator(lambda tgt: TorchTranslator(*self.load(unit.variant, tgt)))
        if unit.series not in self.translators:
            self.translators[unit.series] = translator_for(self.cfg, self.run_dir, unit.variant, unit.backend,
                                                           self.model, self.tok, self.placement)
        return self.translators[unit.series]

    def cross_attention(self, series: str, job, model, tok, states: dict | None = None) -> None:
        """λ of one job: the torch model's attention, teacher-forced on the hypotheses the analysis reads."""
        cfg = self.cfg
        base = self.store.translations(cfg.base, job.benchmark.name, job.src, job.tgt, below=job.limit)
        if sentences_analysed(job, {r["idx"]: r["hyp"] for r in base}, self.spbleu, cfg.thresholds):
            xattn_pass(self.store, series, model, tok, [job], cfg.generation.batch_size, False, states)

    def kept_rows(self, unit: Unit, jobs: list, gender: list):
        """Which rows ``(text, src, tgt)`` of a unit its translation keeps encoder states for (each then encoded
        alone, ≈ 1 ms a sentence: the layout rule, docs/METHOD.md §2.9), or None: a bias unit's MT-Gender items (the
        gender aligner right after); a compared series' pairs whose λ may run right after, those not left out of
        the analysis (two-script, or a base translated below the filter)."""
        cfg = self.cfg
        if gender:
            texts, pairs = {r.sentence for r in cfg.bias.gender_rows}, {(j.src, j.tgt) for j in gender}
            return lambda row: (row[1], row[2]) in pairs and row[0] in texts
        if unit.kind != "pairs" or unit.series not in cfg.compared_series:
            return None
        pairs = set()
        for job in jobs:
            if is_two_script_excluded(job, cfg.thresholds):
                continue
            base = [] if unit.series == cfg.base else self.store.translations(
                cfg.base, job.benchmark.name, job.src, job.tgt, below=job.limit)
            if len(base) == len(job.lines()[0]) and not sentences_analysed(
                    job, {r["idx"]: r["hyp"] for r in base}, self.spbleu, cfg.thresholds):
                continue  # the base translated and below the filter: no λ (kept where not known yet: λ may run
                # inline if the base is done by then, and encoding alone costs less than its pass's own encoding)
            pairs.add((job.src, job.tgt))
        return lambda row: (row[1], row[2]) in pairs

    def inline_cross_attention(self, unit: Unit, model, tok, states: dict) -> float:
        """Right after a group's translation, λ of its jobs whose base translations are done, on the encoder states
        the translation kept (the encoder is not run again: ≈ half of λ's work); each such ``xattn`` unit is
        claimed and finished here with its own seconds. The others stay for whichever process takes them."""
        cfg, store, spent = self.cfg, self.store, 0.0
        base_done = unit.series == cfg.base or store.claims().get(f"pairs:{cfg.base}:{unit.index}", (0, False))[1]
        for i in unit.jobs if base_done else ():
            key = f"xattn:{unit.series}:{i}"
            if store.claim(key, self.owner):
                t0 = time.perf_counter()
                self.cross_attention(unit.series, cfg.jobs[i], model, tok, states)
                store.finish(key, time.perf_counter() - t0)
                spent += time.perf_counter() - t0
        return spent

    def run(self, unit: Unit) -> tuple[dict[str, float], int]:
        """Do one unit; returns its seconds per stage and the sentences of ``cfg.jobs`` it translated."""
        cfg, gen, store, t0 = self.cfg, self.cfg.generation, self.store, time.perf_counter()
        if unit.kind == "prepare":
            prepare_variant(cfg, self.run_dir, store, unit.variant, self.placement)
            return {"compress": time.perf_counter() - t0}, 0
        routed = bool(cfg.routed(unit.variant))
        model, tok = (None, None) if routed else self.load(unit.variant)
        jobs = [(self.bias_jobs if unit.kind == "bias" else cfg.jobs)[i] for i in unit.jobs]
        if unit.kind == "xattn":
            self.cross_attention(unit.series, jobs[0], *self.load(unit.variant, jobs[0].tgt))
            return {"cross_attention": time.perf_counter() - t0}, 0
        tr = self.translator(unit)
        gender = [job for job in jobs if job in cfg.bias.gender_jobs] if unit.kind == "bias" else []
        inline = unit.kind == "pairs" and unit.series in cfg.compared_series and isinstance(tr, TorchTranslator)
        keep = self.kept_rows(unit, jobs, gender) if isinstance(tr, TorchTranslator) else None
        if keep is not None:
            tr.states, tr.keep = {}, keep
        n = run_variant(store, unit.series, tr, jobs, self.batch_size(unit.series), gen.num_beams,
                        gen.max_new_tokens, False, halved=lambda size: self.halved(unit.series, size))
        states = None
        if keep is not None:
            states, tr.states, tr.keep = tr.states, None, None
        if unit.kind == "pairs":
            spent = {"translate": time.perf_counter() - t0}
            if inline:
                spent["cross_attention"] = self.inline_cross_attention(unit, model, tok, states or {})
            return spent, n
        if gender:  # both aligners (the second needs no model: here it runs beside the others)
            for tgt in dict.fromkeys(j.tgt for j in gender) if routed else [None]:
                part = [j for j in gender if tgt in (None, j.tgt)]
                biasmod.gender_pass(store, unit.series, *self.load(unit.variant, tgt), cfg.bias, gen.batch_size,
                                    False, part, states)
            biasmod.fastalign_gender_pass(store, [unit.series], cfg.bias, gender)
        return {"bias": time.perf_counter() - t0}, 0


def _closing_passes(cfg: SweepConfig, run_dir: Path, store: Store, con: Console,
                    placement: Placement | None = None) -> dict[str, float]:
    """Rank 0, once every unit is done: the deployment speed (alone on the machine), then the passes over stored
    text (no model): language identity of every hypothesis and reference, fast_align's gender alignment.
    Returns their seconds."""
    t4 = time.perf_counter()
    if cfg.speed_sentences:
        with con.stage(f"{cfg.name}: deployment speed of {len(cfg.series_names)} series"):
            deployment_pass(cfg, run_dir, store, placement)
    t5 = time.perf_counter()
    with con.stage(f"{cfg.name}: language identification"):
        lid_pass(store, cfg.series_names, cfg.jobs)
    if cfg.attention_maps is not None:
        with con.stage(f"{cfg.name}: cross-attention maps of example sentences"):
            attention_maps_pass(cfg, run_dir, store, placement)
    t6 = time.perf_counter()
    if cfg.bias is not None and cfg.bias.aligner_context is not None and cfg.bias.gender_jobs:
        with con.stage(f"{cfg.name}: second gender aligner"):
            biasmod.fastalign_gender_pass(store, cfg.series_names, cfg.bias)
    return {"speed": t5 - t4, "lid": t6 - t5, "second_aligner": time.perf_counter() - t6}


def attention_maps_pass(cfg: SweepConfig, run_dir: Path, store: Store, placement: Placement | None = None) -> None:
    """Rank 0, after language identification: each compared variant's example cross-attention maps, base and
    compressed side by side (``eval.attention_maps``), stored once per variant (``attention:<variant>``)."""
    spb, on_target, mc = SpBLEU(cfg.spm, official=cfg.spm_official), store.stats("on_target"), cfg.attention_maps
    models: dict = {}
    analysed: dict = {}  # (base series, job key) -> the base's rows of a pair the analysis reads, else None

    def base_rows_of(b, job, key):
        if (b, key) not in analysed:
            rows_b = {r["idx"]: r for r in store.translations(b, *key, below=job.limit)}
            ok = sentences_analysed(job, {i: r["hyp"] for i, r in rows_b.items()}, spb, cfg.thresholds)
            analysed[(b, key)] = rows_b if ok else None
        return analysed[(b, key)]

    def model(name, tgt):
        key = (name, tgt if cfg.routed(name) else None)
        if key not in models:
            models.clear()  # at most the base and one variant in memory
            models[(cfg.base, None)] = load_variant(cfg, run_dir, cfg.base, placement)
            models[key] = load_variant(cfg, run_dir, name, placement, tgt)
        return models[key]

    for v in [v for v in cfg.variants if v != cfg.base and store.meta(f"attention:{v}") is None]:
        b, deltas, rows = cfg.base_of(v), [], {}
        for job in cfg.jobs:
            key = (job.benchmark.name, job.src, job.tgt)
            base_rows = base_rows_of(b, job, key)
            if base_rows is None:
                continue
            comp = {r["idx"]: r for r in store.translations(v, *key, below=job.limit)}
            rows[key] = (job, base_rows, comp)
            deltas += [(key, i, comp[i]["chrf"] - base_rows[i]["chrf"]) for i in sorted(comp) if i in base_rows]
        picked = pick_examples(deltas, on_target, b, v, cfg.thresholds.delta, mc.sentences)
        record: dict = {"layers": mc.layers}
        for subset, examples in picked.items():
            record[subset] = []
            for key, i, d in examples:
                job, base_rows, comp = rows[key]
                src = job.lines()[0][i]
                record[subset].append({
                    "pair": f"{job.src}-{job.tgt}", "benchmark": key[0], "idx": i, "delta_chrF": d, "source": src,
                    "base": base_rows[i]["hyp"], "compressed": comp[i]["hyp"],
                    "base_map": attention_map(*model(cfg.base, job.tgt), src, base_rows[i]["hyp"], job.src, job.tgt, mc.layers),
                    "compressed_map": attention_map(*model(v, job.tgt), src, comp[i]["hyp"], job.src, job.tgt, mc.layers)})
        store.set_meta(f"attention:{v}", record)


def _watch(run_dir: Path, stage, every: float = 2.0):
    """Update ``stage`` from the store every ``every`` seconds (units done and sentences translated by every
    process), in a thread with its own connection; returns the function that stops it."""
    stop = threading.Event()

    def poll():
        store = Store(run_dir / "store.sqlite")
        try:
            while not stop.wait(every):
                stage.update(done_count(store), store.translated())
        finally:
            store.close()

    t = threading.Thread(target=poll, daemon=True, name="forgetbench-progress")
    t.start()

    def end():
        stop.set()
        t.join()

    return end


def run_sweep(cfg: SweepConfig, run_dir: str | Path, progress: bool | Console = True, rank: int = 0, world: int = 1,
              barrier=None, prepared: bool = False, aborted=lambda: False, machines: bool = False) -> Summary | None:
    """Compress, translate, run every pass and summarise; returns the summary (rank 0; None elsewhere). The run
    record holds rank 0's seconds per stage (the units it did) and its wait for the others. ``prepared``: the
    caller ran ``prepare_run`` before starting the processes (``sweep.parallel``), so nobody waits for rank 0.
    ``machines``: a launcher's ranks, possibly on several machines (``sweep.distributed``): claims on the
    launcher's key-value store, each rank's rows in its own shard, merged by rank 0."""
    run_dir = Path(run_dir)
    torch.set_num_threads(cfg.threads)
    env = os.environ
    local = int(env.get("LOCAL_RANK", env.get("SLURM_LOCALID", rank))) if world > 1 else 0
    per_node = re.match(r"\d+", env.get("LOCAL_WORLD_SIZE", env.get("SLURM_NTASKS_PER_NODE", "")))  # SLURM: "4(x2)"
    placement = place(cfg.hardware, f"{cfg.source}: hardware", local, int(per_node.group()) if per_node else world)
    activate(placement)
    con = as_console(progress if rank == 0 else False, "sweep")  # rank 0 speaks for every process
    t0 = time.perf_counter()
    stages = dict.fromkeys(("compress", "translate", "cross_attention", "bias", "waiting", "speed", "lid",
                            "second_aligner", "summarise"), 0.0)
    wait = barrier or (lambda: None)
    todo, cluster = units(cfg), None
    if machines:
        from forgetbench.sweep import distributed

        cluster, store = distributed.start(cfg, run_dir, rank, world, lambda: prepare_run(cfg, run_dir, placement),
                                           [u.key for u in todo])
        aborted = lambda: distributed.aborted(cluster)  # noqa: E731
    else:
        if not prepared:
            if rank == 0:
                prepare_run(cfg, run_dir, placement)
            wait()
        store = Store(run_dir / "store.sqlite")
    worker, timings = _Worker(cfg, run_dir, store, rank, placement), {}
    stage = con.stage(f"{cfg.name}: units of work (compress, translate, λ, bias)", len(todo), "units", "sentences")
    stage.update(done_count(store), store.translated())  # a resumed run's finished work: not in its rate or ETA
    watch = _watch(run_dir, stage) if not con.quiet and not machines else None
    t_idle = time.perf_counter()
    while (unit := next_unit(store, todo, rank, aborted=aborted, until_done=machines)) is not None:
        stages["waiting"] += time.perf_counter() - t_idle
        spent, translated = worker.run(unit)
        store.finish(unit.key, spent[STAGE[unit.kind]])  # inline λ units were finished with their own seconds
        for k, v in spent.items():
            stages[k] += v
        if unit.series is not None:
            rec = timings.setdefault(unit.series, {"backend": unit.backend, "units": 0, "translated": 0,
                                                   "translate_s": 0.0, "xattn_s": 0.0, "bias_s": 0.0})
            rec["units"] += 1
            rec["translated"] += translated
            for k, key in (("translate", "translate_s"), ("cross_attention", "xattn_s"), ("bias", "bias_s")):
                rec[key] = round(rec[key] + spent.get(k, 0.0), 2)
        t_idle = time.perf_counter()
        if machines:
            stage.update(done_count(store), store.translated())
    worker = None
    if not machines:
        wait()
    stages["waiting"] += time.perf_counter() - t_idle
    if watch is not None:
        watch()
    stage.update(len(todo), store.translated())
    stage.close()
    if machines:
        distributed.leave(store)
        if rank != 0:
            distributed.release(cluster)
            return None
        store = Store(run_dir / "store.sqlite")
        with con.stage(f"{cfg.name}: merging {world} ranks' shards"):
            merged = distributed.merge_shards(run_dir, store)
    elif rank != 0:
        store.close()
        return None
    stages |= _closing_passes(cfg, run_dir, store, con, placement)
    if machines:
        work = merged["ranks"]
    else:
        work = {f"rank{r}": {k: round(v, 1) for k, v in sorted(kinds.items())}
                for r, kinds in sorted(store.claim_seconds().items())}
    store.close()
    t7 = time.perf_counter()
    info = {"processes": world, "timings_rank0": timings, "unit_seconds": work}
    if machines:
        info["machines"] = sorted({r["host"] for r in work.values() if r.get("host")})
        info["shards"] = {k: merged[k] for k in ("records", "damaged")}
    with con.stage(f"{cfg.name}: analysis and intervals"):
        summary = summarise(cfg, run_dir, info)
    stages["summarise"] = time.perf_counter() - t7
    summary.run |= {"seconds": round(time.perf_counter() - t0, 1), "stages": {k: round(v, 1) for k, v in stages.items()}}
    if machines:
        distributed.release(cluster)
    return summary
