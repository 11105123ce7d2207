"""Write a shipped student's model card (README.md) from its run records and the distillation eval sweep(s).

    python -m benchmarks.batch1_speed artifacts/teacher artifacts/student-kd artifacts/student-nokd --sentences 240 > speed.json
    python scripts/student_card.py artifacts/student-kd student-kd student-nokd WALL_S speed.json runs/distill-eval [runs/distill-eval-tico19]

WALL_S: the measured wall time of the whole `forgetbench distill` command (data, cache, training, export);
speed.json: `benchmarks.batch1_speed` over teacher and students (interleaved sentence by sentence). Weights not
measured yet: `-` for speed.json and no eval runs; the card then says, where the numbers would be, what measures them.
A twin not trained yet for these weights: `-` for its name; the tables then compare the student with its teacher
alone (the eval run's `[student, teacher]` contrast) and say what trains the twin.
"""

import json
import sys
from pathlib import Path

from forgetbench.eval.languages import PAIR_GROUPS
from forgetbench.io import atomic_write_text

GROUP_ORDER = [*PAIR_GROUPS, "low", "all"]


def _f(x, nd=2):
    return "–" if x is None else f"{x:.{nd}f}"


def _ci(c):
    return "–" if not c or c[0] is None else f"[{c[0]:.2f}, {c[1]:.2f}]"


def _diff(d: dict, metric: str, sign: int) -> str:
    """A contrast's difference and interval, turned round (sign −1) where the run holds it the other way."""
    return f"{_f(sign * d[metric]['difference'])} {_ci([sign * x for x in d[metric]['ci']][::sign])}"


def group_table(S: dict, me: str, twin: str, view: str = "training") -> list[str]:
    groups = S["pair_groups"][view]
    key = f"{me} vs {twin}" if f"{me} vs {twin}" in next(iter(groups.values()))["contrasts"] else f"{twin} vs {me}"
    sign = 1 if key.startswith(me) else -1
    rows = ["| pair group | pairs | sentences | teacher chrF | this student chrF | twin chrF | this − twin chrF [95 % CI] "
            "| teacher spBLEU | this spBLEU | twin spBLEU | this − twin spBLEU [95 % CI] |", "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for g in [g for g in GROUP_ORDER if g in groups]:
        c = groups[g]
        d = c["contrasts"][key]
        rows.append(" | ".join([f"| {g}", str(c["pairs"]), str(c["sentences"]), _f(c["scores"][S["base"]]["chrF"]),
                                _f(c["scores"][me]["chrF"]), _f(c["scores"][twin]["chrF"]),
                                _diff(d, 'chrF', sign),
                                _f(c["scores"][S["base"]]["spBLEU"]), _f(c["scores"][me]["spBLEU"]),
                                _f(c["scores"][twin]["spBLEU"]),
                                _diff(d, 'spBLEU', sign)])
                    + " |")
    return rows


def teacher_table(S: dict, me: str, view: str = "training") -> list[str]:
    """The pair groups' table of a student whose twin is not trained yet: teacher, student and their difference."""
    groups = S["pair_groups"][view]
    base = S["base"]
    key = f"{me} vs {base}" if f"{me} vs {base}" in next(iter(groups.values()))["contrasts"] else f"{base} vs {me}"
    sign = 1 if key.startswith(me) else -1
    rows = ["| pair group | pairs | sentences | teacher chrF | this student chrF | share of the teacher | this − teacher "
            "chrF [95 % CI] | teacher spBLEU | this spBLEU | this − teacher spBLEU [95 % CI] |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for g in [g for g in GROUP_ORDER if g in groups]:
        c = groups[g]
        d = c["contrasts"][key]
        t_chrf, me_chrf = c["scores"][base]["chrF"], c["scores"][me]["chrF"]
        share = f"{100 * me_chrf / t_chrf:.1f} %" if t_chrf else "–"
        rows.append(" | ".join([f"| {g}", str(c["pairs"]), str(c["sentences"]), _f(t_chrf), _f(me_chrf), share,
                                _diff(d, 'chrF', sign),
                                _f(c["scores"][base]["spBLEU"]), _f(c["scores"][me]["spBLEU"]),
                                _diff(d, 'spBLEU', sign)])
                    + " |")
    return rows


def _batched_line(batched: dict, me: str, base: str) -> str:
    """Batched speed of the student and the teacher from the sweep's timings, or why the run cannot give it: a
    series resumed from the store translated nothing in that run."""
    head = "- speed, batched (batch 64, the sweep's translation pass): "
    missing = [v for v in (me, base) if v not in batched]
    if missing:
        return head + (f"not measured: this run took {' and '.join(missing)} from its store (a resumed series is "
                       "not timed); a fresh eval run times both")
    return head + f"{_f(batched[me])} vs {_f(batched[base])} sentences/s"


def config_path(cfg: dict, is_kd: bool) -> str:
    """The config that trained the student, as a path inside the repository where it is one."""
    src = cfg.get("source")
    if src and Path(src).parent.name == "configs":
        return f"configs/{Path(src).name}"
    return f"configs/distill-{'kd' if is_kd else 'nokd'}.yaml"


def _sampling(d: dict, quotas: dict) -> str:
    """How the sample was drawn, in words."""
    if d["sampling"] == "temperature":
        return (f"temperature sampling (T = {d['temperature']}: each direction's share ∝ corpus^(1/T), "
                f"{sum(v['quota'] for v in quotas.values()):,} examples in all)")
    return f"uniform sampling: every direction {d['budget']:,} examples"


def _scaled(t: dict) -> str:
    """Where a run's checkpoint counted the main process's tokens alone up to some step (scaled by the processes)."""
    if "tokens_scaled_to_step" not in t:
        return ""
    return (f" (≈: to step {t['tokens_scaled_to_step']:,} the main process's share, scaled by the number of "
            "processes)")


def _cpu_hours(t: dict) -> str:
    """The CPU time the training took (all processes; a paused process accrues none), where the run counted it."""
    if "train_cpu_seconds" not in t:
        return ""
    since = f", counted from step {t['cpu_from_step']:,}" if t.get("cpu_from_step") else ""
    return f" ({t['train_cpu_seconds'] / 3600:.2f} CPU hours{since}; the wall time includes pauses and contention)"


def stopping_lines(t: dict, m: Path) -> list[str]:
    """Early stopping (METHOD §3.5): the dev measurements, the best step, what ended the run and which weights were
    exported; the training curves where ``curves.png`` lies beside the card (``scripts/training_curves.py --groups``)."""
    es = t.get("early_stop")
    if not es or not es.get("scores"):
        return []
    tr = t["config"]["train"]
    rule = (f"stopped after {tr['patience']} measurements without an improvement of {tr.get('min_delta', 0)}"
            if tr.get("patience") else "no early stopping (a fixed number of steps: its KD twin's)")
    out = [f"- dev chrF (the mean over directions of greedy chrF on {tr.get('dev_sentences', '?')} held-out sentences "
           f"each) every {tr['dev_every']} steps after phase 1, {rule}: {len(es['scores'])} measurements, best "
           f"**{es['best']:.2f} at step {es['best_step']:,}**; the run ended by {es.get('stopped') or t['stopped_by']} "
           f"at step {t['steps']:,}; exported: the {es.get('exported', 'last')} step's weights"]
    if (m / "curves.png").is_file():
        out += ["", "![training loss and dev chrF per pair group over steps](curves.png)"]
    return out


def speed_lines(speed_json: str, me: str, S: dict | None) -> list[str]:
    """Batch-1 speed from ``benchmarks.batch1_speed``'s JSON and batched speed from the eval sweep's timings; where
    either is not given, what measures it."""
    if speed_json == "-":
        out = ["- speed, batch 1: not measured for these weights yet (`python -m benchmarks.batch1_speed "
               "artifacts/teacher artifacts/student-kd artifacts/student-nokd --sentences 240` on an idle host)"]
    else:
        B = json.loads(Path(speed_json).read_text())
        sp_t = next(v for k, v in B["models"].items() if Path(k).name == "teacher")
        sp_me = next(v for k, v in B["models"].items() if Path(k).name == me)
        ci = (f" {_ci(sp_me['speedup_ci95'])}, paired bootstrap 95 % over sentences" if "speedup_ci95" in sp_me else "")
        out = [f"- speed, batch 1 (greedy, {B['sentences']} FLORES-101 sentences of {', '.join(B['directions'])}, models "
               f"interleaved sentence by sentence, {B['threads']} thread, load average {B['loadavg_start']:.2f} → "
               f"{B['environment']['loadavg']:.2f}; `benchmarks/batch1_speed.py`): {_f(sp_me['sentences_per_s'])} "
               f"sentences/s vs the teacher's {_f(sp_t['sentences_per_s'])} (**{_f(sp_me['speedup_vs_first'])}×**{ci}); "
               f"per generated token {_f(sp_me['ms_per_token'])} vs {_f(sp_t['ms_per_token'])} ms "
               f"({_f(sp_t['ms_per_token'] / sp_me['ms_per_token'])}×), {_f(sp_me['tokens_per_sentence'], 1)} vs "
               f"{_f(sp_t['tokens_per_sentence'], 1)} tokens per sentence"]
        if "weights_per_generated_token" in sp_me:
            out[0] += (f"; a generated token reads {sp_me['weights_per_generated_token'] / 1e6:.2f} M weights vs the "
                       f"teacher's {sp_t['weights_per_generated_token'] / 1e6:.2f} M, so a runtime without per-layer "
                       f"overhead is bound to {_f(sp_t['weights_per_generated_token'] / sp_me['weights_per_generated_token'])}"
                       "× per token at batch 1 (the output projection is shared work)")
    if S is None:
        return out + ["- speed, batched: measured by the eval sweep (`configs/distill-eval.yaml`), not run on these "
                      "weights yet"]
    timings = S["run"].get("timings_rank0", {})
    batched = {v: timings[v]["translated"] / timings[v]["translate_s"] for v in (me, S["base"])
               if timings.get(v, {}).get("translated")}  # a series resumed from the store translated nothing here
    return out + [_batched_line(batched, me, S["base"])]


def sampling_phrase(data: dict) -> str:
    """How the card's student saw the directions: uniform (SMaLL-100's language-balanced sampling, thesis §6.2.3) or
    at a temperature (not balanced: the shares follow the corpus sizes, flattened)."""
    if data.get("sampling") == "temperature":
        return (f"its directions sampled at temperature T = {data.get('temperature'):g} (shares ∝ corpus size^(1/T); "
                "not SMaLL-100's uniform sampling)")
    return "language-balanced data (every direction the same budget, SMaLL-100's uniform sampling)"


def thesis_lines() -> list[str]:
    """The thesis's protocol beside today's (SMaLL-100 thesis §6.3.3, Tables 6.2 and 6.9): tables rendered from
    their result files by ``scripts/results.py render`` (markers; the numbers are never written twice)."""
    return ["", "## The thesis's protocol beside today's (FLORES-101, 28 directions × 500 sentences; thesis tiers)", "",
            "The thesis measures SMaLL-100 with beam 5, spBLEU, and only the directions where the teacher reaches 3 "
            "spBLEU (§6.3.3, Table 6.2); today's tables above decode greedily, keep every direction and lead with "
            "chrF. Groups by the thesis's resource tiers (M2M-100's data per language); the last column is SMaLL-100's "
            "share of M2M-100 12B's spBLEU on FLORES-101 (Tables 6.2 and 6.9). Beam 5 with the filter "
            "(`configs/distill-eval-thesis.yaml`), the same translations without it "
            "(`forgetbench report RUN --config configs/distill-eval-thesis-nofilter.yaml`), and today's protocol "
            "(`configs/distill-eval.yaml`):", "",
            "<!-- results: distill-groups-thesis groups -->", "<!-- /results -->", "",
            "<!-- results: distill-groups-thesis-nofilter groups -->", "<!-- /results -->", "",
            "<!-- results: distill-groups groups -->", "<!-- /results -->"]


def main(model_dir: str, me: str, twin: str, wall_s: str, speed_json: str, *evals: str) -> None:
    m = Path(model_dir)
    t = json.loads((m / "training.json").read_text())
    cfg = t["config"]
    sums = [json.loads((Path(r) / "report" / "summary.json").read_text()) for r in evals]
    no_twin = twin == "-"
    for r, x in zip(evals, sums, strict=True):
        if missing := [v for v in (me, *([] if no_twin else [twin])) if v not in x["variants"]]:
            print(f"student_card: {r}: its report has no variant {', '.join(missing)} (it has "
                  f"{', '.join(x['variants'])}): the card compares the student with its teacher and its twin; give "
                  "the eval run of configs/distill-eval*.yaml, which has all three", file=sys.stderr)
            sys.exit(2)
    S = sums[0] if sums else None
    size = (m / "model.safetensors").stat().st_size
    teacher = Path(S["variant_models"][S["base"]]) if S else m.parent / "teacher"
    tsize = (teacher / "model.safetensors").stat().st_size
    kd = cfg["kd"]
    is_kd = kd["source"] != "none"
    probe = [json.loads(x) for x in (m / "signals.jsonl").read_text().splitlines()]
    probe = [p for p in probe if p["split"] == "probe"]
    first, last = probe[0], probe[-1]
    q = t["quotas"]
    lines = [
        f"# forgetbench {me}: a SMaLL-100-style student of the shipped teacher "
        f"({'with word-level KD' if is_kd else 'without KD — the no-KD twin, the study' + chr(39) + 's Finetuned-100'})", "",
        f"{cfg['student']['encoder_layers']} encoder / {cfg['student']['decoder_layers']} decoder layer(s) copied from "
        "`artifacts/teacher` (4 / 3), target-language code on the encoder side (SMaLL-100 format; `forgetbench` loads it "
        f"with its SMaLL-100 tokenizer), trained on {sampling_phrase(cfg['data'])} "
        + (f"with L = L_ce + {kd['alpha']}·T²·L_kd (T = {kd['temperature']}) from a top-{kd['top_k']} + "
           f"{kd['tail_samples']}-sample-tail teacher cache." if is_kd else "with L_ce only (same data, batches and steps as "
                                                                                "its KD twin)."), "",
        "## Reproduce", "", "```bash",
        f"forgetbench distill {config_path(cfg, is_kd)} --out runs/{me}"
        + ("" if is_kd or cfg["train"].get("patience") else f" --steps-of runs/{twin}") + "   # resumable",
        f"python scripts/ship_student.py runs/{me} artifacts/{me}",
        "forgetbench sweep configs/distill-eval.yaml --out runs/distill-eval",
        "forgetbench sweep configs/distill-eval-tico19.yaml --out runs/distill-eval-tico19",
        "python -m benchmarks.batch1_speed artifacts/teacher artifacts/student-kd artifacts/student-nokd --sentences 240 > speed.json",
        f"python scripts/student_card.py artifacts/{me} {me} {twin} WALL_S speed.json runs/distill-eval runs/distill-eval-tico19",
        "```", "",
        f"Wall time of the `distill` command: **{float(wall_s) / 60:.1f} min** (data preparation"
        + (f", teacher cache {t['cache']['seconds'] / 60:.1f} min" if is_kd else "")
        + f", training {t['train_seconds'] / 60:.1f} min for {t['steps']:,} steps) on {t['threads']} CPU thread(s) × "
        f"{t.get('processes', 1)} process(es), "
        f"{t['environment']['cpu']['model']} ({t['environment']['cpu']['cores']} cores, flags "
        f"{', '.join(t['environment']['cpu']['flags']) or 'none'}), load average {t['environment']['loadavg']:.2f} at "
        "the start (other runs beside it lengthen the wall time).", "",
        "## Model", "",
        f"- {t['parameters']:,} parameters (tied embedding once); {size / 2**20:.1f} MiB on disk (fp16 safetensors) vs the "
        f"teacher's {tsize / 2**20:.1f} MiB ({size / tsize:.2f}×)",
        f"- layers: encoder {t['config']['student']['encoder_layers']} (teacher's first), decoder "
        f"{t['config']['student']['decoder_layers']} (teacher's first {t['config']['student']['decoder_layers']}); "
        f"`config.json` → `forgetbench_student` records which",
        "- tokenizer: the teacher's files; `tokenizer_config.json` names `M2M100Tokenizer` (as SMaLL-100's own checkpoint "
        "does), so a bare `AutoTokenizer` builds M2M-100-format inputs (source code first) that this model was not trained "
        "on: load it with `forgetbench.models.load` (it reads `forgetbench_small100` from `config.json`) or "
        "`forgetbench.models.tokenizers.Small100Tokenizer`",
        *speed_lines(speed_json, me, S),
        "", "## Data", "",
        f"The teacher's corpus (WMT news + Tatoeba test, every pair overlapping FLORES-101 / NTREX-128 / TICO-19 removed, "
        f"the teacher's dev split held out), {_sampling(cfg['data'], q)} (small corpora repeated, large ones "
        "subsampled).", "",
        "| direction | group | corpus | quota | unique | repeats |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {d} | {v['group']} | {v['corpus']:,} | {v['quota']:,} | {v['unique']:,} | {v['repeats']} |"
              for d, v in q.items()]
    tr = cfg["train"]
    lines += ["", "## Training", "",
              f"- phase 1: steps 1–{tr['phase1_steps']} L_ce; phase 2: steps {tr['phase1_steps'] + 1}–{t['steps']} "
              + ("L_ce + α·T²·L_kd" if is_kd else "L_ce (no KD)"),
              f"- Adam (0.9, 0.98), eps 1e-6, lr {tr['lr']} inverse-sqrt after {tr['warmup']} warm-up steps, clip "
              f"{tr['clip']}, label smoothing {tr['label_smoothing']}, dropout {tr['dropout']}, ≤ {tr['max_tokens']} padded "
              f"tokens per batch, {t['tokens']:,} tokens seen{_scaled(t)} ({t['epochs']} full pass(es) over the sample), "
              f"{(t.get('arithmetic') or {}).get('autocast', 'float32')}; {t['train_seconds'] / 3600:.2f} h of training on "
              f"{t['threads']} CPU thread(s) × {t.get('processes', 1)} process(es){_cpu_hours(t)}",
              *stopping_lines(t, m),
              "", "Teacher–student signal on the probe (first 8 held-out pairs per direction), per pair group: exact "
              "KL(teacher ‖ student) and the student's CE, at step 0 (layers just copied) and at the end:", "",
              "| group | KL step 0 | KL end | CE step 0 | CE end |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {g} | {_f(first['groups'][g]['kl'], 3)} | {_f(last['groups'][g]['kl'], 3)} | "
              f"{_f(first['groups'][g]['ce'], 3)} | {_f(last['groups'][g]['ce'], 3)} |"
              for g in GROUP_ORDER if g in first["groups"]]
    for s in sums:
        bench = s["pairs"][0]["benchmark"]
        n = {p["n"] for p in s["pairs"]}
        lines += ["", f"## Scores per pair group: {bench} ({len(s['pairs'])} directions, {'/'.join(map(str, sorted(n)))} "
                      f"sentences each; config `{s['name']}`)", "",
                  "Own tiers from training pairs (High ≥ 30k, Medium ≥ 10k, Low ≥ 1k, Very-Low < 1k; English High). "
                  "Intervals: stratified paired bootstrap (1000 resamples) of the mean corpus-score difference over the "
                  "group's pairs.", ""]
        lines += teacher_table(s, me) if no_twin else group_table(s, me, twin)
    if sums and no_twin:
        lines += ["", "The no-KD twin of these weights is not trained yet (the twin in `artifacts/student-nokd` is "
                  "an earlier student's): `forgetbench distill configs/distill-nokd-corpus.yaml --out "
                  f"runs/student-nokd-corpus --steps-of runs/{me}` trains it on the same batches and steps."]
    if is_kd and (Path(__file__).resolve().parents[1] / "docs" / "results" / "distill-groups-thesis.json").is_file():
        lines += thesis_lines()
    if S:
        lines += ["", f"Metric signatures: chrF `{S['signatures']['chrF']}`; spBLEU `{S['signatures']['spBLEU']}` (the "
                  "teacher's own SPM: comparable within forgetbench only)."]
    else:
        lines += ["", "## Scores per pair group", "", "Not measured for these weights yet: `forgetbench sweep "
                  "configs/distill-eval.yaml` (FLORES-101, 28 directions × 500 sentences) and "
                  "`configs/distill-eval-tico19.yaml` measure them, with the teacher and the twin."]
    lines += ["", "## Licence and intended use", "",
              "Research only (the training data includes Tatoeba, CC BY-NC-SA 4.0). Like its teacher, it reproduces a "
              "resource skew on purpose; do not use it to translate anything that matters."]
    text = "\n".join(lines) + "\n"
    if "<!-- results:" in text:  # the tables rendered from their result files, as `scripts/results.py render` does
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results import render

        text = render(text)
    atomic_write_text(m / "README.md", text)
    print(f"wrote {m / 'README.md'}")


if __name__ == "__main__":
    main(*sys.argv[1:])
