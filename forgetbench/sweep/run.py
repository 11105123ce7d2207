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

import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import torch
import yaml

from forgetbench.console import Console, as_console
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bias as biasmod
from forgetbench.eval.analysis import is_two_script_excluded, sentences_analysed
from forgetbench.eval.attention_maps import attention_map, pick_examples
from forgetbench.eval.backends import RoutedTranslator, TorchTranslator
from forgetbench.eval.metrics import SpBLEU
from forgetbench.eval.sentence_stats import lid_pass, xattn_pass
from forgetbench.eval.store import Store
from forgetbench.eval.summary import Summary
from forgetbench.eval.translate import run_variant
from forgetbench.io import atomic_write_text, sha256_file
from forgetbench.models.decoder_step import direct_unsupported
from forgetbench.models.generation import greedy_supported
from forgetbench.models.hardware import Placement, activate, describe, numerics, place
from forgetbench.models.load import weights_sha256
from forgetbench.sweep.config import SweepConfig
from forgetbench.sweep.deploy import deployment_pass, pool_base_timings  # noqa: F401 (the pass run_sweep runs)
from forgetbench.sweep.schedule import Unit, done_count, next_unit, units
from forgetbench.sweep.summarise import summarise
from forgetbench.sweep.variants import (  # noqa: F401 (names callers import from here)
    backend_label,
    calibration_record,
    ct2_folder,
    load_variant,
    model_sizes,
    prepare_variant,
    record_signals,
    translator_for,
    variant_arithmetic,
)


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
