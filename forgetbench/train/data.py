"""Training data for M2M-100-architecture models: corpus (``train.corpus``, evaluation sets filtered
out) → SentencePiece BPE on a language-balanced sample, M2M-100 vocabulary format → token ids
cached as ``.npz`` (no pickle) → length-bucketed batches in a seeded order (``Examples``).

**Temperature sampling over languages** (``train.temperature`` T; GraphMerge's setting, Wu & Monz 2023 §4.1:
T = 2 on IWSLT14, 5 on EC30): each epoch draws as many examples as the corpus holds, language ℓ (an example's
non-English side, both directions together) getting round(N · p_ℓ) of them with p_ℓ = n_ℓ^(1/T) / Σ_k n_k^(1/T)
(``language_shares``): its examples in a seeded order, repeated in fresh seeded orders where the share exceeds
them. T = 1 is the corpus as it is, every example once per epoch (the order of runs before the setting).

Format is M2M-100's: source ``__src__ tokens </s>``, labels ``__tgt__ tokens </s>``, decoder
input ``</s> __tgt__ tokens``; generation forces ``__tgt__`` as first token.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_bytes, atomic_write_json, atomic_write_text, sha256_file
from forgetbench.train.config import VOCABULARY_FILES, TrainMTConfig, spm_settings, where_free
from forgetbench.train.corpus import build_corpus


def prepare(cfg: TrainMTConfig, out: Path, log=print) -> dict:
    """Corpus, SPM and token ids; cached in ``out`` (skipped when already there). With ``spm.from`` the SPM and
    ``vocab.json`` are that model's, copied (the ids of every piece and language code as its embeddings know
    them); else an SPM is trained on a sample of the corpus."""
    from transformers import M2M100Tokenizer

    from forgetbench.models.vocabulary import train_spm, write_m2m_vocab

    meta_path = out / "prepared.json"
    key, legacy = (hashlib.sha256(json.dumps([d, spm_settings(cfg.spm), cfg.train.seed, cfg.train.max_len],
                                             sort_keys=True).encode()).hexdigest()[:16]
                   for d in (where_free(asdict(cfg.data)), asdict(cfg.data)))  # legacy: where the data lay
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("prepared_with", key) not in (key, legacy):
            raise ForgetbenchError(f"{out}: prepared with other data/spm settings ({meta['prepared_with']} vs {key}); "
                                   "use a new --out")
        return meta
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train, dev, stats = build_corpus(cfg.data.shared or None, cfg.data.languages, cfg.data.dev_per_language,
                                     cfg.data.max_chars, cfg.train.seed, corpora=cfg.data.corpora)
    log(f"corpus: {sum(stats.train.values()):,} training pairs; dropped for evaluation-set overlap: "
        f"{sum(stats.dropped_eval_overlap.values()):,}")
    tok_dir = out / "tokenizer"
    if cfg.spm.from_model:
        vocab_size = _copy_vocabulary(Path(cfg.spm.from_model), tok_dir)
        log(f"vocabulary: {cfg.spm.from_model}'s ({vocab_size:,} ids), none trained")
    else:
        rng = random.Random(cfg.train.seed)
        sample = []
        for pairs in train.values():
            sub = pairs if len(pairs) <= cfg.spm.sample_per_language else rng.sample(pairs, cfg.spm.sample_per_language)
            sample += [x for _, x in sub]
            sample += [e for e, _ in sub[: max(1, len(sub) // len(train))]]  # English share ~ one language
        rng.shuffle(sample)
        vocab_size = write_m2m_vocab(train_spm(sample, cfg.spm.vocab_size,
                                               character_coverage=cfg.spm.character_coverage), tok_dir)
    tok = M2M100Tokenizer(str(tok_dir / "vocab.json"), str(tok_dir / "sentencepiece.bpe.model"))
    tok.save_pretrained(tok_dir)

    def encode(texts):
        return [[tok.encoder.get(p, 3) for p in tok.sp_model.encode(t, out_type=str)] for t in texts]

    for split, data in (("train", train), ("dev", dev)):
        src, tgt, sl, tl = [], [], [], []
        for lang, pairs in data.items():
            e_ids, x_ids = encode([e for e, _ in pairs]), encode([x for _, x in pairs])
            lid, eid = tok.get_lang_id(lang), tok.get_lang_id("en")
            for a, b in zip(e_ids, x_ids, strict=True):
                src += [a, b]
                tgt += [b, a]
                sl += [eid, lid]
                tl += [lid, eid]
        _save_ids(out / f"{split}.npz", src, tgt, sl, tl)
        if split == "dev":
            atomic_write_text(out / "dev.json", json.dumps({k: v for k, v in dev.items()}, ensure_ascii=False))
    meta = {"vocab_size": vocab_size, "corpus": asdict(stats), "seconds": round(time.perf_counter() - t0, 1),
            "spm_sha256": sha256_file(tok_dir / "sentencepiece.bpe.model"), "prepared_with": key}
    atomic_write_json(meta_path, meta)
    return meta


def _copy_vocabulary(folder: Path, tok_dir: Path) -> int:
    """``folder``'s SPM and ``vocab.json`` into ``tok_dir``; returns the model vocab size as ``write_m2m_vocab``
    counts it (pieces + language codes + made-up words)."""
    from forgetbench.models.vocabulary import N_LANG_TOKENS, N_MADEUP

    tok_dir.mkdir(parents=True, exist_ok=True)
    for f in VOCABULARY_FILES:
        atomic_write_bytes(tok_dir / f, (folder / f).read_bytes())
    return len(json.loads((tok_dir / "vocab.json").read_text(encoding="utf-8"))) + N_LANG_TOKENS + N_MADEUP


def _save_ids(path: Path, src, tgt, sl, tl) -> None:
    def flat(seqs):
        off = np.zeros(len(seqs) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(s) for s in seqs])
        return np.fromiter((i for s in seqs for i in s), dtype=np.int32, count=int(off[-1])), off

    s_ids, s_off = flat(src)
    t_ids, t_off = flat(tgt)
    np.savez(path, src=s_ids, src_off=s_off, tgt=t_ids, tgt_off=t_off, src_lang=np.array(sl, np.int32),
             tgt_lang=np.array(tl, np.int32))


def language_shares(counts: np.ndarray, temperature: float) -> np.ndarray:
    """p_ℓ = n_ℓ^(1/T) / Σ_k n_k^(1/T) (module docstring)."""
    w = np.asarray(counts, dtype=np.float64) ** (1.0 / temperature)
    return w / w.sum()


class Examples:
    def __init__(self, path: Path, max_len: int, temperature: float = 1.0):
        z = np.load(path, allow_pickle=False)
        self.src, self.src_off, self.tgt, self.tgt_off = z["src"], z["src_off"], z["tgt"], z["tgt_off"]
        self.src_lang, self.tgt_lang = z["src_lang"], z["tgt_lang"]
        self.max_len = max_len
        self.temperature = float(temperature)
        body = max_len - 2
        self.src_len = np.minimum(np.diff(self.src_off), body) + 2
        self.tgt_len = np.minimum(np.diff(self.tgt_off), body) + 2

    def __len__(self):
        return len(self.src_lang)

    def languages(self) -> np.ndarray:
        """Each example's non-English language code (English: the code on one side of every example)."""
        codes, n = np.unique(np.concatenate([self.src_lang, self.tgt_lang]), return_counts=True)
        en = codes[n.argmax()]
        return np.where(self.src_lang == en, self.tgt_lang, self.src_lang)

    def epoch_indices(self, rng) -> np.ndarray:
        """The examples of one epoch under temperature sampling (module docstring), in language order; the caller
        shuffles them."""
        lang = self.languages()
        codes, counts = np.unique(lang, return_counts=True)
        quota = np.rint(len(self) * language_shares(counts, self.temperature)).astype(np.int64)
        out = []
        for code, q in zip(codes, quota, strict=True):
            own = np.nonzero(lang == code)[0]
            reps = -(-int(q) // len(own))
            out.append(np.concatenate([own[rng.permutation(len(own))] for _ in range(reps)])[:q])
        return np.concatenate(out)

    def batches(self, max_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
        """Length-bucketed batches (source+target padded tokens <= max_tokens), in a seeded order."""
        rng = np.random.default_rng(seed * 1000 + epoch)
        if self.temperature == 1.0:
            order = rng.permutation(len(self))
        else:
            pool = self.epoch_indices(rng)
            order = pool[rng.permutation(len(pool))]
        order = order[np.argsort(np.maximum(self.src_len, self.tgt_len)[order], kind="stable")]
        out, cur, cur_max = [], [], 0
        for i in order:
            m = max(self.src_len[i], self.tgt_len[i])
            if cur and (len(cur) + 1) * max(cur_max, m) * 2 > max_tokens:
                out.append(np.array(cur))
                cur, cur_max = [], 0
            cur.append(i)
            cur_max = max(cur_max, m)
        if cur:
            out.append(np.array(cur))
        return [out[j] for j in rng.permutation(len(out))]

    def collate(self, idx: np.ndarray, pad: int = 1, eos: int = 2) -> dict[str, torch.Tensor]:
        body = self.max_len - 2
        srcs = [[int(self.src_lang[i]), *self.src[self.src_off[i]:self.src_off[i + 1]][:body].tolist(), eos] for i in idx]
        tgts = [[int(self.tgt_lang[i]), *self.tgt[self.tgt_off[i]:self.tgt_off[i + 1]][:body].tolist(), eos] for i in idx]
        return pad_batch(srcs, tgts, pad, eos)


def pad_batch(srcs: list[list[int]], tgts: list[list[int]], pad: int = 1, eos: int = 2) -> dict[str, torch.Tensor]:
    """Padded seq2seq inputs from complete source and label sequences: ``input_ids``/``attention_mask``, ``labels``
    (-100 at padding) and ``decoder_input_ids`` = ``</s>`` + labels[:-1]."""
    S, T = max(map(len, srcs)), max(map(len, tgts))
    ids = torch.full((len(srcs), S), pad, dtype=torch.long)
    labels = torch.full((len(srcs), T), -100, dtype=torch.long)
    dec = torch.full((len(srcs), T), pad, dtype=torch.long)
    for r, (s, t) in enumerate(zip(srcs, tgts, strict=True)):
        ids[r, : len(s)] = torch.tensor(s)
        labels[r, : len(t)] = torch.tensor(t)
        dec[r, 0] = eos
        dec[r, 1 : len(t)] = torch.tensor(t[:-1])
    return {"input_ids": ids, "attention_mask": (ids != pad).long(), "decoder_input_ids": dec, "labels": labels}
