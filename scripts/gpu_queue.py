"""The trainings a lent GPU runs side by side in the time it has left, each resumable afterwards.

    python scripts/gpu_queue.py --out DIR --budget-s S [--queue configs/gpu-queue.yaml] [--only NAME,…] [--device cpu]

At the teacher's size a training step is bound by the host's Python, not the GPU (45 % busy with four runs on one
H100, docs/BENCHMARKS.md), so the queue starts every run at once. Each run is a forgetbench training command
(``train-mt``, ``distill``, ``pretrain-encoder``) given ``--stop-after``: at the budget's wall deadline it writes a
checkpoint and stops (``resources`` rule 6); a run still going ``--grace-s`` later is killed (its last periodic
checkpoint stands). Then every run folder and its log are packed into ``DIR/NAME.tar.gz``, cut into ``.partNN`` files of
``--part-mib``. A GPU call returns 8 files of 16 MiB, 64 MiB in all, so what OUT holds is bounded
(``--return-mib``, ``--return-files``): the runs in queue order bring back their whole folder where it fits, else
their exported model and logs, else their logs alone (one archive, ``queue-logs.tar.gz``, holds every such run's
logs), and the report says which (an encoder's folder at d 128 is
≈ 80 MB with its optimizer state: one per call comes back whole). ``DIR/gpu_queue.json`` says, per run, its exit,
what stopped it, the step reached, what came back and the command that resumes it — the same command with the same
``--out``, on the CPU or on the next GPU:

    cat DIR/NAME.tar.gz* | tar -xz -C RUNS && forgetbench COMMAND CONFIG --out RUNS/NAME ARGS

The queue is a list in the repository (``configs/gpu-queue.yaml``): a run's name, command, config (relative to the
repository) and extra arguments. ``--device`` (default cuda) is given to the commands that take it (``distill``);
``train-mt`` and ``pretrain-encoder`` choose CUDA themselves where torch sees a GPU (``train.device: auto``). A run
with a folder of its name under ``--carried`` (``build/gpu-data/runs``: ``gpu_call.sh prepare`` puts there the
GraphMerge runs' graphs built here) starts from a copy of it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("train-mt", "distill", "pretrain-encoder")
DEVICE_FLAG = {"distill"}


def load_queue(path: Path) -> list[dict]:
    """The queue's runs, checked: one line naming the run and what is wrong."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise SystemExit(f"gpu_queue: {path}: 'runs' must be a non-empty list of {{name, command, config, args}}")
    seen = set()
    for i, r in enumerate(runs, 1):
        where = f"gpu_queue: {path}: run {i}"
        if not isinstance(r, dict) or set(r) - {"name", "command", "config", "args"}:
            raise SystemExit(f"{where}: a mapping of name, command, config and args (a list) only")
        if r.get("command") not in COMMANDS:
            raise SystemExit(f"{where}: command {r.get('command')!r}; choose one of {', '.join(COMMANDS)}")
        if not r.get("name") or r["name"] in seen or "/" in str(r["name"]):
            raise SystemExit(f"{where}: a name, unique in the queue, without '/'")
        seen.add(r["name"])
        cfg = Path(str(r.get("config", "")))
        cfg = cfg if cfg.is_absolute() else REPO / cfg
        if not cfg.is_file():
            raise SystemExit(f"{where} ({r['name']}): config {cfg} not found")
        r["config"] = str(cfg)
        r["args"] = [str(a) for a in r.get("args", [])]
    return runs


def _model_and_logs(t: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """The exported model, the run's records and its vocabulary: no checkpoint, best or snapshot copies, no data."""
    parts = Path(t.name).parts[1:]
    if parts and parts[0] in ("checkpoint", "best", "snapshots"):
        return None
    return None if t.isfile() and t.name.endswith((".npz", ".npy", ".bin", ".pt")) and parts[0] != "model" else t


def _logs(t: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """The run's records alone (training and run JSON, the step log)."""
    top = len(Path(t.name).parts)
    return t if (t.isdir() and top == 1) or (t.name.endswith((".json", ".jsonl", ".log")) and top == 2) else None


# what a run brings back, the most first: the first that fits OUT's return budget is kept (the logs always are,
# in LOGS_ARCHIVE with every other run's that brings back its logs alone)
RETURNS = [("whole", None), ("model", _model_and_logs), ("logs", _logs)]
LOGS_ARCHIVE = "queue-logs.tar.gz"
RETURN_SAYS = {"whole": "the whole run folder: resumable with the command below",
               "model": "the exported model and the logs; the checkpoint did not fit the return budget: not resumable "
                        "from the step reached (warm-start from the model, or give this run the call alone with --only)",
               "logs": "the logs alone; neither the checkpoint nor the model fitted the return budget (give this run "
                       "the call alone with --only)"}


def seed_runs(carried: Path, runs: Path, names: list[str]) -> list[str]:
    """Each queued run with a folder of its name under ``carried`` (what a call carries: files a run made here, such
    as the GraphMerge runs' graph, built on the CPU in 0.7 h, with the run marker) starts from a copy of it; returns
    the names seeded. The run takes what it can use (a graph whose key matches) and makes the rest."""
    seeded = []
    for name in names:
        if (carried / name).is_dir():
            shutil.copytree(carried / name, runs / name)
            seeded.append(name)
    return seeded


def last_record(run: Path) -> dict:
    """What the run folder says about itself: the exported model's training.json, else the checkpoint's state."""
    for f in (run / "model" / "training.json", run / "checkpoint" / "state.json"):
        if f.is_file():
            d = json.loads(f.read_text())
            return {"steps": d.get("steps", d.get("step")), "stopped_by": d.get("stopped_by")}
    return {"steps": None, "stopped_by": None}


def pack_runs(runs: Path, out: Path, names: list[str], part_bytes: int, return_bytes: int,
              return_files: int) -> dict[str, tuple[str, list[str]]]:
    """Pack each run folder ``runs/NAME`` and its log ``runs/NAME.log`` into ``out``, in ``names``' order, the most
    that fits: the whole folder, else its model and logs (``RETURNS``), within ``return_bytes`` and ``return_files``
    (an archive over ``part_bytes`` is cut into parts, each a file); a run where neither fits brings back its logs in
    ``LOGS_ARCHIVE``, one file shared by every such run and kept free while a later run may need it. Returns, per
    run, what came back (a ``RETURNS`` kind) and its files in ``out``."""
    returned = {"bytes": 0, "files": 0}
    logs_only: list[str] = []
    packed: dict[str, tuple[str, list[str]]] = {}
    for i, name in enumerate(names):
        folder, logfile = runs / name, runs / f"{name}.log"
        reserve = 0 if logs_only or i == len(names) - 1 else 1
        for kind, keep in RETURNS[:-1]:
            archive = out / f"{name}.tar.gz"
            with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
                if folder.exists():
                    tar.add(folder, arcname=name, filter=keep)
                if logfile.exists():
                    tar.add(logfile, arcname=f"{name}.log")
            size, files = archive.stat().st_size, -(-archive.stat().st_size // part_bytes)
            if returned["bytes"] + size <= return_bytes and returned["files"] + files + reserve <= return_files:
                returned["bytes"] += size
                returned["files"] += files
                packed[name] = (kind, split(archive, part_bytes))
                break
            archive.unlink()
        else:
            returned["files"] += not logs_only  # the shared archive: the file kept free for it
            logs_only.append(name)
            packed[name] = ("logs", [LOGS_ARCHIVE])
    if logs_only:
        with tarfile.open(out / LOGS_ARCHIVE, "w:gz") as tar:
            for name in logs_only:
                if (runs / name).exists():
                    tar.add(runs / name, arcname=name, filter=_logs)
                if (runs / f"{name}.log").exists():
                    tar.add(runs / f"{name}.log", arcname=f"{name}.log")
    return packed


def split(archive: Path, part_bytes: int) -> list[str]:
    """``archive`` as it is, or cut into ``NAME.partNN`` files of at most ``part_bytes`` (a GPU call returns files of
    16 MiB at most); ``cat NAME.part* > NAME`` joins them."""
    if archive.stat().st_size <= part_bytes:
        return [archive.name]
    names = []
    with open(archive, "rb") as f:
        while chunk := f.read(part_bytes):
            part = archive.with_name(f"{archive.name}.part{len(names):02d}")
            part.write_bytes(chunk)
            names.append(part.name)
    archive.unlink()
    return names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="a new folder: the run folders' archives and gpu_queue.json")
    ap.add_argument("--budget-s", type=float, required=True, help="wall seconds the queue may use, archiving included")
    ap.add_argument("--queue", default=str(REPO / "configs" / "gpu-queue.yaml"), help="the queue (default: the shipped)")
    ap.add_argument("--only", help="comma-separated run names (default: all)")
    ap.add_argument("--carried", default=str(REPO / "build" / "gpu-data" / "runs"),
                    help="a folder of run folders (by run name) the runs start from (default: what gpu_call carries)")
    ap.add_argument("--device", default="cuda", help="given to the commands that take --device (default cuda)")
    ap.add_argument("--grace-s", type=float, default=30, help="after the deadline, seconds a run has to checkpoint "
                                                              "before it is killed (default 30)")
    ap.add_argument("--archive-s", type=float, default=20, help="seconds kept for packing the run folders (default 20)")
    ap.add_argument("--part-mib", type=float, default=16, help="largest file written; a bigger archive is cut into parts "
                                                                "(default 16: what a GPU call returns per file)")
    ap.add_argument("--return-mib", type=float, default=56, help="the most OUT may hold in all (default 56: a GPU call "
                    "returns 64 MiB, less room for gpu_check's report); a run that does not fit whole comes back as its "
                    "exported model and logs, or its logs alone, and the report says so")
    ap.add_argument("--return-files", type=int, default=5, help="the most files OUT may hold besides gpu_queue.json "
                    "(default 5: a GPU call returns 8 files, gpu_check's report takes 2)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.exists():
        print(f"gpu_queue: {out} exists; give a new folder", file=sys.stderr)
        return 2
    runs = load_queue(Path(a.queue))
    if a.only:
        unknown = set(a.only.split(",")) - {r["name"] for r in runs}
        if unknown:
            print(f"gpu_queue: --only {sorted(unknown)}: not in {a.queue}", file=sys.stderr)
            return 2
        runs = [r for r in runs if r["name"] in a.only.split(",")]
    start = time.time()
    train_s = a.budget_s - a.grace_s - a.archive_s
    if train_s < 0:
        print(f"gpu_queue: --budget-s {a.budget_s} leaves no time to train after --grace-s and --archive-s",
              file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    (out / "runs").mkdir()
    seeded = seed_runs(Path(a.carried), out / "runs", [r["name"] for r in runs])
    env = dict(os.environ) | {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = {}
    for r in runs:
        cmd = [sys.executable, "-m", "forgetbench.cli", r["command"], r["config"], "--out", str(out / "runs" / r["name"]),
               "--stop-after", f"{train_s / 60:.4f}", "--quiet", *r["args"]]
        if r["command"] in DEVICE_FLAG and "--device" not in r["args"]:
            cmd += ["--device", a.device]
        log = open(out / "runs" / f"{r['name']}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed below
        procs[r["name"]] = (subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT), log, cmd)
    hard_stop = start + train_s + a.grace_s
    for _name, (p, _log, _) in procs.items():
        try:
            p.wait(timeout=max(0.0, hard_stop - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    report = {"budget_s": a.budget_s, "deadline_after_s": round(train_s, 1), "device": a.device, "seeded": seeded,
              "runs": {}}
    for _p, log, _cmd in procs.values():
        log.close()
    packed = pack_runs(out / "runs", out, list(procs), int(a.part_mib * 2**20), int(a.return_mib * 2**20),
                       a.return_files)
    for name, (p, _log, _cmd) in procs.items():
        folder = out / "runs" / name
        rec = {"exit": p.returncode, "killed": p.returncode == -9} | last_record(folder)
        logfile = out / "runs" / f"{name}.log"
        kind, rec["archive"] = packed[name]
        rec["returned"] = RETURN_SAYS[kind]
        tail = [ln for ln in logfile.read_text(errors="replace").splitlines() if ln.strip()]
        rec["last_line"] = tail[-1] if tail else ""
        r = next(x for x in runs if x["name"] == name)
        rec["resume"] = " ".join(["forgetbench", r["command"], str(Path(r["config"]).relative_to(REPO))
                                  if Path(r["config"]).is_relative_to(REPO) else r["config"], "--out", f"RUNS/{name}",
                                  *r["args"]])
        report["runs"][name] = rec
    shutil.rmtree(out / "runs", ignore_errors=True)  # each run is in an archive: OUT holds their files alone
    report["used_s"] = round(time.time() - start, 1)
    (out / "gpu_queue.json").write_text(json.dumps(report, indent=1))
    files = sorted(f for f in out.iterdir() if f.is_file())
    report["files"], report["bytes"] = len(files), sum(f.stat().st_size for f in files)
    (out / "gpu_queue.json").write_text(json.dumps(report, indent=1))
    for name, rec in report["runs"].items():
        print(f"gpu_queue: {name}: exit {rec['exit']}, step {rec['steps']}, stopped by {rec['stopped_by']}; "
              f"returned: {rec['returned'].split(':')[0].split(';')[0]}; resume: {rec['resume']}")
    return 0 if all(r["exit"] == 0 for r in report["runs"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
