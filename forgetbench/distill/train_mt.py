"""Train a multilingual M2M-100-architecture model from scratch (the shipped teacher).

    forgetbench train-mt configs/teacher.yaml --out runs/teacher

Pipeline: corpus (``corpus.build_corpus``, evaluation sets filtered out) → SentencePiece BPE on a
language-balanced sample, M2M-100 vocabulary format → token ids cached as ``.npz`` (no pickle) →
training with label-smoothed cross-entropy, AdamW, inverse-sqrt schedule, bf16 autocast on CPU →
HF model folder loadable by ``M2M100ForConditionalGeneration`` / ``M2M100Tokenizer``.

Format is M2M-100's: source ``__src__ tokens </s>``, labels ``__tgt__ tokens </s>``, decoder
input ``</s> __tgt__ tokens``; generation forces ``__tgt__`` as first token.

Resumable: a checkpoint (weights as safetensors, optimiser state loaded with ``weights_only=True``,
step and data position as JSON) is written atomically every ``checkpoint_minutes``; rerunning the
command continues from it. Deterministic given the seed: batch order comes from a seeded
permutation per epoch and dropout is re-seeded every step.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml
from tqdm.auto import tqdm

from forgetbench.distill.corpus import build_corpus
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json, sha256_file


@dataclass
class DataCfg:
    shared: str = "../shared/data"
    languages: list = field(default_factory=lambda: ["de", "fr"])
    dev_per_language: int = 100
    max_chars: int = 300


@dataclass
class SpmCfg:
    vocab_size: int = 8000
    character_coverage: float = 0.9995
    sample_per_language: int = 20000


@dataclass
class ModelCfg:
    d_model: int = 256
    encoder_layers: int = 4
    decoder_layers: int = 3
    heads: int = 4
    ffn: int = 1024
    dropout: float = 0.1
    max_positions: int = 256


@dataclass
class TrainCfg:
    seed: int = 1
    max_tokens: int = 4096  # source + target tokens per batch
    max_len: int = 128
    lr: float = 1e-3
    warmup: int = 1000
    steps: int = 10000
    time_budget_minutes: float = 0.0  # 0 = no limit; else stop (and say so) when reached
    label_smoothing: float = 0.1
    weight_decay: float = 0.0
    clip: float = 1.0
    bf16: bool = True
    threads: int = 1
    checkpoint_minutes: float = 10.0
    dev_every: int = 1000
    dev_sentences: int = 16
    dev_directions: list = field(default_factory=list)


@dataclass
class TrainMTConfig:
    data: DataCfg
    spm: SpmCfg
    model: ModelCfg
    train: TrainCfg
    source: str = ""


def load_config(path: str | Path) -> TrainMTConfig:
    path = Path(path)
    if not path.is_file():
        raise ForgetbenchError(f"config {path} not found")
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    parts = {}
    for key, cls in (("data", DataCfg), ("spm", SpmCfg), ("model", ModelCfg), ("train", TrainCfg)):
        sec = raw.get(key) or {}
        known = set(cls.__dataclass_fields__)
        extra = set(sec) - known
        if extra:
            raise ForgetbenchError(f"{path}: {key}: unknown key(s) {sorted(extra)}; allowed: {', '.join(sorted(known))}")
        parts[key] = cls(**sec)
    extra = set(raw) - {"data", "spm", "model", "train"}
    if extra:
        raise ForgetbenchError(f"{path}: unknown section(s) {sorted(extra)}; allowed: data, spm, model, train")
    cfg = TrainMTConfig(**parts, source=str(path))
    shared = Path(cfg.data.shared)
    if not shared.is_absolute():
        cfg.data.shared = str((path.parent / shared).resolve() if (path.parent / shared).exists() else shared.resolve())
    if not Path(cfg.data.shared).is_dir():
        raise ForgetbenchError(f"{path}: data.shared {cfg.data.shared} is not a folder (the shared data directory)")
    return cfg


# ---------------------------------------------------------------- preparation

def prepare(cfg: TrainMTConfig, out: Path, log=print) -> dict:
    """Corpus, SPM and token ids; cached in ``out`` (skipped when already there)."""
    from transformers import M2M100Tokenizer

    from forgetbench.models.tiny import train_spm, write_m2m_vocab

    meta_path = out / "prepared.json"
    key = hashlib.sha256(json.dumps([asdict(cfg.data), asdict(cfg.spm), cfg.train.seed, cfg.train.max_len],
                                    sort_keys=True).encode()).hexdigest()[:16]
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if meta.get("prepared_with", key) != key:
            raise ForgetbenchError(f"{out}: prepared with other data/spm settings ({meta['prepared_with']} vs {key}); "
                                   "use a new --out")
        return meta
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train, dev, stats = build_corpus(Path(cfg.data.shared), cfg.data.languages, cfg.data.dev_per_language,
                                     cfg.data.max_chars, cfg.train.seed)
    log(f"corpus: {sum(stats.train.values()):,} training pairs; dropped for evaluation-set overlap: "
        f"{sum(stats.dropped_eval_overlap.values()):,}")
    rng = random.Random(cfg.train.seed)
    sample = []
    for pairs in train.values():
        sub = pairs if len(pairs) <= cfg.spm.sample_per_language else rng.sample(pairs, cfg.spm.sample_per_language)
        sample += [x for _, x in sub]
        sample += [e for e, _ in sub[: max(1, len(sub) // len(train))]]  # English share ~ one language
    rng.shuffle(sample)
    tok_dir = out / "tokenizer"
    vocab_size = write_m2m_vocab(train_spm(sample, cfg.spm.vocab_size, character_coverage=cfg.spm.character_coverage),
                                 tok_dir)
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
            (out / "dev.json").write_text(json.dumps({k: v for k, v in dev.items()}, ensure_ascii=False))
    meta = {"vocab_size": vocab_size, "corpus": asdict(stats), "seconds": round(time.perf_counter() - t0, 1),
            "spm_sha256": sha256_file(tok_dir / "sentencepiece.bpe.model"), "prepared_with": key}
    atomic_write_json(meta_path, meta)
    return meta


def _save_ids(path: Path, src, tgt, sl, tl) -> None:
    def flat(seqs):
        off = np.zeros(len(seqs) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(s) for s in seqs])
        return np.fromiter((i for s in seqs for i in s), dtype=np.int32, count=int(off[-1])), off

    s_ids, s_off = flat(src)
    t_ids, t_off = flat(tgt)
    np.savez(path, src=s_ids, src_off=s_off, tgt=t_ids, tgt_off=t_off, src_lang=np.array(sl, np.int32),
             tgt_lang=np.array(tl, np.int32))


class Examples:
    def __init__(self, path: Path, max_len: int):
        z = np.load(path, allow_pickle=False)
        self.src, self.src_off, self.tgt, self.tgt_off = z["src"], z["src_off"], z["tgt"], z["tgt_off"]
        self.src_lang, self.tgt_lang = z["src_lang"], z["tgt_lang"]
        self.max_len = max_len
        body = max_len - 2
        self.src_len = np.minimum(np.diff(self.src_off), body) + 2
        self.tgt_len = np.minimum(np.diff(self.tgt_off), body) + 2

    def __len__(self):
        return len(self.src_lang)

    def batches(self, max_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
        """Length-bucketed batches (source+target padded tokens <= max_tokens), in a seeded order."""
        rng = np.random.default_rng(seed * 1000 + epoch)
        order = rng.permutation(len(self))
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
        S, T = max(map(len, srcs)), max(map(len, tgts))
        ids = torch.full((len(idx), S), pad, dtype=torch.long)
        labels = torch.full((len(idx), T), -100, dtype=torch.long)
        dec = torch.full((len(idx), T), pad, dtype=torch.long)
        for r, (s, t) in enumerate(zip(srcs, tgts, strict=True)):
            ids[r, : len(s)] = torch.tensor(s)
            labels[r, : len(t)] = torch.tensor(t)
            dec[r, 0] = eos
            dec[r, 1 : len(t)] = torch.tensor(t[:-1])
        return {"input_ids": ids, "attention_mask": (ids != pad).long(), "decoder_input_ids": dec, "labels": labels}


# ---------------------------------------------------------------- training

def _lr(step: int, cfg: TrainCfg) -> float:
    step = max(step, 1)
    return cfg.lr * min(step / cfg.warmup, math.sqrt(cfg.warmup / step))


def _save_checkpoint(model, opt, state: dict, ckpt: Path) -> None:
    from safetensors.torch import save_file

    tmp = ckpt.with_name(ckpt.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    sd = {k: v for k, v in sd.items() if not k.endswith("embed_tokens.weight")}
    save_file(sd, str(tmp / "model.safetensors"))
    torch.save(opt.state_dict(), tmp / "optim.pt")
    (tmp / "state.json").write_text(json.dumps(state))
    old = ckpt.with_name(ckpt.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if ckpt.exists():
        os.rename(ckpt, old)
    os.rename(tmp, ckpt)
    shutil.rmtree(old, ignore_errors=True)


def _load_checkpoint(model, opt, ckpt: Path) -> dict:
    from safetensors.torch import load_file

    missing, unexpected = model.load_state_dict(load_file(str(ckpt / "model.safetensors")), strict=False)
    if unexpected:
        raise ForgetbenchError(f"checkpoint {ckpt} does not match the model config: unexpected {unexpected[:3]}")
    model.tie_weights()
    opt.load_state_dict(torch.load(ckpt / "optim.pt", weights_only=True))
    return json.loads((ckpt / "state.json").read_text())


def build_model(cfg: TrainMTConfig, vocab_size: int):
    from transformers import M2M100ForConditionalGeneration

    from forgetbench.models.tiny import m2m100_config

    m = cfg.model
    conf = m2m100_config(vocab_size, d_model=m.d_model, layers=m.encoder_layers, decoder_layers=m.decoder_layers,
                         heads=m.heads, ffn=m.ffn, max_positions=m.max_positions, dropout=m.dropout,
                         attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(cfg.train.seed)
    return M2M100ForConditionalGeneration(conf)


@torch.no_grad()
def dev_chrf(model, tok, dev: dict, directions: list[str], n: int) -> dict[str, float]:
    """Corpus chrF3 (``eval.metrics``) of greedy translations of the first ``n`` dev pairs per direction."""
    from forgetbench.eval.metrics import corpus_chrf
    from forgetbench.models.generation import translate

    model.eval()
    out = {}
    for d in directions:
        s, t = d.split("-")
        lang = t if s == "en" else s
        pairs = dev.get(lang, [])[:n]
        if not pairs:
            continue
        srcs = [e if s == "en" else x for e, x in pairs]
        refs = [x if s == "en" else e for e, x in pairs]
        hyps = translate(model, tok, srcs, s, t, num_beams=1, max_new_tokens=96, max_length=128)
        out[d] = round(corpus_chrf(hyps, refs), 2)
    model.train()
    return out


_RUN_ONLY = {"steps", "time_budget_minutes", "checkpoint_minutes", "dev_every", "dev_sentences", "dev_directions"}


def fingerprint(cfg: TrainMTConfig) -> str:
    """Hash of every setting that shapes the weights (not how long or how often to checkpoint/evaluate), so a
    run can only resume from a checkpoint made with the same data, vocabulary, model and optimiser."""
    d = asdict(cfg)
    d.pop("source", None)
    d["train"] = {k: v for k, v in d["train"].items() if k not in _RUN_ONLY}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def train(cfg: TrainMTConfig, out_dir: str | Path, progress: bool = True, log=print) -> Path:
    from transformers import M2M100Tokenizer

    out = Path(out_dir)
    torch.set_num_threads(cfg.train.threads)
    meta = prepare(cfg, out, log)
    tok = M2M100Tokenizer.from_pretrained(str(out / "tokenizer"))
    data = Examples(out / "train.npz", cfg.train.max_len)
    dev = json.loads((out / "dev.json").read_text())
    model = build_model(cfg, meta["vocab_size"])
    model.train()
    tc = cfg.train
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc.lr, betas=(0.9, 0.98), eps=1e-6)
    ckpt = out / "checkpoint"
    state = {"step": 0, "epoch": 0, "batch": 0, "elapsed": 0.0, "tokens": 0, "fingerprint": fingerprint(cfg)}
    if ckpt.is_dir():
        saved = json.loads((ckpt / "state.json").read_text()).get("fingerprint")
        if saved != state["fingerprint"]:
            raise ForgetbenchError(f"{ckpt}: made with other data/model/optimiser settings (fingerprint {saved} vs "
                                   f"{state['fingerprint']}); use a new --out, or restore the config it was made with")
        state = _load_checkpoint(model, opt, ckpt)
        log(f"resumed from {ckpt} at step {state['step']}")
    log_f = open(out / "train_log.jsonl", "a", encoding="utf-8")
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=tc.label_smoothing)
    batches = data.batches(tc.max_tokens, tc.seed, state["epoch"])
    t_start, last_ckpt = time.perf_counter() - state["elapsed"], time.perf_counter()
    bar = tqdm(total=tc.steps, initial=state["step"], disable=None if progress else True, unit="step")
    run_loss, run_n = 0.0, 0
    stopped = "steps"
    while state["step"] < tc.steps:
        if state["batch"] >= len(batches):
            state["epoch"], state["batch"] = state["epoch"] + 1, 0
            batches = data.batches(tc.max_tokens, tc.seed, state["epoch"])
        b = data.collate(batches[state["batch"]])
        state["batch"] += 1
        step = state["step"] + 1
        torch.manual_seed(tc.seed * 1_000_003 + step)
        for g in opt.param_groups:
            g["lr"] = _lr(step, tc)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=tc.bf16):
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                           decoder_input_ids=b["decoder_input_ids"]).logits
        loss = loss_fn(logits.float().view(-1, logits.size(-1)), b["labels"].view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip)
        opt.step()
        state["step"] = step
        state["tokens"] += int(b["attention_mask"].sum() + (b["labels"] != -100).sum())
        run_loss, run_n = run_loss + loss.item(), run_n + 1
        bar.update(1)
        elapsed = time.perf_counter() - t_start
        if step % 100 == 0:
            rec = {"step": step, "loss": round(run_loss / run_n, 4), "lr": _lr(step, tc), "epoch": state["epoch"],
                   "elapsed_s": round(elapsed, 1), "tokens": state["tokens"], "loadavg": os.getloadavg()[0]}
            run_loss, run_n = 0.0, 0
            if tc.dev_every and step % tc.dev_every == 0 and tc.dev_directions:
                rec["dev_chrf"] = dev_chrf(model, tok, dev, tc.dev_directions, tc.dev_sentences)
            log_f.write(json.dumps(rec) + "\n")
            log_f.flush()
            bar.set_postfix(loss=rec["loss"])
        over_budget = tc.time_budget_minutes and elapsed > tc.time_budget_minutes * 60
        if time.perf_counter() - last_ckpt > tc.checkpoint_minutes * 60 or over_budget or step == tc.steps:
            state["elapsed"] = elapsed
            _save_checkpoint(model, opt, state, ckpt)
            last_ckpt = time.perf_counter()
        if over_budget:
            stopped = f"time budget ({tc.time_budget_minutes} min)"
            break
    bar.close()
    log_f.close()
    final = out / "model"
    if final.exists():
        shutil.rmtree(final)
    tmp = out / "model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.eval()
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    atomic_write_json(tmp / "training.json", {
        "config": asdict(cfg), "stopped_by": stopped, "steps": state["step"], "epochs": state["epoch"],
        "tokens": state["tokens"], "train_seconds": round(state.get("elapsed", time.perf_counter() - t_start), 1),
        "threads": tc.threads, "corpus": meta["corpus"], "spm_sha256": meta["spm_sha256"],
    })
    os.rename(tmp, final)
    log(f"stopped by {stopped} at step {state['step']}; model in {final}")
    return final
