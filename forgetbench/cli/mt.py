"""The MT commands: compress, compress-stream, make-tiny, train-mt, distill, sweep/eval, report, plan-devices,
convert-fairseq, recipes. Each is a thin adapter over a function the Python API offers: check the inputs and
the output, call it, print the result."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from forgetbench.cli.common import (
    THREADS_HELP,
    add_hardware_flags,
    hardware_flags,
    override_steps,
    positive,
    probe_line,
    set_threads,
)
from forgetbench.console import Console


def cmd_compress(args) -> int:
    from forgetbench.compress.pipeline import compress_dir
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.models.hardware import Hardware, place, with_overrides
    from forgetbench.models.hub import resolve_model
    from forgetbench.outputs import new_output

    new_output(args.out)
    recipe = load_recipe(args.recipe, calibration_override=args.calibration)  # validate before any work
    if args.diagnose and not any(st.kind == "quantize" for st in recipe.steps):
        from forgetbench.errors import ForgetbenchError

        raise ForgetbenchError(f"compress --diagnose: recipe {recipe.name} has no quantize step to diagnose; give a PTQ "
                               "recipe (e.g. ptq-int8) or drop --diagnose")
    args.model_dir = resolve_model(args.model_dir, "compress MODEL").folder  # a folder or a hub id in the cache
    flags = hardware_flags(args)
    placement = place(with_overrides(Hardware(), None, **flags), "compress") if flags else None
    set_threads(args.threads)
    con = Console("compress", quiet=args.quiet)
    report = compress_dir(args.model_dir, recipe, args.out, progress=con, placement=placement, diagnose=args.diagnose)
    sizes = report["sizes"]
    for step in report["steps"]:
        if "prune" in step:
            o = step["prune"]["overall"]
            con.line(f"prune: {o['zeros']:,}/{o['numel']:,} weights zeroed (sparsity {o['sparsity']:.4f}) "
                     f"over {len(step['prune']['units'])} units, {step['seconds']:.2f}s")
        elif "smooth" in step:
            sm = step["smooth"]
            con.line(f"smooth: {sm['norms']} layer norms folded into their linear maps (alpha {sm['alpha']}), "
                     f"{step['seconds']:.2f}s")
        else:
            q = step["quantize"]
            per = {g: sum(1 for k in q["config"]["sites"] if q["config"]["sites"][k]
                          and q["config"].get("granularity", {}).get(k, "tensor") == g) for g in ("channel", "token")}
            how = "".join(f", {n} kind(s) per {g}" for g, n in per.items() if n)
            con.line(f"quantize: {len(q['activation_amax'])} calibrated activation sites{how}, {len(q['weights'])} weight "
                     f"matrices ({q['config']['calibrator']} calibration), {step['seconds']:.2f}s")
            if step.get("diagnosis", {}).get("kinds"):
                kinds = step["diagnosis"]["kinds"]
                con.line("diagnosis (teacher-forced top-1 agreement with the unquantised model): " + ", ".join(
                    f"{k} {100 * r['top1_agreement']:.1f} %" for k, r in kinds.items()))
    line = f"sizes: dense {sizes['dense_bytes']:,} B"
    for k in ("int8", "sparse"):
        if f"{k}_bytes" in sizes:
            line += f", {k} {sizes[f'{k}_bytes']:,} B ({sizes[f'{k}_ratio']:.3f}x)"
    con.line(line + f"; nominal {sizes['nominal_ratio']:.3f}x")
    con.line(f"wrote {args.out}", result=True)
    return 0


def cmd_make_tiny(args) -> int:
    from forgetbench.errors import ForgetbenchError
    from forgetbench.io import atomic_directory, read_text
    from forgetbench.models.tiny import build_tiny_m2m100, build_tiny_nllb
    from forgetbench.outputs import new_output

    new_output(args.out)
    src = Path(args.text)
    if not src.is_file():
        raise ForgetbenchError(f"{src} not found; give a text file (one sentence per line) or a calibration TSV")
    for flag, v, lo in (("--vocab", args.vocab, 16), ("--d-model", args.d_model, 4), ("--layers", args.layers, 1)):
        if v < lo:
            raise ForgetbenchError(f"make-tiny {flag} {v}: must be at least {lo}")
    if args.d_model % 4:
        raise ForgetbenchError(f"make-tiny --d-model {args.d_model}: must be a multiple of 4 (the attention heads)")
    lines = [ln for ln in read_text(src).splitlines() if ln.strip()]
    if not lines:
        raise ForgetbenchError(f"{src}: no text to train the SentencePiece vocabulary on")
    sents = [c for ln in lines for c in (ln.split("\t")[2:] if ln.count("\t") == 3 else [ln])]
    set_threads(1)
    with atomic_directory(args.out) as tmp:
        build = build_tiny_nllb if args.family == "nllb" else build_tiny_m2m100
        model, _ = build(tmp, sents, spm_vocab=args.vocab, seed=args.seed, d_model=args.d_model, layers=args.layers)
    kind = "NLLB-200-shaped M2M100" if args.family == "nllb" else "M2M100"
    print(f"wrote {args.out}: random {kind} with {sum(p.numel() for p in model.parameters()):,} parameters")
    return 0


def cmd_train_mt(args) -> int:
    from forgetbench.errors import ForgetbenchError
    from forgetbench.outputs import resumable_output
    from forgetbench.resources import set_stop_after
    from forgetbench.train.mt import load_config, train

    set_stop_after(args.stop_after)

    cfg = load_config(args.config)
    resumable_output(args.out, "train-run.json", "train-mt run folder")
    override_steps("train-mt", args.steps, cfg.train)
    if args.seed is not None:
        cfg.train.seed = args.seed  # in the fingerprint: a run folder resumes only with its own seed
    if not args.hours > 0:
        raise ForgetbenchError(f"train-mt --hours {args.hours}: give a positive number of hours")
    if args.warm_start and not (Path(args.warm_start) / "model.safetensors").is_file():
        raise ForgetbenchError(f"train-mt --warm-start {args.warm_start}: no model.safetensors there; give a model "
                               "folder written by train-mt (e.g. artifacts/teacher)")
    if cfg.data_note:  # the arguments checked first: a refused command says one line, its own
        print(f"forgetbench: warning: {cfg.data_note}", file=sys.stderr)
    con = Console("train-mt", quiet=args.quiet)
    if args.probe:
        from forgetbench.train.probe import probe

        if args.warm_start:
            raise ForgetbenchError("train-mt --probe measures a fresh model: drop --warm-start")
        r = probe(cfg, args.out, steps=args.steps or 30, hours=args.hours, log=con.line)
        print(probe_line(r))
        return 0
    final = train(cfg, args.out, progress=not args.quiet, log=con.line, warm_from=args.warm_start)
    con.line(f"model: {final}", result=True)
    return 0


def steps_of(run: Path, cfg) -> int:
    """``distill --steps-of RUN``: the steps of the weights RUN exported (its early-stopping best step, else its
    last), so a no-KD twin trains exactly as many steps, on the same batches, as the KD student it is compared with
    (METHOD §3.5)."""
    from forgetbench.errors import ForgetbenchError

    rec_path = run / "model" / "training.json"
    if not rec_path.is_file():
        raise ForgetbenchError(f"distill --steps-of {run}: no model/training.json there; give a finished distill run "
                               "folder (the KD student's)")
    if cfg.train.patience:
        raise ForgetbenchError(f"distill --steps-of {run}: {cfg.source} stops early itself (train.patience "
                               f"{cfg.train.patience}); the twin runs a fixed number of steps: set patience 0")
    rec = json.loads(rec_path.read_text())
    stopped = str(rec.get("stopped_by", "steps"))
    if stopped != "steps" and not stopped.startswith("early stop"):  # a wall deadline or a stop signal: resumable
        raise ForgetbenchError(f"distill --steps-of {run}: that run stopped at step {rec['steps']} by {stopped}, "
                               "before finishing (its best step may still change); resume it to its end first")
    es = rec.get("early_stop") or {}
    return int(es["best_step"]) if es.get("exported") == "best" and es.get("best_step") else int(rec["steps"])


def cmd_distill(args) -> int:
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import RUN_MARKER, distill
    from forgetbench.errors import ForgetbenchError
    from forgetbench.models.hardware import place, with_overrides
    from forgetbench.outputs import resumable_output
    from forgetbench.resources import set_stop_after

    set_stop_after(args.stop_after)
    cfg = load_distill_config(args.config)
    cfg.hardware = with_overrides(cfg.hardware, None, **hardware_flags(args))
    place(cfg.hardware, f"{cfg.source}: hardware")  # the machine's answer before any work
    resumable_output(args.out, RUN_MARKER, "distill run folder")
    if args.steps_of is not None:
        if args.steps is not None:
            raise ForgetbenchError("distill: give --steps or --steps-of, not both")
        args.steps = steps_of(Path(args.steps_of), cfg)
    override_steps("distill", args.steps, cfg.train)
    if args.steps is not None:
        cfg.train.phase1_steps = min(cfg.train.phase1_steps, args.steps)
        if cfg.train.cooldown >= args.steps:
            raise ForgetbenchError(f"distill: {args.steps} steps leave no room for {cfg.source}'s train.cooldown "
                                   f"{cfg.train.cooldown}; give more steps")
    if cfg.data_note:  # the arguments checked first: a refused command says one line, its own
        print(f"forgetbench: warning: {cfg.data_note}", file=sys.stderr)
    con = Console("distill", quiet=args.quiet)
    if cfg.kd.source != "none" and cfg.train.phase1_steps >= cfg.train.steps:
        print(f"forgetbench: warning: KD starts after train.phase1_steps = {cfg.train.phase1_steps} steps "
              f"(cross-entropy only until then) and this run stops at step {cfg.train.steps}: it never reaches KD, so "
              "its student equals the no-KD twin's; give --steps above phase1_steps for a KD student", file=sys.stderr)
    final = distill(cfg, args.out, progress=not args.quiet, log=con.line, branch_from=args.branch_from)
    con.line(f"student: {final}", result=True)
    return 0


def cmd_sweep(args) -> int:
    from forgetbench.console import clock
    from forgetbench.outputs import resumable_output
    from forgetbench.report.build import write_report
    from forgetbench.sweep import load_sweep
    from forgetbench.sweep.parallel import run_in_processes
    from forgetbench.sweep.plan import check_address_space_of, check_resources

    started = time.perf_counter()
    cfg = load_sweep(args.config, hardware_flags(args), args.sentences)  # validated before any work, the machine's too
    cfg.extend = args.extend
    check_address_space_of(cfg)  # under ulimit -v: before the run folder is made
    con = Console(args.command, quiet=args.quiet)
    run_dir = Path(args.out or Path("runs") / cfg.name)
    resumable_output(run_dir, "store.sqlite", "sweep run folder")  # its missing parents made as mkdir -p
    check_resources(cfg, run_dir, args.processes or cfg.processes)  # disk and memory, before any work
    summary, rank, world = run_in_processes(cfg, run_dir, args.processes or cfg.processes, con)
    if rank == 0:
        with con.stage(f"{cfg.name}: report"):
            html_path = write_report(summary, run_dir / "report", started=started)
        con.line(f"{cfg.name}: done in {clock(time.perf_counter() - started)} ({world} process(es))")
        con.line(f"report: {html_path}", result=True)
    return 0


def cmd_gender_score(args) -> int:
    from forgetbench.errors import ForgetbenchError
    from forgetbench.eval.gender_score import score_translations
    from forgetbench.io import atomic_write_json
    from forgetbench.outputs import new_output

    out = new_output(args.out) if args.out else None  # checked before any work
    if args.mt_geneval:
        from forgetbench.eval.mt_geneval import score_files

        if args.translations:
            raise ForgetbenchError("gender-score --mt-geneval reads --feminine/--masculine/--contextual files, not a "
                                   f"'source ||| translation' file ({args.translations})")
        res = score_files(args.mt_geneval, args.lang, args.feminine, args.masculine, args.contextual)
    elif not args.translations:
        raise ForgetbenchError("gender-score: give the MT-Gender translations file (or --mt-geneval DATA with "
                               "--feminine/--masculine/--contextual)")
    else:
        res = score_translations(args.translations, args.lang, args.data)
    if out is not None:
        atomic_write_json(out, res)
    print(json.dumps(res, indent=1, ensure_ascii=False))
    return 0


def cmd_report(args) -> int:
    from forgetbench.errors import ForgetbenchError
    from forgetbench.eval.store import Store
    from forgetbench.eval.store_shards import merge_shards, shard_files
    from forgetbench.report.build import write_report
    from forgetbench.sweep import load_sweep, summarise

    run = Path(args.run_dir)
    if not (run / "store.sqlite").is_file():
        raise ForgetbenchError(f"{run}: not a run folder (no store.sqlite); run `forgetbench sweep` first")
    store = Store(run / "store.sqlite")
    try:
        source, quick = args.config or store.meta("config_source"), store.meta("quick_look")
        if shard_files(run):  # a run on several machines whose rank 0 did not merge: its ranks' finished units
            merge_shards(run, store)
    finally:
        store.close()
    if not source or not Path(source).is_file():
        raise ForgetbenchError(f"{run}: its sweep config {source} is gone; pass --config CONFIG.yaml")
    previous = run / "report" / "summary.json"
    try:
        info = json.loads(previous.read_text(encoding="utf-8"))["run"] if previous.is_file() else None
    except (ValueError, KeyError, TypeError):
        info = None  # a damaged previous summary: the run record is rebuilt without its timings
    summary = summarise(load_sweep(source, sentences=quick), run, info)
    print(f"report: {write_report(summary, run / 'report')}")
    return 0


def cmd_plan_devices(args) -> int:
    from forgetbench.io import atomic_write_json
    from forgetbench.models.device_map import plan
    from forgetbench.outputs import new_output

    if args.out:
        new_output(args.out)
    r = plan(args.model, args.gpus, args.gpu_memory, args.dtype, args.cpu_memory)
    if args.out:
        atomic_write_json(Path(args.out), r)
        print(f"wrote {args.out}: the plan for device_map: {args.out} (hardware block or --device-map)")
    if args.json:
        print(json.dumps(r, indent=1))
        return 0
    print(f"{r['model']}: {r['parameters'] / 1e9:.2f} B parameters, {r['dtype']}, {r['gpus']} x {r['gpu_memory']}")
    for dev, b in sorted(r["bytes_per_device"].items()):
        mods = [m for m, d in r["device_map"].items() if str(d) == dev]
        print(f"  device {dev}: {b / 2**30:6.2f} GiB  {len(mods):3d} modules  {mods[0]} … {mods[-1]}")
    tied = set(map(str, r["tied_devices"].values()))
    print(f"  tied shared/embed_tokens/lm_head on device(s): {', '.join(sorted(tied))}"
          + ("" if len(tied) == 1 else "  WARNING: split across devices"))
    return 0


def cmd_convert_fairseq(args) -> int:
    from forgetbench.models.fairseq import convert
    from forgetbench.outputs import new_output

    new_output(args.out)
    set_threads(1)
    model = convert(args.checkpoint, args.dict, args.spm, args.out, small100=args.small100)
    print(f"wrote {args.out}: M2M100ForConditionalGeneration, {sum(p.numel() for p in model.parameters()):,} parameters")
    return 0


def cmd_compress_stream(args) -> int:
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.compress.streaming import stream_compress
    from forgetbench.models.hub import resolve_model
    from forgetbench.outputs import new_output

    new_output(args.out)
    recipe = load_recipe(args.recipe, calibration_override=args.calibration)
    args.model_dir = resolve_model(args.model_dir, "compress-stream MODEL").folder
    set_threads(args.threads)
    skeleton = None
    cfg = Path(args.model_dir) / "config.json"
    if cfg.is_file() and json.loads(cfg.read_text()).get("model_type", "").startswith("forgetbench-"):
        from forgetbench.parsing.train import parser_skeleton

        skeleton = parser_skeleton(args.model_dir)
    rep = stream_compress(args.model_dir, recipe, args.out, skeleton=skeleton)
    print(f"streamed {recipe.name}: read {rep['bytes_read'] / 2**20:.1f} MiB, wrote {rep['bytes_written'] / 2**20:.1f} MiB "
          f"in {rep['seconds']:.1f}s; wrote {args.out}")
    return 0


def _shipped_names() -> list[str]:
    """The shipped recipes' file names, for --help: a glob, no YAML read, no torch (the parser is built at every
    start, before the thread pools are sized)."""
    from forgetbench.configs import RECIPE_DIRS

    return sorted({f.stem for d in RECIPE_DIRS if d.is_dir() for f in d.glob("*.yaml")})


def cmd_recipes(args) -> int:
    from forgetbench.compress.recipe import load_recipe, shipped_recipes

    files = sorted(set(shipped_recipes().values()), key=lambda f: f.stem)
    recipes = [load_recipe(str(f)) for f in files]
    width = max((len(r.name) for r in recipes), default=12)
    for r in recipes:
        print(f"{r.name:{width}s}  {' -> '.join(s.kind for s in r.steps):20s} {r.description}")
    if args.kinds:
        from forgetbench.compress.kinds import KINDS

        for k in KINDS.values():
            print(f"{k.name:{width}s}  {k.help}; options: {', '.join(sorted(k.keys))}")
    return 0


def add_commands(sub) -> None:
    """Every MT command but ``recipes`` (listed last, after ``parse``)."""
    c = sub.add_parser("compress", help="apply a compression recipe to a model folder")
    c.add_argument("model_dir", help="a Hugging Face model folder (config.json + safetensors + tokenizer files) or a hub "
                   "id in the cache (a download with HF_HUB_OFFLINE=0)")
    c.add_argument("--recipe", required=True, help=f"a recipe YAML file, or a shipped recipe by file name or name: "
                   f"{', '.join(_shipped_names())}")
    c.add_argument("--out", required=True, help="output folder (must not exist)")
    c.add_argument("--calibration", help="calibration TSV overriding the recipe's (src_lang, tgt_lang, source, target)")
    c.add_argument("--diagnose", action="store_true",
                   help="also measure every quantisation site (range, int8 step, share rounded to zero, SNR) and each "
                        "site kind's teacher-forced KL / top-1 agreement: OUT/diagnosis.md")
    c.add_argument("--threads", type=positive, help=THREADS_HELP)
    c.add_argument("--quiet", action="store_true", help="no progress bars")
    add_hardware_flags(c)
    c.set_defaults(func=cmd_compress)

    gs = sub.add_parser("gender-score", help="MT-Gender (WinoMT) scores of given translations ('source ||| "
                        "translation' lines, the official format): accuracy, ΔG, ΔS, ψ, ψ*; or MT-GenEval's accuracy "
                        "(--mt-geneval); nothing translated")
    gs.add_argument("translations", nargs="?", help="one 'source ||| translation' line per MT-Gender en.txt row, in "
                    "its order")
    gs.add_argument("--mt-geneval", metavar="DATA", help="score MT-GenEval translations instead: its test split's "
                    "folder (sentences/test/, context/)")
    gs.add_argument("--feminine", help="MT-GenEval: translations of the feminine English sources, a line each")
    gs.add_argument("--masculine", help="MT-GenEval: translations of the masculine English sources, a line each")
    gs.add_argument("--contextual", help="MT-GenEval: translations of the contextual set's second sentences")
    gs.add_argument("--lang", required=True, help="the translations' language (de, fr, es, it, ru, uk, pl, cs, he, ar)")
    gs.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "data" / "mt_gender"),
                    help="the MT-Gender folder (en.txt, en_pro.txt, en_anti.txt; default: the shipped one)")
    gs.add_argument("--out", help="also write the scores to this JSON file (must not exist)")
    gs.set_defaults(func=cmd_gender_score)

    t = sub.add_parser("make-tiny", help="build a tiny random M2M-100 (or NLLB-200-shaped) model with its own SPM "
                       "vocabulary (tests, demos)")
    t.add_argument("text", help="training text for the SPM: one sentence per line, or a calibration TSV")
    t.add_argument("--out", required=True, help="output folder (must not exist)")
    t.add_argument("--vocab", type=int, default=2000, help="SentencePiece vocabulary size")
    t.add_argument("--d-model", type=int, default=64, help="model width")
    t.add_argument("--layers", type=int, default=2, help="encoder and decoder layers")
    t.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    t.add_argument("--family", choices=("m2m100", "nllb"), default="m2m100",
                   help="m2m100: M2M-100's vocabulary and __xx__ codes; nllb: NLLB-200's token layout and its 202 codes")
    t.set_defaults(func=cmd_make_tiny)

    tm = sub.add_parser("train-mt", help="train a multilingual M2M-100-architecture model from scratch (resumable)")
    tm.add_argument("config", help="training config YAML (see configs/teacher.yaml)")
    tm.add_argument("--out", required=True, help="run folder: new, or a train-mt run folder to resume")
    tm.add_argument("--steps", type=int, help="override train.steps (with --probe: the steps timed, default 30)")
    tm.add_argument("--seed", type=int, help="override train.seed (the GraphMerge study's seeds: its <arm>-s<seed> "
                    "runs are the arm's config with this seed)")
    tm.add_argument("--stop-after", type=float, metavar="MINUTES", help="checkpoint and stop after MINUTES of wall time (a lent machine's slot); the same command resumes")
    tm.add_argument("--warm-start", help="a model folder of this config (e.g. artifacts/teacher) whose weights a run "
                    "with no checkpoint starts from; optimiser and schedule restarted, recorded in training.json")
    tm.add_argument("--probe", action="store_true", help="time a few training steps of the config's model on this "
                    "host and print tokens/s, steps/hour and the epochs --hours buy; trains nothing")
    tm.add_argument("--hours", type=float, default=2.5, help="with --probe: the wall budget to convert into epochs")
    tm.add_argument("--quiet", action="store_true", help="no progress bars")
    tm.set_defaults(func=cmd_train_mt)

    ds = sub.add_parser("distill", help="distil a SMaLL-100-style student from an M2M-100 teacher (resumable; "
                        "accelerate launch for several processes)")
    ds.add_argument("config", help="distillation config YAML (see configs/distill-kd.yaml)")
    ds.add_argument("--out", required=True, help="run folder: new, or a distill run folder to resume")
    ds.add_argument("--steps", type=int, help="override train.steps")
    ds.add_argument("--steps-of", metavar="RUN", help="train as many steps as the finished run RUN exported (its "
                    "early-stopping best step): the no-KD twin of an early-stopped KD student")
    ds.add_argument("--stop-after", type=float, metavar="MINUTES", help="checkpoint and stop after MINUTES of wall time (a lent machine's slot); the same command resumes")
    ds.add_argument("--branch-from", metavar="CHECKPOINT", help="start from a checkpoint of this config's run without "
                    "kd.alpha_directions (RUN/checkpoint or a copy) and train on its batches from its step: a remedy "
                    "that differs from its KD run only after the branch (given again when resuming)")
    ds.add_argument("--quiet", action="store_true", help="no progress bars")
    add_hardware_flags(ds)
    ds.set_defaults(func=cmd_distill)

    for name, text in (("sweep", "compress variants, translate, score, analyse and report (resumable)"),
                       ("eval", "same as sweep; for a config whose only variant is the base model")):
        sw = sub.add_parser(name, help=text)
        sw.add_argument("config", help="sweep config YAML (see configs/demo.yaml)")
        sw.add_argument("--out", help="run folder: new, or a run folder of this kind to resume (default runs/<name>)")
        sw.add_argument("--quiet", action="store_true", help="no progress bars")
        sw.add_argument("--processes", type=int, help="worker processes (overrides the config's processes)")
        sw.add_argument("--sentences", type=positive, help="a quick look: at most N sentences per pair, bias "
                        "benchmark and speed timing (the run record keeps the config as run)")
        sw.add_argument("--extend", action="store_true", help="resume a run folder whose config changed what it "
                        "translates (models, variants, pairs, sentences, generation, backend, metrics)")
        add_hardware_flags(sw)
        sw.set_defaults(func=cmd_sweep)

    rp = sub.add_parser("report", help="recompute the summary of a run from its store and rewrite the report")
    rp.add_argument("run_dir", help="a sweep run folder")
    rp.add_argument("--config", help="the sweep config (default: the one the run was made with)")
    rp.set_defaults(func=cmd_report)

    pd = sub.add_parser("plan-devices", help="layer -> device split on the meta device (no weights loaded)")
    pd.add_argument("model", help="a model folder or a known config: m2m100_418M, m2m100_1.2B, m2m100_12B, small100, "
                    "nllb-200-distilled-600M, nllb-200-1.3B, nllb-200-3.3B")
    pd.add_argument("--gpus", type=positive, required=True, help="number of GPUs")
    pd.add_argument("--gpu-memory", required=True, help="per GPU, e.g. 40GiB")
    pd.add_argument("--cpu-memory", help="allow CPU offload up to this size")
    pd.add_argument("--dtype", default="bf16", help="weight dtype: fp32, fp16, bf16")
    pd.add_argument("--json", action="store_true", help="print the plan as JSON")
    pd.add_argument("--out", help="write the plan as JSON to this new file (a sweep's device_map: PLAN.json)")
    pd.set_defaults(func=cmd_plan_devices)

    cf = sub.add_parser("convert-fairseq", help="fairseq M2M-100/SMaLL-100 .pt -> Hugging Face folder (no fairseq)")
    cf.add_argument("checkpoint", help="fairseq checkpoint .pt (allow-listed unpickling)")
    cf.add_argument("--dict", required=True, help="fairseq dict.txt")
    cf.add_argument("--spm", required=True, help="SentencePiece model")
    cf.add_argument("--out", required=True, help="output folder (must not exist)")
    cf.add_argument("--small100", action="store_true", help="SMaLL-100 input format (target code on the encoder side)")
    cf.set_defaults(func=cmd_convert_fairseq)

    cs = sub.add_parser("compress-stream", help="prune (magnitude, Wanda, SparseGPT) or weight-quantise a sharded safetensors "
                                                "checkpoint group by group, layer by layer")
    cs.add_argument("model_dir", help="a model folder with model.safetensors or a sharded index, or a hub id")
    cs.add_argument("--recipe", required=True, help="a recipe without activation quantisation, a file or a shipped "
                    "name (data-aware pruning calibrates through the folder's tokenizer)")
    cs.add_argument("--out", required=True, help="output folder (must not exist)")
    cs.add_argument("--calibration", help="calibration TSV overriding the recipe's (data-aware pruning)")
    cs.add_argument("--threads", type=positive, help=THREADS_HELP)
    cs.set_defaults(func=cmd_compress_stream)


def add_recipes(sub) -> None:
    r = sub.add_parser("recipes", help="list shipped compression recipes")
    r.add_argument("--kinds", action="store_true", help="also list the step kinds a recipe may use, with their options")
    r.set_defaults(func=cmd_recipes)
