"""forgetbench's MT-GenEval decisions (``eval/mt_geneval``) against the paper's ``accuracy_metric.py``, line by line.

    python scripts/mt_geneval_agreement.py DATA [--reference DATA/reference/accuracy_metric.py] [--hyp NAME=DIR ...]

For every language the paper's metric handles and both sets, hypothesis files are judged by both: the correct
references (the paper's script: ≈ 100 %), the other gender's references (≈ 0 %) and any ``--hyp NAME=DIR`` of
translations laid out as the references are (``DIR/<the reference file's path under DATA>``, as
``scripts/mt_geneval_export.py`` writes them, or ``DIR/<its name>``). Prints, per language, set and
file, the lines, the agreements and both accuracies; exits 1 on any disagreement.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from forgetbench.eval import mt_geneval as mg  # noqa: E402


def _hyp(folder: str, ref: Path, data: Path) -> Path:
    """A hypothesis file named as ``ref``: at its path under DATA, or by its name alone."""
    nested = Path(folder) / ref.relative_to(data)
    return nested if nested.is_file() else Path(folder) / ref.name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--reference", type=Path)
    ap.add_argument("--hyp", nargs="*", default=[], help="NAME=DIR: translations named as the reference files")
    a = ap.parse_args()
    ref_path = a.reference or a.data / "reference" / "accuracy_metric.py"
    spec = importlib.util.spec_from_file_location("accuracy_metric", ref_path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    extra = dict(h.split("=", 1) for h in a.hyp)
    total, bad = 0, 0
    for lang in mg.LANGUAGES:
        cf, cx = mg.counterfactual_files(a.data, lang), mg.context_files(a.data, lang)
        cases = []  # (set, name, hyp file, right file, wrong file)
        for g, o in (("feminine", "masculine"), ("masculine", "feminine")):
            right, wrong = cf[f"{g}.{lang}"], cf[f"{o}.{lang}"]
            cases += [("counterfactual", f"{g}: right refs", right, right, wrong),
                      ("counterfactual", f"{g}: wrong refs", wrong, right, wrong)]
            cases += [("counterfactual", f"{g}: {n}", _hyp(d, right, a.data), right, wrong) for n, d in extra.items()]
        cases += [("contextual", "right refs", cx["original"], cx["original"], cx["flipped"]),
                  ("contextual", "wrong refs", cx["flipped"], cx["original"], cx["flipped"])]
        cases += [("contextual", n, _hyp(d, cx["original"], a.data), cx["original"], cx["flipped"])
                  for n, d in extra.items()]
        for kind, name, hyp, right, wrong in cases:
            if not hyp.is_file():
                print(f"{lang} {kind} {name}: {hyp} missing, skipped")
                continue
            paper_acc, paper = ref.accuracy_metric(str(hyp), str(right), str(wrong))
            ours = [mg.correct(h, r, w) for h, r, w in zip(mg.read_lines(hyp), mg.read_lines(right),
                                                              mg.read_lines(wrong), strict=True)]
            agree = sum((d == "Correct") == o for d, o in zip(paper, ours, strict=True))
            total += len(ours)
            bad += len(ours) - agree
            print(f"{lang} {kind:14s} {name:24s} {len(ours):5d} lines, {agree:5d} agree; accuracy paper "
                  f"{100 * paper_acc:6.2f} %, ours {100 * sum(ours) / len(ours):6.2f} %")
    print(f"all: {total} decisions, {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
