"""Training corpora for small multilingual MT models, from WMT news and Tatoeba (training only).

Evaluation sets never leak in: every pair whose English or foreign side (whitespace- and
case-normalised) occurs in FLORES-101 devtest, NTREX-128 or TICO-19 test (any language) is
dropped, and the count is reported. NTREX-128 is the human translation of WMT newstest2019's
English side, so this filter matters: it removes the newstest2019 English sentences.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.io import read_text

# M2M-100 code -> (ISO 639-3 file code, WMT folders, Tatoeba folder)
SOURCES: dict[str, tuple[str, tuple[str, ...], str | None]] = {
    "de": ("deu", ("eng-deu", "deu-eng"), "deu-eng"),
    "ru": ("rus", ("eng-rus", "rus-eng"), "eng-rus"),
    "cs": ("ces", ("eng-ces",), "ces-eng"),
    "fr": ("fra", ("eng-fra", "fra-eng"), "eng-fra"),
    "es": ("spa", ("eng-spa", "spa-eng"), "eng-spa"),
    "fi": ("fin", ("eng-fin", "fin-eng"), "eng-fin"),
    "tr": ("tur", ("eng-tur",), "eng-tur"),
    "zh": ("zho", ("eng-zho", "zho-eng"), "eng-zho"),
    "ja": ("jpn", ("eng-jpn", "jpn-eng"), "eng-jpn"),
    "it": ("ita", (), "eng-ita"),
    "hu": ("hun", ("eng-hun",), "eng-hun"),
    "pt": ("por", (), "eng-por"),
    "uk": ("ukr", (), "eng-ukr"),
    "nl": ("nld", (), "eng-nld"),
    "he": ("heb", (), "eng-heb"),
    "ar": ("ara", (), "ara-eng"),
    "pl": ("pol", (), "eng-pol"),
    "ha": ("hau", ("eng-hau", "hau-eng"), None),
    "hi": ("hin", ("eng-hin",), "eng-hin"),
    "id": ("ind", (), "eng-ind"),
    "et": ("est", ("eng-est",), "eng-est"),
    "ta": ("tam", ("eng-tam", "tam-eng"), "eng-tam"),
    "sw": ("swa", (), "eng-swa"),
    "vi": ("vie", (), "eng-vie"),
    "ko": ("kor", (), "eng-kor"),
    "af": ("afr", (), "afr-eng"),
    "mr": ("mar", (), "eng-mar"),
    "ur": ("urd", (), "eng-urd"),
    "bn": ("ben", (), "ben-eng"),
    "te": ("tel", (), "eng-tel"),
}


def normalise(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().lower())


@dataclass
class CorpusStats:
    raw: dict[str, int]
    dropped_eval_overlap: dict[str, int]
    dropped_length: dict[str, int]
    duplicates: dict[str, int]
    train: dict[str, int]
    dev: dict[str, int]


def _read_lines(p: Path, newline_only: bool = False) -> list[str]:
    """A file's lines: by ``str.splitlines`` (which also ends a line at U+0085, U+2028, form feeds...), or with
    ``newline_only`` at line feeds alone (a carriage return before one dropped), as the parallel files are numbered
    (METHOD §5: the Polish Tatoeba file holds U+0085 inside two sentences)."""
    if not newline_only:
        return read_text(p).splitlines()
    lines = read_text(p).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [x[:-1] if x.endswith("\r") else x for x in lines]


def eval_sentences(shared: Path) -> set[str]:
    """Normalised sentences of every evaluation set we report on."""
    out: set[str] = set()
    files = list(shared.glob("flores101/**/*.devtest")) + list((shared / "ntrex128").glob("*.txt"))
    files += list((shared / "calibration").glob("*.tsv"))  # the repository's NTREX-128 rows
    files += [p for p in (shared / "tico19").rglob("*") if p.is_file() and p.suffix in (".txt", ".tsv", ".csv")]
    if not files:
        raise ForgetbenchError(f"no evaluation sets under {shared}: cannot check for test-set leakage")
    for p in files:
        for line in _read_lines(p):
            for cell in line.split("\t") if p.suffix == ".tsv" else [line]:
                if len(cell.strip()) > 15:  # short strings ("Yes.", numbers) are not leakage
                    out.add(normalise(cell))
    return out


def tsv_rows(path: Path):
    """(english, foreign) cells of a TSV corpus ("english<TAB>foreign" lines), streamed."""
    with open(path, encoding="utf-8", errors="strict") as f:
        for lineno, line in enumerate(f, 1):
            cells = line.rstrip("\n").split("\t")
            if len(cells) != 2:
                raise ForgetbenchError(f"{path}:{lineno}: expected 'english<TAB>foreign', got {len(cells)} column(s)")
            yield cells[0], cells[1]


def corpus_rows(path: Path, lang: str):
    """A user's corpus for ``lang``: a TSV file (``tsv_rows``) or a ``datasets`` folder with en and ``lang``."""
    if Path(path).is_dir():
        from forgetbench.eval.hf_datasets import parallel_rows

        return parallel_rows(f"data.corpora.{lang}", path, "en", lang)
    return tsv_rows(Path(path))


def repository_eval_sentences() -> set[str]:
    """``eval_sentences`` of the evaluation subsets this repository ships (``data/``): the filter a corpus gets when
    no shared data folder is there."""
    root = Path(__file__).resolve().parents[2] / "data"
    return eval_sentences(root) if root.is_dir() else set()


def source_files(shared: Path, lang: str) -> list[tuple[Path, Path, bool]]:
    """(foreign, english, strict) file pairs of ``lang`` under ``shared``: each WMT-news file with its English
    partner (a pair of unequal length is skipped: ``strict`` False), then the Tatoeba test pair (strict)."""
    if lang not in SOURCES:
        raise ForgetbenchError(f"no training source for language {lang!r}; known: {', '.join(sorted(SOURCES))}")
    iso, wmt_dirs, tato = SOURCES[lang]
    out = [(fx, fx.with_suffix(".eng"), False) for d in wmt_dirs
           for fx in sorted((shared / "wmt_news" / d).glob(f"*.{iso}")) if fx.with_suffix(".eng").is_file()]
    if tato:
        folder = shared / "tatoeba" / "test-v2021-08-07" / tato
        if not (folder / f"tatoeba-test-v2021-08-07.{iso}").is_file():
            raise ForgetbenchError(f"{folder}: Tatoeba test files for {lang!r} not found (data.shared points at "
                                   "the shared data folder; see its README)")
        out.append((folder / f"tatoeba-test-v2021-08-07.{iso}", folder / "tatoeba-test-v2021-08-07.eng", True))
    return out


def raw_pairs(shared: Path, lang: str) -> list[tuple[str, str]]:
    """(english, foreign) pairs for ``lang`` from WMT news and Tatoeba test sets (``source_files``)."""
    pairs: list[tuple[str, str]] = []
    for fx, fe, strict in source_files(shared, lang):
        # a Tatoeba pair is read by line feeds (its line numbers pair it); WMT news by str.splitlines, under which
        # three German files (U+0085 inside sentences) fall to the unequal-length rule: the corpus the shipped
        # teacher and students were trained on (METHOD §5)
        xs, es = _read_lines(fx, strict), _read_lines(fe, strict)
        if strict and len(xs) != len(es):
            raise ForgetbenchError(f"{fx}: {len(xs):,} lines against {len(es):,} in {fe.name}; the Tatoeba pair "
                                   "must be line-parallel (a damaged copy of the shared data folder?)")
        if len(xs) == len(es):  # a WMT-news pair of unequal counts is skipped
            pairs += list(zip(es, xs, strict=True))
    return pairs


def filtered_copy(shared: Path, langs: list[str], dest: Path) -> dict:
    """The corpora ``langs`` read from ``shared``, copied to ``dest`` (a new folder) with every line that is an
    evaluation sentence (``eval_sentences``) emptied, line numbers kept, so every reader of the copy keeps what it
    keeps from the original: ``build_corpus`` drops a pair with an empty side as it drops a pair with an
    evaluation side (only the drop's name in ``CorpusStats`` differs), the encoders' raw text drops empty
    sentences as it drops evaluation sentences. The copy holds no evaluation set but the English FLORES-101
    devtest (its sentences are among those emptied; ``eval_sentences`` needs one set to check against), and the
    MANIFEST.md of each source. Returns {file: lines emptied}."""
    banned = eval_sentences(shared)
    files = sorted({f.relative_to(shared) for lang in langs for fx, fe, _ in source_files(shared, lang) for f in (fx, fe)})
    emptied = {}
    for rel in files:
        lines = _read_lines(shared / rel, newline_only=True)  # the file's own lines, kept in the copy
        kept = ["" if normalise(x) in banned else x for x in lines]
        emptied[str(rel)] = sum(1 for a, b in zip(lines, kept, strict=True) if a != b)
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text("".join(x + "\n" for x in kept), encoding="utf-8")
    extra = [Path("flores101/devtest/eng.devtest")] + sorted({Path(f.parts[0]) / "MANIFEST.md" for f in files})
    for rel in extra:
        if (shared / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes((shared / rel).read_bytes())
    return emptied


def build_corpus(shared: Path | None, langs: list[str], dev_per_language: int = 100, max_chars: int = 300,
                 seed: int = 0, banned: set[str] | None = None, corpora: dict | None = None
                 ) -> tuple[dict[str, list[tuple[str, str]]], dict[str, list[tuple[str, str]]], CorpusStats]:
    """``banned``: ``eval_sentences(shared)`` when the caller already has it (without ``shared``: the repository's
    evaluation subsets). ``corpora``: language -> a user's TSV file or ``datasets`` folder, read instead of the
    shared folder's WMT news and Tatoeba for that language; the same filters apply."""
    shared = Path(shared) if shared else None
    corpora = corpora or {}
    if banned is None:
        banned = eval_sentences(shared) if shared else repository_eval_sentences()
    rng = random.Random(seed)
    train, dev = {}, {}
    st = CorpusStats({}, {}, {}, {}, {}, {})
    for lang in langs:
        if lang in corpora:
            pairs = list(corpus_rows(Path(corpora[lang]), lang))
        elif shared is None:
            raise ForgetbenchError(f"no corpus for {lang!r}: give data.shared or data.corpora.{lang}")
        else:
            pairs = raw_pairs(shared, lang)
        st.raw[lang] = len(pairs)
        seen, kept = set(), []
        n_eval = n_len = n_dup = 0
        for e, x in pairs:
            e, x = e.strip(), x.strip()
            if not e or not x or len(e) > max_chars or len(x) > max_chars:
                n_len += 1
                continue
            ne, nx = normalise(e), normalise(x)
            if ne in banned or nx in banned:
                n_eval += 1
                continue
            if (ne, nx) in seen:
                n_dup += 1
                continue
            seen.add((ne, nx))
            kept.append((e, x))
        rng.shuffle(kept)
        n_dev = min(dev_per_language, len(kept) // 10)
        dev[lang], train[lang] = kept[:n_dev], kept[n_dev:]
        st.dropped_eval_overlap[lang], st.dropped_length[lang], st.duplicates[lang] = n_eval, n_len, n_dup
        st.train[lang], st.dev[lang] = len(train[lang]), len(dev[lang])
    return train, dev, st
