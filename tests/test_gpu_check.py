"""``scripts/gpu_check.py`` runs every step's plumbing on the CPU (``--dry-run``: tiny models), records a failing
step and goes on, and keeps its total budget."""

import json

import pytest

from .conftest import REPO, python

SCRIPT = REPO / "scripts" / "gpu_check.py"


def test_the_pack_runs_the_dry_run_without_the_repository_and_a_forced_failure_does_not_stop_it(tmp_path):
    """``--pack`` (here without wheels: this host's packages stand in for them) copies what the check reads into a new
    folder; the dry run runs from there, writes every step's row, and goes on after a step forced to fail."""
    pack = tmp_path / "pack"
    p = python(SCRIPT, "--pack", pack, "--pack-wheels-for", "none")
    assert p.returncode == 0, p.stderr
    size = sum(f.stat().st_size for f in pack.rglob("*") if f.is_file())
    assert size <= 48 * 2**20  # 60 MiB a GPU call carries, less the wheels (11.0 MiB for Python 3.12)
    assert (pack / "artifacts" / "teacher" / "model.safetensors").is_file() and not (pack / "artifacts" / "student-kd").exists()
    import os
    import subprocess
    import sys

    # budgets scaled out of reach: the test checks each step's plumbing whatever runs beside it, not its time (the
    # budget rule has its own test below)
    p = subprocess.run([sys.executable, "scripts/gpu_check.py", "--out", str(tmp_path / "gc"), "--device", "cpu",
                        "--dry-run", "--budget-s", "100000", "--dry-scale", "100", "--fail-step", "sweep"], cwd=pack,
                       capture_output=True, text=True, timeout=3000, env=dict(os.environ) | {"PYTHONPATH": str(pack)})
    report = json.loads((tmp_path / "gc" / "gpu_check.json").read_text())
    steps = report["steps"]
    assert list(steps) == ["tests", "sweep", "compress", "shape-418m", "device-map", "distill", "parse", "probes"]
    assert steps["sweep"]["status"] == "fail" and "forced to fail" in steps["sweep"]["line"]
    assert p.returncode == 1 and "7 of 8 steps without failure" in p.stdout, (tmp_path / "gc" / "gpu_check.md").read_text()
    for name in ("tests", "compress", "shape-418m", "distill", "parse", "probes"):  # the steps after the failure ran
        assert steps[name]["status"] == "pass", (name, steps[name])
    assert steps["device-map"]["status"] == "skipped"
    assert steps["compress"]["details"]["prune-30"]["matrices_with_equal_masks"] == "33 of 33"
    assert steps["compress"]["details"]["sparsegpt-45-uniform"]["mask_entries_differing"].startswith("0 of ")
    assert steps["distill"]["details"]["tensors_equal"].split(" of ")[0] == steps["distill"]["details"][
        "tensors_equal"].split(" of ")[1]
    md = (tmp_path / "gc" / "gpu_check.md").read_text()
    assert all(f"| {n} |" in md for n in steps) and "dry run" in md


def test_a_budget_too_small_for_any_step_skips_every_step_and_says_why(tmp_path):
    p = python(SCRIPT, "--out", tmp_path / "gc", "--device", "cpu", "--dry-run", "--budget-s", "3")
    report = json.loads((tmp_path / "gc" / "gpu_check.json").read_text())
    assert p.returncode == 0 and report["budget_s"] == 3
    assert {r["status"] for r in report["steps"].values()} == {"skipped"}  # none started: nothing could overrun it
    assert not any("seconds" in r for r in report["steps"].values())
    assert all("budget" in r["why"] for r in report["steps"].values())


def test_cuda_without_a_gpu_is_refused_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here: --device cuda runs")
    p = python(SCRIPT, "--out", tmp_path / "gc", "--device", "cuda")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--dry-run" in p.stderr


def test_a_step_over_its_budget_is_stopped_with_what_it_started_and_its_log_end_is_reported(tmp_path):
    """A step that hangs (the ``--hang-step`` hook: it starts a child and waits on it) is stopped at its budget; its
    child is stopped with it (the step's process group), the report carries the end of the step's log, and the next
    step named in ``--only`` runs in the order given."""
    import os
    import time

    p = python(SCRIPT, "--out", tmp_path / "gc", "--device", "cpu", "--dry-run", "--only", "device-map,tests",
               "--budget-s", "100000", "--dry-scale", "0.25", "--hang-step", "tests")
    report = json.loads((tmp_path / "gc" / "gpu_check.json").read_text())
    assert list(report["steps"]) == ["device-map", "tests"], p.stderr
    tests = report["steps"]["tests"]
    assert tests["status"] == "fail" and tests["line"] == "over its budget of 15 s: stopped"
    assert any("step tests: started" in ln for ln in tests["log_tail"])
    assert any("hanging (--hang-step)" in ln for ln in tests["log_tail"])
    child = int(next((tmp_path / "gc").glob("work-*/tests.child-pid")).read_text())

    def alive() -> bool:
        try:
            os.kill(child, 0)
            return open(f"/proc/{child}/stat").read().split()[2] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            return False

    deadline = time.monotonic() + 30  # polled, not slept: a loaded host may take a while to reap it
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(), "the hanging step's child was left running (30 s after its step was stopped)"
    assert "## tests: the end of its log" in (tmp_path / "gc" / "gpu_check.md").read_text()
    p = python(SCRIPT, "--out", tmp_path / "gc2", "--device", "cpu", "--dry-run", "--only", "tests,nope")
    assert p.returncode == 2 and "no such step" in p.stderr


def test_the_prepared_gpu_call_leaves_its_reports_in_out(tmp_path):
    """``scripts/gpu_call.sh device`` (what a lent GPU's call runs), here on the CPU as a dry run: the environment,
    the check's report and every step's log land in $OUT, within the 8 files a call returns; the carried shared
    data is unpacked where the configs look (beside the checkout)."""
    import os
    import subprocess
    import tarfile

    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "data" / "wmt_news").mkdir(parents=True)
    (tmp_path / "data" / "wmt_news" / "MANIFEST.md").write_text("# a source\n")
    with tarfile.open(tmp_path / "shared-data.tar.xz", "w:xz") as tar:
        tar.add(tmp_path / "data", arcname="data")
    p = subprocess.run(["bash", str(REPO / "scripts" / "gpu_call.sh"), "device", "300", "0", "--only", "tests",
                        "--dry-scale", "5"], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ) | {"OUT": str(out), "GPU_CALL_DEVICE": "cpu",
                                               "GPU_CALL_DATA": str(tmp_path / "shared-data.tar.xz"),
                                               "GPU_CALL_SHARED": str(tmp_path / "beside")})
    assert (tmp_path / "beside" / "data" / "wmt_news" / "MANIFEST.md").read_text() == "# a source\n"
    assert p.returncode == 0, p.stderr
    names = sorted(f.name for f in out.iterdir())
    assert names == ["env.txt", "gpu_check.json", "gpu_check.md", "step_logs.txt"] and len(names) <= 8
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["dry_run"] and report["steps"]["tests"]["status"] == "pass"
    assert "=== tests.log" in (out / "step_logs.txt").read_text() and "Python" in (out / "env.txt").read_text()


def test_the_check_s_children_keep_the_carried_wheels_site_and_log_each_line_as_it_comes(tmp_path, monkeypatch):
    """A GPU call puts the carried wheels' site on PYTHONPATH: every child the check starts (the tests step's pytest
    too: on the H200 of 2026-11-28 it lost the site and a sweep failed on a missing package) gets the repository
    first and the site after it; a command's lines reach the step's log time-stamped as they come."""
    import importlib.util
    import os
    import subprocess

    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    site = tmp_path / "site"
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert gc.repo_env()["PYTHONPATH"].split(os.pathsep) == [str(REPO), str(site)]
    seen = {}

    def fake_run(args, **kw):
        seen["env"] = kw["env"]
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(gc.subprocess, "run", fake_run)
    monkeypatch.delenv("GPU_CHECK_LOG", raising=False)
    gc.step_tests({"dry_run": True, "work": str(tmp_path), "timeout": 10})
    assert seen["env"]["PYTHONPATH"].split(os.pathsep) == [str(REPO), str(site)]
    monkeypatch.undo()
    log = tmp_path / "step.log"
    monkeypatch.setenv("GPU_CHECK_LOG", str(log))
    p = gc.cli("sweep", str(tmp_path / "missing.yaml"), "--out", str(tmp_path / "run"))
    lines = log.read_text().splitlines()
    assert p.returncode == 2 and "missing.yaml" in p.stdout
    assert "start: forgetbench sweep" in lines[0]
    assert any("missing.yaml" in ln and ln.split("] ")[1].startswith("  ") for ln in lines[1:-1])
    assert "exit 2" in lines[-1] and not (tmp_path / "run").exists()
