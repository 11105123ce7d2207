"""Compression recipes: a YAML list of steps, validated up front with one-line errors.

    name: prune-30
    steps:
      - prune: {sparsity: 0.30, scope: layer}
      - quantize:
          calibrator: mse
          sites: {linear_input: true, linear_weight: true, attn_qk: true, attn_pv: true, residual: true}
          granularity: {residual: channel}
          calibration: {data: ../../data/calibration/ntrex128-calib.tsv, max_sentences: 256}

Steps: ``prune``, ``smooth`` (SmoothQuant, ``compress.smooth``), ``quantize``, ``bitsandbytes``. Relative calibration
paths resolve against the recipe file's folder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from forgetbench.compress.bnb import KEYS as BNB_KEYS
from forgetbench.compress.bnb import BnbConfig
from forgetbench.compress.prune import PruneConfig
from forgetbench.compress.ptq import QuantConfig
from forgetbench.compress.smooth import KEYS as SMOOTH_KEYS
from forgetbench.compress.smooth import SmoothConfig
from forgetbench.configs import RECIPE_DIRS, known_keys
from forgetbench.errors import ForgetbenchError

PRUNE_KEYS = {"sparsity", "scope", "include_embeddings", "method", "n_m", "calibration"}
QUANT_KEYS = {"calibrator", "num_bins", "percentile", "start_bin", "sites", "exclude", "granularity", "calibration"}
CALIB_KEYS = {"data", "max_sentences", "batch_size", "max_length", "seed", "choice", "language", "counts"}
CHOICES = ("sample", "english", "uniform", "proportional", "language", "target")
STEP_KINDS = ("prune", "smooth", "quantize", "bitsandbytes")


@dataclass(frozen=True)
class Calibration:
    """A step's calibration set: ``max_sentences`` rows of ``data`` (default: 256 for PTQ, 128 for data-aware pruning)
    chosen by ``choice`` (``calibration.choose``):
    sample (a seeded sample of every row), english (English sources only), uniform (as many per language),
    proportional (per language as its share of ``counts``' training pairs: Multilingual Brain Surgeon), language
    (the rows of one ``language``, either side), target (the rows translating into ``language``: target-language
    calibration; without ``language`` only in a sweep, which routes each pair to the model calibrated on its target
    language)."""

    data: Path
    max_sentences: int = 256
    batch_size: int = 16
    max_length: int = 128
    seed: int = 0
    choice: str = "sample"
    language: str | None = None
    counts: Path | None = None  # a training.json (corpus.train pair counts) for choice: proportional

    @property
    def routed(self) -> bool:
        """choice: target without a language: one calibration per target language, made in a sweep."""
        return self.choice == "target" and self.language is None


@dataclass(frozen=True)
class Step:
    kind: str
    config: PruneConfig | SmoothConfig | QuantConfig | BnbConfig
    calibration: Calibration | None = None


@dataclass(frozen=True)
class Recipe:
    name: str
    steps: tuple[Step, ...]
    source: str = ""
    description: str = ""
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def load_quantisation(self) -> BnbConfig | None:
        """The bitsandbytes step (``compress.bnb``: applied when the model is loaded), or None."""
        return next((s.config for s in self.steps if s.kind == "bitsandbytes"), None)

    @property
    def routed_by_target(self) -> bool:
        """A data-aware prune step calibrated on the target language of each evaluation pair (``choice: target``
        without ``language``): one model per target language, made by ``for_target``."""
        return any(s.calibration is not None and s.calibration.routed for s in self.steps)

    def for_target(self, language: str) -> Recipe:
        """This recipe with its ``choice: target`` calibrations in ``language``: the model that translates the pairs
        into ``language``."""
        steps = tuple(dataclasses.replace(s, calibration=dataclasses.replace(s.calibration, language=language))
                      if s.calibration is not None and s.calibration.routed else s for s in self.steps)
        return dataclasses.replace(self, name=f"{self.name}@{language}", steps=steps)

    @property
    def written_steps(self) -> tuple[Step, ...]:
        """The steps that change the weights written to the variant's folder (all but bitsandbytes)."""
        return tuple(s for s in self.steps if s.kind != "bitsandbytes")


def _fail(where: str, msg: str):
    raise ForgetbenchError(f"{where}: {msg}")


def _unknown(where: str, got: set, allowed: set) -> None:
    known_keys(got, allowed, where)


PRUNE_CALIBRATION_SENTENCES = 128  # data-aware pruning's default calibration size (Wanda's and SparseGPT's papers)


def _calibration(where: str, d, base: Path, override: Path | None, max_sentences: int | None = None,
                 alone: bool = False) -> Calibration | None:
    """A step's ``calibration`` block; ``alone``: each sentence runs by itself (batch_size 1: no padded position
    reaches a statistic), and a batch_size other than 1 is refused."""
    if override is not None:
        d = dict(d or {}) | {"data": str(override)}
        base = Path.cwd()
    if d is None:
        return None
    if not isinstance(d, dict) or "data" not in d:
        _fail(where, "calibration needs a 'data' key: a TSV of src_lang, tgt_lang, source, target")
    _unknown(f"{where}: calibration", set(d), CALIB_KEYS)
    path = Path(d["data"])
    path = path if path.is_absolute() else (base / path)
    if not path.is_file():
        _fail(where, f"calibration data {path} not found")
    for k in ("max_sentences", "batch_size", "max_length"):
        if k in d and (not isinstance(d[k], int) or isinstance(d[k], bool) or d[k] < 1):
            _fail(where, f"calibration.{k} must be a positive integer, got {d[k]!r}")
    if alone and d.get("batch_size", 1) != 1:
        _fail(where, f"calibration.batch_size {d['batch_size']}: quantisation calibrates each sentence alone, so that "
                     "no padding reaches a range (docs/METHOD.md §1.2); remove batch_size")
    choice = d.get("choice", "sample")
    if choice not in CHOICES:
        _fail(where, f"calibration.choice {choice!r} is unknown; choose one of {', '.join(CHOICES)}")
    if (choice == "language" and "language" not in d) or (choice not in ("language", "target") and "language" in d):
        _fail(where, "calibration.language (an M2M-100 code) goes with choice: language or target, and only with them")
    counts = None
    if choice == "proportional":
        if "counts" not in d:
            _fail(where, "calibration choice proportional needs counts: a training.json with corpus.train pair counts")
        counts = Path(d["counts"]) if Path(d["counts"]).is_absolute() else base / d["counts"]
        if not counts.is_file():
            _fail(where, f"calibration.counts {counts} not found")
        counts = counts.resolve()
    elif "counts" in d:
        _fail(where, "calibration.counts goes with choice: proportional")
    d = ({"max_sentences": max_sentences} if max_sentences else {}) | ({"batch_size": 1} if alone else {}) | d
    return Calibration(path.resolve(), **{k: d[k] for k in ("max_sentences", "batch_size", "max_length", "seed") if k in d},
                       choice=choice, language=d.get("language"), counts=counts)


def parse_recipe(data: dict, source: str = "<recipe>", base: Path | None = None,
                 calibration_override: Path | None = None) -> Recipe:
    base = base or Path.cwd()
    if not isinstance(data, dict):
        _fail(source, "a recipe is a mapping with 'name' and 'steps'")
    _unknown(source, set(data), {"name", "description", "steps"})
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        _fail(source, "'steps' must be a non-empty list of {prune: ...} / {quantize: ...}")
    steps = []
    for i, s in enumerate(steps_raw, 1):
        where = f"{source}: step {i}"
        if not isinstance(s, dict) or len(s) != 1:
            _fail(where, "each step is a one-key mapping: {prune: {...}} or {quantize: {...}}")
        (kind, opts), = s.items()
        if kind not in STEP_KINDS:
            _fail(where, f"unknown step {kind!r}; known: {', '.join(STEP_KINDS)}")
        opts = opts or {}
        if not isinstance(opts, dict):
            _fail(where, f"options of {kind} must be a mapping")
        try:
            if kind == "bitsandbytes":
                _unknown(where, set(opts), BNB_KEYS)
                if i != len(steps_raw) or any("quantize" in x for x in steps_raw if isinstance(x, dict)):
                    _fail(where, "bitsandbytes quantises at load time: it must be the last step, and not beside a "
                                 "quantize step (compress.bnb rule 1)")
                steps.append(Step(kind, BnbConfig(**opts)))
            elif kind == "prune":
                _unknown(where, set(opts), PRUNE_KEYS)
                if "sparsity" not in opts and "n_m" not in opts:
                    _fail(where, "prune needs 'sparsity' (a number in [0, 1))")
                cfg = PruneConfig(**{"sparsity": None} | {k: v for k, v in opts.items() if k != "calibration"})
                calib = _calibration(where, opts.get("calibration"), base, calibration_override if cfg.needs_calibration
                                     else None, PRUNE_CALIBRATION_SENTENCES)
                if cfg.needs_calibration and calib is None:
                    _fail(where, f"{cfg.method} pruning needs calibration data: add calibration: {{data: FILE.tsv}} or "
                                 "pass --calibration FILE.tsv")
                if not cfg.needs_calibration and "calibration" in opts:
                    _fail(where, "magnitude pruning reads no calibration data: remove 'calibration' or set method: "
                                 "wanda or sparsegpt")
                steps.append(Step(kind, cfg, calib))
            elif kind == "smooth":
                _unknown(where, set(opts), SMOOTH_KEYS)
                calib = _calibration(where, opts.get("calibration"), base, calibration_override, alone=True)
                if calib is None:
                    _fail(where, "smooth needs calibration data (max |x| per channel): add calibration: {data: FILE.tsv} "
                                 "or pass --calibration FILE.tsv")
                steps.append(Step(kind, SmoothConfig(**{k: v for k, v in opts.items() if k != "calibration"}), calib))
            else:
                _unknown(where, set(opts), QUANT_KEYS)
                q = {k: v for k, v in opts.items() if k != "calibration"}
                if "exclude" in q:
                    q["exclude"] = tuple(q["exclude"]) if isinstance(q["exclude"], list) else q["exclude"]
                cfg = QuantConfig(**q)
                calib = _calibration(where, opts.get("calibration"), base, calibration_override, alone=True)
                if cfg.needs_calibration and calib is None:
                    _fail(where, "activation quantisation needs calibration data: add calibration: {data: FILE.tsv} "
                                 "or pass --calibration FILE.tsv")
                steps.append(Step(kind, cfg, calib))
        except ForgetbenchError as e:
            msg = str(e)
            raise ForgetbenchError(msg if msg.startswith(where) else f"{where}: {msg}") from None
        except TypeError as e:
            _fail(where, str(e))
    name = data.get("name") or Path(source).stem
    return Recipe(str(name), tuple(steps), source, str(data.get("description", "")), data)




def shipped_recipes() -> dict[str, Path]:
    """Every recipe of ``RECIPE_DIRS`` by its file name (stem) and by its ``name:`` (the first folder wins)."""
    import yaml

    found: dict[str, Path] = {}
    for d in RECIPE_DIRS:
        for f in sorted(d.glob("*.yaml")) if d.is_dir() else []:
            found.setdefault(f.stem, f)
            try:
                name = (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("name")
            except (yaml.YAMLError, OSError, AttributeError, UnicodeDecodeError):
                continue  # a broken recipe file is refused when it is the one asked for
            if isinstance(name, str):
                found.setdefault(name, f)
    return found


def find_recipe(name_or_path: str) -> Path:
    """A recipe file: a path, or a shipped recipe by file name or ``name:``; else one line with close names."""
    from forgetbench.configs import did_you_mean

    p = Path(name_or_path)
    if p.is_file():
        return p
    shipped = shipped_recipes()
    key = name_or_path[:-5] if name_or_path.endswith(".yaml") else name_or_path
    if key in shipped:
        return shipped[key]
    raise ForgetbenchError(f"recipe {name_or_path!r} not found (not a file, not a shipped recipe); "
                           f"{did_you_mean(key, shipped)}shipped: "
                           f"{', '.join(sorted({f.stem for f in shipped.values()}))}")


def load_recipe(name_or_path: str, calibration_override: str | Path | None = None) -> Recipe:
    from forgetbench.configs import load_yaml_mapping

    path = find_recipe(name_or_path)
    data = load_yaml_mapping(path, "recipe")
    override = Path(calibration_override) if calibration_override else None
    return parse_recipe(data, str(path), path.parent, override)
