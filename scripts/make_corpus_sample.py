"""Build the shipped training sample (``data/corpus-sample/<lang>.tsv``) that lets the training configs run from a
clone with no shared data folder: the first ``PER_LANGUAGE`` training pairs per language of the teacher's own
corpus (``train.corpus.build_corpus`` with the teacher config's languages, seed and limits: WMT news and Tatoeba,
every pair overlapping an evaluation set already dropped), as "english<TAB>foreign" lines.

    python scripts/make_corpus_sample.py ../shared/data data/corpus-sample

For trying ``train-mt`` and ``distill`` only: a few hundred pairs train nothing useful.
"""

import sys
from pathlib import Path

from forgetbench.train.config import load_config
from forgetbench.train.corpus import build_corpus

REPO = Path(__file__).resolve().parents[1]
PER_LANGUAGE = 400


def main(shared: str, out: str) -> None:
    cfg = load_config(REPO / "configs" / "teacher.yaml")
    d = cfg.data
    train, _, _ = build_corpus(Path(shared), d.languages, d.dev_per_language, d.max_chars, cfg.train.seed)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=False)
    for lang in d.languages:
        rows = [f"{e}\t{x}\n" for e, x in train[lang][:PER_LANGUAGE] if "\t" not in e + x]
        (folder / f"{lang}.tsv").write_text("".join(rows), encoding="utf-8")
        print(f"{lang}: {len(rows)} pairs")


if __name__ == "__main__":
    main(*sys.argv[1:3])
