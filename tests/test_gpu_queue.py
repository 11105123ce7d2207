"""``scripts/gpu_queue.py``: the queue's runs start together, stop with a checkpoint at the budget's wall deadline,
come back one archive each, and resume with the command the report gives."""

import json
import tarfile

import yaml

from forgetbench.cli import main

from .conftest import REPO, python
from .test_distill import toy_setup
from .test_train_mt import _config, _shared

SCRIPT = REPO / "scripts" / "gpu_queue.py"


def test_the_queue_stops_every_run_at_its_deadline_and_each_resumes_from_its_archive(tiny_dir, tmp_path):
    _shared(tmp_path / "shared")
    _config(tmp_path, 6)  # writes cfg6.yaml
    queue = tmp_path / "queue.yaml"
    queue.write_text(yaml.safe_dump({"runs": [
        {"name": "student", "command": "distill", "config": str(toy_setup(tmp_path / "d", tiny_dir))},
        {"name": "mt", "command": "train-mt", "config": str(tmp_path / "cfg6.yaml")}]}))
    # a budget of grace + archive time only: the deadline is at once, each run stops after its first step
    p = python(SCRIPT, "--out", tmp_path / "q", "--budget-s", "150", "--grace-s", "120", "--archive-s", "30",
               "--queue", queue, "--device", "cpu", "--part-mib", "0.5", "--return-mib", "1000", "--return-files", "100",
               timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads((tmp_path / "q" / "gpu_queue.json").read_text())
    names = sorted(p.name for p in (tmp_path / "q").iterdir())
    assert names[0] == "gpu_queue.json" and report["files"] == len(names)
    for name, total in (("student", 8), ("mt", 6)):
        r = report["runs"][name]
        assert (r["exit"], r["steps"], r["stopped_by"]) == (0, 1, "the wall deadline (--stop-after)"), r
        assert r["returned"].startswith("the whole run folder")
        parts = [tmp_path / "q" / f for f in r["archive"]]
        assert all(f.stat().st_size <= 2**19 for f in parts) and len(parts) > 1  # cut into parts of 0.5 MiB
        joined = tmp_path / f"{name}.tar.gz"
        joined.write_bytes(b"".join(f.read_bytes() for f in parts))
        with tarfile.open(joined) as tar:
            tar.extractall(tmp_path / "runs", filter="data")
        assert (tmp_path / "runs" / name / "checkpoint" / "state.json").is_file()
        cmd = r["resume"].split()[1:]
        cmd[cmd.index("--out") + 1] = str(tmp_path / "runs" / name)
        assert main([*cmd, "--quiet"]) == 0
        rec = json.loads((tmp_path / "runs" / name / "model" / "training.json").read_text())
        assert rec["steps"] == total and rec["stopped_by"] == "steps"


def test_a_bad_queue_is_refused_in_one_line(tmp_path):
    queue = tmp_path / "queue.yaml"
    queue.write_text(yaml.safe_dump({"runs": [{"name": "x", "command": "sweep", "config": "configs/demo.yaml"}]}))
    p = python(SCRIPT, "--out", tmp_path / "q", "--budget-s", "60", "--queue", queue)
    assert p.returncode != 0 and "command 'sweep'" in p.stderr and not (tmp_path / "q").exists()
    shipped = yaml.safe_load((REPO / "configs" / "gpu-queue.yaml").read_text())["runs"]
    assert {r["command"] for r in shipped} <= {"pretrain-encoder", "distill", "train-mt"}
    assert all((REPO / r["config"]).is_file() for r in shipped)


def test_what_comes_back_is_bounded_whole_runs_first_then_models_then_logs(tmp_path):
    """OUT holds at most ``--return-mib``: a run that does not fit whole comes back as its exported model and logs
    (no checkpoint, best copy, snapshots or prepared data), else as its logs alone."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_queue", SCRIPT)
    q = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(q)
    run = tmp_path / "enc"
    for rel in ("checkpoint/model.safetensors", "checkpoint/state.json", "best/model.safetensors", "model/model.safetensors",
                "model/training.json", "snapshots/step-005000/model.safetensors", "text.npz", "train_log.jsonl",
                "pretrain-run.json", "spm.model"):
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_bytes(b"x" * 100)

    def kept(fn):
        tar = tmp_path / "t.tar"
        with tarfile.open(tar, "w") as t:
            t.add(run, arcname="enc", filter=fn)
        with tarfile.open(tar) as t:
            return sorted(m.name for m in t.getmembers() if m.isfile())

    assert kept(q._model_and_logs) == ["enc/model/model.safetensors", "enc/model/training.json", "enc/pretrain-run.json",
                                       "enc/spm.model", "enc/train_log.jsonl"]
    assert kept(q._logs) == ["enc/pretrain-run.json", "enc/train_log.jsonl"]
    assert [k for k, _ in q.RETURNS] == ["whole", "model", "logs"]


def test_the_returned_files_stay_within_the_bound_however_many_runs_bring_back_logs_alone(tmp_path):
    """Four runs, three files: the runs whose folder does not fit bring back their model (one file each) while a
    file stays free for the logs of those where nothing more fits, which share one archive (the H200 call of
    2026-11-28 returned five archives where three were allowed)."""
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location("gpu_queue", SCRIPT)
    q = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(q)
    runs, out = tmp_path / "runs", tmp_path / "out"
    out.mkdir()
    for name in "abcd":
        for rel, size in (("checkpoint/model.safetensors", 1_500_000), ("model/model.safetensors", 600_000),
                          ("train_log.jsonl", 100)):
            (runs / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (runs / name / rel).write_bytes(os.urandom(size))  # incompressible: the archive keeps its size
        (runs / f"{name}.log").write_text(f"{name} stopped\n")
    packed = q.pack_runs(runs, out, list("abcd"), part_bytes=2**20, return_bytes=2**30, return_files=3)
    assert {n: k for n, (k, _) in packed.items()} == {"a": "model", "b": "model", "c": "logs", "d": "logs"}
    assert sorted(p.name for p in out.iterdir()) == ["a.tar.gz", "b.tar.gz", q.LOGS_ARCHIVE]
    with tarfile.open(out / q.LOGS_ARCHIVE) as tar:
        assert sorted(tar.getnames()) == ["c", "c.log", "c/train_log.jsonl", "d", "d.log", "d/train_log.jsonl"]
    # queue order first: a fourth file lets the first run come back whole (three parts), the rest their logs;
    # one run alone needs no file kept free
    out2, out3 = tmp_path / "out2", tmp_path / "out3"
    out2.mkdir(), out3.mkdir()
    packed = q.pack_runs(runs, out2, list("abcd"), part_bytes=2**20, return_bytes=2**30, return_files=4)
    assert [k for k, _ in packed.values()] == ["whole", "logs", "logs", "logs"] and len(list(out2.iterdir())) == 4
    packed = q.pack_runs(runs, out3, ["a"], part_bytes=2**20, return_bytes=2**30, return_files=3)
    assert packed["a"][0] == "whole" and len(packed["a"][1]) == 3 == len(list(out3.iterdir()))


def test_a_run_with_a_carried_folder_starts_from_a_copy_of_it(tmp_path):
    """``--carried DIR``: the queued runs with a folder of their name there start from a copy (the GraphMerge runs'
    graphs built on the CPU); the others start empty, and the carried folder is left as it was."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_queue", SCRIPT)
    q = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(q)
    (tmp_path / "carried" / "graphmerge-s1").mkdir(parents=True)
    (tmp_path / "carried" / "graphmerge-s1" / "graph.json").write_text('{"key": 1}')
    (tmp_path / "runs").mkdir()
    assert q.seed_runs(tmp_path / "carried", tmp_path / "runs", ["baseline-s1", "graphmerge-s1"]) == ["graphmerge-s1"]
    assert (tmp_path / "runs" / "graphmerge-s1" / "graph.json").read_text() == '{"key": 1}'
    assert not (tmp_path / "runs" / "baseline-s1").exists()
    assert (tmp_path / "carried" / "graphmerge-s1" / "graph.json").is_file()
    assert q.seed_runs(tmp_path / "nothing", tmp_path / "runs2", ["graphmerge-s1"]) == []
