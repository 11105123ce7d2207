"""The parser commands: ``parse train | eval | predict | compress``, thin adapters over ``forgetbench.parsing``."""

from __future__ import annotations

import json
from pathlib import Path

from forgetbench.cli.common import (
    THREADS_HELP,
    Parser,
    override_steps,
    positive,
    positive_minutes,
    probe_line,
    set_threads,
    thread_count,
)

DEVICE_HELP = ("where the networks run: cpu (default), cuda, cuda:N or auto (a GPU where torch sees one); MST and "
               "transitions decode on the host")


def cmd_parse(args) -> int:
    from forgetbench.outputs import new_output
    from forgetbench.parsing import train as ptrain

    if args.action == "compress":
        from forgetbench.io import atomic_directory
        from forgetbench.parsing.compress_eval import run
        from forgetbench.report.parsing import write_parse_report

        new_output(args.out)
        S = run(args.models, args.test, args.dev, args.recipes, threads=thread_count(args.threads), device=args.device)
        with atomic_directory(args.out) as tmp:
            write_parse_report(S, tmp)
        for tb in S["treebanks"]:
            print(Path(tb["model"]).name, f"base LAS {tb['base']['las']:.2f}",
                  *(f"{v} {d['las']:.2f} ({'–' if d['rel_las'] is None else format(d['rel_las'], '+.2f')} %)"
                    for v, d in tb["variants"].items()))
        print(f"wrote {args.out}")
        return 0
    if args.action == "train":
        new_output(args.out)
        cfg = ptrain.ParseTrainConfig.from_options(args, threads=thread_count(args.threads))
        info = ptrain.train_parser(cfg, progress=not args.quiet)
        tags = f", dev UPOS {info['tagger_dev_upos']:.2f}" if "tagger_dev_upos" in info else ""
        print(f"{args.arch}: best dev LAS {info['dev']['las']:.2f} ({args.tags} tags{tags}; step {info['best_step']} of "
              f"{info['steps']}, epoch {info['best_epoch']} of {info['epochs']}, {info['train_seconds']:.0f}s; stopped "
              f"by {info['stopped_by']}); wrote {args.out}")
    elif args.action == "eval":
        from forgetbench.parsing.evaluate import evaluate_parser
        from forgetbench.parsing.layers.pretrained import is_encoder_folder

        set_threads(args.threads)
        if is_encoder_folder(args.model):  # a pre-trained encoder: its USL head parses, untrained further
            from forgetbench.parsing.parsers.usl_parser import evaluate_usl

            print(json.dumps(evaluate_usl(args.model, args.data, device=args.device)))
        else:
            print(json.dumps(evaluate_parser(args.model, args.data, initial=args.initial, iterations=args.iterations,
                                             device=args.device)))
    else:
        new_output(args.out)
        set_threads(args.threads)
        ptrain.predict_file(args.model, args.data, args.out, progress=not args.quiet, device=args.device)
        print(f"wrote {args.out}")
    return 0


def cmd_pretrain_encoder(args) -> int:
    from forgetbench.console import Console
    from forgetbench.errors import ForgetbenchError
    from forgetbench.outputs import resumable_output
    from forgetbench.pretrain.config import load_pretrain_config
    from forgetbench.pretrain.data import check_treebanks
    from forgetbench.pretrain.run import RUN_MARKER, pretrain
    from forgetbench.resources import set_stop_after

    set_stop_after(args.stop_after)
    cfg = load_pretrain_config(args.config)
    check_treebanks(cfg)  # a bad treebank is refused before the run folder exists
    resumable_output(args.out, RUN_MARKER, "pretrain-encoder run folder")
    override_steps("pretrain-encoder", args.steps, cfg.train)
    if args.continue_from is not None and not (Path(args.out) / "checkpoint").is_dir():
        from forgetbench.pretrain.run import continuable

        continuable(cfg, Path(args.continue_from))  # before the run folder is made
    con = Console("pretrain-encoder", quiet=args.quiet)
    if args.probe:
        from forgetbench.pretrain.run import probe

        if not args.hours > 0:
            raise ForgetbenchError(f"pretrain-encoder --hours {args.hours}: give a positive number of hours")
        r = probe(cfg, args.out, steps=args.steps or 30, hours=args.hours, log=con.line)
        print(f"{r['variant']}: {probe_line(r)}")
        return 0
    final = pretrain(cfg, args.out, progress=not args.quiet, log=con.line, continue_folder=args.continue_from)
    con.line(f"encoder: {final}", result=True)
    return 0


def add_commands(sub) -> None:
    pe = sub.add_parser("pretrain-encoder", help="pre-train a multilingual encoder: MLM, USL + MLM, or UD-PrLM "
                                                 "(resumable)")
    pe.add_argument("config", help="pre-training config YAML (see configs/pretrain/ud-prlm.yaml)")
    pe.add_argument("--out", required=True, help="run folder: new, or a pretrain-encoder run folder to resume")
    pe.add_argument("--steps", type=int, help="override train.steps (with --probe: the steps timed, default 30)")
    pe.add_argument("--stop-after", type=float, metavar="MINUTES", help="checkpoint and stop after MINUTES of wall time (a lent machine's slot); the same command resumes")
    pe.add_argument("--probe", action="store_true", help="time a few steps of the config's encoder on this host and "
                                                         "print tokens/s, steps/hour and the epochs --hours buy; trains "
                                                         "nothing")
    pe.add_argument("--hours", type=float, default=2.5, help="with --probe: the wall budget (default: 2.5)")
    pe.add_argument("--continue-from", help="a new run folder continues this exported encoder of the same config "
                                            "(RUN/model) from its step; the optimiser restarts")
    pe.add_argument("--quiet", action="store_true", help="no progress bars")
    pe.set_defaults(func=cmd_pretrain_encoder)
    pa = sub.add_parser("parse", help="dependency parsers (biaffine, SynTr, RNGTr, G2GTr): train | eval | predict | compress")
    psub = pa.add_subparsers(dest="action", required=True, parser_class=Parser)
    pt = psub.add_parser("train", help="train a parser on a UD treebank (gold tokenisation)")
    pt.add_argument("--train", required=True, help="training CoNLL-U")
    pt.add_argument("--dev", help="dev CoNLL-U for model selection; without it every 10th training sentence is "
                                  "held out as dev (documented in training.json)")
    pt.add_argument("--out", required=True, help="output folder (must not exist)")
    pt.add_argument("--max-steps", type=positive, help="the budget in steps, Dozat's rule: at most this many updates "
                                                       "(default 30000), the best dev LAS kept")
    pt.add_argument("--patience", type=int, help="stop once this many steps pass without a dev improvement (default "
                                                 "5000; 0: run --max-steps)")
    pt.add_argument("--eval-every", type=positive, help="dev LAS every this many steps (default 100)")
    pt.add_argument("--max-epochs", type=positive, help="a budget in epochs instead of steps (dev after each epoch)")
    pt.add_argument("--minutes", type=positive_minutes, help="a safety stop of the parser's wall time, reported in "
                                                             "training.json when it fires (with --max-epochs: the "
                                                             "whole run's budget, taggers included); default none")
    pt.add_argument("--network", choices=["today", "thesis"], help="biaffine: today's network (default) or Dozat's UD "
                                                                   "setting (3 x 200 BiLSTM, MLPs 400/100, word/tag and "
                                                                   "recurrent dropout, annealing; its 2-layer tagger)")
    pt.add_argument("--seed", type=int, default=1, help="seed")
    pt.add_argument("--tags", choices=["gold", "predicted"], default="predicted",
                    help="UPOS input: predicted by the parser's own tagger (trained on jackknifed tags), or gold")
    pt.add_argument("--tagger-max-steps", type=positive, help="each tagger's cap in steps (default: --max-steps; "
                                                              "--patience and --eval-every shared)")
    pt.add_argument("--tagger-epochs", type=positive, help="each tagger's budget in epochs instead of steps")
    pt.add_argument("--tagger-minutes", type=positive_minutes, help="with --tagger-epochs: each tagger's time budget")
    pt.add_argument("--jackknife", type=int, default=2, help="folds for the jackknifed training tags")
    pt.add_argument("--arch", choices=["biaffine", "syntr", "rngtr", "g2gtr"], default="biaffine",
                    help="biaffine (BiLSTM), syntr (Transformer + biaffine), rngtr (graph-to-graph refiner of an initial "
                         "parse), g2gtr (transition-based graph-to-graph Transformer, arc-standard + SWAP)")
    pt.add_argument("--encoder", help="a pretrain-encoder model folder: biaffine, syntr and rngtr read its first-piece "
                                      "states (--encoder-mode)")
    pt.add_argument("--encoder-mode", choices=["beside", "replace"], default="beside",
                    help="beside (default): the encoder's features, projected to 300, join the parser's word, character "
                         "and UPOS inputs; replace: they and UPOS replace them (and the biaffine parser's BiLSTM)")
    pt.add_argument("--encoder-lr-scale", type=float, default=1.0,
                    help="the encoder's learning rate relative to the parser's (default 1; 0 freezes it)")
    pt.add_argument("--encoder-lr-decay", type=float, default=1.0,
                    help="layer-wise decay: each encoder layer down gets this factor more (default 1: one rate)")
    pt.add_argument("--tagger-from", help="reuse this parser's tagger and jackknifed training tags (same --train): "
                                          "architectures compared on the same tags, no second jackknife")
    pt.add_argument("--initial", help="rngtr: the parser (biaffine or syntr folder) whose output is the initial graph; "
                                      "default: the empty graph")
    pt.add_argument("--iterations", type=positive,
                    help="rngtr: at most T refinement iterations (default: the thesis's T, 3 from an initial parser, "
                         "4 from the empty graph)")
    pt.add_argument("--train-iterations", type=positive,
                    help="rngtr: refinement iterations per training batch (default: --iterations, as the thesis "
                         "trains and tests alike)")
    pt.add_argument("--refiner-graphs", choices=["empty", "kfold"],
                    help="rngtr: the first training iteration's input graphs: empty, or k-fold predictions of the "
                         "initial parser's architecture (--folds parsers, trained first with the run's budget); "
                         "default kfold with --initial (the measured setting), else empty")
    pt.add_argument("--folds", type=positive, default=2, help="rngtr with --refiner-graphs kfold: folds")
    pt.add_argument("--fold-minutes", type=positive_minutes, help="rngtr with --refiner-graphs kfold and --max-epochs: "
                                                                  "time budget per fold parser (steps: the run's)")
    pt.add_argument("--warm-start", help="rngtr: initialise the refiner from this syntr folder (relation embeddings new)")
    pt.add_argument("--attention", choices=["g2g", "syng2g"], help="graph-input attention: relations on key and value "
                                                                   "(g2g, default) or on query and key (syng2g)")
    pt.add_argument("--graph", choices=["labelled", "unlabelled", "none"],
                    help="relation ids of the input graph: rngtr labelled (default) or unlabelled; g2gtr unlabelled "
                         "(default, the paper's k = 3), labelled, or none (the no-graph baseline, the paper's SentTr)")
    pt.add_argument("--no-relation-norm", dest="relation_norm", action="store_false", default=None,
                    help="no LayerNorm on the key-side relation embeddings (the ablation)")
    pt.add_argument("--no-value-relations", dest="value_relations", action="store_false", default=None,
                    help="no relation embeddings on the value side")
    pt.add_argument("--threads", type=positive, help=THREADS_HELP)
    pt.add_argument("--device", default="cpu", help=DEVICE_HELP)
    pt.add_argument("--quiet", action="store_true", help="no progress bars")
    pt.set_defaults(func=cmd_parse)
    pe = psub.add_parser("eval", help="CoNLL 2018 UAS/LAS/CLAS (+ UPOS with predicted tags) on a CoNLL-U file")
    pp = psub.add_parser("predict", help="parse a CoNLL-U file: heads, deprels and (predicted-tag parsers) UPOS")
    for q in (pe, pp):
        q.add_argument("model", help="a parser folder from `parse train` (eval: also a `pretrain-encoder` model folder, "
                                     "whose USL head parses)")
        q.add_argument("data", help="CoNLL-U file (gold tokenisation)")
        q.add_argument("--threads", type=positive, help=THREADS_HELP)
        q.add_argument("--device", default="cpu", help=DEVICE_HELP)
        q.set_defaults(func=cmd_parse)
    pe.add_argument("--initial", help="rngtr: initial parser folder, or 'empty' (default: the one saved with it)")
    pe.add_argument("--iterations", type=positive, help="rngtr: at most T refinement iterations (default: as saved)")
    pp.add_argument("--out", required=True, help="output CoNLL-U file (must not exist)")
    pp.add_argument("--quiet", action="store_true", help="no progress bar")
    pc = psub.add_parser("compress", help="apply recipes to trained parsers; per-treebank report")
    pc.add_argument("--models", nargs="+", required=True, help="parser folders")
    pc.add_argument("--test", nargs="+", required=True, help="test CoNLL-U per parser")
    pc.add_argument("--dev", nargs="+", help="PTQ calibration data per treebank (its first 200 sentences), replacing "
                                            "the recipes' own; without it a recipe must name a CoNLL-U calibration file")
    pc.add_argument("--recipes", nargs="+", default=["prune-30", "prune-45", "ptq-int8"], help="recipes")
    pc.add_argument("--out", required=True, help="report folder (must not exist)")
    pc.add_argument("--threads", type=positive, help=THREADS_HELP)
    pc.add_argument("--device", default="cpu", help=DEVICE_HELP)
    pc.set_defaults(func=cmd_parse)
