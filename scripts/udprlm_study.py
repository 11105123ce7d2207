"""The UD-PrLM study (docs/METHOD.md §5c): the scratch biaffine parser against the same parser reading each
pre-trained encoder's features beside its own inputs (Sun, Li, Zhao §4), frozen and fine-tuned, on every shipped
treebank; the paper's ablations (Table 6) side by side; then who pays when each is compressed.

    python scripts/udprlm_study.py --out RUN [--stage pretrain|parsers|eval|compress|table|all]
        [--treebanks en_lines tr_imst wo_wtb af_afribooms ta_ttb] [--pretrain-steps N] [--max-steps 30000]
        [--patience 5000 | --max-epochs N] [--recipes prune-30 prune-45 wanda-45 ptq-int8] [--refine]
        [--variants mlm usl-mlm usi-mlm ud-prlm] [--modes tuned frozen] [--encoders DIR [--at-step N]]

Stages (each skips what its output folder already holds, so a rerun resumes):

1. **pretrain**: ``forgetbench pretrain-encoder configs/pretrain/<variant>.yaml --out RUN/enc-<variant>`` for each
   variant (the same data, vocabulary, steps, seed and step draws); ``--pretrain-steps`` overrides steps. Skipped
   with ``--encoders DIR`` (encoder model folders ``DIR/<variant>``, e.g. ``artifacts/encoders``; with ``--at-step N``
   run folders, each read at its snapshot of step N: ``DIR/<variant>/snapshots/step-NNNNNN``, the equal-step
   comparison).
2. **parsers**, per treebank T: the scratch biaffine parser (its own tagger: predicted UPOS, 2-fold jackknife),
   then per variant and mode a biaffine parser on that encoder (``--encoder``; ``tuned``: beside, fine-tuned at
   the parser's rate; ``frozen``: beside, ``--encoder-lr-scale 0``; ``replace``: the encoder's states replace the
   parser's inputs and BiLSTM, fine-tuned), with the scratch parser's tagger and training tags: the same UPOS for
   all; with ``--refine`` an RNGTr refiner on the scratch parser and on each tuned one (trained from empty graphs,
   its initial parser that biaffine parser, its encoder read as that parser's). Every parser by the same budget
   in steps (Dozat's rule, ``parse train``'s: at most ``--max-steps``, stopped after ``--patience`` steps without a
   dev improvement) or, with ``--max-epochs``, the same number of epochs; the scratch parser's taggers by steps
   too; 1 thread, seed 1; no wall-clock budget, so the parsers are the same on any host and load.
3. **eval**: test LAS (CoNLL 2018) of every parser and of the trained USL heads as parsers (``parse eval
   ENCODER``); ``parsing.evaluate.las_gain`` (paired bootstrap, 1,000 resamples) of each encoder's parser against
   the scratch one, of UD-PrLM against each ablation in the same mode, and of each refiner against its initial
   parser.
4. **compress**: ``forgetbench parse compress`` per treebank with the first mode's parsers in the order mlm,
   ud-prlm, the other ablations, scratch, so its "which forgets more" contrasts are each model's LAS change minus
   the MLM-only parser's, paired; LAS per relation class before and after.
5. **table**: ``RUN/study.json`` and ``RUN/study.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from forgetbench.io import atomic_write_text

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("mlm", "usl-mlm", "usi-mlm", "ud-prlm")
MODES = {"tuned": ["--encoder-mode", "beside"], "frozen": ["--encoder-mode", "beside", "--encoder-lr-scale", "0"],
         "replace": ["--encoder-mode", "replace"]}
JACKKNIFE = 2  # folds of the scratch parser's jackknifed training tags
TREEBANKS = {"en_lines": "UD_English-LinES", "tr_imst": "UD_Turkish-IMST", "wo_wtb": "UD_Wolof-WTB",
             "af_afribooms": "UD_Afrikaans-AfriBooms", "ta_ttb": "UD_Tamil-TTB"}


def cli(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "forgetbench.cli", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"forgetbench {' '.join(args[:2])} failed: {r.stderr.strip()[-2000:]}")
    return r.stdout


def files(data: Path, code: str) -> dict[str, Path]:
    d = data / TREEBANKS[code]
    return {s: d / f"{code}-ud-{s}.conllu" for s in ("train", "dev", "test")}


def systems(a, out: Path, code: str) -> dict[str, Path]:
    """The study's parsers of treebank ``code``: ``scratch`` and ``<variant>·<mode>`` (+ ``…+rngtr`` refiners)."""
    s = {"scratch": out / "parsers" / code / "scratch"} | {
        f"{v}·{m}": out / "parsers" / code / f"{v}-{m}" for m in a.modes for v in a.variants}
    if a.refine:
        s |= {f"{k}+rngtr": p.with_name(p.name + "-rngtr") for k, p in list(s.items())
              if k == "scratch" or k.endswith("·" + a.modes[0])}
    return s


def encoder(a, out: Path, v: str) -> Path:
    if a.encoders and a.at_step:
        return a.encoders / v / "snapshots" / f"step-{a.at_step:06d}"
    return a.encoders / v if a.encoders else out / f"enc-{v}" / "model"


def check_snapshots(a) -> None:
    """``--at-step N``: every variant's run folder under ``--encoders`` has its snapshot of step N (the equal-step
    comparison), else one line naming the variants without it and the steps each has."""
    if not a.at_step:
        return
    if not a.encoders:
        raise SystemExit("udprlm_study: --at-step reads snapshots of encoder runs: give --encoders RUNS (run folders "
                         "named by variant, e.g. ~/.cache/forgetbench/encoders)")
    missing = {}
    for v in a.variants:
        if not (encoder(a, Path(), v) / "config.json").is_file():
            have = sorted(int(p.name.split("-")[1]) for p in (a.encoders / v / "snapshots").glob("step-*")) \
                if (a.encoders / v / "snapshots").is_dir() else []
            missing[v] = have
    if missing:
        raise SystemExit(f"udprlm_study: no snapshot of step {a.at_step} for "
                         + "; ".join(f"{v} (has {', '.join(map(str, s)) or 'none'})" for v, s in missing.items())
                         + ": train them on (pretrain-encoder resumes) or choose a step they all have")


def stage_pretrain(a, out: Path) -> None:
    if a.encoders:
        return
    for v in a.variants:
        enc = out / f"enc-{v}"
        if (enc / "model" / "config.json").is_file():
            continue
        extra = ["--steps", str(a.pretrain_steps)] if a.pretrain_steps else []
        cli("pretrain-encoder", str(a.configs / f"{v}.yaml"), "--out", str(enc), "--quiet", *extra)


def stage_parsers(a, out: Path) -> None:
    budget = (["--max-epochs", str(a.max_epochs)] if a.max_epochs else
              ["--max-steps", str(a.max_steps), "--patience", str(a.patience)]) + [
        "--threads", "1", "--seed", "1", "--quiet"]
    for code in a.treebanks:
        f, sy = files(a.data, code), systems(a, out, code)
        common = ["--train", str(f["train"]), "--dev", str(f["dev"])]
        if not sy["scratch"].exists():
            cli("parse", "train", *common, "--out", str(sy["scratch"]), "--tags", "predicted", "--jackknife",
                str(JACKKNIFE), "--tagger-max-steps", str(a.max_steps),
                *(["--patience", str(a.patience)] if a.max_epochs else []), *budget)
        for m in a.modes:
            for v in a.variants:
                if not sy[f"{v}·{m}"].exists():
                    cli("parse", "train", *common, "--out", str(sy[f"{v}·{m}"]), "--tags", "predicted", "--tagger-from",
                        str(sy["scratch"]), "--encoder", str(encoder(a, out, v)), *MODES[m], *budget)
        for k, r in sy.items():
            if k.endswith("+rngtr") and not r.exists():
                base = k[: -len("+rngtr")]
                enc = ["--encoder", str(encoder(a, out, base.split("·")[0])), *MODES[a.modes[0]]] if base != "scratch" else []
                cli("parse", "train", "--arch", "rngtr", *common, "--out", str(r), "--tags", "predicted",
                    "--tagger-from", str(sy["scratch"]), "--initial", str(sy[base]), "--refiner-graphs", "empty", *enc,
                    *budget)


def stage_eval(a, out: Path) -> dict:
    from forgetbench.parsing.evaluate import las_gain, parse_file
    from forgetbench.parsing.metrics import score
    from forgetbench.parsing.parsers import interface as parsers
    from forgetbench.parsing.parsers.usl_parser import evaluate_usl

    res: dict = {}
    for code in a.treebanks:
        f, sy = files(a.data, code), systems(a, out, code)
        preds, scores, gold = {}, {}, None
        for name, folder in sy.items():
            r = parse_file(parsers.load(folder), f["test"])
            gold, preds[name] = r["gold"], r["preds"]
            scores[name] = score(gold, preds[name]).to_dict()
        for v in ("usl-mlm", "ud-prlm"):
            if v in a.variants:
                scores[f"{v} USL head"] = evaluate_usl(encoder(a, out, v), f["test"])
        pairs = [(f"{v}·{m}", "scratch") for m in a.modes for v in a.variants]
        if "ud-prlm" in a.variants:
            pairs += [(f"ud-prlm·{m}", f"{v}·{m}") for m in a.modes for v in a.variants if v != "ud-prlm"]
        pairs += [(k, k[: -len("+rngtr")]) for k in sy if k.endswith("+rngtr")]
        gains = {f"{b} − {c}": las_gain(gold, preds[c], preds[b]) for b, c in pairs}
        res[code] = {"scores": {k: {m: v[m] for m in ("las", "uas", "clas")} for k, v in scores.items()},
                     "gains": gains, "sentences": len(gold)}
    return res


def stage_compress(a, out: Path) -> None:
    for code in a.treebanks:
        rep = out / "compress" / code
        if rep.exists():
            continue
        f, sy = files(a.data, code), systems(a, out, code)
        order = [f"{v}·{a.modes[0]}" for v in ("mlm", "ud-prlm", "usl-mlm", "usi-mlm") if v in a.variants] + ["scratch"]
        n = len(order)
        cli("parse", "compress", "--models", *(str(sy[k]) for k in order), "--test", *[str(f["test"])] * n,
            "--dev", *[str(f["dev"])] * n, "--recipes", *a.recipes, "--out", str(rep), "--threads", "1")


def table(a, out: Path, ev: dict) -> str:
    lines = ["Test LAS (CoNLL 2018, predicted UPOS from the scratch parser's tagger for every parser).", "",
             "| treebank | " + " | ".join(next(iter(ev.values()))["scores"]) + " |",
             "|---|" + "---|" * len(next(iter(ev.values()))["scores"])]
    for code, r in ev.items():
        lines.append(f"| {code} | " + " | ".join(f"{s['las']:.2f}" for s in r["scores"].values()) + " |")
    lines += ["", "LAS differences in points [95 % paired bootstrap interval] (* excludes 0).", "",
              "| treebank | " + " | ".join(next(iter(ev.values()))["gains"]) + " |",
              "|---|" + "---|" * len(next(iter(ev.values()))["gains"])]
    for code, r in ev.items():
        cells = [f"{g['delta']:+.2f} [{g['delta_ci'][0]:+.2f}, {g['delta_ci'][1]:+.2f}]"
                 + (" *" if g["delta_ci"][0] > 0 or g["delta_ci"][1] < 0 else "") for g in r["gains"].values()]
        lines.append(f"| {code} | " + " | ".join(cells) + " |")
    lines += ["", "Who pays: each model's LAS change under a recipe minus the MLM-only parser's (points, paired; "
              "negative: it loses more).", "", "| treebank | recipe | model | LAS change | − MLM-only's [95 % CI] |",
              "|---|---|---|---|---|"]
    for code in ev:
        f = out / "compress" / code / "summary.json"
        if not f.is_file():
            continue
        S = json.loads(f.read_text())
        for c in S["contrasts"]:
            lines.append(f"| {code} | {c['recipe']} | {Path(c['model']).name} | {c['las_change']['other']:+.2f} | "
                         f"{c['delta']:+.2f} [{c['delta_ci'][0]:+.2f}, {c['delta_ci'][1]:+.2f}] |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stage", choices=["pretrain", "parsers", "eval", "compress", "table", "all"], default="all")
    ap.add_argument("--treebanks", nargs="+", default=list(TREEBANKS), choices=list(TREEBANKS))
    ap.add_argument("--configs", type=Path, default=REPO / "configs" / "pretrain")
    ap.add_argument("--data", type=Path, default=REPO / "data" / "ud")
    ap.add_argument("--pretrain-steps", type=int)
    ap.add_argument("--max-steps", type=int, default=30000, help="every parser's and tagger's cap in steps")
    ap.add_argument("--patience", type=int, default=5000, help="stop after this many steps without a dev improvement")
    ap.add_argument("--max-epochs", type=int, help="every parser the same number of epochs instead (taggers by steps)")
    ap.add_argument("--recipes", nargs="+", default=["prune-30", "prune-45", "wanda-45-uniform", "ptq-int8"])
    ap.add_argument("--refine", action="store_true", help="also an RNGTr refiner on every biaffine parser")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS,
                    help="the encoders the study reads (every stage)")
    ap.add_argument("--modes", nargs="+", default=["tuned", "frozen"], choices=list(MODES),
                    help="how each encoder's parser reads it (the first mode's parsers are compressed and refined)")
    ap.add_argument("--encoders", type=Path, help="a folder of encoder model folders named by variant (no pretrain "
                                                 "stage), e.g. artifacts/encoders; with --at-step, of their run folders")
    ap.add_argument("--at-step", type=int, help="read each encoder at the same step: RUNS/<variant>/snapshots/"
                                                "step-NNNNNN of the run folders --encoders names (train.snapshot_every)")
    a = ap.parse_args(argv)
    out = a.out.expanduser().resolve()
    a.encoders = a.encoders.expanduser().resolve() if a.encoders else None
    check_snapshots(a)
    out.mkdir(parents=True, exist_ok=True)
    if a.stage in ("pretrain", "all"):
        stage_pretrain(a, out)
    if a.stage in ("parsers", "all"):
        stage_parsers(a, out)
    if a.stage in ("compress", "all"):
        stage_compress(a, out)
    if a.stage in ("eval", "table", "all"):
        ev = stage_eval(a, out)
        atomic_write_text(out / "study.json", json.dumps(ev, indent=1))
        md = table(a, out, ev)
        atomic_write_text(out / "study.md", md)
        print(md)


if __name__ == "__main__":
    main()
