"""A full disk and a full memory, made real where they can be (SQLite's page limit, an ENOSPC write, a
MemoryError), told as what they are in one line (exit 2); the rerun resumes to the uninterrupted result."""

import errno
import json
import sqlite3

import pytest

import forgetbench.eval.store as store_mod
from forgetbench.cli import main
from forgetbench.eval.store import Store
from forgetbench.resources import exhausted

from .conftest import flores_sweep


def _cfg(tmp_path, tiny_dir):
    return flores_sweep(tmp_path / "r.yaml", tiny_dir, "{base: null, prune-30: prune-30}", "[en-de, de-en]", 3, 6)


def _rows(run):
    return sorted(r[:6] for r in Store(run / "store.sqlite").translations())


def _summary(run):
    S = json.loads((run / "report" / "summary.json").read_text())
    return {k: S[k] for k in ("variant_table", "pairs", "delta")}


@pytest.fixture(scope="module")
def reference(tiny_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    run = tmp / "run"
    assert main(["sweep", str(_cfg(tmp, tiny_dir)), "--out", str(run), "--quiet"]) == 0
    return _rows(run), _summary(run)


def _one_line(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("forgetbench: error: "), err
    return err[0]


def test_the_store_filling_up_mid_run_is_a_full_disk_and_the_rerun_finishes(tiny_dir, tmp_path, monkeypatch, capsys,
                                                                            reference):
    real = sqlite3.connect

    def limited(*a, **k):  # SQLite's own limit: the store really fills (SQLITE_FULL) after a few pages
        db = real(*a, **k)
        db.execute("PRAGMA page_size = 512")  # a new file: small pages, so a few rows need new ones
        db.execute("PRAGMA max_page_count = 24")
        return db

    monkeypatch.setattr(store_mod.sqlite3, "connect", limited)
    run = tmp_path / "run"
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(run), "--quiet"]) == 2
    line = _one_line(capsys)
    assert "the disk is full" in line and str(run) in line and "free on that filesystem now" in line
    assert "rerun the same command to resume" in line and "damaged" not in line
    monkeypatch.setattr(store_mod.sqlite3, "connect", real)
    assert Store(run / "store.sqlite").meta("numerics") is not None  # it filled mid-run, after its set-up
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(run), "--quiet"]) == 0
    assert (_rows(run), _summary(run)) == reference


def test_opening_a_full_store_is_not_called_damaged_but_a_damaged_file_is(tmp_path, monkeypatch, capsys):
    from forgetbench.errors import ForgetbenchError

    real = sqlite3.connect

    def full(*a, **k):
        db = real(*a, **k)
        db.execute("PRAGMA max_page_count = 1")  # no room for the schema: SQLITE_FULL at open
        return db

    monkeypatch.setattr(store_mod.sqlite3, "connect", full)
    with pytest.raises(sqlite3.DatabaseError) as e:
        Store(tmp_path / "full" / "store.sqlite")
    assert exhausted(e.value) == "disk"
    monkeypatch.setattr(store_mod.sqlite3, "connect", real)
    bad = tmp_path / "bad" / "store.sqlite"
    bad.parent.mkdir()
    bad.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(ForgetbenchError, match="it is damaged"):
        Store(bad)


def test_an_artefact_write_into_a_full_disk_leaves_no_partial_variant(tiny_dir, tmp_path, monkeypatch, capsys,
                                                                      reference):
    import forgetbench.compress.pipeline as pipeline

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    real = pipeline.write_artefacts
    monkeypatch.setattr(pipeline, "write_artefacts", no_space)
    run = tmp_path / "run"
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(run), "--quiet"]) == 2
    assert "the disk is full" in _one_line(capsys)
    assert not (run / "variants" / "prune-30").exists()  # no partial folder stands as complete
    monkeypatch.setattr(pipeline, "write_artefacts", real)
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(run), "--quiet"]) == 0
    assert (_rows(run), _summary(run)) == reference


def test_memory_running_out_at_load_or_mid_translation_is_said_as_such(tiny_dir, tmp_path, monkeypatch, capsys,
                                                                        reference):
    from transformers import AutoModelForSeq2SeqLM

    import forgetbench.eval.backends as backends

    def no_memory(*a, **k):
        raise MemoryError()

    monkeypatch.setattr(AutoModelForSeq2SeqLM, "from_pretrained", no_memory)
    assert main(["compress", str(tiny_dir), "--recipe", "prune-30", "--out", str(tmp_path / "c")]) == 2
    line = _one_line(capsys)
    assert "out of memory while `compress` ran" in line and "cannot be loaded" not in line
    assert not (tmp_path / "c").exists()
    loaded = tmp_path / "loaded"  # the same at a sweep's first load; its rerun finishes as an uninterrupted run
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(loaded), "--quiet"]) == 2
    assert "out of memory while `sweep` ran" in _one_line(capsys)
    monkeypatch.undo()
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(loaded), "--quiet"]) == 0
    assert (_rows(loaded), _summary(loaded)) == reference
    real = backends.translate_rows
    calls = []

    def once(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory")
        return real(*a, **k)

    monkeypatch.setattr(backends, "translate_rows", once)
    monkeypatch.setattr(backends, "stream_rows", lambda *a, **k: None)  # every batch through translate_rows
    run = tmp_path / "run"
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(run), "--quiet"]) == 2
    assert "out of memory while `sweep` ran" in _one_line(capsys)
    monkeypatch.undo()
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(run), "--quiet"]) == 0
    assert (_rows(run), _summary(run)) == reference


def test_a_sweep_that_cannot_fit_is_refused_before_any_work(tiny_dir, tmp_path, monkeypatch, capsys):
    import forgetbench.sweep.plan as plan
    from forgetbench.sweep import load_sweep

    cfg = _cfg(tmp_path, tiny_dir)
    need = plan.disk_plan(load_sweep(cfg), tmp_path / "run")
    src = sum(p.stat().st_size for p in tiny_dir.glob("*.safetensors"))
    assert need >= plan.REPORT_BYTES + 2 * src  # prune-30 keeps the source dtype: dense + sparse <= 2 sources
    monkeypatch.setattr(plan, "free_disk", lambda p: need - 1)  # the one seam: the filesystem's free bytes
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    line = _one_line(capsys)
    assert "still has about" in line and "free" in line and not (tmp_path / "run").exists()
    monkeypatch.setattr(plan, "free_disk", lambda p: 10 * need)
    monkeypatch.setattr(plan, "available_memory", lambda: 1000)  # and memory: 1000 bytes available
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    line = _one_line(capsys)
    assert "of memory and 1000 B is available" in line and "processes: 1" in line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("writer,recipe", [("save_sparse", "prune-30"), ("save_int8", "ptq-int8"),
                                           ("atomic_write_json", "prune-30")])
def test_each_artefact_writer_hitting_a_full_disk_is_one_line_and_no_output(writer, recipe, tiny_dir, tmp_path,
                                                                             monkeypatch, capsys):
    import forgetbench.compress.pipeline as pipeline

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pipeline, writer, no_space)
    out = tmp_path / "o"
    assert main(["compress", str(tiny_dir), "--recipe", recipe, "--out", str(out), "--quiet"]) == 2
    line = _one_line(capsys)
    assert "the disk is full: `compress` could not write under" in line and str(out) in line
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".o.")]  # no partial output


def _limited(kib: int):
    """A ``preexec_fn`` setting the child's address-space limit, as ``ulimit -v KIB`` does in a shell."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, resource.RLIM_INFINITY))


@pytest.mark.parametrize("stage", ["before torch", "with the model"])
def test_an_address_space_limit_too_small_is_one_line_and_nothing_written(tmp_path, stage):
    """``ulimit -v`` below what a sweep maps: one line naming the limit, the need and the fix, exit 2, no run folder
    (resources rule 5, sweep.plan rule 3): before torch loads when the limit is below a sweep process's own
    mappings, once the config is read when it is below those plus the model (the shipped teacher)."""
    import subprocess
    import sys

    from forgetbench.resources import SWEEP_ADDRESS_SPACE

    from .conftest import REPO

    kib = 800_000 if stage == "before torch" else SWEEP_ADDRESS_SPACE // 1024 + 16 * 1024
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "forgetbench.cli", "sweep", "configs/demo.yaml", "--out", str(out),
                        "--sentences", "2", "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=300,
                       preexec_fn=_limited(kib))
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(err) == 1, p.stderr[-2000:]
    assert err[0].startswith(f"forgetbench: error: the address-space limit (ulimit -v {kib}) is ")
    assert ("before its model" in err[0]) == (stage == "before torch")
    assert ("artifacts/teacher (8.4 M parameters) needs about 1.4 GiB" in err[0]) == (stage == "with the model")
    assert "ulimit -v unlimited" in err[0] and not out.exists()


def test_thread_pools_are_sized_to_the_configured_count_before_torch_loads(tmp_path):
    """The CLI's first step sets OpenMP's and the BLAS's pool sizes to the command's thread count (a sweep config's
    ``threads``), over whatever the environment said (here 64), so torch starts with that many threads and no
    larger pool is ever created; parsing the command line loads no torch."""
    import os
    import subprocess
    import sys

    from .conftest import REPO

    cfg = tmp_path / "s.yaml"
    cfg.write_text("name: s\nthreads: 1\n")
    code = ("import os, sys, argparse\nfrom forgetbench.cli import build_parser\nbuild_parser()\n"
            "assert 'torch' not in sys.modules\n"
            "from forgetbench.cli.common import early_environment\n"
            f"early_environment(argparse.Namespace(command='sweep', config={str(cfg)!r}, threads=None))\n"
            "import torch\n"
            "print(os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'], torch.get_num_threads())")
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="64")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["1", "1", "1"]  # not 64, nor one per core


def test_a_file_is_hashed_once_per_state_and_again_when_it_changes(tmp_path, monkeypatch):
    """io.sha256_file remembers a file's hash while its inode, size and modification time stay; a rewrite (in
    place or replaced) is hashed again."""
    import builtins
    import hashlib
    import os

    from forgetbench import io

    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    assert io.sha256_file(f) == io.sha256_file(f)  # just written: hashed each time (a rewrite could keep its stamp)
    f.write_bytes(b"abd")  # within the same clock tick, perhaps: the same size, inode and time stamp
    assert io.sha256_file(f) == hashlib.sha256(b"abd").hexdigest()
    f.write_bytes(b"abc")
    os.utime(f, ns=(10**18, 10**18))  # settled (an old stamp)
    reads = []
    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: (reads.append(str(p)), real_open(p, *a, **k))[1])
    assert io.sha256_file(f) == io.sha256_file(f) == hashlib.sha256(b"abc").hexdigest()
    assert reads.count(str(f)) == 1
    f.write_bytes(b"abd")
    os.utime(f, ns=(1, 2))  # another modification time, as any rewrite has once settled
    assert io.sha256_file(f) == hashlib.sha256(b"abd").hexdigest()
    io.atomic_write_bytes(f, b"xyz")
    assert io.sha256_file(f) == hashlib.sha256(b"xyz").hexdigest() and reads.count(str(f)) == 3
