"""MT-Gender readers against WinoMT's human judgements: the sweep's fast_align path end to end on the published
commercial translations, compared with the gender a person read in each annotated sentence.

    python scripts/gender_human_agreement.py MT_GENDER_CLONE [--langs ar de ...] [--out agreement.json]

``MT_GENDER_CLONE`` is a checkout of github.com/gabrielStanovsky/mt_gender (MIT): its ``translations/<system>/
en-<lang>.txt`` (``source ||| translation`` per en.txt row) and ``data/human_annotations/*.csv`` (100 sampled
rows per file: Index into en.txt, the translation, the annotator's M/F/N). For each language, the annotation file
and the system whose translations it annotates are found by matching sentences. Each system's whole file is
aligned as the sweep aligns (``bias.profession_links``: words and punctuation apart, FLORES-101 devtest of the pair
as context, every item linked), ``gender_readers.read_gender`` reads the linked word, and the reading agrees when
it names the annotator's gender (M/F/N; "M/N" accepts either; rows without a judgement are left out).
``--pronoun-over-masculine`` reads as some annotators do: a feminine pronoun outweighs a masculine noun.

Prints one line per language (agreement %, items, and the readings that disagree by class) and writes the
disagreements, sentence by sentence, to ``--out`` (JSON) for reading.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import Counter
from pathlib import Path

from forgetbench.eval.alignment import tokens
from forgetbench.eval.benchmarks import open_benchmark
from forgetbench.eval.bias import profession_links, read_mt_gender
from forgetbench.eval.gender_readers import read_gender, version
from forgetbench.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
# the annotation file per language: where a language has two, the one its file name ties to a system and that
# carries judgements (bing.it has none; "Italian - it.in" has no row index)
FILES = {"ar": "aws.ar.in - ar.in.csv", "de": "aws.de.in - de.in.csv", "es": "es.in - es.in.csv",
         "fr": "fr.in - fr.in.csv", "it": "google.it.in - it.in.csv", "he": "he.in.csv - he.in.csv",
         "ru": "ru.google - ru.in.csv", "uk": "uk.google.gold - uk.in.csv"}
NAME = {"male": "m", "female": "f", "neutral": "n", "unknown": "?"}


def annotations(path: Path) -> list[dict]:
    with path.open(encoding="utf8", newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    gi = next(i for i, h in enumerate(head) if h.startswith("Gender"))
    si = head.index("Sentence") if "Sentence" in head else 2
    out = []
    for r in rows[1:]:
        gold = r[gi].strip().lower()
        if not gold or not set(gold.split("/")) <= {"m", "f", "n"}:
            continue
        out.append({"index": int(r[0]), "sentence": r[si].strip(), "gold": set(gold.split("/"))})
    return out


def system_of(clone: Path, lang: str, ann: list[dict]) -> Path:
    best, hits = None, -1
    for f in sorted((clone / "translations").glob(f"*/en-{lang}.txt")):
        lines = f.read_text(encoding="utf8").splitlines()
        n = sum(a["index"] < len(lines) and lines[a["index"]].partition(" ||| ")[2].strip() == a["sentence"] for a in ann)
        if n > hits:
            best, hits = f, n
    if best is None or hits < 0.9 * len(ann):
        sys.exit(f"{lang}: no translations file under {clone / 'translations'} matches its annotations")
    return best


def measure(clone: Path, lang: str, rows, flores, over: bool = False) -> dict:
    ann = annotations(clone / "data" / "human_annotations" / FILES[lang])
    path = system_of(clone, lang, ann)
    hyps = [tokens(line.partition(" ||| ")[2]) for line in path.read_text(encoding="utf8").splitlines()]
    ctx = [(" ".join(tokens(a)), " ".join(tokens(b))) for a, b in zip(*flores.pair("en", lang), strict=True)]
    links = profession_links(rows, hyps, ctx)
    agree, wrong = 0, []
    for a in ann:
        words, (j, pj) = hyps[a["index"]], links[a["index"]]
        g = read_gender(lang, words, j, pronoun=pj, pronoun_over_masculine=over) if j is not None else "unknown"
        if NAME[g] in a["gold"]:
            agree += 1
        else:
            wrong.append({"index": a["index"], "profession": rows[a["index"]].profession, "gold": "/".join(sorted(a["gold"])),
                          "read": g, "linked": words[j] if j is not None else None,
                          "pronoun": words[pj] if pj is not None else None, "sentence": " ".join(words)})
    return {"lang": lang, "system": path.parent.name, "items": len(ann), "agree": agree,
            "agreement": round(100 * agree / len(ann), 1),
            "disagree": dict(Counter(f"{w['gold']}->{NAME[w['read']]}" for w in wrong)), "wrong": wrong}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("clone", type=Path, help="a checkout of github.com/gabrielStanovsky/mt_gender")
    ap.add_argument("--langs", nargs="+", default=list(FILES), choices=list(FILES))
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "mt_gender", help="MT-Gender's en.txt folder")
    ap.add_argument("--flores", type=Path, default=ROOT / "data" / "flores101", help="FLORES-101 devtest (context)")
    ap.add_argument("--out", type=Path, help="JSON with every disagreement")
    ap.add_argument("--pronoun-over-masculine", action="store_true",
                    help="read the sentence's referent: a feminine pronoun outweighs a masculine noun (read_gender)")
    args = ap.parse_args(argv)
    if not (args.clone / "data" / "human_annotations").is_dir():
        sys.exit(f"{args.clone}: no data/human_annotations; give a checkout of github.com/gabrielStanovsky/mt_gender")
    rows = read_mt_gender(args.data)
    flores = open_benchmark("aligner-context", "flores101", args.flores)
    results = []
    for lang in args.langs:
        r = measure(args.clone, lang, rows, flores, args.pronoun_over_masculine)
        results.append(r)
        print(f"{lang}  {r['agreement']:5.1f} %  ({r['agree']}/{r['items']}, {r['system']})  disagree: {r['disagree']}",
              flush=True)
    print(f"readers {version()}")
    if args.out:
        atomic_write_text(args.out, json.dumps({"readers": version(), "pronoun_over_masculine": args.pronoun_over_masculine,
                                                "results": results}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
