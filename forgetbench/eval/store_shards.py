"""Store shards: what one process of a multi-machine run stores, in a file no other process writes.

SQLite's locking is not safe on network filesystems (NFS, Lustre), where a cluster's shared run folder lives.
So under a multi-machine launch (``sweep.distributed``) each process keeps its own store on its node-local
disk (``RecordingStore``, a copy of the run's store made at start) and appends, for every unit of work it
finishes, one line to its shard in the shared run folder (``shards/<attempt>-rank<R>.jsonl``). Rank 0 merges
the shards into the run's ``store.sqlite`` (``merge_shards``), as does ``forgetbench report``.

Rules:

1. A line is one finished unit: ``{"unit", "rank", "host", "seconds", "rows": {table: [row, …]}, "sha256"}``,
   tables ``translations``, ``sentence_stats``, ``variants``, ``meta`` (the store's own rows). ``sha256`` is the
   hash of the line's canonical JSON without it. The line is written with one ``write`` and ``fsync``ed before
   the unit is marked done anywhere else.
2. A line counts only when it ends with a newline and its hash matches (``read_shard``): a line cut short by a
   crash is skipped (counted as damaged), so its unit is not done and is translated again. Nothing after a
   damaged line is trusted in that file.
3. Importing is idempotent (``import_records``): translations ``INSERT OR IGNORE`` (their primary key), statistics,
   variants and metadata ``INSERT OR REPLACE`` (the same values whoever computed them). Merging twice, or a
   merge cut short and redone, gives the same store; a shard is deleted only after its rows are committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

from forgetbench.eval.store import Store

TABLES = ("translations", "sentence_stats", "variants", "meta")
SHARDS = "shards"


def _digest(record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ShardWriter:
    """Appends unit records to one shard file (rule 1); only its own process writes the file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, record: dict) -> None:
        record = dict(record, sha256=None)
        record["sha256"] = _digest(record)
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


def read_shard(path: str | Path, offset: int = 0) -> tuple[list[dict], int, int]:
    """The valid records of a shard from byte ``offset`` (rule 2): ``(records, offset after the last valid line,
    damaged lines)``. A last line without its newline is left for a later read (its writer may still be
    writing); it is damaged for good once its writer is gone."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset, 0
    records, pos, damaged = [], 0, 0
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            damaged += int(pos < len(data))
            break
        try:
            rec = json.loads(data[pos:end])
            ok = isinstance(rec, dict) and rec.get("sha256") == _digest(rec)
        except ValueError:
            ok = False
        if not ok:
            damaged += 1
            break  # nothing after a damaged line is trusted
        records.append(rec)
        pos = end + 1
    return records, offset + pos, damaged


def import_records(store: Store, records: list[dict]) -> int:
    """Rule 3: the records' rows into ``store``, one transaction; returns the rows imported."""
    n = 0
    with store.db:
        for rec in records:
            rows = rec.get("rows", {})
            if rows.get("translations"):
                store.db.executemany("INSERT OR IGNORE INTO translations VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                     [tuple(r) for r in rows["translations"]])
            if rows.get("sentence_stats"):
                store.db.executemany("INSERT OR REPLACE INTO sentence_stats VALUES (?, ?, ?, ?, ?, ?, ?)",
                                     [tuple(r) for r in rows["sentence_stats"]])
            for name, model_dir, sha, info in rows.get("variants", []):
                store.db.execute("INSERT OR REPLACE INTO variants VALUES (?, ?, ?, ?)",
                                 (name, model_dir, sha, json.dumps(info)))
            for key, value in rows.get("meta", []):
                store.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
            n += sum(len(rows.get(t, [])) for t in TABLES)
    return n


def shard_files(run_dir: str | Path) -> list[Path]:
    return sorted((Path(run_dir) / SHARDS).glob("*.jsonl"))


def merge_shards(run_dir: str | Path, store: Store) -> dict:
    """Every shard of ``run_dir`` into ``store`` (the run's own), then the shards deleted (rule 3). Returns what
    was merged: records, damaged lines, and per rank its host, units and seconds per kind of unit."""
    out = {"records": 0, "damaged": 0, "ranks": {}}
    for path in shard_files(run_dir):
        records, _, damaged = read_shard(path)
        import_records(store, records)
        out["records"] += len(records)
        out["damaged"] += damaged
        for rec in records:
            r = out["ranks"].setdefault(f"rank{rec['rank']}", {"host": rec.get("host"), "units": 0, "seconds": {}})
            kind = str(rec["unit"]).split(":", 1)[0]
            r["units"] += 1
            r["seconds"][kind] = round(r["seconds"].get(kind, 0.0) + float(rec.get("seconds") or 0.0), 1)
    for path in shard_files(run_dir):
        path.unlink()
    return out


class RecordingStore(Store):
    """A process's own store (on its node-local disk) that also keeps every row it is given since the last
    ``take`` — the rows a shard line carries (rule 1)."""

    def __init__(self, path: str | Path):
        super().__init__(path)
        self.pending: dict[str, list] = {t: [] for t in TABLES}
        self.host = socket.gethostname()

    def add_translations(self, rows: list[tuple]) -> None:
        super().add_translations(rows)
        self.pending["translations"] += [list(r) for r in rows]

    def add_stats(self, rows: list[tuple]) -> None:
        super().add_stats(rows)
        self.pending["sentence_stats"] += [list(r) for r in rows]

    def add_variant(self, name: str, model_dir: str, model_sha256: str, info: dict) -> None:
        super().add_variant(name, model_dir, model_sha256, info)
        self.pending["variants"].append([name, model_dir, model_sha256, info])

    def set_meta(self, key: str, value) -> None:
        super().set_meta(key, value)
        self.pending["meta"].append([key, value])

    def take(self) -> dict[str, list]:
        """The rows given since the last call (and forget them)."""
        rows, self.pending = {t: v for t, v in self.pending.items() if v}, {t: [] for t in TABLES}
        return rows
