"""The summary of a finished run, read from its store alone (no model, no pass): the analysis
sections, the bias benchmarks and the run record. ``forgetbench report`` calls it too."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bias as biasmod
from forgetbench.eval.analysis import analyse
from forgetbench.eval.findings import findings
from forgetbench.eval.metrics import SpBLEU
from forgetbench.eval.store import Store
from forgetbench.eval.summary import BiasSummary, Summary
from forgetbench.sweep.config import SweepConfig


def summarise(cfg: SweepConfig, run_dir: str | Path, run_info: dict | None = None) -> Summary:
    """The analysis of a finished run's store; the report's summary (``summary.json`` is its ``to_dict()``). Reads
    the store only."""
    run_dir = Path(run_dir)
    if not (run_dir / "store.sqlite").is_file():
        raise ForgetbenchError(f"{run_dir}: no store.sqlite; run `forgetbench sweep` first")
    store = Store(run_dir / "store.sqlite")
    series, known = cfg.series_names, store.variants()
    missing = [v for v in series if v not in known]
    if missing:
        raise ForgetbenchError(f"{run_dir}: variants {missing} have no results yet; rerun the sweep to finish them")
    unfinished = sum(len(store.missing_stat("on_target", v, j.benchmark.name, j.src, j.tgt, below=j.limit)) for v in series
                     for j in cfg.jobs)
    if unfinished:
        store.close()
        raise ForgetbenchError(f"{run_dir}: {unfinished} translations have no language identification yet (the run was "
                               "interrupted or made by an older version); rerun `forgetbench sweep` on it to finish")
    spb = SpBLEU(cfg.spm, official=cfg.spm_official)
    bases = {s: cfg.base_of(s) for s in series}
    A = analyse(store, cfg.jobs, cfg.base, series, spb, cfg.thresholds, cfg.tier_views, contrasts=cfg.contrasts,
                bases=bases, parity=cfg.parity_series, families=cfg.families, movements=cfg.movement)
    lacking = {v: r["all"].missing for v, r in A.hallucination.items() if r["all"].missing}
    if lacking:  # the sweep computes λ for the analysed pairs only: the analysis settings or pairs changed since
        store.close()
        raise ForgetbenchError(f"{run_dir}: cross-attention λ is missing for analysed sentences ({lacking}); the analysis "
                               "settings changed since the sweep: rerun `forgetbench sweep` with this config on the run "
                               "folder to compute them")
    stale = biasmod.stale_readings(store)
    if stale is not None:
        store.close()
        raise ForgetbenchError(f"{run_dir}: its MT-Gender items were read by other gender readers ({stale}; now "
                               f"{biasmod.readers_version()}); rerun `forgetbench sweep` with this config on the run "
                               "folder to read them again")
    speed, signals, hardware, batches, maps = ({v: x for v in series if (x := store.meta(f"{kind}:{v}")) is not None}
                                               for kind in ("speed", "signals", "hardware", "batch_size", "attention"))
    bias_summary = biasmod.analyse_bias(store, cfg.bias, cfg.base, series, cfg.thresholds.resamples,
                                        cfg.thresholds.seed, bases, cfg.contrasts)
    if bias_summary and store.stats_count(biasmod.GENDER_STATS):
        bias_summary["gender_readers"] = biasmod.readers_version()
    backends = {s: known[s].get("backend", "torch") for s in series}
    store.close()
    run = {"threads": cfg.threads, "generation": asdict(cfg.generation), "seconds": None, "processes": None,
           "environment": environment()} | (run_info or {})
    run |= {k: v for k, v in (("hardware", hardware), ("out_of_memory", batches)) if v}
    S = Summary.of(A, bias=BiasSummary.from_record(bias_summary), name=cfg.name, model=str(cfg.model),
                   model_source=cfg.model_source, quick_look=cfg.quick_look, speed=speed, distillation_signals=signals,
                   backend=cfg.backend.describe(), backends=backends,
                   variant_models={v: str(cfg.model_of(v)) for v in cfg.variants},
                   tier_views={v.name: v.tiers for v in cfg.tier_views}, run=run, attention_maps=maps,
                   calibrations={v: known[v]["calibration"] for v in series if known[v].get("calibration")})
    S.findings = findings(S)
    return S
