"""Pre-train an encoder (``forgetbench pretrain-encoder CONFIG --out RUN``) on ``train-mt``'s loop: the same
schedule, per-step seeding, bf16 choice, atomic checkpoints and exact resume (``train.loop``).

Each step's objective comes from Algorithm 1 (``schedule.Schedule``) and its masking from a generator seeded by
the step (``train.loop.step_seed``), so an interrupted run resumes to the same weights. The model folder
(``RUN/model``): ``config.json`` (``model_type: forgetbench-encoder``, the encoder settings and the label
list), ``model.safetensors``, ``spm.model`` and ``training.json`` (steps, objectives taken, data counts,
arithmetic, environment); written to a temporary folder and renamed.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory, atomic_write_json
from forgetbench.parsing.layers.pretrained import (
    FIRST_NORMAL,
    MASK,
    MODEL_TYPE,
    PAD,
    EncoderConfig,
    PretrainedEncoder,
)
from forgetbench.pretrain import switch
from forgetbench.pretrain.config import TREE_VARIANTS, USI_VARIANTS, PretrainConfig, fingerprint
from forgetbench.pretrain.data import Batches, dev_set, prepare
from forgetbench.pretrain.masking import mask_tokens
from forgetbench.pretrain.schedule import Schedule, losses

RUN_MARKER = "pretrain-run.json"


def encoder_config(cfg: PretrainConfig, vocab_size: int, n_labels: int) -> EncoderConfig:
    """The encoder of ``cfg``: ``model.layers`` is the baseline's L; a variant with USI gets L − 1 layers below its
    USI layer, so that every variant runs L Transformer layers (Sun, Li, Zhao §4)."""
    m = cfg.model
    usi = m.variant in USI_VARIANTS
    return EncoderConfig(vocab_size=vocab_size, n_rels=0 if m.variant == "mlm" else n_labels, d_model=m.d_model,
                         layers=m.layers - usi, heads=m.heads, ffn=m.ffn, dropout=m.dropout,
                         max_positions=cfg.data.max_pieces, arc_mlp=m.arc_mlp, rel_mlp=m.rel_mlp, usi=usi, pad_id=PAD,
                         structure=m.structure, head_mlp=m.head_mlp, dep_mlp=m.dep_mlp,
                         supervised=m.variant != "usi-mlm")


def make_step_loss(model: PretrainedEncoder, schedule: Schedule, state: dict, seed: int, mask_rate: float,
                   arith, taken: Counter):
    """``step_loss(batch)`` of ``train.loop.run``: the objective Algorithm 1 picks for the coming step."""
    from forgetbench.train.loop import step_seed

    c = model.config

    def step_loss(b):
        step = state["step"] + 1
        kind = schedule.kind(step)
        usl, through_usi = losses(kind, c.variant)
        taken[kind] += 1
        b = {k: v.to(arith.device) for k, v in b.items()}
        loss, tokens = torch.zeros((), device=arith.device), 0
        with arith.autocast():
            if usl and "tree_ids" in b:
                h, mask = model.encode(b["tree_ids"])
                loss = loss + model.usl_loss(h, mask, b["heads"], b["rels"]).float()
                tokens += int(mask.sum())
            text = b["text"]
            special = text < FIRST_NORMAL
            g = torch.Generator().manual_seed(step_seed(seed, step))
            ids, labels = mask_tokens(text.cpu(), special.cpu(), MASK, c.vocab_size, FIRST_NORMAL, g, mask_rate)
            h, mask = model.encode(ids.to(arith.device))
            if through_usi:
                h = model.integrate(h, mask)
            loss = loss + model.mlm_loss(h, labels.to(arith.device)).float()
            tokens += int(mask.sum())
        return loss, tokens

    return step_loss


def make_dev(model: PretrainedEncoder, cfg: PretrainConfig, dev: dict, arith):
    """``dev(step)`` of ``train.loop.run``: the held-out MLM loss (``pretrain.data`` rule 5's sentences, the same
    masks every time: BERT's rule drawn from one generator seeded by the run's seed) read as that step reads MLM —
    through USI after the joint steps for a variant with USI, else on H^(L); its negation is the score. A variant
    trained on trees also logs its held-out USL loss."""
    from forgetbench.pretrain.data import pad_rows, token_chunks

    c, m = model.config, cfg.objective.joint_steps
    lengths = np.asarray([len(r) for r in dev["ids"]])
    chunks = token_chunks(np.arange(len(lengths)), lengths, cfg.train.max_tokens // 2)

    def score(step: int) -> tuple[float, dict]:
        g = torch.Generator().manual_seed(cfg.train.seed)
        through = c.n_rels and c.usi and step > m
        mlm = usl = 0.0
        n_mlm = n_usl = 0
        for idx in chunks:
            ids = pad_rows([dev["ids"][i] for i in idx], PAD)
            masked, labels = mask_tokens(ids, ids < FIRST_NORMAL, MASK, c.vocab_size, FIRST_NORMAL, g,
                                         cfg.objective.mask_rate)
            with arith.autocast():
                h, mask = model.encode(masked.to(arith.device))
                if through:
                    h = model.integrate(h, mask)
                k = int((labels != -100).sum())
                mlm += model.mlm_loss(h, labels.to(arith.device)).float().item() * k
                n_mlm += k
                if cfg.model.variant in TREE_VARIANTS:
                    h, mask = model.encode(ids.to(arith.device))
                    heads = pad_rows([dev["heads"][i] for i in idx], -100).to(arith.device)
                    rels = pad_rows([dev["rels"][i] for i in idx], -100).to(arith.device)
                    k = int((heads != -100).sum())
                    usl += model.usl_loss(h, mask, heads, rels).float().item() * k
                    n_usl += k
        fields = {"dev_mlm_loss": round(mlm / max(n_mlm, 1), 4)}
        if n_usl:
            fields["dev_usl_loss"] = round(usl / n_usl, 4)
        return -mlm / max(n_mlm, 1), fields

    return score


def export(model: PretrainedEncoder, out: Path, labels: list[str], record: dict, folder: Path | None = None) -> Path:
    """The encoder as a folder parsers read (``out/model``, or ``folder``: a snapshot)."""
    from safetensors.torch import save_file

    from forgetbench.train.weights import unique_tensors

    dest = folder or out / "model"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_directory(dest, replace=True) as tmp:
        save_file(unique_tensors(model), str(tmp / "model.safetensors"))
        atomic_write_json(tmp / "config.json", {"model_type": MODEL_TYPE, **model.config.to_dict(), "labels": labels})
        shutil.copy(out / "spm.model", tmp / "spm.model")
        atomic_write_json(tmp / "training.json", record)
    return dest


@dataclass
class Setup:
    """What a run and a probe share: the prepared data, the model on its device, its optimiser, loop state and step
    loss."""

    meta: dict
    arith: object
    model: PretrainedEncoder
    opt: torch.optim.Optimizer
    state: dict
    taken: Counter
    step_loss: object
    data: Batches


def setup(cfg: PretrainConfig, out: Path, log=print, resume: bool = True) -> Setup:
    from forgetbench.train import loop
    from forgetbench.train.arithmetic import choose

    tc = cfg.train
    torch.set_num_threads(tc.threads)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / RUN_MARKER).is_file():
        atomic_write_json(out / RUN_MARKER, {"kind": "forgetbench pretrain-encoder run", "config": cfg.source})
    meta = prepare(cfg, out, log)
    arith = choose(tc.device, tc.bf16, f"{cfg.source}: train")
    log(f"arithmetic: {arith.describe()}")
    torch.manual_seed(tc.seed)
    model = PretrainedEncoder(encoder_config(cfg, meta["vocab_size"], len(meta["labels"]))).to(arith.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, betas=(0.9, 0.98), eps=1e-6, weight_decay=tc.weight_decay)
    fp = fingerprint(cfg)
    state = (loop.resume(model, opt, out / "checkpoint", fp, log, legacy=fingerprint(cfg, legacy=True)) if resume
             else loop.new_state(fp))
    schedule = Schedule(cfg.objective.joint_steps, cfg.objective.p, tc.seed)
    taken: Counter = Counter(state.get("objectives", {}))
    state["objectives"] = taken  # saved with every checkpoint (a Counter is a dict)
    step_loss = make_step_loss(model, schedule, state, tc.seed, cfg.objective.mask_rate, arith, taken)
    return Setup(meta, arith, model, opt, state, taken, step_loss, Batches(out, with_trees=cfg.model.variant in TREE_VARIANTS))


def continuable(cfg: PretrainConfig, folder: Path) -> dict:
    """The training record of an exported encoder that a run of ``cfg`` can continue (same fingerprint, fewer
    steps than the config's), or one line saying why not; checked before any work."""
    rec_f, weights = folder / "training.json", folder / "model.safetensors"
    if not rec_f.is_file() or not weights.is_file():
        raise ForgetbenchError(f"--continue-from {folder}: no training.json and model.safetensors there; give the "
                               "model folder of a pretrain-encoder run (RUN/model)")
    rec = json.loads(rec_f.read_text())
    if rec.get("fingerprint") not in (fingerprint(cfg), fingerprint(cfg, legacy=True)):
        raise ForgetbenchError(f"--continue-from {folder}: pre-trained with other settings (fingerprint "
                               f"{rec.get('fingerprint')} vs {fingerprint(cfg)}); continue only an encoder of this config")
    if rec["steps"] >= cfg.train.steps:
        raise ForgetbenchError(f"--continue-from {folder}: already at step {rec['steps']} of the config's "
                               f"{cfg.train.steps}; raise train.steps or --steps")
    return rec


def continue_from(S: Setup, cfg: PretrainConfig, folder: Path, log=print) -> dict:
    """A run folder with no checkpoint continues an exported encoder of this config (``--continue-from``): its
    weights, and its step, epoch, tokens and objectives taken, so that Algorithm 1's schedule, the learning rate
    and the batch order go on from its step; the optimiser's moments restart (recorded in the state and the
    export). The position in the epoch is recomputed from the seeded batch order, which the record does not hold."""
    from safetensors.torch import load_file

    from forgetbench.io import sha256_file

    rec, weights = continuable(cfg, folder), folder / "model.safetensors"
    S.model.load_state_dict(load_file(str(weights)), strict=False)  # tied copies are stored once
    epoch, before = rec["epochs"], 0
    for e in range(epoch):
        before += len(S.data.batches(cfg.train.max_tokens, cfg.train.seed, e))
    S.state.update(step=rec["steps"], epoch=epoch, batch=rec["steps"] - before, tokens=rec["tokens"],
                   elapsed=float(rec["train_seconds"]))
    S.taken.update(rec.get("objectives", {}))
    S.state["continued_from"] = {"from": str(folder), "weights_sha256": sha256_file(weights), "step": rec["steps"],
                                 "arithmetic": rec.get("arithmetic"), "optimiser": "restarted"}
    log(f"continuing {folder} from step {rec['steps']} (epoch {epoch}); optimiser restarted")
    return S.state["continued_from"]


def pretrain(cfg: PretrainConfig, out_dir: str | Path, progress: bool = True, log=print,
             continue_folder: str | Path | None = None) -> Path:
    from forgetbench.train import loop

    out, tc = Path(out_dir), cfg.train
    S = setup(cfg, out, log)
    state = S.state
    if continue_folder is not None and state["step"] == 0 and "continued_from" not in state:
        continue_from(S, cfg, Path(continue_folder), log)
    elif continue_folder is not None:
        log(f"--continue-from {continue_folder} ignored: the run resumes from its own checkpoint at step {state['step']}")
    dev_data = dev_set(cfg, out, S.meta["labels"]) if tc.dev_every else None
    dev = make_dev(S.model, cfg, dev_data, S.arith) if tc.dev_every else None
    m = cfg.objective.joint_steps
    watched = bool(dev_data and m and cfg.model.variant in TREE_VARIANTS and dev_data.get("heads"))
    on_log = switch.on_log(S.model, switch.make_watch(S.model, cfg, dev_data, S.arith), m, tc.dev_every) \
        if watched else None

    def snapshot(step: int) -> None:  # the weights at a fixed step: the variants compared at equal steps
        was = S.model.training
        export(S.model, out, S.meta["labels"], {"variant": cfg.model.variant, "fingerprint": state["fingerprint"],
                                                "steps": step, "snapshot": True, "tokens": state["tokens"]},
               out / "snapshots" / f"step-{step:06d}")
        S.model.train(was)

    stopped = loop.run(S.model, S.opt, S.data, S.step_loss, tc, state, out / "checkpoint", out / "train_log.jsonl",
                       on_log, progress, dev=dev, dev_start=cfg.objective.joint_steps, snapshot=snapshot)
    from forgetbench.train import early_stop

    stopping = early_stop.finish(S.model, state, out, tc.patience)
    record = {"config": asdict(cfg), "variant": cfg.model.variant, "fingerprint": state["fingerprint"],
              "stopped_by": stopped, "steps": state["step"], "epochs": state["epoch"], "tokens": state["tokens"],
              "train_seconds": round(state["elapsed"], 1), "objectives": dict(S.taken), "data": S.meta,
              "parameters": sum(p.numel() for p in S.model.parameters()), "threads": tc.threads,
              "arithmetic": S.arith.record(), "environment": environment(),
              "continued_from": state.get("continued_from"),
              "early_stop": stopping,
              "switch": switch.verdict(switch.curve_from_log(out / "train_log.jsonl"), m) if watched else None}
    final = export(S.model.cpu(), out, S.meta["labels"], record)
    log(f"stopped by {stopped} at step {state['step']}; encoder in {final}")
    return final


def probe(cfg: PretrainConfig, out_dir: str | Path, steps: int = 30, hours: float = 2.5, log=print) -> dict:
    """``train-mt --probe``'s rules (``train.probe``) for a pre-training config: the data prepared and kept, 2
    warm-up steps, then ``steps`` timed steps of epoch 0 (Algorithm 1's objectives as a run takes them); an epoch's
    tokens are its batches' text and tree tokens. No checkpoint, no weights kept."""
    from forgetbench.train.probe import WARMUP_STEPS, figures, timed_steps

    tc = cfg.train
    S = setup(cfg, Path(out_dir), log, resume=False)
    batches = S.data.batches(tc.max_tokens, tc.seed, 0)
    if len(batches) <= WARMUP_STEPS:
        raise ForgetbenchError(f"pretrain-encoder --probe: the text makes {len(batches)} batches, no more than the "
                               f"{WARMUP_STEPS} warm-up steps; nothing to time")
    seconds, tokens = timed_steps(S.model, S.opt, S.data, batches, S.step_loss, tc, S.arith, steps, S.state)
    epoch = S.data.epoch_tokens(batches)
    return figures(seconds, tokens, epoch, hours) | {
        "parameters": sum(p.numel() for p in S.model.parameters()), "variant": cfg.model.variant,
        "objectives": dict(S.taken), "arithmetic": S.arith.record(), "threads": tc.threads,
        "environment": environment()}
