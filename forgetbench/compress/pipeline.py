"""Apply a recipe to a model directory and write the compressed model, atomically.

Output folder (nothing is overwritten; it appears only when complete):

- ``config.json`` + ``model.safetensors`` (+ tokenizer files): the compressed model as dense
  weights; loads with plain ``from_pretrained``. Pruned zeros and quantised weights are in it.
- ``quantization.json``: activation ranges of every quantisation site (fake-quant PTQ); plain
  transformers ignores it, ``load_compressed`` re-installs the activation quantisers from it.
- ``model.int8.safetensors`` / ``model.sparse.safetensors``: real int8 and sparse artefacts.
- ``compression.json``: recipe, realised sparsity per unit, sizes, SHA-256 of every input.
- ``diagnosis.md`` (``--diagnose``): which quantiser pays (``compress.diagnosis``); its numbers in compression.json.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from torch import nn

from forgetbench.compress.apply import Target, apply_recipe, check_recipe
from forgetbench.compress.artefacts import load_int8, load_sparse, save_int8, save_sparse
from forgetbench.compress.bnb import BnbConfig, quantization_config
from forgetbench.compress.calibration import Seq2SeqCalibration
from forgetbench.compress.ptq import QuantState, attach
from forgetbench.compress.recipe import Recipe
from forgetbench.console import Console, as_console
from forgetbench.env import environment
from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_directory, atomic_write_json, atomic_write_text, sha256_file
from forgetbench.models.hardware import Placement, describe


def write_artefacts(model: nn.Module, recipe: Recipe, qstate: QuantState | None, folder: Path,
                    steps: list[dict] | None = None) -> dict:
    """Beside ``folder/model.safetensors`` (the dense weights, already written): the real int8 and sparse
    artefacts the recipe calls for; returns their sizes, ratios to the dense file and the nominal ratio (``steps``:
    the recipe's step reports, for the weights each prune step covered)."""
    sizes = {"dense_bytes": os.path.getsize(folder / "model.safetensors")}
    if qstate is not None and qstate.weight_amax:
        stats = save_int8(model, qstate.weight_amax, folder / "model.int8.safetensors")
        sizes |= {"int8_bytes": os.path.getsize(folder / "model.int8.safetensors"), "int8": stats}
    if any(s.kind == "prune" for s in recipe.steps):
        stats = save_sparse(model, folder / "model.sparse.safetensors")
        sizes |= {"sparse_bytes": os.path.getsize(folder / "model.sparse.safetensors"), "sparse": stats}
    for k in ("int8", "sparse"):
        if f"{k}_bytes" in sizes:
            sizes[f"{k}_ratio"] = sizes[f"{k}_bytes"] / sizes["dense_bytes"]
    sizes["nominal_ratio"] = nominal_ratio(recipe, steps)
    return sizes


def nominal_ratio(recipe: Recipe, steps: list[dict] | None = None) -> float:
    """The study's size accounting (docs/METHOD.md §1.4): a step pruning a fraction p of weights that hold the
    fraction ``covered`` of the model's prunable weights counts 1 − p·covered (1 − p where it prunes every unit,
    embeddings included; ``covered`` from the step's report in ``steps``, else 1), int8 0.25, smoothing 1; bitsandbytes its
    bits
    (``compress.bnb`` rule 3)."""
    r = 1.0
    for i, s in enumerate(recipe.steps):
        if s.kind == "prune":
            covered = (steps[i].get("prune") or {}).get("covered", 1.0) if steps and i < len(steps) else 1.0
            r *= 1 - s.config.sparsity * covered
        elif s.kind != "smooth":  # smoothing changes no size
            r *= s.config.nominal_ratio if s.kind == "bitsandbytes" else 0.25
    return r


def load_model_dir(model_dir: str | Path, eager: bool = True, placement: Placement | None = None,
                   quantisation: BnbConfig | None = None):
    """``(model, tokenizer)`` of a saved model folder through ``models.load.load`` (no weights hash): fp32 on the
    CPU, or where and in the dtype ``placement`` says (``models.hardware``); ``quantisation``: bitsandbytes at
    load time (``compress.bnb``)."""
    from forgetbench.models.load import load

    d = Path(model_dir)
    if not (d / "config.json").is_file():
        raise ForgetbenchError(f"{d} is not a model folder (no config.json); give a folder saved with save_pretrained")
    kw = placement.load_kwargs() if placement is not None else {"dtype": "fp32"}
    if quantisation is not None:
        kw["quantization_config"] = quantization_config(quantisation)
    model, tok, _ = load(d, attn_implementation="eager" if eager else "sdpa", with_signature=False, **kw)
    return model, tok


def compress_dir(model_dir: str | Path, recipe: Recipe, out_dir: str | Path, progress: bool | Console = True,
                 placement: Placement | None = None, diagnose: bool = False) -> dict:
    """Apply ``recipe`` to the model in ``model_dir`` and write the output folder (model, artefacts,
    ``compression.json``) atomically; ``progress``: stage lines (``console``) or not; ``placement``: where the
    model is loaded and in which dtype (default: fp32 on the CPU), e.g. device-mapped over several GPUs, whose
    calibration hooks run on every module's own device; ``diagnose``: each quantize step's per-site diagnosis
    (``compress.diagnosis``) in ``compression.json`` and ``diagnosis.md``."""
    con = as_console(progress, "compress")
    model_dir = Path(model_dir)
    if recipe.load_quantisation is not None:  # before any work
        check_recipe(recipe)
    with con.stage(f"load {model_dir}"):
        model, tok = load_model_dir(model_dir, placement=placement)
    calibrate = Seq2SeqCalibration(tok, progress=not con.quiet)
    check_recipe(recipe, calibrate)
    inputs = {str(p.relative_to(model_dir)): sha256_file(p) for p in sorted(model_dir.iterdir())
              if p.is_file() and p.suffix in (".safetensors", ".json", ".model", ".bin")}
    t0 = time.perf_counter()
    with con.stage(f"recipe {recipe.name}: {' -> '.join(s.kind for s in recipe.steps)}"):
        report, qstate = apply_recipe(Target(model, diagnose=diagnose), recipe, calibrate)
    seconds = time.perf_counter() - t0
    stored = keep_source_dtype(model, model_dir, recipe)
    with con.stage(f"write {out_dir}"), atomic_directory(out_dir) as tmp:
        model.save_pretrained(tmp)
        if tok is not None:
            tok.save_pretrained(tmp)
        if qstate is not None:
            atomic_write_json(tmp / "quantization.json", qstate.to_dict())
        sizes = write_artefacts(model, recipe, qstate, tmp, report["steps"])
        report |= {
            "format": "forgetbench-compression-v1",
            "model_dir": str(model_dir.resolve()),
            "inputs_sha256": inputs | ({"recipe": sha256_file(recipe.source)} if Path(recipe.source).is_file() else {}),
            "sizes": sizes | {"source_bytes": source_bytes(model_dir)},
            "stored_dtype": stored,
            "seconds": round(seconds, 3),
            "environment": environment(),
        } | ({"hardware": describe(placement, model)} if placement is not None else {})
        atomic_write_json(tmp / "compression.json", report)
        diagnoses = [s["diagnosis"] for s in report["steps"] if "diagnosis" in s]
        if diagnoses:
            from forgetbench.compress.diagnosis import markdown

            atomic_write_text(tmp / "diagnosis.md", "\n".join(markdown(d) for d in diagnoses))
    return report


def source_dtype(model_dir: Path) -> torch.dtype | None:
    """The dtype the source checkpoint stores its weights in (config.json's ``dtype`` / ``torch_dtype``)."""
    try:
        cfg = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    from forgetbench.models.load import DTYPES

    return DTYPES.get(str(cfg.get("dtype") or cfg.get("torch_dtype")))


def source_bytes(model_dir: Path) -> int:
    return sum(p.stat().st_size for p in model_dir.glob("*.safetensors") if ".int8." not in p.name
               and ".sparse." not in p.name)


def keep_source_dtype(model: nn.Module, model_dir: Path, recipe: Recipe) -> dict:
    """Rule of the written weights (docs/METHOD.md §1.4): a half-precision source (float16 / bfloat16) stays in its
    dtype wherever that is lossless — every floating value of the compressed model exact in it (pruning's zeros and
    kept source values) — so a pruned variant takes no more disk than its source; a method whose values are not
    exact there (SparseGPT's updates, fake-quantised PTQ weights) is stored in float32. The model is cast in place
    (it is not used after writing). Returns the dtype stored and why, for ``compression.json``."""
    src = source_dtype(model_dir)
    if src in (None, torch.float32) or recipe.load_quantisation is not None:
        return {"dtype": "float32", "why": "the source is float32" if src == torch.float32 else "as computed"}
    floats = [t for t in model.state_dict().values() if t.is_floating_point()]
    if all(torch.equal(t.to(src).to(t.dtype), t) for t in floats):
        model.to(src)
        return {"dtype": str(src).removeprefix("torch."), "why": "lossless: every value is exact in the source's dtype"}
    return {"dtype": "float32", "why": f"the method's values are not exact in the source's "
                                       f"{str(src).removeprefix('torch.')}"}


def load_compressed(out_dir: str | Path, artefact: str = "dense", placement: Placement | None = None):
    """Load a ``forgetbench compress`` output: weights from the chosen artefact, activation quantisers re-installed;
    ``placement`` as in ``load_model_dir``."""
    out = Path(out_dir)
    model, tok = load_model_dir(out, placement=placement)
    if artefact in ("int8", "sparse"):
        sd = (load_int8 if artefact == "int8" else load_sparse)(out / f"model.{artefact}.safetensors")
        missing, unexpected = model.load_state_dict(sd, strict=False)
        if unexpected or any(not k.endswith("embed_positions.weights") for k in missing):
            raise ForgetbenchError(f"{out}: {artefact} artefact does not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    elif artefact != "dense":
        raise ForgetbenchError(f"unknown artefact {artefact!r}; choose dense, int8 or sparse")
    qfile = out / "quantization.json"
    qstate = attach(model, QuantState.from_dict(json.loads(qfile.read_text()))) if qfile.is_file() else None
    return model, tok, qstate
