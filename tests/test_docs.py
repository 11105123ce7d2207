"""docs/METHOD.md describes the tree as it is: every docstring reference resolves to one of its
sections, and every module and function its look-up table names exists."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
METHOD = (REPO / "docs" / "METHOD.md").read_text(encoding="utf-8")


def _sections() -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", METHOD, re.M)}


def test_every_docstring_reference_resolves_to_a_section():
    sections = _sections()
    assert {"1.1", "1.2", "2", "4", "6"} <= sections
    refs = []
    for f in sorted((REPO / "forgetbench").rglob("*.py")):
        for m in re.finditer(r"METHOD\.md §(\d+(?:\.\d+)?)", f.read_text(encoding="utf-8")):
            refs.append((f.relative_to(REPO), m.group(1)))
    assert refs, "no references found: the pattern is wrong"
    assert [r for r in refs if r[1] not in sections] == []
    bare = [f for f in (REPO / "forgetbench").rglob("*.py") if re.search(r"(?<!docs/)METHOD\.md", f.read_text(encoding="utf-8"))]
    assert bare == [], "cite docs/METHOD.md, the repository's own file"


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_lookup_table_names_real_modules_and_functions():
    rows = [line for line in METHOD.splitlines() if line.startswith("| ") and "`" in line and ".py`" in line]
    assert len(rows) >= 20
    for row in rows:
        cells = row.split("|")
        modules = re.findall(r"`([\w/]+\.py)`", cells[2])
        functions = {f.split(".")[-1] for f in re.findall(r"`([\w.]+)`", cells[3])}
        defined = set()
        for m in modules:
            path = REPO / "forgetbench" / m
            assert path.is_file(), f"{m} named in docs/METHOD.md does not exist"
            defined |= _defined(path)
        assert functions <= defined, f"{row}: not defined in {modules}: {sorted(functions - defined)}"


def test_every_readme_command_parses_with_the_current_cli():
    """Each ``forgetbench`` command of the README's bash blocks is accepted by the command line as written (its
    commands and flags exist; shell variables stand for paths): a renamed flag fails here, not for a reader."""
    import shlex

    from forgetbench.cli import build_parser

    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = 0
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            cmd = line.split(" #")[0].strip()
            if "forgetbench" not in cmd:
                continue
            words = shlex.split(cmd.replace("$T", "T").replace("$O", "O"))
            start = max(i for i, w in enumerate(words) if w in ("forgetbench", "forgetbench.cli")) + 1
            args = words[start:]
            try:
                build_parser().parse_args(args)
            except SystemExit as e:
                raise AssertionError(f"README command does not parse: {cmd}") from e
            found += 1
    assert found >= 10


def test_every_definition_the_report_links_exists_in_method():
    """The report's notes name where each quantity is defined (λ, ψ*, VL2H, Δ, off-target, MuCoW rates): every
    ``docs/METHOD.md §N`` (and ``§N`` after it) they cite is a heading there."""
    import re

    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?[a-z]?)[ .]", (REPO / "docs" / "METHOD.md").read_text(), re.M))
    text = "".join(p.read_text() for p in (REPO / "forgetbench" / "report").glob("*.py"))
    cited = set(re.findall(r"§(\d+(?:\.\d+)?[a-z]?)", text))
    assert {"2.2", "2.4", "2.5", "2.6", "2.7", "2.8", "3.6"} <= cited
    assert cited <= headings, cited - headings


def test_a_saturated_miss_rate_is_explained_beside_the_table():
    from forgetbench.eval.analysis import Thresholds
    from forgetbench.eval.summary import BiasSummary, Summary
    from forgetbench.report.sections import MUCOW_NOTE, mucow_note

    S = Summary("base", [], Thresholds(), {}, bias=BiasSummary(word_sense={
        "en-de": {"base": {"n": 40, "miss_rate": 1.0}, "p45": {"n": 40, "miss_rate": 0.5}}}))
    note = mucow_note(S)
    assert "Miss rate ≥ 0.9 in 1 row(s)" in note and "base en-de: 0 of 40" in note and "p45" not in note
    S.bias.word_sense["en-de"]["base"]["miss_rate"] = 0.2
    assert mucow_note(S) == MUCOW_NOTE
