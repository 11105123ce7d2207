"""Reading YAML configs at the boundary: one clear line for invalid YAML, a document that is not a
mapping, unknown keys and values of the wrong type (``where.key: expected …, got …``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from forgetbench.errors import ForgetbenchError

# Where shipped and local recipes are found: ./configs/recipes first, then the package's own (read by --help, so
# here, where finding them loads no torch)
RECIPE_DIRS = (Path.cwd() / "configs" / "recipes", Path(__file__).resolve().parents[1] / "configs" / "recipes")

_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list",
          dict: "a mapping"}


def load_yaml_mapping(path: str | Path, what: str = "config") -> dict:
    """The YAML document in ``path`` as a mapping (an empty file is an empty mapping)."""
    from forgetbench.io import read_text

    p = Path(path)
    if not p.is_file():
        raise ForgetbenchError(f"{what} {p} not found")
    try:
        raw = yaml.safe_load(read_text(p, what))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise ForgetbenchError(f"{where}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ForgetbenchError(f"{p}: a {what} is a YAML mapping (key: value lines), not a {type(raw).__name__}")
    return raw


def did_you_mean(word: str, choices) -> str:
    """``"did you mean 'fr'? "`` for the close matches of ``word`` among ``choices`` (difflib), else ``""``."""
    import difflib

    close = difflib.get_close_matches(str(word), list(choices), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""


def is_type(value, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def expect(value, kind: type | tuple, where: str):
    """``value`` if it is of ``kind`` (a type or a tuple of types), else one line naming ``where``."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not any(is_type(value, k) for k in kinds):
        want = " or ".join(_NAMES.get(k, k.__name__) for k in kinds)
        raise ForgetbenchError(f"{where}: expected {want}, got {value!r}")
    return value


def mapping(value, where: str) -> dict:
    if value is None:
        return {}
    return expect(value, dict, where)


def known_keys(values, allowed, where: str, note: str = "", kind: str = "key(s)") -> None:
    """Every config section's key check: keys of ``values`` outside ``allowed`` end in the one line ``WHERE: unknown
    key(s) [...]; allowed: a, b, c`` (sorted), ``note`` after, then a close match where there is one
    (``did_you_mean``); ``kind``: what the keys are (a config's top level: ``section(s)``)."""
    extra = sorted(set(values) - set(allowed))
    if extra:
        hint = did_you_mean(extra[0], allowed).strip() if len(extra) == 1 else ""
        raise ForgetbenchError(f"{where}: unknown {kind} {extra}; allowed: {', '.join(sorted(allowed))}{note}"
                               + (f"; {hint}" if hint else ""))


def dataclass_from(cls, values, where: str):
    """``cls(**values)`` after checking keys and each value's type against the field's default."""
    values = mapping(values, where)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    known_keys(values, fields, where)
    for k, v in values.items():
        f = fields[k]
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        if default is not None:
            expect(v, type(default) if not isinstance(default, float) else float, f"{where}.{k}")
    return cls(**values)
