"""The GraphMerge study (docs/METHOD.md §5b): does better cross-lingual alignment protect low-resource and
other-script languages from pruning and quantisation?

    python scripts/graphmerge_study.py configs/graphmerge-study/study.yaml --out RUN [--stage train|sweep|table|all]
        [--jobs N] [--seeds S …]

Stages (each resumes where it stopped when run again):

1. **train**: every arm × seed with ``forgetbench train-mt`` (the arm's config with ``train.seed`` and
   ``train.steps`` set; data paths made absolute), ``jobs`` at once, one thread each, in ``RUN/<arm>-s<seed>``.
2. **sweep**: one ``forgetbench sweep`` over every trained model and each of its compressions, in
   ``RUN/sweep-<steps>`` (the same sentences for all).
   Raising ``steps`` and running again continues every training run (``train-mt`` resumes) and sweeps the
   longer-trained models in ``RUN/sweep-<steps>``. ``--seeds`` takes some of the config's seeds alone (a study whose
   other seeds are still training): their systems are swept, and a later sweep with more seeds adds its systems to
   the same folder (``sweep --extend``) without translating the others again.
3. **table**: ``RUN/study-<steps>.json`` and ``.md``. chrF (the project's chrF3, corpus level per direction) and
   spBLEU-local (the models' shared SentencePiece model). Per seed s, with B_s / G_s the baseline and GraphMerge
   models of seed s and c a compression:

   - before compression: Δ_s(d) = score(G_s, d) − score(B_s, d) for direction d;
   - who pays: the relative loss L_s^X(d, c) = (score(X_s^c, d) − score(X_s, d)) / score(X_s, d) · 100 of each
     arm X, and its difference D_s(d, c) = L_s^G(d, c) − L_s^B(d, c) (> 0: GraphMerge loses less);
   - a group (tier, script class, all) takes the mean over its directions; the seeds' mean is the study's figure.

   Intervals: a paired bootstrap (1,000 resamples, seed 12345) draws each direction's sentence indices once per
   resample and applies the same draw to all systems of both seeds, so every figure (per seed and the seeds'
   mean) has its 95 % percentile interval over sentences; the seed spread (min, max over seeds) is given beside
   it, since the interval does not cover training randomness.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from forgetbench.configs import load_yaml_mapping
from forgetbench.eval.bootstrap import (
    RESAMPLES,
    SEED,
    counts,
    percentile_interval,
    scores_from,
    sentence_stats,
)
from forgetbench.eval.embedding_alignment import script_of
from forgetbench.eval.metrics import CHRF3, SpBLEU, chrf_signature
from forgetbench.eval.store import Store
from forgetbench.io import atomic_write_text, sha256_file
from forgetbench.resources import past_stop_at
from forgetbench.sweep.config import training_tiers

TIER_ORDER = ("High", "Medium", "Low", "Very-Low")


def _path(base: Path, p: str) -> Path:
    p = Path(os.path.expanduser(str(p)))
    return p if p.is_absolute() else (base / p).resolve()


def load(path: Path) -> dict:
    cfg = load_yaml_mapping(path)
    base = path.parent
    cfg["arms"] = {a: _path(base, p) for a, p in cfg["arms"].items()}
    cfg["sweep"]["benchmarks"] = [b | {"path": str(_path(base, b["path"]))} for b in cfg["sweep"]["benchmarks"]]
    cfg["tiers"]["counts"] = _path(base, cfg["tiers"]["counts"])
    return cfg


def runs(cfg: dict, out: Path) -> dict[tuple[str, int], Path]:
    return {(arm, s): out / f"{arm}-s{s}" for arm in cfg["arms"] for s in cfg["seeds"]}


def derived_config(arm_config: Path, seed: int, steps: int, dest: Path) -> Path:
    """The arm's config with this seed and step count, its data paths made absolute (it is written elsewhere)."""
    c = yaml.safe_load(arm_config.read_text())
    for key in ("shared", "sample"):
        if c["data"].get(key):
            c["data"][key] = str(_path(arm_config.parent, c["data"][key]))
    c["train"] |= {"seed": seed, "steps": steps}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(c, sort_keys=False))
    tmp.replace(dest)
    return dest


def steps_of(run: Path) -> int:
    """The steps a run has trained: its checkpoint's, or its exported model's (0 before either)."""
    ckpt, model = run / "checkpoint" / "state.json", run / "model" / "training.json"
    if ckpt.is_file():
        return int(json.loads(ckpt.read_text())["step"])
    return int(json.loads(model.read_text()).get("steps", 0)) if model.is_file() else 0


def trained(run: Path, steps: int) -> bool:
    """A run whose exported model has ``steps`` steps (a lower count: the run continues)."""
    rec = run / "model" / "training.json"
    return rec.is_file() and json.loads(rec.read_text()).get("steps", 0) >= steps


def training_order(cfg: dict, out: Path) -> list[tuple[tuple[str, int], Path]]:
    """The runs seed by seed (baseline-s1, graphmerge-s1, baseline-s2, …): with fewer jobs than runs, the arms of a
    seed are trained before the next seed's, so a study cut short still has a pair of arms at equal steps."""
    return sorted(runs(cfg, out).items(), key=lambda kv: (cfg["seeds"].index(kv[0][1]), list(cfg["arms"]).index(kv[0][0])))


def stage_train(cfg: dict, out: Path) -> bool:
    """Trains every run to ``steps``; whether all got there. A wall deadline (``$FORGETBENCH_STOP_AT``, METHOD §7)
    stops the running ones at their next step with a checkpoint and starts no other; the same command resumes."""
    todo = [(k, r) for k, r in training_order(cfg, out) if not trained(r, int(cfg["steps"]))]
    env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    active: list[tuple[subprocess.Popen, str]] = []
    while (todo and not past_stop_at()) or active:
        while todo and len(active) < int(cfg.get("jobs", 1)) and not past_stop_at():
            (arm, seed), run = todo.pop(0)
            conf = derived_config(cfg["arms"][arm], seed, int(cfg["steps"]), out / "configs" / f"{arm}-s{seed}.yaml")
            log = open(out / f"{arm}-s{seed}.log", "a")
            print(f"train {arm} seed {seed} → {run}", flush=True)
            active.append((subprocess.Popen([sys.executable, "-m", "forgetbench.cli", "train-mt", str(conf), "--out",
                                             str(run), "--quiet"], stdout=log, stderr=subprocess.STDOUT, env=env),
                           f"{arm}-s{seed}"))
        time.sleep(5)
        for p, name in list(active):
            if p.poll() is not None:
                active.remove((p, name))
                if p.returncode != 0:
                    sys.exit(f"training {name} failed (exit {p.returncode}); see {out / (name + '.log')}")
    return all(trained(r, int(cfg["steps"])) for r in runs(cfg, out).values())


def model_dir(run: Path) -> Path:
    return run / "model"


def sweep_dir(cfg: dict, out: Path) -> Path:
    """The sweep of the models at ``steps``: raising ``steps`` and running again trains on and sweeps anew."""
    return out / f"sweep-{cfg['steps']}"


def sweep_config(cfg: dict, out: Path) -> Path:
    rs = runs(cfg, out)
    first = next(iter(rs))
    variants = {}
    for (arm, seed), run in rs.items():
        name = f"{arm}-s{seed}"
        variants[name] = {"model": str(model_dir(run))}
        for cname, recipe in cfg["compressions"].items():
            variants[f"{name}-{cname}"] = {"model": str(model_dir(run)), "recipe": recipe}
    sweep = {"name": "graphmerge-study", "model": str(model_dir(rs[first])), "base": f"{first[0]}-s{first[1]}",
             "variants": variants} | cfg["sweep"]
    dest = out / f"sweep-{cfg['steps']}.yaml"
    atomic_write_text(dest, yaml.safe_dump(sweep, sort_keys=False))
    return dest


def stage_sweep(cfg: dict, out: Path) -> None:
    conf = sweep_config(cfg, out)
    extend = ["--extend"] if (sweep_dir(cfg, out) / "store.sqlite").is_file() else []  # another set of seeds' systems
    subprocess.run([sys.executable, "-m", "forgetbench.cli", "sweep", str(conf), "--out", str(sweep_dir(cfg, out)),
                    *extend], check=True)


def table_name(cfg: dict, all_seeds: list[int]) -> str:
    """``study-<steps>``, with ``-s<seed>…`` where the table holds only some of the config's seeds."""
    subset = list(cfg["seeds"]) != list(all_seeds)
    return f"study-{cfg['steps']}" + ("-" + "-".join(f"s{s}" for s in cfg["seeds"]) if subset else "")


# ---- table ----

def _scores(metric, stats: np.ndarray, weights: np.ndarray) -> tuple[float, np.ndarray]:
    return float(scores_from(metric, stats.sum(0, keepdims=True))[0]), scores_from(metric, weights @ stats)


def _r(v) -> float | None:
    return None if v is None or not np.isfinite(v) else round(float(v), 3)


def _summary(point: float, samples: np.ndarray, per_seed: list[float]) -> dict:
    """A figure: its value, 95 % interval, whether that excludes 0, each seed's value and their range (None where a
    score of 0 leaves a relative loss undefined)."""
    iv = percentile_interval(samples)
    finite = [v for v in per_seed if np.isfinite(v)]
    return {"value": _r(point), "ci": [_r(v) for v in iv.to_dict()], "excludes_zero": iv.excludes_zero(),
            "seeds": [_r(v) for v in per_seed],
            "seed_spread": [_r(min(finite)), _r(max(finite))] if finite else [None, None]}


def stage_table(cfg: dict, out: Path) -> dict:
    store = Store(sweep_dir(cfg, out) / "store.sqlite")
    sweep = yaml.safe_load((out / f"sweep-{cfg['steps']}.yaml").read_text())
    bench = sweep["benchmarks"][0]
    from forgetbench.eval.benchmarks import open_benchmark

    b = open_benchmark(bench["name"], bench["kind"], bench["path"])
    seeds, comps = list(cfg["seeds"]), list(cfg["compressions"])
    arms = list(cfg["arms"])
    base_arm, gm_arm = arms
    rs = runs(cfg, out)
    spm_path = model_dir(rs[(base_arm, seeds[0])]) / "sentencepiece.bpe.model"
    spbleu = SpBLEU(spm_path)
    metrics = {"chrF": CHRF3, "spBLEU-local": spbleu.bleu}
    tiers = training_tiers(Path(cfg["tiers"]["counts"]), cfg["tiers"]["thresholds"])
    langs = [x for x in sweep["languages"] if x != "en"]
    directions = [(s, t) for x in langs for s, t in (("en", x), (x, "en"))]
    n = int(sweep["sentences"])

    # scores[metric][system][direction] = (point, resampled [R])
    scores: dict = {m: {} for m in metrics}
    systems = [f"{a}-s{s}" + (f"-{c}" if c else "") for a in arms for s in seeds for c in [None, *comps]]
    weights = {}
    for d in directions:
        _, refs = b.pair(*d)
        refs = refs[:n]
        weights[d] = counts(len(refs), RESAMPLES, SEED + directions.index(d))
        for sysname in systems:
            rows = store.translations(sysname, bench["name"], *d)
            hyps = [r["hyp"] for r in rows]
            if len(hyps) != len(refs):
                sys.exit(f"{sysname} {d}: {len(hyps)} translations for {len(refs)} references; run the sweep stage")
            for mname, metric in metrics.items():
                if mname == "chrF":
                    st = sentence_stats(metric, hyps, refs)
                else:
                    st = sentence_stats(metric, spbleu.segment(hyps), spbleu.segment(refs))
                scores[mname].setdefault(sysname, {})[d] = _scores(metric, st, weights[d])

    def script_class(d) -> str:
        text = b.pair(*d)[1 if d[1] != "en" else 0][:20]  # the non-English side
        return "Latin" if script_of(text) == "Latin" else "other scripts"

    def groups() -> dict[str, list]:
        g = {"all": directions}
        g |= {f"tier {t}": [d for d in directions if tiers[d[0] if d[1] == "en" else d[1]] == t] for t in TIER_ORDER}
        g |= {f"script {k}": [d for d in directions if script_class(d) == k] for k in ("Latin", "other scripts")}
        g |= {k: [d for d in directions if (d[1] == "en") == (k == "into English")]
              for k in ("into English", "out of English")}
        return {k: v for k, v in g.items() if v}

    def mean_over(ds, f):
        pts, samp = zip(*(f(d) for d in ds), strict=True)
        return float(np.mean(pts)), np.mean(np.vstack(samp), axis=0)

    def absolute(m, arm, seed, d):
        return scores[m][f"{arm}-s{seed}"][d]

    def delta(m, seed, d):  # GraphMerge − baseline, before compression
        (pg, rg), (pb, rb) = absolute(m, gm_arm, seed, d), absolute(m, base_arm, seed, d)
        return pg - pb, rg - rb

    def rel_loss(m, c, arm, seed, d):
        p0, r0 = scores[m][f"{arm}-s{seed}"][d]
        p1, r1 = scores[m][f"{arm}-s{seed}-{c}"][d]
        with np.errstate(divide="ignore", invalid="ignore"):
            return ((p1 - p0) / p0 * 100 if p0 else np.nan), np.where(r0 != 0, (r1 - r0) / r0 * 100, np.nan)

    def protection(m, c, seed, d):  # L^G − L^B (> 0: GraphMerge loses less)
        (pg, rg), (pb, rb) = rel_loss(m, c, gm_arm, seed, d), rel_loss(m, c, base_arm, seed, d)
        return pg - pb, rg - rb

    def over_seeds(ds, f):
        """f(seed, direction) → (point, resamples); the group mean per seed, then the seeds' mean."""
        per = [mean_over(ds, functools.partial(f, s)) for s in seeds]
        point = float(np.mean([p for p, _ in per]))  # NaN where a seed's is (a base score of 0)
        samples = np.nanmean(np.vstack([s for _, s in per]), axis=0)
        return _summary(point, samples, [p for p, _ in per])

    result = {"settings": {"arms": {a: str(p) for a, p in cfg["arms"].items()}, "seeds": seeds,
                           "steps": cfg["steps"], "compressions": cfg["compressions"], "sentences": n,
                           "directions": len(directions), "benchmark": bench["name"],
                           "benchmark_sha256": {f"{s}-{t}": b.sha256(s, t)[:16] for s, t in directions[:2]},
                           "metrics": {"chrF": chrf_signature(), "spBLEU-local": spbleu.signature()},
                           "bootstrap": {"resamples": RESAMPLES, "seed": SEED, "level": 0.95},
                           "tiers": {k: v for k, v in tiers.items() if k in langs}},
              "models": {}, "before": {}, "who_pays": {}, "loss": {}}
    for (arm, seed), run in rs.items():
        info = json.loads((model_dir(run) / "training.json").read_text()) if (model_dir(run) / "training.json").is_file() else {}
        result["models"][f"{arm}-s{seed}"] = {k: info.get(k) for k in ("steps", "stopped_by", "train_seconds", "arithmetic")
                                             if k in info} | {
            "weights_sha256": sha256_file(model_dir(run) / "model.safetensors")[:16],
            "spm_sha256": str(info.get("spm_sha256", ""))[:16]}
    G = groups()
    result["alignment"] = alignment(cfg, out, b, langs)
    for m in metrics:
        P = functools.partial
        result["before"][m] = {g: {"baseline": over_seeds(ds, P(absolute, m, base_arm)),
                                   "graphmerge": over_seeds(ds, P(absolute, m, gm_arm)),
                                   "delta": over_seeds(ds, P(delta, m))} for g, ds in G.items()}
        result["who_pays"][m] = {c: {g: over_seeds(ds, P(protection, m, c)) for g, ds in G.items()} for c in comps}
        result["loss"][m] = {c: {arm: {g: over_seeds(ds, P(rel_loss, m, c, arm)) for g, ds in G.items()}
                                 for arm in arms} for c in comps}
    return result


ALIGNMENT_SENTENCES = 400  # FLORES-101 devtest sentences per language, as the model cards


def alignment(cfg: dict, out: Path, b, langs: list[str]) -> dict:
    """Each model's cross-lingual embedding alignment (``eval.embedding_alignment``): mean cosine of the embeddings
    of subword pairs linked in English–x FLORES-101 devtest pairs, per script pair; then per arm the seeds' mean and
    range."""
    import json

    from forgetbench.eval.embedding_alignment import alignment_scores, graph_edges, independent_aligner
    from forgetbench.models.load import load

    bitext = {}
    for x in langs:
        eng, foreign = b.pair("en", x)
        bitext[x] = list(zip(eng[:ALIGNMENT_SENTENCES], foreign[:ALIGNMENT_SENTENCES], strict=True))
    graph_aligners = set()
    for run in runs(cfg, out).values():
        rec = json.loads((model_dir(run) / "training.json").read_text()).get("graphmerge")
        if rec:
            graph_aligners.add(rec["graph"].get("aligner", rec["settings"]["aligner"]))
    # every arm measured by one aligner, the one that built no arm's graph where there is one
    aligner = independent_aligner(next(iter(graph_aligners)) if len(graph_aligners) == 1 else None)
    graphs = {}  # seed -> the edges of that seed's GraphMerge graph: both arms' pairs split by it (rule 4)
    for (_arm, seed), run in runs(cfg, out).items():
        if (run / "graph.npz").is_file():
            with np.load(run / "graph.npz", allow_pickle=False) as z:
                graphs.setdefault(seed, graph_edges(z["indices"]))
    per_model = {}
    for (arm, seed), run in runs(cfg, out).items():
        model, tok, _ = load(model_dir(run), with_signature=False)
        per_model[f"{arm}-s{seed}"] = alignment_scores(model, tok, bitext, aligner=aligner, edges=graphs.get(seed))
    table = {}
    for arm in cfg["arms"]:
        rows = [per_model[f"{arm}-s{s}"]["script_pairs"] for s in cfg["seeds"]]
        for sp in rows[0]:
            vals = [r[sp]["mean_cosine"] for r in rows if r.get(sp, {}).get("mean_cosine") is not None]
            table.setdefault(sp, {})[arm] = {"mean": _r(float(np.mean(vals))) if vals else None,
                                             "seeds": vals, "pairs": rows[0][sp]["pairs"]}
    iso = {arm: _r(float(np.mean([r["isotropy"] for s in cfg["seeds"]
                                  for r in per_model[f"{arm}-s{s}"]["languages"].values() if r["isotropy"] is not None])))
           for arm in cfg["arms"]}
    return {"sentences": ALIGNMENT_SENTENCES, "aligner": aligner, "graph_aligners": sorted(graph_aligners),
            "script_pairs": table, "isotropy": iso, "models": per_model}


def _f(v, fmt: str = "+.2f") -> str:
    return "n/a" if v is None else format(v, fmt)


def _cell(x: dict) -> str:
    lo, hi = x["ci"]
    star = " *" if x["excludes_zero"] else ""
    return f"{_f(x['value'])} [{_f(lo)}, {_f(hi)}]{star} ({_f(x['seed_spread'][0])}…{_f(x['seed_spread'][1])})"


def markdown(res: dict) -> str:
    s = res["settings"]
    lines = [f"Seeds {s['seeds']}, {s['steps']} steps, {s['directions']} directions × {s['sentences']} sentences "
             f"({s['benchmark']}); bootstrap {s['bootstrap']['resamples']} resamples, seed {s['bootstrap']['seed']}. "
             "Cells: seeds' mean [95 % paired bootstrap interval over sentences] (* excludes 0) "
             "(seed spread: min…max over seeds).", ""]
    for m in res["before"]:
        lines += [f"**Before compression, {m}**", "", "| group | baseline | GraphMerge | GraphMerge − baseline |",
                  "|---|---|---|---|"]
        for g, row in res["before"][m].items():
            lines.append(f"| {g} | {_f(row['baseline']['value'], '.2f')} | {_f(row['graphmerge']['value'], '.2f')} | "
                         f"{_cell(row['delta'])} |")
        lines += ["", f"**Who pays, {m}: relative loss (%) under each compression, and GraphMerge's loss minus "
                      "the baseline's (> 0: GraphMerge loses less)**", "",
                  "| compression | group | baseline loss % | GraphMerge loss % | difference |", "|---|---|---|---|---|"]
        for c, rows in res["who_pays"][m].items():
            for g, x in rows.items():
                lb, lg = res["loss"][m][c]["baseline"][g], res["loss"][m][c]["graphmerge"][g]
                lines.append(f"| {c} | {g} | {_f(lb['value'], '+.1f')} | {_f(lg['value'], '+.1f')} | {_cell(x)} |")
        lines.append("")
    al = res.get("alignment")
    if al:
        arms = list(res["settings"]["arms"])
        lines += [f"**Cross-lingual embedding alignment** (mean cosine of linked subword pairs, first {al['sentences']} "
                  f"FLORES-101 devtest sentences per language, linked by {al.get('aligner', 'fast_align')} (graphs built "
                  f"by {', '.join(al.get('graph_aligners', [])) or 'n/a'}); seeds' mean (each seed)); isotropy control "
                  "(mean cosine to random subwords, languages and seeds averaged): "
                  + ", ".join(f"{a} {_f(v, '.3f')}" for a, v in al.get("isotropy", {}).items()), "",
                  "| script pair | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
        for sp, row in al["script_pairs"].items():
            cells = [f"{_f(row[a]['mean'], '.3f')} ({', '.join(f'{v:.3f}' for v in row[a]['seeds'])})" for a in arms]
            lines.append(f"| {sp} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stage", choices=["train", "sweep", "table", "all"], default="all")
    ap.add_argument("--jobs", type=int, help="training runs at once (default: the config's `jobs`)")
    ap.add_argument("--seeds", type=int, nargs="+", metavar="S",
                    help="some of the config's seeds alone: train, sweep and tabulate those (default: all)")
    a = ap.parse_args(argv)
    cfg = load(a.config.resolve())
    all_seeds = list(cfg["seeds"])
    if a.seeds:
        if set(a.seeds) - set(all_seeds):
            ap.error(f"--seeds {' '.join(map(str, a.seeds))}: {a.config} has seeds {all_seeds}; give some of those")
        cfg["seeds"] = [s for s in all_seeds if s in a.seeds]
    if a.jobs:
        cfg["jobs"] = a.jobs
    out = a.out.expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    if a.stage in ("train", "all") and not stage_train(cfg, out):
        left = {f"{arm}-s{s}": steps_of(r) for (arm, s), r in training_order(cfg, out) if not trained(r, cfg["steps"])}
        print(f"training stopped by the wall deadline before {cfg['steps']:,} steps ("
              + ", ".join(f"{k} at {v:,}" for k, v in left.items()) + "): run the same command again to resume; "
              "the sweep waits for every run", flush=True)
        return
    if a.stage in ("sweep", "all"):
        stage_sweep(cfg, out)
    if a.stage in ("table", "all"):
        res = stage_table(cfg, out)
        name = table_name(cfg, all_seeds)
        atomic_write_text(out / f"{name}.json", json.dumps(res, indent=1))
        atomic_write_text(out / f"{name}.md", markdown(res))
        print(markdown(res))


if __name__ == "__main__":
    main()
