"""A sweep's MT-GenEval translations of one series, written in the paper's layout (the reference files' names:
``sentences/test/geneval-sentences-{feminine,masculine}-test.en_XX.XX`` and
``context/geneval-context-wikiprofessions-original-test.en_XX.XX``), for the paper's ``accuracy_metric.py`` or
``scripts/mt_geneval_agreement.py --hyp NAME=OUT``.

    python scripts/mt_geneval_export.py RUN SERIES OUT

The contextual line is the judged part of the translation (docs/METHOD.md §2.7a); an unsplit translation is written
whole (the paper's script then judges all of it, as this project does not). Every line of the run's sample must be
translated; OUT must not exist.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from forgetbench.errors import ForgetbenchError  # noqa: E402
from forgetbench.eval import mt_geneval as mg  # noqa: E402
from forgetbench.eval.mt_geneval_suite import judged_part  # noqa: E402
from forgetbench.eval.store import Store  # noqa: E402
from forgetbench.io import atomic_write_text  # noqa: E402
from forgetbench.sweep import load_sweep  # noqa: E402


def export(run: Path, series: str, out: Path) -> dict[str, int]:
    if out.exists():
        raise ForgetbenchError(f"{out} exists; give a new folder")
    if not (run / "store.sqlite").is_file():
        raise ForgetbenchError(f"{run}: not a run folder (no store.sqlite)")
    store = Store(run / "store.sqlite")
    source = store.meta("config_source")  # the sweep config as given (its relative paths resolve from there)
    if not source or not Path(source).is_file():
        raise ForgetbenchError(f"{run}: its sweep config {source} is gone")
    cfg = load_sweep(source)
    if cfg.bias is None or not cfg.bias.mt_geneval:
        raise ForgetbenchError(f"{source}: no bias.mt_geneval block: nothing to export")
    written = {}
    for lang, (its, job) in cfg.bias.mt_geneval.items():
        hyps = {r["idx"]: r["hyp"] for r in store.translations(series, job.benchmark.name, below=len(its))}
        if len(hyps) != len(its):
            raise ForgetbenchError(f"{run}: {series} has {len(hyps)} of {len(its)} MT-GenEval {lang} translations; "
                                   "finish the sweep first")
        lines: dict[Path, list[str]] = {}
        for k, it in enumerate(its):
            if it.set == "counterfactual":
                f = mg.counterfactual_files(out, lang)[f"{it.gender}.{lang}"]
                text = hyps[k]
            else:
                f = mg.context_files(out, lang)["original"]
                text = judged_part(it, hyps[k])
                text = hyps[k] if text is None else text
            lines.setdefault(f, []).append(" ".join(text.split()))
        for f, rows in lines.items():
            f.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(f, "".join(r + "\n" for r in rows))
            written[str(f.relative_to(out))] = len(rows)
    store.close()
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("series")
    ap.add_argument("out", type=Path)
    a = ap.parse_args()
    try:
        for f, n in export(a.run, a.series, a.out).items():
            print(f"{f}: {n} lines")
    except ForgetbenchError as e:
        print(f"mt_geneval_export: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
