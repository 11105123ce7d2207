"""A sweep across machines: ranks from the launcher, units claimed on torch.distributed's key-value store, each
rank's rows in its own shard (``eval.store_shards``), nothing written twice to one file.

Launch: ``torchrun``, ``accelerate launch --num_machines N …`` or ``srun`` (one process per GPU or per node):
``RANK`` / ``WORLD_SIZE`` (or SLURM's ``SLURM_PROCID`` / ``SLURM_NTASKS``) and ``MASTER_ADDR``. The claim store
is a ``torch.distributed.TCPStore`` hosted by rank 0 on ``MASTER_ADDR``, port ``FORGETBENCH_STORE_PORT`` (default
``MASTER_PORT`` + 1: the launcher's own store keeps ``MASTER_PORT``). No process group is made: no collective can
hang on a dead rank.

Rules:

1. **Identity.** Rank 0 publishes the run's identity (``identity``: SHA-256 of the resolved config, the model's
   ``config.json`` and weight files by name and size, every benchmark file of the run, the forgetbench and torch
   versions); every rank compares its own before anything is written. A rank that differs names what differs
   (``abort``); every rank then ends with that line, exit 2, and nothing is written anywhere.
2. **Start.** Rank 0 merges the shards an earlier attempt left (``merge_shards``), prepares the run
   (``run.prepare_run``), closes the store and publishes a new attempt id (``ready``). Each rank copies the run's
   ``store.sqlite`` to its scratch folder (node-local: ``FORGETBENCH_SCRATCH``, else the system's temporary
   folder) and works on that copy (``RecordingStore``).
3. **Claims.** Every unit has a key ``u:<unit>`` = ``free`` | ``c:<rank>`` | ``d:<rank>``. A rank claims with
   ``compare_set(free → c:rank)``: exactly one wins. A unit is finished by appending its shard line (fsynced),
   then setting ``d:rank``. Before doing a unit, a rank imports the other ranks' new shard lines into its store
   (``sync``), so a unit that needs another's rows (λ on the base's translations) has them.
4. **Heartbeats.** Each rank adds 1 to ``hb:<rank>`` every ``HEARTBEAT_S`` from a thread. A rank whose count has
   not moved for ``lost_after`` seconds (``FORGETBENCH_LOST_AFTER_S``, default 60) is lost: its claimed units
   count as free and are claimed with ``compare_set(c:lost → c:rank)``. A rank that has ended sets ``x:<rank>``
   and is never counted lost. The heartbeat thread is joined before the process ends (``Cluster.close``, also
   registered with ``atexit`` for every other way out): a thread still inside a store call while the interpreter
   finalises is ended by ``pthread_exit`` through the binding's C++ frames, which aborts the process
   (``terminate called without an active exception``, exit -6). Its connection's calls time out after
   ``HEARTBEAT_TIMEOUT_S``, so the join is bounded when rank 0's machine vanishes.
5. **End.** A rank leaves once every unit is done (or lost ranks' units are all taken and done). Rank 0 then
   merges every shard into the run's store and runs the closing passes and the summary as a single process
   would. The run record lists each rank's host, units and seconds per kind (``ranks``). If rank 0 (the store's
   host) is lost, the others end with one line; the shards keep every finished unit and a rerun of the same
   command resumes from them.
"""

from __future__ import annotations

import atexit
import datetime
import hashlib
import json
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path

from forgetbench.errors import ForgetbenchError
from forgetbench.eval.store_shards import (
    SHARDS,
    RecordingStore,
    ShardWriter,
    import_records,
    merge_shards,
    read_shard,
)

HEARTBEAT_S = 1.0
LOST_AFTER_S = 60.0
POLL_S = 0.2
HEARTBEAT_TIMEOUT_S = 10.0  # one heartbeat call at most; bounds the join in ``Cluster.close``
START_TIMEOUT_S = 600.0  # how long rank 0 waits for every rank to show up


def launched(env=os.environ) -> bool:
    """A launcher's several ranks (torchrun, accelerate launch, srun)."""
    return int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1"))) > 1 and (
        "RANK" in env or "SLURM_PROCID" in env)


def rank_world(env=os.environ) -> tuple[int, int]:
    if "RANK" in env:
        return int(env["RANK"]), int(env["WORLD_SIZE"])
    return int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"])


def _lost_error(what: str) -> ForgetbenchError:
    return ForgetbenchError(f"{what}; every finished unit is kept in the run folder's shards: rerun the same command "
                            "to resume")


class Cluster:
    """This rank's view of the claim store (rules 3-4)."""

    def __init__(self, rank: int, world: int, env=os.environ):
        from torch.distributed import TCPStore

        self.rank, self.world, self.host = rank, world, socket.gethostname()
        addr = env.get("MASTER_ADDR", "127.0.0.1")
        port = int(env.get("FORGETBENCH_STORE_PORT") or int(env.get("MASTER_PORT", "29500")) + 1)
        self.lost_after = float(env.get("FORGETBENCH_LOST_AFTER_S") or LOST_AFTER_S)
        timeout = datetime.timedelta(seconds=START_TIMEOUT_S)
        try:
            self.kv = TCPStore(addr, port, world, rank == 0, timeout=timeout, wait_for_workers=False)
            self._hb_kv = TCPStore(addr, port, world, False, timeout=timeout)  # the heartbeat thread's connection
            self._hb_kv.set_timeout(datetime.timedelta(seconds=HEARTBEAT_TIMEOUT_S))
        except (RuntimeError, OSError) as e:
            raise ForgetbenchError(f"rank {rank}: cannot reach the claim store at {addr}:{port} ({str(e).splitlines()[0]}); "
                                   "check MASTER_ADDR and that the port (FORGETBENCH_STORE_PORT, default MASTER_PORT + 1) "
                                   "is free on rank 0's machine and reachable from this one") from None
        self._seen: dict[int, tuple[int, float]] = {}
        self._stop = threading.Event()
        self._hb = threading.Thread(target=self._beat, daemon=True, name="forgetbench-heartbeat")
        self._hb.start()
        atexit.register(self.close)

    # ---------------------------------------------------------------- liveness (rule 4)
    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._hb_kv.add(f"hb:{self.rank}", 1)
            except Exception:  # noqa: BLE001 - the store is gone: the main loop reports it
                return

    def lost(self) -> set[int]:
        """Ranks whose heartbeat has not moved for ``lost_after`` seconds (of this rank's clock) and that have not
        ended."""
        now, out = time.monotonic(), set()
        ranks = [r for r in range(self.world) if r != self.rank]
        beats = self._get_many([f"hb:{r}" for r in ranks], "0")
        ended = self._get_many([f"x:{r}" for r in ranks], "")
        for r, b, x in zip(ranks, beats, ended, strict=True):
            count = int(b)
            last = self._seen.get(r)
            if last is None or last[0] != count:
                self._seen[r] = (count, now)
            elif not x and now - last[1] > self.lost_after:
                out.add(r)
        return out

    def _get_many(self, keys: list[str], default: str, all_set: bool = False) -> list[str]:
        """The values of ``keys`` (``default`` for keys not set; ``all_set``: every key is known to be set)."""
        if all_set:
            return [v.decode() for v in self._call(self.kv.multi_get, keys)] if keys else []
        have = {k.decode() if isinstance(k, bytes) else k for k in self._call(self.kv.list_keys)}
        present = [k for k in keys if k in have]
        vals = dict(zip(present, self._call(self.kv.multi_get, present), strict=True)) if present else {}
        return [vals[k].decode() if k in vals else default for k in keys]

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - every failure of the store is rank 0 gone
            if self.rank == 0:
                raise
            raise _lost_error(f"rank {self.rank} on {self.host}: lost the claim store on rank 0 "
                              f"({type(e).__name__})") from None

    def set(self, key: str, value: str) -> None:
        self._call(self.kv.set, key, value)

    def get(self, key: str) -> str:
        return self._call(self.kv.get, key).decode()

    def wait(self, keys: list[str], what: str, timeout: float = START_TIMEOUT_S) -> None:
        """Wait for ``keys``; a set ``abort`` ends the wait with its line (rule 1)."""
        end = time.monotonic() + timeout
        while not self._call(self.kv.check, keys):
            if self._call(self.kv.check, ["abort"]):
                raise ForgetbenchError(self.get("abort"))
            if time.monotonic() > end:
                raise ForgetbenchError(f"rank {self.rank}: {what} did not happen within {timeout:.0f} s; check that "
                                       f"every rank of WORLD_SIZE {self.world} was started")
            time.sleep(POLL_S)

    def close(self) -> None:
        """Stop the heartbeat and wait for its thread (rule 4: never left inside a store call at exit)."""
        self._stop.set()
        self._hb.join(HEARTBEAT_TIMEOUT_S + HEARTBEAT_S)
        atexit.unregister(self.close)


def identity(cfg) -> dict:
    """Rule 1: what every rank must share."""
    import torch

    import forgetbench

    model = Path(str(cfg.model))
    files = {}
    if model.is_dir():
        for p in sorted(model.iterdir()):
            if p.name == "config.json":
                files[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
            elif p.suffix in (".safetensors", ".bin"):
                files[p.name] = p.stat().st_size
    data = hashlib.sha256()
    for job in cfg.jobs:
        data.update(f"{job.benchmark.name}:{job.src}-{job.tgt}:{job.benchmark.sha256(job.src, job.tgt)}".encode())
    return {"config": hashlib.sha256(json.dumps(cfg.raw, sort_keys=True, default=str).encode()).hexdigest(),
            "model": hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest(),
            "data": data.hexdigest(), "forgetbench": forgetbench.__version__, "torch": torch.__version__}


class DistributedStore(RecordingStore):
    """A rank's store (its scratch copy) whose claims live in the cluster's key-value store (rule 3) and whose
    finished units go to its shard."""

    def __init__(self, path: Path, cluster: Cluster, run_dir: Path, attempt: str, units: list[str]):
        super().__init__(path)
        self.cluster, self.run_dir, self.attempt, self.unit_keys = cluster, run_dir, attempt, units
        self.shard = ShardWriter(run_dir / SHARDS / f"{attempt}-rank{cluster.rank}.jsonl")
        self.offsets: dict[Path, int] = {}

    def sync(self) -> int:
        """Rule 3: the other ranks' new shard lines of this attempt into this store."""
        n = 0
        for path in sorted((self.run_dir / SHARDS).glob(f"{self.attempt}-rank*.jsonl")):
            if path == self.shard.path:
                continue
            records, self.offsets[path], _ = read_shard(path, self.offsets.get(path, 0))
            n += import_records(self, records)
        return n

    def reset_claims(self) -> None:  # a new attempt's keys are made by rank 0 (``start``)
        pass

    def claims(self) -> dict[str, tuple[int, bool]]:
        """unit -> (owner, done) of every claimed unit; claims of lost ranks are left out (free again)."""
        c = self.cluster
        values = c._get_many([f"u:{u}" for u in self.unit_keys], "free", all_set=True)
        out = {u: (int(v[2:]), v[0] == "d") for u, v in zip(self.unit_keys, values, strict=True) if v != "free"}
        if any(not d for _, d in out.values()):
            lost = c.lost()
            out = {u: (o, d) for u, (o, d) in out.items() if d or o not in lost}
        return out

    def claim(self, unit: str, owner: int) -> bool:
        c = self.cluster
        want = f"c:{owner}"
        now = c._call(c.kv.compare_set, f"u:{unit}", "free", want).decode()
        if now.startswith("c:") and now != want and int(now[2:]) in c.lost():
            now = c._call(c.kv.compare_set, f"u:{unit}", now, want).decode()
        if now == want:
            self.sync()  # imported rows are written directly: they never join this unit's pending rows
            return True
        return False

    def finish(self, unit: str, seconds: float | None = None) -> None:
        self.shard.append({"unit": unit, "rank": self.cluster.rank, "host": self.host, "seconds": seconds,
                           "rows": self.take()})
        self.cluster.set(f"u:{unit}", f"d:{self.cluster.rank}")

    def claim_seconds(self) -> dict[int, dict[str, float]]:
        return {}

    def close(self):
        self.shard.close()
        super().close()


def scratch_folder(env=os.environ) -> Path:
    return Path(env.get("FORGETBENCH_SCRATCH") or tempfile.gettempdir())


def start(cfg, run_dir: Path, rank: int, world: int, prepare, unit_keys: list[str], env=os.environ):
    """Rules 1-2: the cluster, identity checked, the run prepared once; returns ``(cluster, store)``."""
    from forgetbench.eval.store import Store

    cluster = Cluster(rank, world, env)
    mine = identity(cfg)
    try:
        if rank == 0:
            cluster.set("identity", json.dumps(mine, sort_keys=True))
            cluster.wait([f"ok:{r}" for r in range(1, world)], "every rank's identity check")
            run_dir.mkdir(parents=True, exist_ok=True)
            if (run_dir / "store.sqlite").is_file() and (run_dir / SHARDS).is_dir():
                store = Store(run_dir / "store.sqlite")
                try:
                    merge_shards(run_dir, store)  # an earlier attempt's finished units (rule 2)
                finally:
                    store.close()
            prepare()
            for u in unit_keys:
                cluster.set(f"u:{u}", "free")
            cluster.set("ready", uuid.uuid4().hex[:12])
        else:
            cluster.wait(["identity"], "rank 0's start")
            theirs = json.loads(cluster.get("identity"))
            differ = [k for k in mine if mine[k] != theirs.get(k)]
            if differ:
                line = (f"rank {rank} on {cluster.host} differs from rank 0 in {', '.join(differ)} "
                        f"({'; '.join(f'{k}: {mine[k]} vs {theirs.get(k)}' for k in differ if k in ('forgetbench', 'torch'))}"
                        "); every rank must run the same config on the same model, data and versions").replace(" ()", "")
                cluster.set("abort", line)
                raise ForgetbenchError(line)
            cluster.set(f"ok:{rank}", "1")
            cluster.wait(["ready"], "rank 0's preparation of the run")
        attempt = cluster.get("ready")
    except ForgetbenchError as e:
        try:
            if rank == 0 and not cluster._call(cluster.kv.check, ["abort"]):
                cluster.set("abort", str(e))
            cluster.set(f"x:{rank}", "1")
            if rank == 0:  # the store stays until every rank has read the line (or a while)
                _wait_for_ends(cluster, range(1, world), 10)
        except ForgetbenchError:
            pass  # rank 0 gone already: this rank's own line stands
        cluster.close()
        raise
    local = scratch_folder(env) / f"forgetbench-{attempt}-rank{rank}"
    local.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run_dir / "store.sqlite", local / "store.sqlite")
    return cluster, DistributedStore(local / "store.sqlite", cluster, run_dir, attempt, unit_keys)


def aborted(cluster: Cluster) -> bool:
    """Whether a rank has ended the run (rule 1's ``abort``)."""
    return bool(cluster._call(cluster.kv.check, ["abort"]))


def leave(store: DistributedStore) -> None:
    """This rank's units are over (rule 5): its shard and scratch copy closed, the copy removed, the end said."""
    folder = store.path.parent
    store.close()
    shutil.rmtree(folder, ignore_errors=True)
    store.cluster.set(f"x:{store.cluster.rank}", "1")


def release(cluster: Cluster) -> None:
    """Rank 0, last: waits a while for the other live ranks to have ended before its claim store goes."""
    if cluster.rank == 0:
        lost = cluster.lost()
        _wait_for_ends(cluster, [r for r in range(1, cluster.world) if r not in lost], 30)
    cluster.close()


def _wait_for_ends(cluster: Cluster, ranks, seconds: float) -> None:
    """Wait up to ``seconds`` for ``ranks`` to have said their end (``x:<rank>``)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and not cluster._call(cluster.kv.check, [f"x:{r}" for r in ranks]):
        time.sleep(POLL_S)
