"""Train a multilingual M2M-100-architecture model from scratch (the shipped teacher).

    forgetbench train-mt configs/teacher.yaml --out runs/teacher

``train.data`` prepares the corpus, SentencePiece vocabulary and cached token ids; the model is
trained with label-smoothed cross-entropy, AdamW (0.9, 0.98, eps 1e-6), the inverse-sqrt schedule
and bf16 autocast on CPU by ``train.loop``; ``train.export`` writes an HF model folder loadable by
``M2M100ForConditionalGeneration`` / ``M2M100Tokenizer``. Resumable (rerun the command) and
deterministic given the seed.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch

from forgetbench.env import environment
from forgetbench.io import atomic_write_json
from forgetbench.train import loop
from forgetbench.train.config import TrainMTConfig, fingerprint, load_config
from forgetbench.train.data import Examples, prepare
from forgetbench.train.export import export_model

__all__ = ["load_config", "train", "build_model", "dev_chrf", "RUN_MARKER"]

RUN_MARKER = "train-run.json"


def build_model(cfg: TrainMTConfig, vocab_size: int):
    from transformers import M2M100ForConditionalGeneration

    from forgetbench.models.architecture import m2m100_config

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


def train(cfg: TrainMTConfig, out_dir: str | Path, progress: bool = True, log=print) -> Path:
    from transformers import M2M100Tokenizer

    out = Path(out_dir)
    tc = cfg.train
    torch.set_num_threads(tc.threads)
    out.mkdir(exist_ok=True)
    if not (out / RUN_MARKER).is_file():  # marks the folder as a train-mt run: only such a folder is resumed
        atomic_write_json(out / RUN_MARKER, {"kind": "forgetbench train-mt run", "config": cfg.source})
    meta = prepare(cfg, out, log)
    tok = M2M100Tokenizer.from_pretrained(str(out / "tokenizer"))
    data = Examples(out / "train.npz", tc.max_len)
    dev = json.loads((out / "dev.json").read_text())
    model = build_model(cfg, meta["vocab_size"])
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc.lr, betas=(0.9, 0.98), eps=1e-6)
    ckpt = out / "checkpoint"
    state = loop.resume(model, opt, ckpt, fingerprint(cfg), log)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=tc.label_smoothing)

    def step_loss(b):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=tc.bf16):
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                           decoder_input_ids=b["decoder_input_ids"]).logits
        loss = loss_fn(logits.float().view(-1, logits.size(-1)), b["labels"].view(-1))
        return loss, int(b["attention_mask"].sum() + (b["labels"] != -100).sum())

    def on_log(step):
        if tc.dev_every and step % tc.dev_every == 0 and tc.dev_directions:
            return {"dev_chrf": dev_chrf(model, tok, dev, tc.dev_directions, tc.dev_sentences)}
        return {}

    stopped = loop.run(model, opt, data, step_loss, tc, state, ckpt, out / "train_log.jsonl", on_log, progress)
    final = export_model(model, tok, out, {
        "config": asdict(cfg), "stopped_by": stopped, "steps": state["step"], "epochs": state["epoch"],
        "tokens": state["tokens"], "train_seconds": round(state["elapsed"], 1),
        "threads": tc.threads, "corpus": meta["corpus"], "spm_sha256": meta["spm_sha256"], "environment": environment(),
    })
    log(f"stopped by {stopped} at step {state['step']}; model in {final}")
    return final
