"""``forgetbench distill CONFIG.yaml --out RUN``: a SMaLL-100-style student from an M2M-100-architecture teacher.

Order of work (every check before the first write):

1. ``check``: config, teacher and initialising model load, same vocabulary (size, ``vocab.json``, SPM hash),
   ``kd.top_k + kd.tail_samples`` below the vocabulary, a reused ``kd.cache`` made for this teacher and data;
2. ``prepare_data`` (ids on disk), the realised sample (``quotas.json``);
3. the teacher cache (``kd.source: cache``; resumable shard by shard), unless the run ends before KD starts
   (``train.steps`` ≤ ``phase1_steps``: cross-entropy only, nothing to cache);
4. the student (``student.build_student``), the loop (``distill.loop``), resumable from ``checkpoint/``;
5. export: ``RUN/model`` — an ordinary Hugging Face folder with the tokenizer and ``training.json``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

import torch

from forgetbench.distill.cache import TeacherCache, build_cache, cache_keys, check_manifest, earlier_keys
from forgetbench.distill.config import DistillConfig, fingerprint
from forgetbench.distill.data import DistillData, prepare_data
from forgetbench.distill.loop import StepLoss, probe, train_loop
from forgetbench.distill.loss import LearnedAlpha
from forgetbench.distill.student import build_student, parameter_count
from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json, content_sha256, sha256_file
from forgetbench.models.hardware import Placement, place
from forgetbench.models.load import load, weights_sha256
from forgetbench.models.tokenizers import SMALL100_MARKER, language_tokens, load_tokenizer
from forgetbench.train import loop as train_loop_mod
from forgetbench.train.arithmetic import Arithmetic, choose
from forgetbench.train.config import where_free
from forgetbench.train.export import export_model

RUN_MARKER = "distill-run.json"
BARRIER_HOURS = 12  # how long a process waits for the others at a barrier (data, teacher cache, checkpoint)


@dataclass
class Checked:
    teacher: torch.nn.Module
    init: torch.nn.Module
    tok: object
    teacher_sha256: str
    teacher_small100: bool
    keys: dict | None  # the teacher cache's keys (kd.source cache)


def data_key(cfg: DistillConfig, legacy: bool = False) -> str:
    """What decides the sample, from the config alone (checked before any work): the data settings as what they
    read, not where it lies (``train.config.where_free``: TSV corpora by content), seed and length limit. The
    shared folder enters through ``data_sha256`` (the ids) later. ``legacy``: the key of caches written before,
    which held the sample folder's path."""
    d = asdict(cfg.data)
    if legacy:
        d["corpora"] = {lang: content_sha256(p) for lang, p in sorted(cfg.data.corpora.items())}
        d["shared"] = bool(cfg.data.shared)
    else:
        d = where_free(d)
    d |= {"seed": cfg.train.seed, "max_len": cfg.train.max_len}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _vocab_sha(folder: Path) -> tuple[str | None, str | None]:
    v, s = folder / "vocab.json", folder / "sentencepiece.bpe.model"
    return (sha256_file(v) if v.is_file() else None), (sha256_file(s) if s.is_file() else None)


def _code_token(tok, lang: str) -> str | None:
    """The token naming ``lang`` in ``tok`` (``__de__``, ``deu_Latn``), None where the tokenizer has none."""
    try:
        return tok.get_lang_token(lang)
    except (ForgetbenchError, KeyError):
        return None


def check(cfg: DistillConfig, device_map=None, placement: Placement | None = None) -> Checked:
    """Everything that can be refused, refused here: nothing is written before this returns. The teacher is loaded
    where ``placement`` says (``models.hardware``; default fp32 on the CPU); ``device_map`` or the config's
    ``teacher.device_map`` place it instead."""
    tpath, ipath = Path(cfg.teacher.path), Path(cfg.student.init)
    kw = placement.load_kwargs() if placement is not None else {}
    given = device_map if device_map is not None else cfg.teacher.device_map
    if given is not None:
        kw["device_map"] = given
    teacher, tok, _ = load(tpath, with_signature=False, **kw)
    if tok is None:
        raise ForgetbenchError(f"teacher {tpath}: no tokenizer files (vocab.json + sentencepiece.bpe.model)")
    init = teacher
    if ipath != tpath:
        init, _, _ = load(ipath, with_signature=False)
        tv, iv = _vocab_sha(tpath), _vocab_sha(ipath)
        if teacher.config.vocab_size != init.config.vocab_size or (iv != (None, None) and iv != tv):
            raise ForgetbenchError(
                f"student.init {ipath}: its vocabulary differs from the teacher's ({init.config.vocab_size} vs "
                f"{teacher.config.vocab_size} entries, vocab.json/SPM {'same' if iv == tv else 'different'}); word-level "
                "KD needs one vocabulary: initialise from a model with the teacher's tokenizer")
    V = teacher.config.vocab_size
    k = cfg.kd
    if k.source != "none" and k.top_k + k.tail_samples > V - 1:
        raise ForgetbenchError(f"kd.top_k {k.top_k} (+ tail_samples {k.tail_samples}) must stay below the vocabulary "
                               f"size {V}: a top-k larger than the vocabulary has no tail to sample")
    held = set(language_tokens(tok))
    missing = [x for x in ["en", *cfg.data.languages] if _code_token(tok, x) not in held]
    if missing:
        raise ForgetbenchError(f"data.languages: unknown language code(s) {missing}: the teacher's tokenizer has no "
                               "language token (__xx__, or NLLB's xxx_Xxxx) for them")
    teacher_sha = weights_sha256(tpath) or "unknown"
    keys = None
    if k.source == "cache":
        keys = cache_keys(teacher_sha, data_key(cfg), k.temperature, k.top_k, k.tail_samples, V, k.tail_draws)
        if k.cache:
            keys = earlier_keys(Path(k.cache), keys, data_key(cfg, legacy=True))
            check_manifest(Path(k.cache), keys)
    t_small = bool(getattr(teacher.config, SMALL100_MARKER, False))
    return Checked(teacher, init, tok, teacher_sha, t_small, keys)


def cpu_arithmetic(cfg: DistillConfig, cuda: bool) -> Arithmetic | None:
    """A student trained on the CPU: bfloat16 autocast where ``hardware.dtype`` is bfloat16, else as ``train.bf16``
    decides (``train.arithmetic``: auto = with AMX only); None on CUDA (accelerate's mixed precision). The
    decision replaces ``auto`` in the config, so the fingerprint holds the arithmetic that ran: a run resumes only
    in its own."""
    if cuda:
        return None
    if cfg.hardware.dtype == "bfloat16":
        return Arithmetic("cpu", True, "hardware.dtype: bfloat16")
    return choose("cpu", cfg.train.bf16, f"{cfg.source}: train")


def dev_chrf_fn(cfg: DistillConfig, tok, dev: dict):
    """The students' early-stopping score (METHOD §3.5): greedy translations of the first ``train.dev_sentences``
    held-out pairs of every direction (their texts decoded from the prepared ids), corpus chrF3 per direction, the
    mean over directions the score; the student read in its own format (SMaLL-100's tokenizer for such students)."""
    from forgetbench.eval.metrics import corpus_chrf
    from forgetbench.models.generation import translate_rows

    student_tok = load_tokenizer(cfg.teacher.path, small100=cfg.student.format == "small100")
    rows, refs = [], []
    for src, tgt in cfg.pairs:
        lang = tgt if src == "en" else src
        for e_ids, x_ids in dev.get(lang, [])[: cfg.train.dev_sentences]:
            e, x = (tok.decode(i, skip_special_tokens=True).strip() for i in (e_ids, x_ids))
            rows.append((e if src == "en" else x, src, tgt))
            refs.append(x if src == "en" else e)

    def score(model) -> tuple[float, dict]:
        hyps = translate_rows(model, student_tok, rows, num_beams=1, max_new_tokens=cfg.train.max_len,
                              max_length=cfg.train.max_len)
        per: dict[str, tuple[list, list]] = {}
        for (_, s, t), h, r in zip(rows, hyps, refs, strict=True):
            per.setdefault(f"{s}-{t}", ([], []))[0].append(h)
            per[f"{s}-{t}"][1].append(r)
        chrf = {d: round(corpus_chrf(h, r), 2) for d, (h, r) in per.items()}
        return sum(chrf.values()) / max(len(chrf), 1), {"dev_chrf": chrf}

    return score


def branch(student, opt, source: Path, cfg: DistillConfig, log=print) -> dict:
    """``distill --branch-from CHECKPOINT`` (METHOD §3.5): a run whose config is the source run's with
    ``kd.alpha_directions`` added (its teacher cache read from the source) and/or a ``train.cooldown`` starts from
    the source's checkpoint (weights, optimiser, step) instead of step 0 and trains on the same batches from there,
    so the two differ only in those directions' KD term and the learning rate over the steps after the branch. A
    cooldown must start at the branch or after it (before it, the branch's rate would differ from its source's
    there). Returns the loop state, which records the branch."""
    import copy

    if not cfg.kd.alpha_directions and not cfg.train.cooldown:
        raise ForgetbenchError(f"--branch-from {source}: {cfg.source} sets neither kd.alpha_directions nor "
                               "train.cooldown; a branch differs from its source run in those alone")
    if not (source / "state.json").is_file():
        raise ForgetbenchError(f"--branch-from {source}: no state.json there; give a distill run's checkpoint folder "
                               "(RUN/checkpoint, or a copy of it)")
    saved_state = json.loads((source / "state.json").read_text())
    saved = saved_state.get("fingerprint")
    origin = copy.deepcopy(cfg)
    origin.kd.alpha_directions, origin.kd.cache, origin.train.cooldown = {}, "", 0
    if saved not in (fingerprint(origin), fingerprint(origin, legacy=True)):
        raise ForgetbenchError(f"--branch-from {source}: a checkpoint of other settings (fingerprint {saved}); branch "
                               f"from a run of {cfg.source} without kd.alpha_directions and train.cooldown")
    start = cfg.train.steps - cfg.train.cooldown
    if cfg.train.cooldown and start < int(saved_state["step"]):
        raise ForgetbenchError(f"--branch-from {source}: train.cooldown starts after step {start}, before the "
                               f"checkpoint's step {saved_state['step']}; set train.steps - train.cooldown to at least "
                               f"{saved_state['step']}")
    state = train_loop_mod.resume(student, opt, source, saved, log)
    state.pop("early_stop", None)  # the branch's own stopping (a fixed number of steps: patience 0)
    state["branched_from"] = {"checkpoint": str(source), "step": state["step"], "fingerprint": saved,
                              "cpu_s": state.get("cpu")}
    state["fingerprint"] = fingerprint(cfg)
    what = [f"kd.alpha_directions {cfg.kd.alpha_directions}"] if cfg.kd.alpha_directions else []
    what += [f"the learning rate cooled over steps {start + 1}-{cfg.train.steps}"] if cfg.train.cooldown else []
    log(f"branched from {source} at step {state['step']}: {' and '.join(what)} from here")
    return state


def distill(cfg: DistillConfig, out_dir: str | Path, progress: bool = True, log=print,
            branch_from: str | Path | None = None) -> Path:
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs

    placement = place(cfg.hardware, f"{cfg.source}: hardware")
    half = {"bfloat16": "bf16", "float16": "fp16"}.get(cfg.hardware.dtype, "no")
    # the other processes wait at a barrier while the main process prepares the data and builds the teacher cache
    # (≈ 70 min on one CPU thread for configs/distill-kd-corpus.yaml): the process group's default 30-minute timeout would end them
    acc = Accelerator(cpu=not placement.cuda, mixed_precision=half if placement.cuda else "no",
                      kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(hours=BARRIER_HOURS))])
    torch.set_num_threads(cfg.train.threads)
    ch = check(cfg, placement=placement)
    arithmetic = cpu_arithmetic(cfg, placement.cuda)
    if arithmetic is not None:  # on the CPU: the forwards in bf16 autocast or not, decided before the fingerprint
        cfg.train.bf16 = arithmetic.bf16
        log(f"arithmetic: {arithmetic.describe()}")
    mapped = cfg.teacher.device_map is not None or cfg.hardware.device_map is not None
    if not mapped and acc.device.type != "cpu":  # no map given: the teacher beside the student
        ch.teacher.to(acc.device)
    out = Path(out_dir)
    if acc.is_main_process:
        out.mkdir(exist_ok=True)
        if not (out / RUN_MARKER).is_file():
            atomic_write_json(out / RUN_MARKER, {"kind": "forgetbench distill run", "config": cfg.source})
        prepare_data(cfg, ch.tok, out / "data", log)
    acc.wait_for_everyone()
    data = DistillData(cfg, out / "data", ch.tok.get_lang_id, ch.teacher_small100)
    if acc.is_main_process:
        atomic_write_json(out / "quotas.json", {"sampling": cfg.data.sampling, "budget": cfg.data.budget,
                                                "temperature": cfg.data.temperature, "examples": len(data),
                                                "tiers": data.tiers, "directions": data.quotas})
    cache = None
    cache_man = None
    if cfg.kd.source == "cache" and cfg.train.phase1_steps < cfg.train.steps:  # a run that never reaches KD needs none
        need = data.kd_uids(cfg.train.max_tokens, cfg.train.seed, cfg.train.phase1_steps, cfg.train.steps)
        if cfg.kd.cache:  # a given cache is read, never written: it must hold what this run's KD steps use
            cache_man = check_manifest(Path(cfg.kd.cache), ch.keys, data.sample_sha256())
            cache = TeacherCache(Path(cfg.kd.cache), cache_man)
            lacking = int((~cache.holds(need)).sum())
            if lacking:
                raise ForgetbenchError(f"kd.cache {cfg.kd.cache}: holds {cache_man['examples']:,} examples and lacks "
                                       f"{lacking:,} of the {len(need):,} this run's KD steps use (it was built by a "
                                       "shorter run); leave kd.cache empty to build this run's own")
        else:  # the run's own: the examples its KD steps use, added to what it holds (distill.cache rule 1)
            folder = out / "teacher-cache"
            ch.keys = earlier_keys(folder, ch.keys, data_key(cfg, legacy=True))
            if acc.is_main_process:
                build_cache(folder, ch.keys, data, ch.teacher, cfg.train.seed, cfg.train.max_tokens * 2,
                            cfg.train.bf16, progress, log, uids=need)
            acc.wait_for_everyone()
            cache_man = check_manifest(folder, ch.keys, data.sample_sha256())
            cache = TeacherCache(folder, cache_man)
    s = cfg.student
    student = build_student(ch.init, s.encoder_layers, s.decoder_layers, s.copy, s.format)
    student.config.dropout = cfg.train.dropout
    student.config.attention_dropout = cfg.train.attention_dropout
    for m in student.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = cfg.train.dropout
        elif isinstance(getattr(m, "dropout", None), float) and hasattr(m, "k_proj"):
            m.dropout = cfg.train.attention_dropout  # M2M100Attention: dropout on the attention weights
    if ch.init is not ch.teacher:
        del ch.init
    student.train()
    alpha = LearnedAlpha(cfg.kd.alpha) if cfg.kd.alpha_mode == "learned" and cfg.kd.source != "none" else None
    params = [{"params": list(student.parameters()), "weight_decay": 0.0}]
    if alpha is not None:
        params.append({"params": [alpha.s], "weight_decay": 0.0})
    opt = torch.optim.AdamW(params, lr=cfg.train.lr, betas=(0.9, 0.98), eps=1e-6)
    ckpt = out / "checkpoint"
    own = ckpt.is_dir() or ckpt.with_name(ckpt.name + ".old").is_dir()
    if branch_from is not None and not own:
        state = branch(student, opt, Path(branch_from), cfg, log)
    else:
        state = train_loop_mod.resume(student, opt, ckpt, fingerprint(cfg), log, legacy=fingerprint(cfg, legacy=True))
        if branch_from is not None and state.get("branched_from", {}).get("checkpoint") != str(branch_from):
            raise ForgetbenchError(f"--branch-from {branch_from}: {out} resumes its own checkpoint, which branched "
                                   f"from {state.get('branched_from', {}).get('checkpoint', 'nothing')}")
    state.setdefault("phase1_steps", cfg.train.phase1_steps)
    if alpha is not None and state.get("alpha_s") is not None:
        with torch.no_grad():
            alpha.s.fill_(state["alpha_s"])
    model, opt = acc.prepare(student, opt)
    ch.teacher.eval()
    dev = json.loads((out / "data" / "dev.json").read_text())
    rows, groups = [], []
    for k, (src, tgt) in enumerate(cfg.pairs):
        lang = tgt if src == "en" else src
        for e_ids, x_ids in dev.get(lang, [])[: cfg.train.signal_sentences]:
            a, b = (e_ids, x_ids) if src == "en" else (x_ids, e_ids)
            rows.append((src, tgt, a[: cfg.train.max_len - 2], b[: cfg.train.max_len - 2]))
            groups.append(data.dir_group[k])

    def probe_fn(m):
        return probe(m, ch.teacher, rows, data.lang_id, s.format == "small100", ch.teacher_small100, groups)

    dev_fn = dev_chrf_fn(cfg, ch.tok, dev) if cfg.train.dev_every else None
    stopped = train_loop(acc, cfg, model, opt, data, StepLoss(cfg, ch.teacher, cache, alpha), state, ckpt, out,
                         probe_fn, alpha, progress, dev_fn)
    final = out / "model"
    if acc.is_main_process:
        tok = load_tokenizer(cfg.teacher.path)  # the teacher's files; config.json marks the SMaLL-100 format
        unwrapped = acc.unwrap_model(model)
        from forgetbench.train import early_stop

        stopping = early_stop.finish(unwrapped, state, out, cfg.train.patience)
        record = {"config": asdict(cfg), "fingerprint": fingerprint(cfg), "stopped_by": stopped, "steps": state["step"],
                  "branched_from": state.get("branched_from"),
                  "epochs": state["epoch"], "tokens": state["tokens"],
                  **({"tokens_scaled_to_step": state["tokens_scaled_to_step"]} if "tokens_scaled_to_step" in state else {}),
                  "train_seconds": round(state["elapsed"], 1),
                  "train_cpu_seconds": round(state["cpu"], 1), "cpu_from_step": state.get("cpu_from_step", 0),
                  "processes": acc.num_processes, "threads": cfg.train.threads, "teacher_sha256": ch.teacher_sha256,
                  "parameters": parameter_count(unwrapped), "quotas": data.quotas, "tiers": data.tiers,
                  "alpha": alpha.alpha if alpha is not None else cfg.kd.alpha,
                  "cache": None if cache_man is None else {k: v for k, v in cache_man.items() if k != "shards"},
                  "arithmetic": arithmetic.record() if arithmetic is not None else {
                      "device": str(acc.device), "autocast": "none (float32)" if half == "no" else f"mixed precision {half}",
                      "why": "hardware.dtype on CUDA (accelerate)"},
                  "environment": environment(),
                  "early_stop": stopping}
        final = export_model(unwrapped, tok, out, record, (out / "signals.jsonl",))
        log(f"stopped by {stopped} at step {state['step']}; student in {final}")
    acc.wait_for_everyone()
    return final
