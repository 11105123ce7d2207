"""The ``forgetbench`` command line.

Bad input: one line on stderr (``forgetbench: error: what, where, how to fix``), exit 2, nothing
written; every command checks its inputs and its output (``forgetbench.outputs``) before any work.
An unexpected exception also ends in one line (exit 1), with ``--debug`` for the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def _thread_count(n: int | None) -> int:
    """--threads, else $FORGETBENCH_THREADS, else 1. Deliberate: with another busy process, 2 torch threads
    ran generate 25-45x slower than 1 here."""
    from forgetbench.errors import ForgetbenchError

    if n is not None:
        return n
    env = os.environ.get("FORGETBENCH_THREADS", "1")
    if not env.isdigit() or int(env) < 1:
        raise ForgetbenchError(f"$FORGETBENCH_THREADS={env!r}: give a positive integer (torch threads)")
    return int(env)


def _threads(n: int | None) -> None:
    import torch

    torch.set_num_threads(_thread_count(n))


def cmd_compress(args) -> int:
    from forgetbench.compress.pipeline import compress_dir
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.console import Console
    from forgetbench.outputs import new_output

    new_output(args.out)
    recipe = load_recipe(args.recipe, calibration_override=args.calibration)  # validate before any work
    _threads(args.threads)
    con = Console("compress", quiet=args.quiet)
    report = compress_dir(args.model_dir, recipe, args.out, progress=con)
    sizes = report["sizes"]
    for step in report["steps"]:
        if "prune" in step:
            o = step["prune"]["overall"]
            con.line(f"prune: {o['zeros']:,}/{o['numel']:,} weights zeroed (sparsity {o['sparsity']:.4f}) "
                     f"over {len(step['prune']['units'])} units, {step['seconds']:.2f}s")
        else:
            q = step["quantize"]
            con.line(f"quantize: {len(q['activation_amax'])} activation sites, {len(q['weights'])} weight matrices "
                     f"({q['config']['calibrator']} calibration), {step['seconds']:.2f}s")
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
    from forgetbench.models.tiny import build_tiny_m2m100
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
    _threads(1)
    with atomic_directory(args.out) as tmp:
        model, _ = build_tiny_m2m100(tmp, sents, spm_vocab=args.vocab, seed=args.seed, d_model=args.d_model,
                                     layers=args.layers)
    print(f"wrote {args.out}: random M2M100 with {sum(p.numel() for p in model.parameters()):,} parameters")
    return 0


def cmd_train_mt(args) -> int:
    from forgetbench.errors import ForgetbenchError
    from forgetbench.outputs import resumable_output
    from forgetbench.train.mt import load_config, train

    cfg = load_config(args.config)
    resumable_output(args.out, "train-run.json", "train-mt run folder")
    if args.steps is not None:
        if args.steps < 1:
            raise ForgetbenchError(f"train-mt --steps {args.steps}: must be a positive number of steps")
        cfg.train.steps = args.steps
    train(cfg, args.out, progress=not args.quiet)
    return 0


def cmd_distill(args) -> int:
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import RUN_MARKER, distill
    from forgetbench.errors import ForgetbenchError
    from forgetbench.outputs import resumable_output

    cfg = load_distill_config(args.config)
    resumable_output(args.out, RUN_MARKER, "distill run folder")
    if args.steps is not None:
        if args.steps < 1:
            raise ForgetbenchError(f"distill --steps {args.steps}: must be a positive number of steps")
        cfg.train.steps = args.steps
        cfg.train.phase1_steps = min(cfg.train.phase1_steps, args.steps)
    distill(cfg, args.out, progress=not args.quiet)
    return 0


def cmd_sweep(args) -> int:
    from forgetbench.console import Console, clock
    from forgetbench.errors import ForgetbenchError
    from forgetbench.outputs import resumable_output
    from forgetbench.report.build import write_report
    from forgetbench.sweep import load_sweep, run_sweep

    started = time.perf_counter()
    cfg = load_sweep(args.config)  # validated before any work
    con = Console(args.command, quiet=args.quiet)
    run_dir = Path(args.out or Path("runs") / cfg.name)
    if not run_dir.parent.exists() and args.out is None:
        run_dir.parent.mkdir(parents=True)
    resumable_output(run_dir, "store.sqlite", "sweep run folder")
    rank, world, barrier = 0, 1, None
    processes = args.processes or cfg.processes
    if processes < 1:
        raise ForgetbenchError(f"--processes {processes}: must be a positive number of processes")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # launched with `accelerate launch --num_processes N`
        from accelerate import PartialState

        state = PartialState(cpu=True)
        rank, world, barrier = state.process_index, state.num_processes, state.wait_for_everyone
        summary = run_sweep(cfg, run_dir, progress=con, rank=rank, world=world, barrier=barrier)
    elif processes > 1:
        from forgetbench.sweep.parallel import run_parallel

        summary = run_parallel(cfg, run_dir, processes, progress=con)
    else:
        summary = run_sweep(cfg, run_dir, progress=con)
    if rank == 0:
        with con.stage(f"{cfg.name}: report"):
            html_path = write_report(summary, run_dir / "report", started=started)
        con.line(f"{cfg.name}: done in {clock(time.perf_counter() - started)} ({processes if world == 1 else world} "
                 f"process(es))")
        con.line(f"report: {html_path}", result=True)
    return 0


def cmd_report(args) -> int:
    from forgetbench.errors import ForgetbenchError
    from forgetbench.eval.store import Store
    from forgetbench.report.build import write_report
    from forgetbench.sweep import load_sweep, summarise

    run = Path(args.run_dir)
    if not (run / "store.sqlite").is_file():
        raise ForgetbenchError(f"{run}: not a run folder (no store.sqlite); run `forgetbench sweep` first")
    store = Store(run / "store.sqlite")
    try:
        source = args.config or store.meta("config_source")
    finally:
        store.close()
    if not source or not Path(source).is_file():
        raise ForgetbenchError(f"{run}: its sweep config {source} is gone; pass --config CONFIG.yaml")
    previous = run / "report" / "summary.json"
    try:
        info = json.loads(previous.read_text(encoding="utf-8"))["run"] if previous.is_file() else None
    except (ValueError, KeyError, TypeError):
        info = None  # a damaged previous summary: the run record is rebuilt without its timings
    summary = summarise(load_sweep(source), run, info)
    print(f"report: {write_report(summary, run / 'report')}")
    return 0


def cmd_plan_devices(args) -> int:
    from forgetbench.models.device_map import plan

    r = plan(args.model, args.gpus, args.gpu_memory, args.dtype, args.cpu_memory)
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
    _threads(1)
    model = convert(args.checkpoint, args.dict, args.spm, args.out, small100=args.small100)
    print(f"wrote {args.out}: M2M100ForConditionalGeneration, {sum(p.numel() for p in model.parameters()):,} parameters")
    return 0


def cmd_compress_stream(args) -> int:
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.compress.streaming import stream_compress
    from forgetbench.outputs import new_output

    new_output(args.out)
    recipe = load_recipe(args.recipe)
    _threads(args.threads)
    skeleton = None
    cfg = Path(args.model_dir) / "config.json"
    if cfg.is_file() and json.loads(cfg.read_text()).get("model_type", "").startswith("forgetbench-"):
        from forgetbench.parsing.train import parser_skeleton

        skeleton = parser_skeleton(args.model_dir)
    rep = stream_compress(args.model_dir, recipe, args.out, skeleton=skeleton)
    print(f"streamed {recipe.name}: read {rep['bytes_read'] / 2**20:.1f} MiB, wrote {rep['bytes_written'] / 2**20:.1f} MiB "
          f"in {rep['seconds']:.1f}s; wrote {args.out}")
    return 0


def cmd_parse(args) -> int:
    from forgetbench.outputs import new_output
    from forgetbench.parsing import train as ptrain

    if args.action == "compress":
        from forgetbench.io import atomic_directory
        from forgetbench.parsing.compress_eval import run
        from forgetbench.report.parsing import write_parse_report

        new_output(args.out)
        S = run(args.models, args.test, args.dev, args.recipes, threads=_thread_count(args.threads))
        with atomic_directory(args.out) as tmp:
            write_parse_report(S, tmp)
        for tb in S["treebanks"]:
            print(Path(tb["model"]).name, f"base LAS {tb['base']['las']:.2f}",
                  *(f"{v} {d['las']:.2f} ({d['rel_las']:+.2f} %)" for v, d in tb["variants"].items()))
        print(f"wrote {args.out}")
        return 0
    if args.action == "train":
        new_output(args.out)
        graph_kw = {k: v for k, v in (("attention", args.attention), ("relation_norm", args.relation_norm),
                                      ("value_relations", args.value_relations), ("graph", args.graph)) if v is not None}
        minutes = args.minutes or ptrain.DEFAULT_MINUTES[args.arch]
        info = ptrain.train(args.train, args.dev, args.out, minutes=minutes, threads=_thread_count(args.threads),
                            seed=args.seed, progress=not args.quiet, tags=args.tags, tagger_minutes=args.tagger_minutes,
                            max_epochs=args.max_epochs, tagger_epochs=args.tagger_epochs, jackknife=args.jackknife, arch=args.arch, tagger_from=args.tagger_from, initial=args.initial,
                            iterations=args.iterations, train_iterations=args.train_iterations,
                            warm_start=args.warm_start, folds=args.folds, fold_minutes=args.fold_minutes,
                            refiner_graphs=args.refiner_graphs or ("kfold" if args.initial else "empty"), **graph_kw)
        tags = f", dev UPOS {info['tagger_dev_upos']:.2f}" if "tagger_dev_upos" in info else ""
        print(f"{args.arch}: best dev LAS {info['dev']['las']:.2f} ({args.tags} tags{tags}; epoch {info['best_epoch']} of "
              f"{info['epochs']}, {info['train_seconds']:.0f}s); wrote {args.out}")
    elif args.action == "eval":
        from forgetbench.parsing.evaluate import evaluate_parser

        _threads(args.threads)
        print(json.dumps(evaluate_parser(args.model, args.data, initial=args.initial, iterations=args.iterations)))
    else:
        new_output(args.out)
        _threads(args.threads)
        ptrain.predict_file(args.model, args.data, args.out, progress=not args.quiet)
        print(f"wrote {args.out}")
    return 0


def cmd_recipes(args) -> int:
    from forgetbench.compress.recipe import RECIPE_DIRS, load_recipe

    seen = set()
    for d in RECIPE_DIRS:
        for f in sorted(d.glob("*.yaml")) if d.is_dir() else []:
            if f.stem in seen:
                continue
            seen.add(f.stem)
            r = load_recipe(str(f))
            print(f"{r.name:12s} {' -> '.join(s.kind for s in r.steps):20s} {r.description}")
    return 0


class _Help(argparse.HelpFormatter):
    """Shows an option's default in --help where it has a meaningful one."""

    def _get_help_string(self, action):
        h = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in h and action.option_strings:
            h += " (default: %(default)s)"
        return h


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``forgetbench: error: …``, exit 2) and defaults shown in --help."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", _Help)
        super().__init__(*a, **kw)

    def error(self, message):
        sys.stderr.write(f"forgetbench: error: {self.prog}: {message}; see `{self.prog} --help`\n")
        sys.exit(2)


def _positive(v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{v!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{v} must be at least 1")
    return n


def _minutes(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{v!r} is not a number of minutes") from None
    if not x > 0 or x != x or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{v} must be a positive number of minutes")
    return x


THREADS_HELP = "torch threads (default: $FORGETBENCH_THREADS, else 1)"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="forgetbench", description="Who pays for compression? Compress, translate, score and report "
                                                "per language, tier, gender and word sense.")
    p.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("compress", help="apply a compression recipe to a model folder")
    c.add_argument("model_dir", help="a Hugging Face model folder (config.json + safetensors + tokenizer files)")
    c.add_argument("--recipe", required=True, help="a recipe YAML file or a shipped name (prune-30, prune-45, ptq-int8)")
    c.add_argument("--out", required=True, help="output folder (must not exist)")
    c.add_argument("--calibration", help="calibration TSV overriding the recipe's (src_lang, tgt_lang, source, target)")
    c.add_argument("--threads", type=_positive, help=THREADS_HELP)
    c.add_argument("--quiet", action="store_true", help="no progress bars")
    c.set_defaults(func=cmd_compress)

    t = sub.add_parser("make-tiny", help="build a tiny random M2M-100 with its own SPM vocabulary (tests, demos)")
    t.add_argument("text", help="training text for the SPM: one sentence per line, or a calibration TSV")
    t.add_argument("--out", required=True, help="output folder (must not exist)")
    t.add_argument("--vocab", type=int, default=2000, help="SentencePiece vocabulary size")
    t.add_argument("--d-model", type=int, default=64, help="model width")
    t.add_argument("--layers", type=int, default=2, help="encoder and decoder layers")
    t.add_argument("--seed", type=int, default=0, help="weight initialisation seed")
    t.set_defaults(func=cmd_make_tiny)

    tm = sub.add_parser("train-mt", help="train a multilingual M2M-100-architecture model from scratch (resumable)")
    tm.add_argument("config", help="training config YAML (see configs/teacher.yaml)")
    tm.add_argument("--out", required=True, help="run folder: new, or a train-mt run folder to resume")
    tm.add_argument("--steps", type=int, help="override train.steps")
    tm.add_argument("--quiet", action="store_true", help="no progress bars")
    tm.set_defaults(func=cmd_train_mt)

    ds = sub.add_parser("distill", help="distil a SMaLL-100-style student from an M2M-100 teacher (resumable; "
                        "accelerate launch for several processes)")
    ds.add_argument("config", help="distillation config YAML (see configs/distill-kd.yaml)")
    ds.add_argument("--out", required=True, help="run folder: new, or a distill run folder to resume")
    ds.add_argument("--steps", type=int, help="override train.steps")
    ds.add_argument("--quiet", action="store_true", help="no progress bars")
    ds.set_defaults(func=cmd_distill)

    for name, text in (("sweep", "compress variants, translate, score, analyse and report (resumable)"),
                       ("eval", "same as sweep; for a config whose only variant is the base model")):
        sw = sub.add_parser(name, help=text)
        sw.add_argument("config", help="sweep config YAML (see configs/demo.yaml)")
        sw.add_argument("--out", help="run folder: new, or a run folder of this kind to resume (default runs/<name>)")
        sw.add_argument("--quiet", action="store_true", help="no progress bars")
        sw.add_argument("--processes", type=int, help="worker processes (overrides the config's processes)")
        sw.set_defaults(func=cmd_sweep)

    rp = sub.add_parser("report", help="recompute the summary of a run from its store and rewrite the report")
    rp.add_argument("run_dir", help="a sweep run folder")
    rp.add_argument("--config", help="the sweep config (default: the one the run was made with)")
    rp.set_defaults(func=cmd_report)

    pd = sub.add_parser("plan-devices", help="layer -> device split on the meta device (no weights loaded)")
    pd.add_argument("model", help="a model folder or a known config: m2m100_418M, m2m100_1.2B, m2m100_12B, small100")
    pd.add_argument("--gpus", type=_positive, required=True, help="number of GPUs")
    pd.add_argument("--gpu-memory", required=True, help="per GPU, e.g. 40GiB")
    pd.add_argument("--cpu-memory", help="allow CPU offload up to this size")
    pd.add_argument("--dtype", default="bf16", help="weight dtype: fp32, fp16, bf16")
    pd.add_argument("--json", action="store_true", help="print the plan as JSON")
    pd.set_defaults(func=cmd_plan_devices)

    cf = sub.add_parser("convert-fairseq", help="fairseq M2M-100/SMaLL-100 .pt -> Hugging Face folder (no fairseq)")
    cf.add_argument("checkpoint", help="fairseq checkpoint .pt (allow-listed unpickling)")
    cf.add_argument("--dict", required=True, help="fairseq dict.txt")
    cf.add_argument("--spm", required=True, help="SentencePiece model")
    cf.add_argument("--out", required=True, help="output folder (must not exist)")
    cf.add_argument("--small100", action="store_true", help="SMaLL-100 input format (target code on the encoder side)")
    cf.set_defaults(func=cmd_convert_fairseq)

    cs = sub.add_parser("compress-stream", help="prune / weight-quantise a sharded safetensors checkpoint group by group")
    cs.add_argument("model_dir", help="a model folder with model.safetensors or a sharded index")
    cs.add_argument("--recipe", required=True, help="a recipe without activation quantisation")
    cs.add_argument("--out", required=True, help="output folder (must not exist)")
    cs.add_argument("--threads", type=_positive, help=THREADS_HELP)
    cs.set_defaults(func=cmd_compress_stream)

    pa = sub.add_parser("parse", help="dependency parsers (biaffine, SynTr, RNGTr, G2GTr): train | eval | predict | compress")
    psub = pa.add_subparsers(dest="action", required=True, parser_class=_Parser)
    pt = psub.add_parser("train", help="train a parser on a UD treebank (gold tokenisation)")
    pt.add_argument("--train", required=True, help="training CoNLL-U")
    pt.add_argument("--dev", help="dev CoNLL-U for model selection; without it every 10th training sentence is "
                                  "held out as dev (documented in training.json)")
    pt.add_argument("--out", required=True, help="output folder (must not exist)")
    pt.add_argument("--minutes", type=_minutes, help="time budget of the whole run, taggers included (default: the "
                                                      "README's measured setting, biaffine 15, syntr 6, rngtr 6, g2gtr 10)")
    pt.add_argument("--seed", type=int, default=1, help="seed")
    pt.add_argument("--tags", choices=["gold", "predicted"], default="predicted",
                    help="UPOS input: predicted by the parser's own tagger (trained on jackknifed tags), or gold")
    pt.add_argument("--tagger-minutes", type=_minutes, default=1.5, help="time budget of each tagger (predicted tags)")
    pt.add_argument("--max-epochs", type=_positive, default=200,
                    help="the parser's epoch budget; with a --minutes too large to bind, the run is deterministic")
    pt.add_argument("--tagger-epochs", type=_positive, default=999, help="each tagger's epoch budget (predicted tags)")
    pt.add_argument("--jackknife", type=int, default=2, help="folds for the jackknifed training tags")
    pt.add_argument("--arch", choices=["biaffine", "syntr", "rngtr", "g2gtr"], default="biaffine",
                    help="biaffine (BiLSTM), syntr (Transformer + biaffine), rngtr (graph-to-graph refiner of an initial "
                         "parse), g2gtr (transition-based graph-to-graph Transformer, arc-standard + SWAP)")
    pt.add_argument("--tagger-from", help="reuse this parser's tagger and jackknifed training tags (same --train): "
                                          "architectures compared on the same tags, no second jackknife")
    pt.add_argument("--initial", help="rngtr: the parser (biaffine or syntr folder) whose output is the initial graph; "
                                      "default: the empty graph")
    pt.add_argument("--iterations", type=_positive, default=3, help="rngtr: at most T refinement iterations")
    pt.add_argument("--train-iterations", type=_positive, default=2,
                    help="rngtr: refinement iterations per training batch (the measured setting)")
    pt.add_argument("--refiner-graphs", choices=["empty", "kfold"],
                    help="rngtr: the first training iteration's input graphs: empty, or k-fold predictions of the "
                         "initial parser's architecture (--folds parsers of --fold-minutes each, trained first); "
                         "default kfold with --initial (the measured setting), else empty")
    pt.add_argument("--folds", type=_positive, default=2, help="rngtr with --refiner-graphs kfold: folds")
    pt.add_argument("--fold-minutes", type=_minutes, default=6.0, help="rngtr with --refiner-graphs kfold: budget per fold parser")
    pt.add_argument("--warm-start", help="rngtr: initialise the refiner from this syntr folder (relation embeddings new)")
    pt.add_argument("--attention", choices=["g2g", "syng2g"], help="graph-input attention: relations on key and value "
                                                                   "(g2g, default) or on query and key (syng2g)")
    pt.add_argument("--graph", choices=["labelled", "unlabelled"], help="rngtr: relation ids of the input graph "
                                                                       "(default labelled)")
    pt.add_argument("--no-relation-norm", dest="relation_norm", action="store_false", default=None,
                    help="no LayerNorm on the key-side relation embeddings (the ablation)")
    pt.add_argument("--no-value-relations", dest="value_relations", action="store_false", default=None,
                    help="no relation embeddings on the value side")
    pt.add_argument("--threads", type=_positive, help=THREADS_HELP)
    pt.add_argument("--quiet", action="store_true", help="no progress bars")
    pt.set_defaults(func=cmd_parse)
    pe = psub.add_parser("eval", help="CoNLL 2018 UAS/LAS/CLAS (+ UPOS with predicted tags) on a CoNLL-U file")
    pp = psub.add_parser("predict", help="parse a CoNLL-U file: heads, deprels and (predicted-tag parsers) UPOS")
    for q in (pe, pp):
        q.add_argument("model", help="a parser folder from `parse train`")
        q.add_argument("data", help="CoNLL-U file (gold tokenisation)")
        q.add_argument("--threads", type=_positive, help=THREADS_HELP)
        q.set_defaults(func=cmd_parse)
    pe.add_argument("--initial", help="rngtr: initial parser folder, or 'empty' (default: the one saved with it)")
    pe.add_argument("--iterations", type=_positive, help="rngtr: at most T refinement iterations (default: as saved)")
    pp.add_argument("--out", required=True, help="output CoNLL-U file (must not exist)")
    pp.add_argument("--quiet", action="store_true", help="no progress bar")
    pc = psub.add_parser("compress", help="apply recipes to trained parsers; per-treebank report")
    pc.add_argument("--models", nargs="+", required=True, help="parser folders")
    pc.add_argument("--test", nargs="+", required=True, help="test CoNLL-U per parser")
    pc.add_argument("--dev", nargs="+", help="PTQ calibration data per treebank (its first 200 sentences), replacing "
                                            "the recipes' own; without it a recipe must name a CoNLL-U calibration file")
    pc.add_argument("--recipes", nargs="+", default=["prune-30", "prune-45", "ptq-int8"], help="recipes")
    pc.add_argument("--out", required=True, help="report folder (must not exist)")
    pc.add_argument("--threads", type=_positive, help=THREADS_HELP)
    pc.set_defaults(func=cmd_parse)

    r = sub.add_parser("recipes", help="list shipped compression recipes")
    r.set_defaults(func=cmd_recipes)
    return p


def main(argv: list[str] | None = None) -> int:
    from forgetbench.errors import ForgetbenchError

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or one error line (2)
        return e.code if isinstance(e.code, int) else 2
    from forgetbench.console import quiet_libraries

    quiet_libraries(debug=args.debug)  # library chatter never precedes our one line (console rule 4)
    try:
        return args.func(args)
    except ForgetbenchError as e:
        print(f"forgetbench: error: {' '.join(str(e).split())}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("forgetbench: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the one place that turns any other failure into one line
        if args.debug:
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"forgetbench: error: unexpected {type(e).__name__}: {first} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())



