"""The package's layer order, checked on every import statement (parsed with ``ast``, not grepped);
``docs/ARCHITECTURE.md`` draws it.

    models ← {compress, eval} ← sweep ← report ← cli      compress and eval side by side: neither imports the other
    train, distill, parsing, pretrain: beside them — they may import the core layers below the sweep,
    and nothing below ``cli`` imports them.
    errors, io, env, stats, configs, outputs, console: base modules every layer may use; they import no layer.
"""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "forgetbench"
RANK = {"models": 0, "compress": 1, "eval": 1, "sweep": 2, "report": 3, "cli": 4}
BESIDE = {"train", "distill", "parsing", "pretrain"}
BASE = {"errors", "io", "env", "stats", "configs", "outputs", "console", "resources", "__init__"}
MAY_IMPORT_BESIDE = {"cli": BESIDE, "train": set(), "distill": {"train"}, "parsing": set(), "pretrain": {"train", "parsing"}}


def layer_of(module: str) -> str | None:
    """'forgetbench.eval.store' -> 'eval'; None outside the package."""
    parts = module.split(".")
    if parts[0] != "forgetbench":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """Every module a file imports (module level or inside functions), absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text, filename=str(path))
    pkg = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against the file's package
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if mod in ("forgetbench",)]
    return out


def violation(src_layer: str, dst_layer: str) -> str | None:
    if dst_layer in BASE or dst_layer == src_layer:
        return None
    if src_layer in BASE:
        return "a base module imports a layer"
    if dst_layer in BESIDE:
        return None if dst_layer in MAY_IMPORT_BESIDE.get(src_layer, set()) else f"{src_layer} imports {dst_layer}"
    if src_layer in BESIDE:
        return None if RANK[dst_layer] < RANK["sweep"] else f"{src_layer} (beside the core) imports {dst_layer}"
    if RANK[dst_layer] > RANK[src_layer]:
        return f"{src_layer} imports the higher layer {dst_layer}"
    if RANK[dst_layer] == RANK[src_layer]:
        return f"{src_layer} imports {dst_layer}, which stands beside it"
    return None


def test_every_module_belongs_to_a_known_layer():
    for path in PKG.rglob("*.py"):
        layer = layer_of(".".join(path.relative_to(PKG.parent).with_suffix("").parts))
        assert layer in RANK or layer in BESIDE or layer in BASE, f"{path}: unknown layer {layer!r}; add it to tests/test_layers.py"


def test_no_module_imports_against_the_layer_order():
    problems = []
    for path in sorted(PKG.rglob("*.py")):
        src = layer_of(".".join(path.relative_to(PKG.parent).with_suffix("").parts))
        for line, mod in imports(path):
            dst = layer_of(mod)
            if dst is None:
                continue
            why = violation(src, dst)
            if why:
                problems.append(f"{path.relative_to(PKG.parent)}:{line}: {mod} ({why})")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("src, dst, bad", [("eval", "compress", True), ("compress", "eval", True), ("eval", "sweep", True),
                                           ("parsing", "eval", False), ("parsing", "report", True), ("models", "train", True),
                                           ("cli", "parsing", False), ("io", "models", True), ("report", "stats", False),
                                           ("sweep", "parsing", True), ("report", "eval", False), ("sweep", "compress", False)])
def test_the_rule_itself(src, dst, bad):
    assert (violation(src, dst) is not None) is bad


def test_relative_imports_are_resolved():
    probe = PKG / "eval" / "_layer_probe.py"  # not a real file: its text is given
    found = [m for _, m in imports(probe, "from ..sweep import run\nfrom . import store\n")]
    assert found == ["forgetbench.sweep", "forgetbench.eval"]
    assert violation(layer_of(found[0]) and "eval", layer_of(found[0])) is not None
