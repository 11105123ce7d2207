"""The suite passes in a user's clone, where nothing lies beside the repository: the developers' data folder
(``../shared/data``) is named in one place (conftest's ``SHARED_DATA``), and a test that reads it is marked
``shared_data`` and takes the fixture of that name, so that it skips in a clone with a reason and CI runs it beside
the folder (``.ci/run``: the whole suite in a fresh clone with no ``../shared``, then ``-m shared_data`` here)."""

import ast
import re

from .conftest import REPO, SHARED_SKIP, python

TESTS = sorted((REPO / "tests").glob("*.py"))
# a path built to the folder beside the repository: REPO.parent / "shared", parents[2] / "shared", "../shared"
NAMES_SHARED = re.compile(r"""(parent|parents\[\d+\])\s*/\s*["']shared["']|["'](\.\./)+shared\b""")


def test_no_test_module_names_the_developers_data_folder_itself():
    hits = [f"{path.name}:{i}: {ln.strip()}" for path in TESTS
            if path.name not in ("conftest.py", "test_suite_layout.py")  # the one definition; this test's pattern
            for i, ln in enumerate(path.read_text().splitlines(), 1) if NAMES_SHARED.search(ln)]
    assert not hits, ("a test names ../shared itself; mark it shared_data and take the shared_data fixture "
                      f"(tests/conftest.py): {hits}")


def test_a_test_taking_the_shared_data_fixture_is_marked():
    unmarked, marked = [], 0
    for path in TESTS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test") and \
                    "shared_data" in {a.arg for a in node.args.args}:
                if "pytest.mark.shared_data" in {ast.unparse(d) for d in node.decorator_list}:
                    marked += 1
                else:
                    unmarked.append(f"{path.name}::{node.name}")
    assert marked >= 2 and not unmarked, f"reading ../shared/data unmarked: {unmarked}"


def test_a_marked_test_skips_with_its_reason_where_the_folder_is_not(tmp_path):
    """conftest's hook, in a suite of its own whose folder is absent: the marked test skips with the reason that
    names the folder and how CI runs it; the unmarked one runs."""
    (tmp_path / "conftest.py").write_text(f"""import importlib.util
from pathlib import Path
spec = importlib.util.spec_from_file_location("suite_conftest", {str(REPO / "tests" / "conftest.py")!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
def pytest_collection_modifyitems(config, items):
    suite.skip_shared_data_tests(items, Path({str(tmp_path / "nowhere")!r}))
""")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers = shared_data: x\n")
    (tmp_path / "test_one.py").write_text("import pytest\n@pytest.mark.shared_data\ndef test_a():\n    assert False\n"
                                          "def test_b():\n    assert True\n")
    r = python("-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-rs", "-q", tmp_path, cwd=tmp_path)
    assert r.returncode == 0 and "1 passed, 1 skipped" in r.stdout, r.stdout + r.stderr
    assert SHARED_SKIP in " ".join(r.stdout.split()), r.stdout
