"""Benchmarks held as Hugging Face ``datasets``: a folder written by ``save_to_disk``, or a hub id when online.

    benchmarks: [{name: my-test, kind: dataset, path: ../data/my_test, split: test}]
    benchmarks: [{name: wmt, kind: dataset, path: "hub:wmt/wmt19", config: de-en, split: validation}]

Rules:

1. A row holds one sentence per language, found in this order: a column named by the M2M-100 code (``de``);
   a FLORES-style column ``sentence_<iso3>_<Script>`` (``sentence_deu_Latn``); a ``translation`` column of
   ``{code: text}`` mappings (the WMT datasets). A pair is read from the rows that have both languages.
2. The same checks as the file benchmarks (``eval.benchmarks``): no empty sentence (named by split and row),
   the pair's SHA-256 in every score's signature — here over the pair's text itself.
3. ``datasets`` is imported only for these benchmarks; a missing package, an offline hub id or a folder that
   ``load_from_disk`` cannot read is one line before any work; a ``DatasetDict`` needs ``split``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.languages import language

HUB = "hub:"


@dataclass
class DatasetBenchmark:
    """A ``datasets`` split as a benchmark: opened and checked when made (rule 3), pairs read once each."""

    name: str
    kind: str
    root: Path | str  # a save_to_disk folder, or "hub:<id>"
    split: str | None = None
    config: str | None = None
    _rows: object = field(default=None, init=False, repr=False, compare=False)
    _lines: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        self._rows = open_dataset(self.name, self.root, self.split, self.config)

    def pair(self, src: str, tgt: str) -> tuple[list[str], list[str]]:
        if (src, tgt) not in self._lines:
            s, t = (column(self._rows, x, self.name, self.root) for x in (src, tgt))
            rows = [(i, a, b) for i, (a, b) in enumerate(zip(s, t, strict=True)) if a is not None and b is not None]
            if not rows:
                raise ForgetbenchError(f"{self.name}: no row has both {src} and {tgt} in {self.root}")
            for i, a, b in rows:
                if not str(a).strip() or not str(b).strip():
                    raise ForgetbenchError(f"{self.name} {src}-{tgt}: split {self.split or '-'} row {i}: empty sentence; "
                                           "every row is a sentence to translate or a reference: drop the row")
            self._lines[(src, tgt)] = ([str(a) for _, a, _ in rows], [str(b) for _, _, b in rows])
        s, t = self._lines[(src, tgt)]
        return list(s), list(t)

    def sha256(self, src: str, tgt: str) -> str:
        s, t = self.pair(src, tgt)
        h = hashlib.sha256()
        for line in (*s, "\0", *t):
            h.update(line.encode("utf-8") + b"\n")
        return h.hexdigest()


def column(ds, lang: str, name: str, root) -> list:
    """Rule 1: the sentences of ``lang`` in ``ds`` (None where a row lacks it)."""
    cols = ds.column_names
    if lang in cols:
        return list(ds[lang])
    L = language(lang)
    flores = [c for c in cols if c.startswith(f"sentence_{L.iso3}_")]
    if flores:
        return list(ds[flores[0]])
    if "translation" in cols:
        return [(t or {}).get(lang) for t in ds["translation"]]
    raise ForgetbenchError(f"{name}: no column for {L.name} ({lang}) in {root}; columns {cols[:8]}: name "
                           f"one {lang!r}, sentence_{L.iso3}_<Script>, or give a translation column")


def open_dataset(name: str, root, split: str | None, config: str | None, default_split: str | None = None):
    """Rule 3: the rows of a ``save_to_disk`` folder or a hub dataset, one split (a DatasetDict without ``split``:
    ``default_split`` where it has it)."""
    try:
        import datasets
    except ImportError:
        raise ForgetbenchError(f"benchmark {name}: kind dataset needs the datasets package; pip install datasets") from None
    try:
        if str(root).startswith(HUB):
            ds = datasets.load_dataset(str(root)[len(HUB):], config, split=split)
        else:
            ds = datasets.load_from_disk(str(root))
    except (ConnectionError, OSError, FileNotFoundError, ValueError) as e:
        where = "the hub (offline? give a save_to_disk folder)" if str(root).startswith(HUB) else "a save_to_disk folder"
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        raise ForgetbenchError(f"benchmark {name}: {root} cannot be read as {where}: {first}") from None
    if isinstance(ds, datasets.DatasetDict):
        split = split if split is not None or default_split not in ds else default_split
        if split is None or split not in ds:
            raise ForgetbenchError(f"benchmark {name}: {root} holds splits {sorted(ds)}; choose one with split: …")
        ds = ds[split]
    elif split is not None and not str(root).startswith(HUB):
        raise ForgetbenchError(f"benchmark {name}: {root} is a single dataset without splits; remove split: {split}")
    return ds


def parallel_rows(name: str, root, src: str, tgt: str) -> list[tuple[str, str]]:
    """The (src, tgt) sentences of a ``save_to_disk`` folder used as a training corpus (a DatasetDict: its ``train``
    split), rows lacking either side left out; the columns found as in rule 1."""
    ds = open_dataset(name, root, None, None, default_split="train")
    return [(str(a), str(b)) for a, b in zip(column(ds, src, name, root), column(ds, tgt, name, root), strict=True)
            if a is not None and b is not None]
