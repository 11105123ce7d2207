"""Distillation data: per-language parallel corpora → token ids on disk → the language-balanced sample,
batched for a student and its teacher in their own input formats.

- Corpora: the teacher's own corpus (``train.corpus.build_corpus``: WMT news + Tatoeba, every pair that
  overlaps FLORES-101 / NTREX-128 / TICO-19 removed, the same dev split) or per-language TSV files
  ("english<TAB>foreign", read line by line, the same evaluation-set filter when ``data.shared`` is given).
- Ids: one language at a time, with the teacher's SentencePiece vocabulary, into ``<run>/data/`` as
  flat ``.npy`` arrays with offsets. Training opens them memory-mapped: only the sample's (direction,
  row) pairs and lengths are in memory, never the corpus.
- Formats (docs/METHOD.md §3): SMaLL-100 = source ``__tgt__ x </s>``, labels ``y </s>``; M2M-100 =
  source ``__src__ x </s>``, labels ``__tgt__ y </s>``; decoder input = ``</s>`` + labels[:-1]. The
  *content* positions (y and the final ``</s>``) are where student and teacher distributions meet:
  they start at label position 0 (SMaLL-100) or 1 (M2M-100).
- Groups: a direction's resource-tier pair group, e.g. ``H2VL`` (English → Swahili), from training-pair
  counts and ``data.tiers`` (``eval.languages.tiers_from_counts``, the sweep's own-tier rule).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from forgetbench.distill.config import DistillConfig
from forgetbench.distill.sampling import plan
from forgetbench.errors import ForgetbenchError
from forgetbench.eval.languages import PAIR_GROUPS, pair_group, tiers_from_counts
from forgetbench.io import atomic_write_json, sha256_file
from forgetbench.train.data import pad_batch

PAD, EOS = 1, 2


def encoder_of(tok):
    """text → ids with the M2M-100 vocabulary (unknown pieces → ``<unk>``); other tokenizers (NLLB-200) by their
    own call without special tokens."""
    if not hasattr(tok, "sp_model"):
        return lambda text: tok(text, add_special_tokens=False)["input_ids"]
    unk = tok.encoder.get("<unk>", 3)
    return lambda text: [tok.encoder.get(p, unk) for p in tok.sp_model.encode(text, out_type=str)]


def _save_side(folder: Path, name: str, seqs: list[list[int]]) -> None:
    off = np.zeros(len(seqs) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(s) for s in seqs])
    ids = np.fromiter((i for s in seqs for i in s), dtype=np.int32, count=int(off[-1]))
    for suffix, arr in (("ids", ids), ("off", off)):
        tmp = folder / f".{name}.{suffix}.npy.partial"
        with open(tmp, "wb") as f:
            np.save(f, arr)
        tmp.replace(folder / f"{name}.{suffix}.npy")


def _tsv_pairs(path: Path, banned: set[str], max_chars: int, lang: str = ""):
    """(english, foreign) pairs of a TSV corpus (or a ``datasets`` folder), streamed; the filter of
    ``train.corpus.build_corpus``."""
    from forgetbench.train.corpus import corpus_rows, normalise

    seen: set[bytes] = set()
    rows = corpus_rows(Path(path), lang)
    for e, x in rows:
        e, x = e.strip(), x.strip()
        if not e or not x or len(e) > max_chars or len(x) > max_chars:
            continue
        ne, nx = normalise(e), normalise(x)
        if ne in banned or nx in banned:
            continue
        h = hashlib.blake2b(f"{ne}\t{nx}".encode(), digest_size=12).digest()
        if h in seen:
            continue
        seen.add(h)
        yield e, x


def prepare_data(cfg: DistillConfig, tok, out: Path, log=print) -> dict:
    """Token ids per language in ``out`` (skipped when ``out/prepared.json`` exists); returns that record."""
    meta_path = out / "prepared.json"
    if meta_path.is_file():
        return json.loads(meta_path.read_text())
    out.mkdir(parents=True, exist_ok=True)
    d = cfg.data
    enc = encoder_of(tok)
    counts, dev_ids = {}, {}
    from_shared = [x for x in d.languages if x not in d.corpora]
    banned: set[str] = set()
    if d.shared:
        from forgetbench.train.corpus import eval_sentences

        banned = eval_sentences(Path(d.shared))
    if from_shared:
        from forgetbench.train.corpus import build_corpus

        # all languages in one call, with the teacher's seed: the same train/dev split as the teacher's
        train, dev, _ = build_corpus(Path(d.shared), from_shared, d.dev_per_language, d.max_chars, cfg.train.seed,
                                     banned)
        for lang in from_shared:
            _write_language(out, lang, train.pop(lang), enc)
            counts[lang] = int(np.load(out / f"{lang}.en.off.npy").shape[0] - 1)
            dev_ids[lang] = [(enc(e), enc(x)) for e, x in dev[lang]]
    for lang, path in d.corpora.items():
        rng = np.random.default_rng(cfg.train.seed)
        pairs = list(_tsv_pairs(Path(path), banned, d.max_chars, lang))
        if not pairs:
            raise ForgetbenchError(f"{path}: no usable 'english<TAB>foreign' lines for {lang!r} after filtering")
        order = rng.permutation(len(pairs))
        n_dev = min(d.dev_per_language, len(pairs) // 10)
        dev_ids[lang] = [(enc(pairs[i][0]), enc(pairs[i][1])) for i in order[:n_dev]]
        _write_language(out, lang, [pairs[i] for i in order[n_dev:]], enc)
        counts[lang] = len(pairs) - n_dev
    atomic_write_json(out / "dev.json", {k: v for k, v in dev_ids.items()})
    files = sorted(p.name for p in out.glob("*.npy"))
    h = hashlib.sha256()
    for name in files:
        h.update(name.encode() + bytes.fromhex(sha256_file(out / name)))
    meta = {"train_pairs": counts, "dev_pairs": {k: len(v) for k, v in dev_ids.items()}, "ids_sha256": h.hexdigest(),
            "evaluation_filter": bool(d.shared)}
    atomic_write_json(meta_path, meta)
    log(f"data: {sum(counts.values()):,} training pairs over {len(counts)} languages (ids in {out})")
    return meta


def _write_language(out: Path, lang: str, pairs: list[tuple[str, str]], enc) -> None:
    _save_side(out, f"{lang}.en", [enc(e) for e, _ in pairs])
    _save_side(out, f"{lang}.{lang}", [enc(x) for _, x in pairs])


class Side:
    """One language side of a corpus, memory-mapped."""

    def __init__(self, folder: Path, name: str):
        try:
            self.ids = np.load(folder / f"{name}.ids.npy", mmap_mode="r", allow_pickle=False)
            self.off = np.load(folder / f"{name}.off.npy", allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ForgetbenchError(f"{folder}: prepared ids {name} unreadable ({e}); delete {folder} and rerun") from None

    def __len__(self):
        return len(self.off) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.off)

    def row(self, i: int, limit: int) -> list[int]:
        return self.ids[self.off[i]: min(self.off[i + 1], self.off[i] + limit)].tolist()


class DistillData:
    """The realised sample of one run: batches of plan entries collated for student and teacher."""

    def __init__(self, cfg: DistillConfig, folder: Path, lang_id, teacher_small100: bool, max_len: int | None = None):
        meta = json.loads((folder / "prepared.json").read_text())
        self.pairs = cfg.pairs
        self.max_len = max_len or cfg.train.max_len
        self.student_small100 = cfg.student.format == "small100"
        self.teacher_small100 = teacher_small100
        self.sides = {}
        for lang in cfg.data.languages:
            self.sides[(lang, "en")] = Side(folder, f"{lang}.en")
            self.sides[(lang, lang)] = Side(folder, f"{lang}.{lang}")
        self.lang_id = {c: lang_id(c) for c in ["en", *cfg.data.languages]}
        sizes = {f"{s}-{t}": meta["train_pairs"][t if s == "en" else s] for s, t in self.pairs}
        self.dirs, self.rows, self.quotas = plan(sizes, cfg.data.sampling, cfg.data.budget, cfg.data.temperature,
                                                 cfg.train.seed)
        self.tiers = tiers_from_counts(meta["train_pairs"], cfg.data.tiers)
        self.dir_group = [pair_group(self.tiers[s], self.tiers[t]) for s, t in self.pairs]
        for k, g in enumerate(self.dir_group):
            self.quotas[f"{self.pairs[k][0]}-{self.pairs[k][1]}"]["group"] = g
        keys = self.dirs.astype(np.int64) * (1 << 40) + self.rows
        self.unique_keys, self.uid = np.unique(keys, return_inverse=True)
        self.copies = np.bincount(self.uid, minlength=len(self.unique_keys))  # plan entries per unique example
        order = np.argsort(self.uid, kind="stable")
        first = np.concatenate([[0], np.cumsum(self.copies)[:-1]])
        self.copy_rank = np.empty(len(self.uid), np.int64)  # an entry's rank among its example's copies
        self.copy_rank[order] = np.arange(len(order)) - first[self.uid[order]]
        body = self.max_len - 2
        src_len = np.empty(len(self.dirs), np.int64)
        tgt_len = np.empty(len(self.dirs), np.int64)
        for k, (s, t) in enumerate(self.pairs):
            sel = self.dirs == k
            src_len[sel] = self._side(s, t, "src").lengths()[self.rows[sel]]
            tgt_len[sel] = self._side(s, t, "tgt").lengths()[self.rows[sel]]
        self.src_len = np.minimum(src_len, body) + 2
        self.tgt_len = np.minimum(tgt_len, body) + 2
        self.ids_sha256 = meta["ids_sha256"]

    def _side(self, s: str, t: str, which: str) -> Side:
        lang = t if s == "en" else s
        code = s if which == "src" else t
        return self.sides[(lang, code)]

    def __len__(self) -> int:
        return len(self.dirs)

    def sample_sha256(self) -> str:
        """The data a cache is tied to: the ids on disk and the realised sample."""
        h = hashlib.sha256(self.ids_sha256.encode())
        h.update(self.unique_keys.tobytes())
        h.update(str(self.max_len).encode())
        return h.hexdigest()

    def batches(self, max_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
        """Length-bucketed batches of plan entries (source+target padded tokens ≤ max_tokens), seeded order."""
        rng = np.random.default_rng(seed * 1000 + epoch)
        order = rng.permutation(len(self))
        m = np.maximum(self.src_len, self.tgt_len)
        order = order[np.argsort(m[order], kind="stable")]
        out, cur, cur_max = [], [], 0
        for i in order:
            if cur and (len(cur) + 1) * max(cur_max, m[i]) * 2 > max_tokens:
                out.append(np.array(cur))
                cur, cur_max = [], 0
            cur.append(i)
            cur_max = max(cur_max, int(m[i]))
        if cur:
            out.append(np.array(cur))
        return [out[j] for j in rng.permutation(len(out))]

    def kd_uids(self, max_tokens: int, seed: int, first_step: int, last_step: int) -> np.ndarray:
        """The unique examples of the global batches of steps ``first_step + 1 … last_step`` (the loop's order:
        ``batches`` of epoch 0, 1, … one batch a step), sorted; stops early once every example is in."""
        step, epoch, n = 0, 0, len(self.unique_keys)
        seen = np.zeros(n, bool)
        while step < last_step and not seen.all():
            for b in self.batches(max_tokens, seed, epoch):
                step += 1
                if step > first_step:
                    seen[self.uid[b]] = True
                if step >= last_step:
                    break
            epoch += 1
        return np.flatnonzero(seen)

    def example(self, i: int) -> tuple[str, str, list[int], list[int]]:
        s, t = self.pairs[self.dirs[i]]
        body = self.max_len - 2
        return s, t, self._side(s, t, "src").row(int(self.rows[i]), body), self._side(s, t, "tgt").row(int(self.rows[i]), body)

    def occurrence(self, idx, epoch: int) -> np.ndarray:
        """How many times each entry's example was used before this use: the epochs before times its copies in the
        plan, plus the entry's rank among them (a function of the plan, not of the run: equal on resume)."""
        idx = np.asarray(idx)
        return epoch * self.copies[self.uid[idx]] + self.copy_rank[idx]

    def collate(self, idx, epoch: int = 0) -> dict[str, torch.Tensor]:
        rows = [self.example(int(i)) for i in idx]
        out = encode_batch(rows, self.lang_id, self.student_small100, prefix="")
        out |= encode_batch(rows, self.lang_id, self.teacher_small100, prefix="teacher_")
        out["group"] = torch.tensor([PAIR_GROUPS.index(self.dir_group[self.dirs[i]]) for i in idx])
        out["uid"] = torch.from_numpy(self.uid[np.asarray(idx)])
        out["direction"] = torch.from_numpy(self.dirs[np.asarray(idx)].astype(np.int64))  # index into self.pairs
        out["occurrence"] = torch.from_numpy(self.occurrence(idx, epoch))
        return out


def encode_batch(rows, lang_id: dict[str, int], small100: bool, prefix: str = "") -> dict[str, torch.Tensor]:
    """Padded model inputs for (src, tgt, src ids, tgt ids) rows in one format; ``content_start`` is the label
    position of the first target token, ``content_len`` the target tokens + ``</s>`` per row."""
    srcs = [[lang_id[t] if small100 else lang_id[s], *x, EOS] for s, t, x, _ in rows]
    tgts = [([] if small100 else [lang_id[t]]) + [*y, EOS] for _, t, _, y in rows]
    b = pad_batch(srcs, tgts, PAD, EOS)
    return {f"{prefix}{k}": v for k, v in b.items()} | {
        f"{prefix}content_start": torch.tensor(0 if small100 else 1),
        "content_len": torch.tensor([len(y) + 1 for *_, y in rows])}
