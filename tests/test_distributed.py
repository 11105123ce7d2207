"""A sweep across machines (``sweep.distributed``), ranks standing in for nodes on one machine: each rank a process
with the launcher's environment (RANK, WORLD_SIZE, MASTER_ADDR) and its own scratch folder as its node-local disk,
the run folder shared. The summary of 3 ranks equals one process's; a rank killed mid-unit, a shard line cut
mid-write, rank 0 killed, and a rank with another config."""

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from .conftest import FLORES, REPO, free_port, same

KILL_AFTER_FIRST_UNIT = """
import forgetbench.sweep.run as R
_run = R._Worker.run
def run(self, unit):
    out = _run(self, unit)  # the unit's rows are in this rank's own store, not yet in its shard
    os.kill(os.getpid(), signal.SIGKILL)
R._Worker.run = run
"""
CUT_FIRST_SHARD_LINE = """
import forgetbench.eval.store_shards as S
def append(self, record):
    record = dict(record, sha256=None)
    record["sha256"] = S._digest(record)
    data = (json.dumps(record) + "\\n").encode()
    os.write(self.fd, data[: len(data) // 2])  # half a line reaches the shard, then the machine dies
    os.fsync(self.fd)
    os.kill(os.getpid(), signal.SIGKILL)
S.ShardWriter.append = append
"""


def _config(path, model, sentences=4):
    path.write_text(textwrap.dedent(f"""\
        name: dist
        model: {model}
        variants: {{base: null, p30: prune-30}}
        benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]
        pairs: [en-de, de-en, en-fr, fr-en]
        sentences: {sentences}
        generation: {{max_new_tokens: 8, batch_size: 2}}
        analysis: {{bleu_filter: 0, resamples: 50}}
        """))
    return path


def launch(tmp_path, configs, out, patches=None, lost_after=3):
    """One process per config, as a launcher starts ranks; returns [(exit code, stderr lines)] by rank."""
    port, procs = free_port(), []
    for r, cfg in enumerate(configs):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(len(configs)), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", FORGETBENCH_STORE_PORT=str(port), PYTHONPATH=str(REPO),
                   FORGETBENCH_SCRATCH=str(tmp_path / f"scratch{r}"), FORGETBENCH_LOST_AFTER_S=str(lost_after),
                   HF_HUB_OFFLINE="1")
        (tmp_path / f"scratch{r}").mkdir(exist_ok=True)
        code = (f"import json, os, signal, sys\n{(patches or {}).get(r, '')}\nfrom forgetbench.cli import main\n"
                f"sys.exit(main(['sweep', {str(cfg)!r}, '--out', {str(out)!r}, '--quiet']))")
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, cwd=REPO, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    res = []
    for p in procs:
        _, err = p.communicate(timeout=600)
        res.append((p.returncode, [ln for ln in err.splitlines() if ln.strip()]))
    return res


def _summary(run):
    S = json.loads((run / "report" / "summary.json").read_text())
    return S, {k: v for k, v in S.items() if k != "run"}


def _rows(run):
    db = sqlite3.connect(str(run / "store.sqlite"))
    try:
        n = db.execute("SELECT count(*) FROM translations").fetchone()[0]
        distinct = db.execute("SELECT count(DISTINCT variant || benchmark || src || tgt || idx) FROM translations").fetchone()[0]
        return n, distinct
    finally:
        db.close()


@pytest.fixture(scope="module")
def one_process(tiny_dir, tmp_path_factory):
    from forgetbench.cli import main

    w = tmp_path_factory.mktemp("one")
    cfg = _config(w / "s.yaml", tiny_dir)
    assert main(["sweep", str(cfg), "--out", str(w / "run"), "--quiet"]) == 0
    return cfg, _summary(w / "run")[1]


def test_three_ranks_give_one_processs_summary(one_process, tmp_path):
    cfg, want = one_process
    res = launch(tmp_path, [cfg] * 3, tmp_path / "run")
    assert [c for c, _ in res] == [0, 0, 0], res
    S, got = _summary(tmp_path / "run")
    same(got, want)
    assert _rows(tmp_path / "run") == (2 * 4 * 4, 2 * 4 * 4)  # 2 series x 4 pairs x 4 sentences, none twice
    run = S["run"]
    assert run["processes"] == 3 and run["machines"] == [socket.gethostname()] and run["shards"]["damaged"] == 0
    assert set(run["unit_seconds"]) <= {"rank0", "rank1", "rank2"} and sum(
        r["units"] for r in run["unit_seconds"].values()) == run["shards"]["records"]
    assert not (tmp_path / "run" / "shards").exists() or not list((tmp_path / "run" / "shards").iterdir())
    assert not any(list((tmp_path / f"scratch{r}").iterdir()) for r in range(3))  # scratch copies removed


@pytest.mark.parametrize("fault", ["killed-mid-unit", "shard-line-cut"])
def test_a_lost_ranks_units_are_finished_by_the_others(one_process, tmp_path, fault):
    cfg, want = one_process
    patch = KILL_AFTER_FIRST_UNIT if fault == "killed-mid-unit" else CUT_FIRST_SHARD_LINE
    res = launch(tmp_path, [cfg] * 3, tmp_path / "run", patches={2: patch})
    assert res[2][0] == -9 and [c for c, _ in res[:2]] == [0, 0], res
    S, got = _summary(tmp_path / "run")
    same(got, want)
    assert _rows(tmp_path / "run") == (32, 32)
    assert S["run"]["shards"]["damaged"] == (1 if fault == "shard-line-cut" else 0)


def test_rank_0_killed_then_a_rerun_completes(one_process, tmp_path):
    cfg, want = one_process
    res = launch(tmp_path, [cfg] * 3, tmp_path / "run", patches={0: KILL_AFTER_FIRST_UNIT})
    assert res[0][0] == -9
    for code, err in res[1:]:  # the others end in one line naming the lost store, or had finished already
        assert code == 0 or (code != 0 and len(err) == 1 and "lost the claim store on rank 0" in err[0]), (code, err)
    res = launch(tmp_path, [cfg] * 3, tmp_path / "run")
    assert [c for c, _ in res] == [0, 0, 0], res
    same(_summary(tmp_path / "run")[1], want)
    assert _rows(tmp_path / "run") == (32, 32)


def test_a_rank_with_another_config_ends_every_rank_in_one_line(one_process, tmp_path):
    cfg, _ = one_process
    other = tmp_path / "other.yaml"
    other.write_text(cfg.read_text().replace("sentences: 4", "sentences: 3"))
    res = launch(tmp_path, [cfg, other, cfg], tmp_path / "run")
    assert [c for c, _ in res] == [2, 2, 2], res
    assert all(len(err) == 1 and "rank 1 on" in err[0] and "differs from rank 0 in config" in err[0]
               for _, err in res), res
    assert not (tmp_path / "run").exists()


def test_shards_skip_a_cut_line_and_merge_idempotently(tmp_path):
    from forgetbench.eval.store import Store
    from forgetbench.eval.store_shards import ShardWriter, merge_shards, read_shard

    w = ShardWriter(tmp_path / "shards" / "a-rank1.jsonl")
    row = ["base", "flores101", "en", "de", 0, "Hallo", 12.5, 0.1]
    w.append({"unit": "pairs:base:0", "rank": 1, "host": "h", "seconds": 1.0, "rows": {"translations": [row]}})
    w.append({"unit": "pairs:base:1", "rank": 1, "host": "h", "seconds": 1.0,
              "rows": {"translations": [[*row[:4], 1, "Welt", 3.0, 0.1]], "meta": [["k", {"v": 1}]]}})
    w.close()
    path = tmp_path / "shards" / "a-rank1.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 20])  # the second line cut mid-write
    recs, offset, damaged = read_shard(path)
    assert [r["unit"] for r in recs] == ["pairs:base:0"] and damaged == 1 and offset == whole.index(b"\n") + 1
    tampered = whole.replace(b"Hallo", b"Hallx")
    path.write_bytes(tampered)
    assert read_shard(path)[0] == [] and read_shard(path)[2] == 1  # a changed line fails its hash
    path.write_bytes(whole)
    store = Store(tmp_path / "store.sqlite")
    m = merge_shards(tmp_path, store)
    assert m["records"] == 2 and m["ranks"]["rank1"]["units"] == 2 and not path.exists()
    path.write_bytes(whole)  # merged again (a merge cut short and redone): the same store
    merge_shards(tmp_path, store)
    assert store.db.execute("SELECT count(*) FROM translations").fetchone()[0] == 2 and store.meta("k") == {"v": 1}
    store.close()


HEARTBEAT_IN_A_STORE_CALL_AT_EXIT = """
import datetime, os, sys, time
import forgetbench.sweep.distributed as D
D.HEARTBEAT_S = 0.05
c = D.Cluster(0, 1, dict(os.environ, MASTER_ADDR="127.0.0.1", FORGETBENCH_STORE_PORT=sys.argv[1]))
kv = c._hb_kv
class InStoreCall:  # the heartbeat's store call (C++, lock released) returns while the interpreter finalises
    def add(self, key, n):
        try:
            kv.wait(["never"], datetime.timedelta(seconds=1))
        except Exception:
            pass
c._hb_kv = InStoreCall()
class SlowFinalisation:
    def __del__(self, sleep=time.sleep):
        sleep(3)
slow = SlowFinalisation()
time.sleep(0.2)
if sys.argv[2] == "close":
    c.close()
else:
    sys.exit(1)  # an error's way out, close never called: the atexit hook joins the thread
"""


@pytest.mark.parametrize("way_out", ["close", "error"])
def test_the_heartbeat_thread_never_outlives_the_interpreter(tmp_path, way_out):
    """Rule 4: a heartbeat still inside a store call at exit aborted the process (exit -6, "terminate called
    without an active exception"); the thread is joined first, whichever way the process ends."""
    script = tmp_path / "hb.py"
    script.write_text(HEARTBEAT_IN_A_STORE_CALL_AT_EXIT)
    p = subprocess.run([sys.executable, str(script), str(free_port()), way_out], cwd=REPO, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert p.returncode == (0 if way_out == "close" else 1), (p.returncode, p.stderr[-500:])
    assert "terminate called" not in p.stderr
