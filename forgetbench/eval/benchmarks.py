"""Benchmark loaders from local folders (formats as in the shared data; the repo ships subsets).

- ``flores101``: ``<dir>/<iso3>.devtest`` (or ``<dir>/devtest/<iso3>.devtest``), multi-way.
- ``flores200``: ``<dir>/<code>.devtest`` (or ``<dir>/devtest/…``) named by NLLB/FLORES-200 code (``deu_Latn``),
  multi-way; the project's language names map to the codes by ``models.nllb_codes``.
- ``ntrex128``: ``<dir>/newstest2019-ref.<code>.txt`` + ``newstest2019-src.eng.txt``, multi-way.
- ``tico19``: ``<dir>/en-<xx>/tico19-test.{en,<xx>}`` (English-centric pairs).
- ``tatoeba``: ``<dir>/<a>-<b>/tatoeba-test-v2021-08-07.{a,b}`` (English-centric pairs).
- ``dataset``: a Hugging Face ``datasets`` folder (``save_to_disk``) or ``hub:<id>`` (``eval.hf_datasets``).

``Benchmark.pair(src, tgt)`` returns source and reference lines; ``sha256(src, tgt)`` the hash of
the files used, which goes into every score's signature.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.languages import language
from forgetbench.io import read_text, sha256_file
from forgetbench.models.nllb_codes import nllb_code

KINDS = ("flores101", "flores200", "ntrex128", "tico19", "tatoeba")


@dataclass
class Benchmark:
    name: str
    kind: str
    root: Path
    _lines: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # (src, tgt) -> checked lines

    def _file(self, lang: str, other: str) -> Path:
        L = language(lang)
        if self.kind == "flores101":
            for p in (self.root / L.flores_file, self.root / "devtest" / L.flores_file):
                if p.is_file():
                    return p
            raise ForgetbenchError(f"{self.name}: no FLORES-101 file {L.flores_file} under {self.root}")
        if self.kind == "flores200":
            name = f"{nllb_code(lang, f'benchmark {self.name}')}.devtest"
            for p in (self.root / name, self.root / "devtest" / name):
                if p.is_file():
                    return p
            raise ForgetbenchError(f"{self.name}: no FLORES-200 file {name} for {L.name} ({lang}) under {self.root}; "
                                   "give the folder holding the FLORES-200 devtest files")
        if self.kind == "ntrex128":
            if lang == "en":
                p = self.root / "newstest2019-src.eng.txt"
            elif L.ntrex is None:
                raise ForgetbenchError(f"{self.name}: NTREX-128 subset has no {L.name} ({lang})")
            else:
                p = self.root / f"newstest2019-ref.{L.ntrex}.txt"
            if not p.is_file():
                raise ForgetbenchError(f"{self.name}: missing {p}")
            return p
        if self.kind == "tico19":
            x = other if lang == "en" else lang
            if "en" not in (lang, other):
                raise ForgetbenchError(f"{self.name}: TICO-19 pairs are English-centric; {lang}-{other} is not")
            p = self.root / f"en-{x}" / f"tico19-test.{lang}"
            if not p.is_file():
                raise ForgetbenchError(f"{self.name}: missing {p}")
            return p
        # tatoeba
        x = other if lang == "en" else lang
        iso = {"ar": "ara", "sw": "swa"}.get(x, language(x).iso3)
        for folder in (f"eng-{iso}", f"{iso}-eng"):
            d = self.root / folder
            if d.is_dir():
                p = d / f"tatoeba-test-v2021-08-07.{'eng' if lang == 'en' else iso}"
                if p.is_file():
                    return p
        raise ForgetbenchError(f"{self.name}: no Tatoeba pair folder for {x} under {self.root}")

    def pair(self, src: str, tgt: str) -> tuple[list[str], list[str]]:
        """Source and reference lines, read and checked once per pair (copies: callers may not change the cache)."""
        if (src, tgt) not in self._lines:
            self._lines[(src, tgt)] = self._read_pair(src, tgt)
        s, t = self._lines[(src, tgt)]
        return list(s), list(t)

    def _read_pair(self, src: str, tgt: str) -> tuple[list[str], list[str]]:
        fs, ft = self._file(src, tgt), self._file(tgt, src)
        s, t = read_text(fs).splitlines(), read_text(ft).splitlines()
        if len(s) != len(t):
            raise ForgetbenchError(f"{self.name} {src}-{tgt}: {fs} has {len(s)} lines but {ft} has {len(t)}; "
                                   "source and reference must be line-aligned")
        for f, lines in ((fs, s), (ft, t)):
            empty = next((i for i, x in enumerate(lines, 1) if not x.strip()), None)
            if empty is not None:
                raise ForgetbenchError(f"{f}:{empty}: empty line; every line is a sentence to translate or a reference "
                                       "(an empty one would be scored chrF 0): remove it from both files")
        return s, t

    def sha256(self, src: str, tgt: str) -> str:
        h = hashlib.sha256()
        for f in (self._file(src, tgt), self._file(tgt, src)):
            h.update(sha256_file(f).encode())
        return h.hexdigest()


def open_benchmark(name: str, kind: str, root: str | Path, split: str | None = None, config: str | None = None):
    """A benchmark of ``kind`` under ``root`` (``dataset``: ``eval.hf_datasets``, ``split``/``config`` its own)."""
    if kind == "dataset":
        from forgetbench.eval.hf_datasets import HUB, DatasetBenchmark

        if not str(root).startswith(HUB) and not Path(root).is_dir():
            raise ForgetbenchError(f"benchmark {name}: folder {root} not found (a save_to_disk folder, or hub:<id>)")
        return DatasetBenchmark(name, kind, root, split, config)  # read and checked before any work
    if split is not None or config is not None:
        raise ForgetbenchError(f"benchmark {name}: split and config are for kind dataset, not {kind}")
    if kind not in KINDS:
        raise ForgetbenchError(f"benchmark {name}: unknown kind {kind!r}; known: {', '.join((*KINDS, 'dataset'))}")
    root = Path(root)
    if not root.is_dir():
        raise ForgetbenchError(f"benchmark {name}: folder {root} not found")
    return Benchmark(name, kind, root)
