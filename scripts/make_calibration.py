"""Build the shipped calibration sets from NTREX-128 (CC BY-SA 4.0), never from a test set.

    python scripts/make_calibration.py ../shared/data/ntrex128 data/calibration/ntrex128-calib.tsv
    python scripts/make_calibration.py ../shared/data/ntrex128 data/calibration/ntrex128-target.tsv --target

NTREX-128 is multi-way parallel. The PTQ / data-aware set: for each language X below, lines 1001.. of the
English source and of X, alternating en->X and X->en, ``PER_DIRECTION`` rows each. The target-language set
(``--target``, for ``calibration: {choice: target}``): for each X, 128 rows en->X (lines 1101–1228) and 10 rows
X->en (lines 1229–1238), so that every language, English included, is the target of at least 128 rows.
"""

import sys
from pathlib import Path

# NTREX file code -> M2M-100 language code
LANGS = {"deu": "de", "rus": "ru", "ces": "cs", "fra": "fr", "spa": "es", "fin": "fi", "tur": "tr", "ita": "it",
         "hin": "hi", "est": "et", "tam": "ta", "swa": "sw", "ukr": "uk", "heb": "he", "arb": "ar", "pol": "pl",
         "jpn": "ja", "zho_Hans": "zh", "hun": "hu", "hau": "ha"}
START, PER_DIRECTION = 1000, 16
TARGET_START, TARGET_INTO_X, TARGET_INTO_EN = 1100, 128, 10


def main(src_dir: str, out: str, target: bool = False) -> None:
    d = Path(src_dir)
    eng = (d / "newstest2019-src.eng.txt").read_text(encoding="utf-8").splitlines()
    rows = []
    for code, m2m in LANGS.items():
        x = (d / f"newstest2019-ref.{code}.txt").read_text(encoding="utf-8").splitlines()
        assert len(x) == len(eng), code
        if target:
            for i in range(TARGET_START, TARGET_START + TARGET_INTO_X + TARGET_INTO_EN):
                a, b = eng[i].strip(), x[i].strip()
                assert a and b, (code, i)
                rows.append(("en", m2m, a, b) if i < TARGET_START + TARGET_INTO_X else (m2m, "en", b, a))
            continue
        for i in range(START, START + 2 * PER_DIRECTION):
            a, b = eng[i].strip(), x[i].strip()
            if not a or not b:
                continue
            rows.append(("en", m2m, a, b) if i % 2 == 0 else (m2m, "en", b, a))
    Path(out).write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3], target="--target" in sys.argv[3:])
