"""Build the shipped PTQ calibration set from NTREX-128 (CC BY-SA 4.0), never from a test set.

    python scripts/make_calibration.py ../shared/data/ntrex128 data/calibration/ntrex128-calib.tsv

NTREX-128 is multi-way parallel; for each language X below we take lines 1001.. of the
English source and of X, alternating en->X and X->en, ``PER_DIRECTION`` rows each.
"""

import sys
from pathlib import Path

# NTREX file code -> M2M-100 language code
LANGS = {"deu": "de", "rus": "ru", "ces": "cs", "fra": "fr", "spa": "es", "fin": "fi", "tur": "tr", "ita": "it",
         "hin": "hi", "est": "et", "tam": "ta", "swa": "sw", "ukr": "uk", "heb": "he", "arb": "ar", "pol": "pl",
         "jpn": "ja", "zho_Hans": "zh", "hun": "hu", "hau": "ha"}
START, PER_DIRECTION = 1000, 16


def main(src_dir: str, out: str) -> None:
    d = Path(src_dir)
    eng = (d / "newstest2019-src.eng.txt").read_text(encoding="utf-8").splitlines()
    rows = []
    for code, m2m in LANGS.items():
        x = (d / f"newstest2019-ref.{code}.txt").read_text(encoding="utf-8").splitlines()
        assert len(x) == len(eng), code
        for i in range(START, START + 2 * PER_DIRECTION):
            a, b = eng[i].strip(), x[i].strip()
            if not a or not b:
                continue
            rows.append(("en", m2m, a, b) if i % 2 == 0 else (m2m, "en", b, a))
    Path(out).write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
