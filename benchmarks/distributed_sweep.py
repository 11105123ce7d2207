"""A sweep on 1, 2 and 3 local ranks (``sweep.distributed``, loopback, one scratch folder per rank), side by side in
one run, and the claim protocol's cost per unit.

    python -m benchmarks.distributed_sweep [--ranks 1 2 3] [--rounds 3] [--sentences 8] [--claims 200]

The sweep: a tiny random M2M-100 (``make-tiny``, d_model 64, 2 + 2 layers), variants base and prune-30, eight
English-centric FLORES-101 pairs, ``--sentences`` each, greedy, 1 thread per rank. A round runs each rank count
once into a new run folder, the order rotating every round. Units/s = the sweep's units of work (compress,
translate, λ) / the wall time of the whole launch (start-up, identity check, merge, closing passes and summary
included); the ratio to 1 rank is per round, with a 95 % bootstrap interval over the rounds. Claim overhead: the
seconds of ``claim`` + ``finish`` (``compare_set``, shard line with fsync, ``set``) per unit on a TCPStore with
3 ranks' keys, against the single-machine SQLite claim (``Store.claim`` + ``finish``). Printed as JSON with the
environment. More ranks than cores measure contention, not scaling: read the CPU count beside the numbers.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import environment

REPO = Path(__file__).resolve().parents[1]
PAIRS = "[en-de, de-en, en-fr, fr-en, en-sw, sw-en, en-hi, hi-en]"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cfg: Path, out: Path, world: int, scratch: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    t0 = time.perf_counter()
    if world == 1:
        subprocess.run([sys.executable, "-m", "forgetbench.cli", "sweep", str(cfg), "--out", str(out), "--quiet"],
                       env=env, check=True, capture_output=True)
        return time.perf_counter() - t0
    port, procs = free_port(), []
    for r in range(world):
        (scratch / f"r{r}").mkdir(parents=True, exist_ok=True)
        e = env | {"RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                   "MASTER_ADDR": "127.0.0.1", "FORGETBENCH_STORE_PORT": str(port),
                   "FORGETBENCH_SCRATCH": str(scratch / f"r{r}")}
        procs.append(subprocess.Popen([sys.executable, "-m", "forgetbench.cli", "sweep", str(cfg), "--out", str(out),
                                       "--quiet"], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            raise SystemExit(f"rank failed: {err.decode()[-500:]}")
    return time.perf_counter() - t0


def time_claims(store, keys: list[str]) -> float:
    """Seconds per unit of ``claim`` + ``finish`` over ``keys``."""
    t0 = time.perf_counter()
    for k in keys:
        store.claim(k, 0)
        store.finish(k, 0.0)
    return (time.perf_counter() - t0) / len(keys)


def claim_overhead(n: int, tmp: Path) -> dict:
    from forgetbench.eval.store import Store
    from forgetbench.sweep.distributed import Cluster, DistributedStore

    keys = [f"pairs:base:{i}" for i in range(n)]
    env = {"MASTER_ADDR": "127.0.0.1", "FORGETBENCH_STORE_PORT": str(free_port())}
    cluster = Cluster(0, 3, env)
    for k in keys:
        cluster.set(f"u:{k}", "free")
    Store(tmp / "s.sqlite").close()
    store = DistributedStore(tmp / "s.sqlite", cluster, tmp / "run", "bench", keys)
    kv = time_claims(store, keys)
    store.close()
    cluster.close()
    local = Store(tmp / "local.sqlite")
    sq = time_claims(local, keys)
    local.close()
    return {"units": n, "tcpstore_and_shard_ms_per_unit": round(kv * 1000, 2),
            "sqlite_ms_per_unit": round(sq * 1000, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=8)
    ap.add_argument("--claims", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        subprocess.run([sys.executable, "-m", "forgetbench.cli", "make-tiny", str(REPO / "data/calibration/ntrex128-calib.tsv"),
                        "--out", str(tmp / "m"), "--vocab", "1200"], check=True, capture_output=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
        cfg = tmp / "s.yaml"
        cfg.write_text(f"name: bench\nmodel: {tmp / 'm'}\nvariants: {{base: null, p30: prune-30}}\n"
                       f"benchmarks: [{{name: flores101, kind: flores101, path: {REPO / 'data/flores101'}}}]\n"
                       f"pairs: {PAIRS}\nsentences: {a.sentences}\n"
                       "generation: {max_new_tokens: 32, batch_size: 4}\nanalysis: {bleu_filter: 0, resamples: 50}\n")
        from forgetbench.sweep import load_sweep
        from forgetbench.sweep.schedule import units as unit_list

        units = len(unit_list(load_sweep(cfg)))
        seconds: dict[int, list[float]] = {w: [] for w in a.ranks}
        for r in range(a.rounds):
            order = a.ranks[r % len(a.ranks):] + a.ranks[:r % len(a.ranks)]
            for w in order:
                seconds[w].append(launch(cfg, tmp / f"run-{r}-{w}", w, tmp / f"scratch-{r}-{w}"))
        rng = np.random.default_rng(0)
        out = {"units": units, "rounds": a.rounds, "sentences_per_pair": a.sentences, "ranks": {}}
        base = np.array(seconds[a.ranks[0]])
        for w in a.ranks:
            ratios = base / np.array(seconds[w])
            boot = [float(np.median(rng.choice(ratios, len(ratios)))) for _ in range(2000)]
            out["ranks"][w] = {"seconds": round(statistics.median(seconds[w]), 2),
                               "units_per_s": round(units / statistics.median(seconds[w]), 3),
                               f"speedup_vs_{a.ranks[0]}": round(float(np.median(ratios)), 3),
                               "ci95": [round(float(np.percentile(boot, 2.5)), 3),
                                        round(float(np.percentile(boot, 97.5)), 3)]}
        out["claim_overhead"] = claim_overhead(a.claims, tmp)
    out["environment"] = environment()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
