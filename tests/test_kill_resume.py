"""kill -9 at the worst moments: between the checkpoint renames of train-mt, inside compress, while the report
is written. Each rerun finishes from what is on disk and leaves no leftover."""

import json
import signal

import torch
from safetensors.torch import load_file

from forgetbench.cli import main

from .conftest import REPO, run_killed
from .test_train_mt import _config, _shared


def test_train_mt_killed_between_checkpoint_renames_resumes_from_the_last_checkpoint(tmp_path):
    _shared(tmp_path / "shared")
    from forgetbench.train.mt import train

    full = train(_config(tmp_path, 8), tmp_path / "full", progress=False, log=lambda *_: None)
    killed = tmp_path / "killed"
    # the 5th checkpoint swap: 'checkpoint' (step 4) has been renamed to 'checkpoint.old', the new one not yet in place
    rc = run_killed(f"""
        import os, signal, sys
        sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from tests.test_train_mt import _config
        from forgetbench.train import loop
        calls = []
        real = os.rename
        def rename(a, b):
            if str(b).endswith("checkpoint.old"):
                calls.append(a)
                if len(calls) == 4:
                    real(a, b)
                    os.kill(os.getpid(), signal.SIGKILL)
            return real(a, b)
        loop.os.rename = rename
        from forgetbench.train.mt import train
        train(_config(Path({str(tmp_path)!r}), 8), Path({str(killed)!r}), progress=False, log=lambda *_: None)
    """)
    assert rc == -signal.SIGKILL
    assert not (killed / "checkpoint").exists() and (killed / "checkpoint.old" / "state.json").is_file()
    assert json.loads((killed / "checkpoint.old" / "state.json").read_text())["step"] == 4
    logs = []
    train(_config(tmp_path, 8), killed, progress=False, log=logs.append)
    assert any("interrupted" in m for m in logs) and any("resumed from" in m and "step 4" in m for m in logs)
    a, b = load_file(str(full / "model.safetensors")), load_file(str(killed / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not any(p.name.endswith((".old", ".tmp")) for p in killed.iterdir())


def test_compress_killed_midway_leaves_no_partial_and_the_rerun_completes(tiny_dir, tmp_path):
    out = tmp_path / "out"
    rc = run_killed(f"""
        import os, signal
        from forgetbench.compress import pipeline
        real = pipeline.write_artefacts
        def killed(*a, **k):
            real(*a, **k)
            os.kill(os.getpid(), signal.SIGKILL)  # artefacts written, folder not yet renamed into place
        pipeline.write_artefacts = killed
        from forgetbench.cli import main
        main(["compress", {str(tiny_dir)!r}, "--recipe", "prune-30", "--out", {str(out)!r}, "--quiet"])
    """)
    assert rc == -signal.SIGKILL
    assert not out.exists() and len(list(tmp_path.glob(".out.*.partial"))) == 1
    assert main(["compress", str(tiny_dir), "--recipe", "prune-30", "--out", str(out), "--quiet"]) == 0
    assert (out / "compression.json").is_file() and list(tmp_path.glob(".out.*")) == []


def test_report_killed_mid_write_is_restored_complete_by_the_rerun(tiny_dir, tmp_path):
    from .test_eval import _sweep_config

    cfg = _sweep_config(tmp_path, tiny_dir, name="k2", sentences=2, pairs="[en-de]")
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    complete = sorted(p.name for p in (run / "report").iterdir())
    rc = run_killed(f"""
        import os, signal
        from forgetbench.report import build
        real = build.atomic_write_text
        n = []
        def killed(path, text):
            n.append(path)
            if len(n) == 2:  # summary.json and report.md written, report.html not yet
                os.kill(os.getpid(), signal.SIGKILL)
            return real(path, text)
        build.atomic_write_text = killed
        from forgetbench.cli import main
        main(["report", {str(run)!r}])
    """)
    assert rc == -signal.SIGKILL
    # the previous report is still whole: the new one was being built beside it
    assert sorted(p.name for p in (run / "report").iterdir()) == complete
    assert main(["report", str(run)]) == 0
    assert sorted(p.name for p in (run / "report").iterdir()) == complete
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []
