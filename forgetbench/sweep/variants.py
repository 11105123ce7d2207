"""A sweep's variants: compressed and registered in the store (``prepare_variant``), loaded for a pass
(``load_variant``), their translators (``translator_for``: torch or CTranslate2) and sizes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

from forgetbench.compress.bnb import arithmetic
from forgetbench.compress.pipeline import compress_dir, load_compressed, load_model_dir, nominal_ratio
from forgetbench.errors import ForgetbenchError
from forgetbench.eval.backends import TorchTranslator
from forgetbench.eval.store import Store
from forgetbench.models import ct2
from forgetbench.models.hardware import Placement
from forgetbench.models.load import weights_sha256
from forgetbench.sweep.config import SweepConfig
from forgetbench.sweep.plan import source_size


def variant_arithmetic(recipe, placement: Placement | None) -> dict:
    """What a variant's weights are stored in and its matmuls compute in: bitsandbytes by its rule 5
    (``compress.bnb.arithmetic``), every other variant in the placement's dtype (fake-quantised int8 values
    included: they are computed in it)."""
    dtype = placement.hardware.dtype if placement is not None else "float32"
    q = None if recipe is None else recipe.load_quantisation
    return arithmetic(q, dtype) if q is not None else {"weights": dtype, "compute_dtype": dtype}


def model_sizes(folder: Path, sweep_model: Path, recipe) -> dict:
    """The sizes of a model folder translated as it is (the base, a student, a bitsandbytes variant): a compress
    output's own record (``compression.json``: its artefacts and nominal size; the artefacts beside the dense file
    not counted as weights); else its weights files, and for a model other than the sweep's (a student) its
    parameters over the sweep model's as its nominal size; a load-time recipe's ratio multiplied in."""
    sizes = None
    if (folder / "compression.json").is_file():
        try:
            sizes = dict(json.loads((folder / "compression.json").read_text())["sizes"])
        except (OSError, ValueError, KeyError, TypeError):
            sizes = None
    if sizes is None:
        src_bytes, params = source_size(folder)
        sizes = {"dense_bytes": src_bytes, "parameters": params, "nominal_ratio": 1.0}
        if Path(folder).resolve() != Path(sweep_model).resolve():
            base = source_size(sweep_model)[1]
            sizes |= {"base_parameters": base, "nominal_ratio": params / base}
    if recipe is not None:
        sizes["nominal_ratio"] = sizes.get("nominal_ratio", 1.0) * nominal_ratio(recipe)
    return sizes


def prepare_variant(cfg: SweepConfig, run_dir: Path, store: Store, name: str, placement: Placement | None = None) -> None:
    """A ``prepare`` unit: compress ``name`` (unless done; loaded as ``placement`` says), register its translation
    series (backend, recipe, sizes), convert it for the CTranslate2 series."""
    model, recipe = cfg.model_of(name), cfg.variants[name]
    record_signals(store, name, model)
    langs = cfg.routed(name)
    if langs:  # one model per target language (eval.backends rule 4)
        folder = run_dir / "variants" / name
        folder.mkdir(parents=True, exist_ok=True)
        for lang in langs:
            _compress(model, recipe.for_target(lang), folder / lang, placement)
        sizes = json.loads((folder / langs[0] / "compression.json").read_text())["sizes"]
        info = {"recipe": recipe.name, "sizes": sizes, "routed": langs}
    elif recipe is None or not recipe.written_steps:  # the base, or bitsandbytes alone (quantised when loaded)
        folder, info = model, {"recipe": None if recipe is None else recipe.name,
                               "sizes": model_sizes(model, cfg.model, recipe)}
    else:
        folder = run_dir / "variants" / name
        _compress(model, recipe, folder, placement)
        sizes = json.loads((folder / "compression.json").read_text())["sizes"]
        info = {"recipe": recipe.name, "sizes": sizes}
    info["arithmetic"] = variant_arithmetic(recipe, placement)
    calibration = calibration_record(recipe)
    if calibration:
        info["calibration"] = calibration
    known = store.variants()
    if name in known:
        sha = known[name]["model_sha256"]
    elif langs:  # the members' hashes, in language order
        sha = hashlib.sha256(" ".join(weights_sha256(folder / x) for x in langs).encode()).hexdigest()
    else:
        sha = weights_sha256(folder)
    for series, backend in cfg.series(name):
        if series not in known:
            store.add_variant(series, str(folder), sha, info | {"variant": name, "backend": backend_label(cfg, backend)})
        if backend == "ctranslate2":
            ct2.cached_conversion(lambda n=name: load_variant(cfg, run_dir, n), ct2_folder(cfg, run_dir, name),
                                  cfg.backend.compute_type, sha)


def _compress(model: Path, recipe, folder: Path, placement: Placement | None) -> None:
    """``recipe``'s written steps applied to ``model`` into ``folder``, unless a finished one is there."""
    if not (folder / "compression.json").is_file():
        if folder.exists():
            shutil.rmtree(folder)
        compress_dir(model, dataclasses.replace(recipe, steps=recipe.written_steps), folder, progress=False,
                     placement=placement)


def calibration_record(recipe) -> dict | None:
    """A data-aware prune step's method, sparsity, scope, embeddings and calibration choice (for the Findings on
    calibration: a choice is compared with the English-only calibration of an otherwise identical step)."""
    for st in (recipe.steps if recipe is not None else ()):
        if st.kind == "prune" and getattr(st.config, "needs_calibration", False):
            c = st.calibration
            return {"method": st.config.method, "sparsity": st.config.sparsity, "scope": st.config.scope,
                    "include_embeddings": st.config.include_embeddings, "choice": c.choice, "language": c.language}
    return None


def backend_label(cfg: SweepConfig, backend: str) -> str:
    return cfg.backend.describe() if backend == cfg.backend.name else backend


def ct2_folder(cfg: SweepConfig, run_dir: Path, name: str, compute_type: str | None = None) -> Path:
    return run_dir / "ctranslate2" / f"{name}-{compute_type or cfg.backend.compute_type}"


def translator_for(cfg: SweepConfig, run_dir: Path, name: str, backend: str, model, tok,
                   placement: Placement | None = None):
    if backend == "ctranslate2":
        device = cfg.backend.device
        if device.startswith("cuda") and ":" not in device and placement is not None and placement.gpus:
            device = f"cuda:{placement.gpus[0]}"  # this process's GPU, not every process on GPU 0
        return ct2.Ct2Translator(ct2_folder(cfg, run_dir, name), tok, device, cfg.backend.compute_type, cfg.threads)
    return TorchTranslator(model, tok)


def record_signals(store: Store, name: str, model: Path) -> None:
    """A distilled student's first and last probe (``signals.jsonl``, exported beside its weights: teacher–student KL
    and CE per pair group) into the store, so the report can set who forgets beside the distillation signal."""
    f = model / "signals.jsonl"
    if store.meta(f"signals:{name}") is not None or not f.is_file():
        return
    probes = [r for r in map(json.loads, f.read_text(encoding="utf-8").splitlines()) if r.get("split") == "probe"]
    if probes:
        store.set_meta(f"signals:{name}", {"first": probes[0], "last": probes[-1]})


def load_variant(cfg: SweepConfig, run_dir: Path, name: str, placement: Placement | None = None,
                 tgt: str | None = None):
    """A variant's model and tokenizer, fp32 on the CPU or where ``placement`` says (bitsandbytes variants
    quantised as they load); for a variant routed by target language, the model of target language ``tgt``."""
    recipe, folder, langs = cfg.variants[name], run_dir / "variants" / name, cfg.routed(name)
    if langs and tgt not in langs:
        raise ForgetbenchError(f"{name}: one model per target language ({', '.join(langs)}); no model for target {tgt!r}")
    if not langs and (recipe is None or recipe.load_quantisation is not None):
        folder = cfg.model_of(name) if recipe is None or not recipe.written_steps else folder
        return load_model_dir(folder, placement=placement, quantisation=recipe and recipe.load_quantisation)
    model, tok, _ = load_compressed(folder / tgt if langs else folder, placement=placement)
    return model, tok
