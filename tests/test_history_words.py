"""The product describes itself, not the history of its making: no work-period word ("session") and no "as
before" in the README, docs, the package, scripts, benchmarks, configs or the model cards. Decisions state their
reasons (docs/METHOD.md); timings are dated rows (docs/BENCHMARKS.md). pytest's own ``scope="session"`` is not
prose and is allowed."""

import re

from .conftest import REPO

HISTORY = re.compile(r"\bsessions?\b|\bas before\b(?!\s+\w)", re.IGNORECASE)  # "as before any work" is fine
ALLOWED = re.compile(r"""scope\s*=\s*["']session["']""")


def _files():
    yield REPO / "README.md"
    for folder, patterns in (("docs", ("*.md", "*.json")), ("forgetbench", ("*.py",)), ("scripts", ("*.py", "*.sh")),
                             ("benchmarks", ("*.py",)), ("configs", ("*.yaml",)), ("artifacts", ("README.md",))):
        for pattern in patterns:
            yield from sorted((REPO / folder).rglob(pattern))


def test_no_history_words_in_the_product():
    hits = []
    for path in _files():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY.search(ALLOWED.sub("", line)):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_the_check_catches_what_it_names():
    assert HISTORY.search("measured in Session 11") and HISTORY.search("padded as before.")
    assert not HISTORY.search(ALLOWED.sub("", '@pytest.fixture(scope="session")'))
    assert not HISTORY.search("a sessionless run") and not HISTORY.search("as before any work")  # word bounds
