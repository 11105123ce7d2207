import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]
CALIB = REPO / "data" / "calibration" / "ntrex128-calib.tsv"
FLORES = REPO / "data" / "flores101"
MAX_WORKERS = 4  # pytest -n auto (pyproject's addopts): one worker per usable core, at most this many
# The developers' data folder (the study's corpora, NTREX, UD ...): beside the project's own checkouts and CI's, never
# in a user's clone. The one place the suite names it: a test that reads it is marked ``shared_data`` and takes the
# ``shared_data`` fixture; in a clone it skips with the reason below, and CI runs the marked tests beside the folder
# (.ci/run) after the whole suite in a fresh clone with nothing beside it (tests/test_suite_layout.py).
SHARED_DATA = REPO.parent / "shared" / "data"
SHARED_SKIP = ("needs the developers' data folder ../shared/data (the study's full corpora, not distributed); a "
               "clone runs without it: CI runs this test beside it with -m shared_data")


def skip_shared_data_tests(items, folder: Path = SHARED_DATA) -> None:
    """Every test marked ``shared_data`` skips, with ``SHARED_SKIP``, where ``folder`` is not."""
    if folder.is_dir():
        return
    skip = pytest.mark.skip(reason=SHARED_SKIP)
    for item in items:
        if item.get_closest_marker("shared_data"):
            item.add_marker(skip)


def pytest_collection_modifyitems(config, items):
    skip_shared_data_tests(items)


@pytest.fixture
def shared_data(request) -> Path:
    """``../shared/data``, for a test marked ``shared_data`` (it skips where the folder is not)."""
    assert request.node.get_closest_marker("shared_data"), "a test reading ../shared/data is marked shared_data"
    return SHARED_DATA


def pytest_xdist_auto_num_workers(config) -> int:
    """Workers for ``-n auto``: the cores this process may run on (a container's share, not the host's count), at
    most ``MAX_WORKERS``. Each worker keeps to one torch thread (above), so two workers on two cores do not
    oversubscribe them."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1  # Linux | else
    return max(1, min(MAX_WORKERS, cores))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now: a launcher or a key-value store in a test never takes a fixed port that
    a test running beside it in another worker may hold."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def flores_sweep(path: Path, model, variants: str, pairs: str, sentences: int, max_new_tokens: int,
                 languages: str | None = None, extra: str = "") -> Path:
    """A small sweep config on the shipped FLORES-101 subset, written to ``path`` (named by its stem)."""
    langs = f"languages: {languages}\n" if languages else ""
    path.write_text(f"""name: {path.stem}
model: {model}
variants: {variants}
benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]
{langs}pairs: {pairs}
sentences: {sentences}
generation: {{max_new_tokens: {max_new_tokens}, batch_size: 4}}
analysis: {{bleu_filter: 0}}
{extra}""")
    return path


def run_killed(code: str, cwd: Path = REPO) -> int:
    """Run ``code`` in a fresh interpreter (repo on the path, offline) and return its exit code: -9 when the code
    SIGKILLed itself at the point it names (a patched function: a kill point by a hook, never by a sleep)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                          timeout=600).returncode


def python(*args, cwd: Path = REPO, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh interpreter (a module with ``-m``, or a script), its output captured as text."""
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def calib_rows(n=None):
    from forgetbench.compress.calibration import read_calibration_tsv

    rows = read_calibration_tsv(CALIB)
    return rows if n is None else rows[:n]


def _tiny_model(tmp_path_factory, family: str, spm_vocab: int) -> Path:
    """A tiny random model of ``family`` (d=64, 2+2 layers) with a real SPM vocabulary on the calibration text."""
    from forgetbench.models.tiny import build_tiny_m2m100, build_tiny_nllb

    d = tmp_path_factory.mktemp("tiny") / family
    build = build_tiny_nllb if family == "nllb" else build_tiny_m2m100
    build(d, [c for r in calib_rows() for c in r[2:]], spm_vocab=spm_vocab, d_model=64, layers=2, heads=4, ffn=128,
          seed=0)
    return d


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A tiny random M2M-100 (d=64, 2+2 layers) with a real SPM vocabulary, saved once per session."""
    return _tiny_model(tmp_path_factory, "m2m", 1000)


@pytest.fixture(scope="session")
def nllb_dir(tmp_path_factory):
    """A tiny random NLLB-200-shaped model (NLLB's token layout and 202 codes), saved once per session."""
    return _tiny_model(tmp_path_factory, "nllb", 1200)


@pytest.fixture
def tiny(tiny_dir):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir), attn_implementation="eager").eval()
    return model, AutoTokenizer.from_pretrained(str(tiny_dir))


@pytest.fixture
def batch(tiny):
    _, tok = tiny
    rows = [r for r in calib_rows() if r[0] == "en" and r[1] == "de"][:4]
    tok.src_lang, tok.tgt_lang = "en", "de"
    return tok([r[2] for r in rows], text_target=[r[3] for r in rows], padding=True, return_tensors="pt")


@pytest.fixture(scope="session")
def tiny_parser(tmp_path_factory):
    """A folder with a toy treebank (train.conllu, dev.conllu) and a tiny gold-tag biaffine parser trained on it (p/)."""
    from forgetbench.parsing.train import train

    from .test_parser import _toy_treebank

    d = tmp_path_factory.mktemp("tiny_parser")
    tr, dv = _toy_treebank(d / "train.conllu", 40, 0), _toy_treebank(d / "dev.conllu", 10, 1)
    train(tr, dv, d / "p", minutes=60, max_epochs=1, max_tokens=200, progress=False, lstm_hidden=16, arc_mlp=16,
          rel_mlp=8, word_dim=8, char_dim=4, char_hidden=8, tag_dim=4)
    return d


def same(a, b, path="summary"):
    """Equal, floats bit for bit (the path of the first difference named): the layout rule (docs/METHOD.md §2.9)
    makes every stored per-sentence value independent of batches, processes and ranks, so two runs of the same
    work give the same summary, whichever worker did which unit."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    else:
        assert a == b, path
