"""Compression recipes: a YAML list of steps, validated up front with one-line errors.

    name: prune-30
    steps:
      - prune: {sparsity: 0.30, scope: layer}
      - quantize:
          calibrator: mse
          sites: {linear_input: true, linear_weight: true, attn_qk: true, attn_pv: true, residual: true}
          granularity: {residual: channel}
          calibration: {data: ../../data/calibration/ntrex128-calib.tsv, max_sentences: 256}

Steps: the kinds of ``compress.kinds`` (``prune``, ``smooth``: SmoothQuant, ``quantize``, ``bitsandbytes``), each
read by its own module through the one registry. Relative calibration paths resolve against the recipe file's
folder.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from forgetbench.compress.bnb import BnbConfig
from forgetbench.compress.kinds import KINDS
from forgetbench.compress.step_kind import Calibration, ParseContext, Step, fail
from forgetbench.configs import RECIPE_DIRS, known_keys
from forgetbench.errors import ForgetbenchError

__all__ = ["Calibration", "Recipe", "Step", "find_recipe", "load_recipe", "parse_recipe", "shipped_recipes", "step_kinds"]


def step_kinds() -> tuple[str, ...]:
    """The step kinds a recipe may name: the registry's (``compress.kinds``)."""
    return tuple(KINDS)


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


def parse_recipe(data: dict, source: str = "<recipe>", base: Path | None = None,
                 calibration_override: Path | None = None) -> Recipe:
    base = base or Path.cwd()
    if not isinstance(data, dict):
        fail(source, "a recipe is a mapping with 'name' and 'steps'")
    known_keys(data, {"name", "description", "steps"}, source)
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        fail(source, "'steps' must be a non-empty list of {prune: ...} / {quantize: ...}")
    steps = []
    for i, s in enumerate(steps_raw, 1):
        where = f"{source}: step {i}"
        if not isinstance(s, dict) or len(s) != 1:
            fail(where, "each step is a one-key mapping: {prune: {...}} or {quantize: {...}}")
        (name, opts), = s.items()
        kind = KINDS.get(name)
        if kind is None:
            fail(where, f"unknown step {name!r}; known: {', '.join(KINDS)}")
        opts = opts or {}
        if not isinstance(opts, dict):
            fail(where, f"options of {name} must be a mapping")
        try:
            known_keys(opts, kind.keys, where)
            steps.append(kind.parse(opts, where, ParseContext(base, calibration_override, i, steps_raw)))
        except ForgetbenchError as e:
            msg = str(e)
            raise ForgetbenchError(msg if msg.startswith(where) else f"{where}: {msg}") from None
        except TypeError as e:
            fail(where, str(e))
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
