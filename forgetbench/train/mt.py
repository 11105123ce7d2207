"""Train a multilingual M2M-100-architecture model from scratch (the shipped teacher).

    forgetbench train-mt configs/teacher.yaml --out runs/teacher

``train.data`` prepares the corpus, SentencePiece vocabulary and cached token ids; the model is
trained with label-smoothed cross-entropy, AdamW (0.9, 0.98, eps 1e-6) and the inverse-sqrt schedule, on the
device and in the autocast ``train.arithmetic`` chooses (bfloat16 on CUDA or an AMX CPU, else float32);
``train.export`` writes an HF model folder loadable by ``M2M100ForConditionalGeneration`` /
``M2M100Tokenizer``. Resumable (rerun the command) and
deterministic given the seed.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json
from forgetbench.train import early_stop, loop
from forgetbench.train.arithmetic import choose
from forgetbench.train.config import TrainMTConfig, config_record, fingerprint, load_config
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


@dataclass
class Setup:
    """What a run and a probe share: the prepared data, the model on its device, its optimiser and step loss."""

    meta: dict
    tok: object
    data: Examples
    arith: object
    model: torch.nn.Module
    opt: torch.optim.Optimizer
    step_loss: object


def setup(cfg: TrainMTConfig, out: Path, log=print) -> Setup:
    from transformers import M2M100Tokenizer

    tc = cfg.train
    torch.set_num_threads(tc.threads)
    out.mkdir(exist_ok=True)
    if not (out / RUN_MARKER).is_file():  # marks the folder as a train-mt run: only such a folder is resumed
        atomic_write_json(out / RUN_MARKER, {"kind": "forgetbench train-mt run", "config": cfg.source})
    meta = prepare(cfg, out, log)
    tok = M2M100Tokenizer.from_pretrained(str(out / "tokenizer"))
    data = Examples(out / "train.npz", tc.max_len, tc.temperature)
    arith = choose(tc.device, tc.bf16, f"{cfg.source}: train")
    log(f"arithmetic: {arith.describe()}")
    model = build_model(cfg, meta["vocab_size"]).to(arith.device)
    gm = cfg.model.embeddings.get("graphmerge")
    if gm is not None:  # GraphMerge (train.graphmerge): the hop layers join the model before the optimiser is made
        from forgetbench.train import graphmerge

        adjacency, meta["graph"] = graphmerge.ensure_graph(out, data, tok, gm, cfg.data.languages, meta["vocab_size"],
                                                           tc.seed, log, vocabulary=meta["spm_sha256"])
        torch.manual_seed(tc.seed + 1)
        graphmerge.attach(model, adjacency.to(arith.device), gm)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc.lr, betas=(0.9, 0.98), eps=1e-6)
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=tc.label_smoothing)

    def step_loss(b):
        b = {k: v.to(arith.device) for k, v in b.items()}
        with arith.autocast():
            if gm is not None:
                logits = graphmerge.logits(model, b["input_ids"], b["attention_mask"], b["decoder_input_ids"])
            else:
                logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                               decoder_input_ids=b["decoder_input_ids"]).logits
        loss = loss_fn(logits.float().view(-1, logits.size(-1)), b["labels"].view(-1))
        return loss, int(b["attention_mask"].sum() + (b["labels"] != -100).sum())

    return Setup(meta, tok, data, arith, model, opt, step_loss)


def warm_start(model, folder: Path, spm_sha256: str, log=print) -> dict:
    """Rule (module docstring): a run with no checkpoint starts from ``folder``'s weights (same architecture and
    vocabulary), the optimiser and the schedule restarted; what it started from is returned for the record."""
    from safetensors.torch import load_file

    from forgetbench.io import sha256_file

    weights = folder / "model.safetensors"
    spm = folder / "sentencepiece.bpe.model"
    if not weights.is_file() or not spm.is_file():
        raise ForgetbenchError(f"--warm-start {folder}: no model.safetensors and sentencepiece.bpe.model there; give "
                               "a model folder written by train-mt (e.g. artifacts/teacher)")
    if sha256_file(spm) != spm_sha256:
        raise ForgetbenchError(f"--warm-start {folder}: its SentencePiece vocabulary differs from this run's (the "
                               "config's data or spm settings differ); give the config spm: {from: "
                               f"{folder}}} to train on that model's vocabulary (a new --out)")
    state = {k: v.float() for k, v in load_file(str(weights)).items()}
    own = model.state_dict()
    bad = sorted(k for k, v in state.items() if k in own and own[k].shape != v.shape)
    if bad or not set(state) & set(own):
        raise ForgetbenchError(f"--warm-start {folder}: its shapes do not match the config's model ({bad[:2]}); "
                               "warm-start only from a model of this architecture")
    model.load_state_dict(state, strict=False)
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    log(f"warm start from {folder} (weights sha256 {sha256_file(weights)[:12]}…); optimiser and schedule restarted")
    return {"from": str(folder), "weights_sha256": sha256_file(weights), "optimiser": "restarted"}


def _probe_line(p: dict) -> str:
    return (f"mean row norm {p['mean_row_norm']:.4f}, random-pair cosine {p['random_pair_cosine']:.4f}, effective "
            f"rank {p['effective_rank']:.1f} of {p['rows']} rows")


def train(cfg: TrainMTConfig, out_dir: str | Path, progress: bool = True, log=print,
          warm_from: str | Path | None = None) -> Path:
    out = Path(out_dir)
    tc = cfg.train
    S = setup(cfg, out, log)
    tok, data, model, opt, arith, step_loss = S.tok, S.data, S.model, S.opt, S.arith, S.step_loss
    dev = json.loads((out / "dev.json").read_text())
    ckpt = out / "checkpoint"
    state = loop.resume(model, opt, ckpt, fingerprint(cfg), log, legacy=fingerprint(cfg, legacy=True))
    warm = state.get("warm_start")
    if warm_from is not None and state["step"] == 0 and warm is None:
        state["warm_start"] = warm = warm_start(model, Path(warm_from), S.meta["spm_sha256"], log)
    elif warm_from is not None:
        log(f"--warm-start {warm_from} ignored: the run resumes from its own checkpoint at step {state['step']}")

    graph = S.meta.get("graph")
    from forgetbench.train import graphmerge

    probe_file = out / "table_probe.json"  # the table at step 0 (before any update; a resume keeps the first)
    step0 = json.loads(probe_file.read_text())["step0"] if probe_file.is_file() else None
    if step0 is None and state["step"] == 0:
        step0 = graphmerge.probe(model)
        atomic_write_json(probe_file, {"step0": step0})
    if step0:
        log(f"table at step 0: {_probe_line(step0)}")
    table_of = graphmerge.materialised if graph is not None else contextlib.nullcontext

    def on_log(step):
        if tc.dev_every and step % tc.dev_every == 0 and tc.dev_directions and not tc.patience:
            with table_of(model):  # GraphMerge: the final table, as the exported model will have it
                return {"dev_chrf": dev_chrf(model, tok, dev, tc.dev_directions, tc.dev_sentences)}
        return {}

    def dev_score(step):  # early stopping (train.early_stop): the mean dev chrF over the dev directions
        with table_of(model):
            per = dev_chrf(model, tok, dev, tc.dev_directions, tc.dev_sentences)
        return sum(per.values()) / max(len(per), 1), {"dev_chrf": per}

    stopped = loop.run(model, opt, data, step_loss, tc, state, ckpt, out / "train_log.jsonl", on_log, progress,
                       dev=dev_score if tc.patience else None)
    stopping = early_stop.finish(model, state, out, tc.patience)
    if graph is not None:
        graphmerge.bake(model)
    final_probe = graphmerge.probe(model)
    log(f"table at step {state['step']}: {_probe_line(final_probe)}")
    final = export_model(model, tok, out, {
        "config": config_record(cfg), "stopped_by": stopped, "steps": state["step"], "epochs": state["epoch"],
        "warm_start": warm,
        "early_stop": stopping,
        "tokens": state["tokens"], "train_seconds": round(state["elapsed"], 1),
        "threads": tc.threads, "arithmetic": arith.record(), "corpus": S.meta["corpus"], "spm_sha256": S.meta["spm_sha256"],
        "environment": environment(), "table_probe": {"step0": step0, "final": final_probe},
    } | ({"graphmerge": {"settings": asdict(cfg.model.embeddings["graphmerge"]), "graph": graph}}
         if graph is not None else {}))
    log(f"stopped by {stopped} at step {state['step']}; model in {final}")
    return final
