"""Off-target shares of two variants of one sweep run, direction by direction, and their paired difference with its
bootstrap 95 % interval: the report's off-target rule (METHOD §2.5) between any two variants, not only a variant
and its base.

    python scripts/off_target_contrast.py RUN A B [--pairs en-sw en-et]

A sentence counts where the identifier places its reference in the target language and both hypotheses were
identified (``eval.analysis.off_target.off_flags`` on the run's ``on_target`` statistics); the share is the percentage of those whose hypothesis it does not
place there. The interval resamples those sentences (``eval.bootstrap``: 1,000 resamples, seed 0, percentile).
Prints JSON: per benchmark and direction, n and each variant's share, A − B in percentage points with its interval.
Without ``--pairs``: every direction of the run whose target has an identifier.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from forgetbench.eval import bootstrap as bs
from forgetbench.eval.analysis.off_target import off_flags
from forgetbench.eval.sentence_stats import REF
from forgetbench.eval.store import Store


def contrast(on_target: dict[tuple, float | None], idxs: list[int], a: str, b: str, key: tuple) -> dict | None:
    """n, A's and B's off-target %, A − B with its interval over the direction's sentences ``idxs`` that count
    (``off_flags``); None if none."""
    rows = [f for i in idxs if (f := off_flags(on_target, (a, b), key, i)) is not None]
    if not rows:
        return None
    off = np.array(rows) * 100
    d = off[:, 0] - off[:, 1]
    ci = bs.percentile_interval(bs.resample_mean(d, bs.counts(len(d))))
    return {"n": len(d), a: round(float(off[:, 0].mean()), 2), b: round(float(off[:, 1].mean()), 2),
            "difference_pp": round(float(d.mean()), 2), "ci95": [round(ci.low, 2), round(ci.high, 2)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--pairs", nargs="*", default=None, metavar="SRC-TGT")
    args = ap.parse_args(argv)
    path = Path(args.run) / "store.sqlite"
    if not path.is_file():
        print(f"off_target_contrast: {path} not found; give a sweep run folder (its --out)", file=sys.stderr)
        return 2
    on_target = Store(path).stats("on_target")
    variants = {k[0] for k in on_target} - {REF}
    missing = [v for v in (args.a, args.b) if v not in variants]
    if missing:
        print(f"off_target_contrast: {', '.join(missing)} not in {path} (its variants with on-target statistics: "
              f"{', '.join(sorted(variants)) or 'none'})", file=sys.stderr)
        return 2
    refs: dict[tuple, list[int]] = {}  # (benchmark, src, tgt) -> the sentences with a reference statistic
    for (x, *job, i) in on_target:
        if x == REF:
            refs.setdefault(tuple(job), []).append(i)
    jobs = sorted(refs)
    if args.pairs is not None:
        want = {tuple(p.split("-", 1)) for p in args.pairs}
        jobs = [j for j in jobs if j[1:] in want]
    out = {}
    for benchmark, src, tgt in jobs:
        r = contrast(on_target, sorted(refs[(benchmark, src, tgt)]), args.a, args.b, (benchmark, src, tgt))
        if r is not None:
            out.setdefault(benchmark, {})[f"{src}-{tgt}"] = r
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
