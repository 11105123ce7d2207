"""The run store: one SQLite file per run directory.

One row per (variant, benchmark, pair, sentence) with the hypothesis and per-sentence scores.
Rows are written one batch per transaction, so a killed run (even SIGKILL) loses at most the
batch in flight and a rerun never duplicates rows (primary key + ``INSERT OR IGNORE``).

Processes sharing one run claim its units of work here (``claim``: one ``INSERT OR IGNORE``, so exactly one
process wins each unit; ``finish`` marks it done). Claims belong to one attempt: the process that starts a run
clears them (``reset_claims``), and a unit whose work is stored already finishes at once when claimed again.

A store may hold more sentences of a pair than the run now reads (a run extended to fewer sentences, a quick look):
a job's rows are those below its limit, and its readers ask for them (``below``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from forgetbench.errors import ForgetbenchError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS variants (
  name TEXT PRIMARY KEY, model_dir TEXT NOT NULL, model_sha256 TEXT NOT NULL, info TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS translations (
  variant TEXT NOT NULL, benchmark TEXT NOT NULL, src TEXT NOT NULL, tgt TEXT NOT NULL, idx INTEGER NOT NULL,
  hyp TEXT NOT NULL, chrf REAL NOT NULL, seconds REAL NOT NULL,
  PRIMARY KEY (variant, benchmark, src, tgt, idx));
CREATE TABLE IF NOT EXISTS sentence_stats (
  variant TEXT NOT NULL, benchmark TEXT NOT NULL, src TEXT NOT NULL, tgt TEXT NOT NULL, idx INTEGER NOT NULL,
  name TEXT NOT NULL, value REAL,
  PRIMARY KEY (variant, benchmark, src, tgt, idx, name));
"""
CLAIMS = """CREATE TABLE IF NOT EXISTS claims (unit TEXT PRIMARY KEY, owner INTEGER NOT NULL,
  done INTEGER NOT NULL DEFAULT 0, seconds REAL)"""


class Store:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = None
        try:
            self.db = sqlite3.connect(str(self.path), timeout=60)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA + CLAIMS + ";")
            self.db.execute("SELECT count(*) FROM translations").fetchone()
        except sqlite3.DatabaseError as e:
            if self.db is not None:
                self.db.close()
            from forgetbench.resources import exhausted

            if exhausted(e) is not None:  # a full disk, not a damaged file: the CLI says so (the store is intact)
                raise
            raise ForgetbenchError(f"{self.path}: not a readable forgetbench run store ({e}); it is damaged: move it "
                                   "away and rerun the sweep into a new --out") from None

    def close(self):
        self.db.close()

    def set_meta(self, key: str, value) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self, key: str, default=None):
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        try:
            return json.loads(row[0]) if row else default
        except ValueError:
            raise ForgetbenchError(f"{self.path}: metadata {key!r} is damaged (not JSON)") from None

    def variants(self) -> dict[str, dict]:
        try:
            return {n: {"model_dir": d, "model_sha256": h, **json.loads(i)}
                    for n, d, h, i in self.db.execute("SELECT * FROM variants")}
        except (ValueError, TypeError):
            raise ForgetbenchError(f"{self.path}: the variants table is damaged (not JSON)") from None

    def add_variant(self, name: str, model_dir: str, model_sha256: str, info: dict) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO variants VALUES (?, ?, ?, ?)",
                            (name, model_dir, model_sha256, json.dumps(info)))

    def done(self, variant: str, benchmark: str, src: str, tgt: str) -> set[int]:
        cur = self.db.execute("SELECT idx FROM translations WHERE variant=? AND benchmark=? AND src=? AND tgt=?",
                              (variant, benchmark, src, tgt))
        return {r[0] for r in cur}

    def add_translations(self, rows: list[tuple]) -> None:
        """rows: (variant, benchmark, src, tgt, idx, hyp, chrf, seconds); one transaction."""
        with self.db:
            self.db.executemany("INSERT OR IGNORE INTO translations VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def translated(self) -> int:
        """How many translations the store holds (every process's)."""
        return self.db.execute("SELECT count(*) FROM translations").fetchone()[0]

    def translations(self, variant: str | None = None, benchmark: str | None = None, src: str | None = None,
                     tgt: str | None = None, below: int | None = None) -> list[sqlite3.Row]:
        """Stored rows, in key order; ``below``: only sentences with idx < below (a job's own: its limit)."""
        q, args = "SELECT * FROM translations WHERE 1=1", []
        for col, val in (("variant", variant), ("benchmark", benchmark), ("src", src), ("tgt", tgt)):
            if val:
                q, args = q + f" AND {col}=?", [*args, val]
        if below is not None:
            q, args = q + " AND idx<?", [*args, below]
        self.db.row_factory = sqlite3.Row
        try:
            return self.db.execute(q + " ORDER BY variant, benchmark, src, tgt, idx", args).fetchall()
        finally:
            self.db.row_factory = None

    def stats_done(self, name: str, variant: str, benchmark: str, src: str, tgt: str) -> set[int]:
        cur = self.db.execute("SELECT idx FROM sentence_stats WHERE name=? AND variant=? AND benchmark=? AND src=? AND tgt=?",
                              (name, variant, benchmark, src, tgt))
        return {r[0] for r in cur}

    def missing_stat(self, name: str, variant: str, benchmark: str, src: str, tgt: str,
                     below: int | None = None) -> dict[int, str]:
        """The translations of one (variant, benchmark, pair) that have no statistic ``name`` yet:
        idx -> hypothesis, in idx order (``below``: idx < below only). Every per-sentence pass asks this to resume
        where it stopped."""
        cur = self.db.execute(
            "SELECT t.idx, t.hyp FROM translations t LEFT JOIN sentence_stats s ON s.name=? AND s.variant=t.variant "
            "AND s.benchmark=t.benchmark AND s.src=t.src AND s.tgt=t.tgt AND s.idx=t.idx "
            "WHERE t.variant=? AND t.benchmark=? AND t.src=? AND t.tgt=? AND s.idx IS NULL"
            + ("" if below is None else " AND t.idx<?") + " ORDER BY t.idx",
            (name, variant, benchmark, src, tgt, *(() if below is None else (below,))))
        return dict(cur.fetchall())

    def add_stats(self, rows: list[tuple]) -> None:
        """rows: (variant, benchmark, src, tgt, idx, name, value)."""
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO sentence_stats VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def stats_count(self, names: tuple[str, ...]) -> int:
        """How many statistics called one of ``names`` the store holds."""
        q = f"SELECT count(*) FROM sentence_stats WHERE name IN ({','.join('?' * len(names))})"
        return self.db.execute(q, names).fetchone()[0]

    def drop_stats(self, names: tuple[str, ...]) -> int:
        """Delete every statistic called one of ``names`` (one transaction); the passes that compute them find them
        missing and compute them again. Returns how many were deleted."""
        with self.db:
            cur = self.db.execute(f"DELETE FROM sentence_stats WHERE name IN ({','.join('?' * len(names))})", names)
        return cur.rowcount

    def reset_claims(self) -> None:
        """A new attempt: no unit claimed (the table is made anew, so a store of an older layout gets this one)."""
        with self.db:
            self.db.execute("DROP TABLE IF EXISTS claims")
            self.db.execute(CLAIMS)

    def claim(self, unit: str, owner: int) -> bool:
        """True when this call took ``unit`` (nobody had); one transaction."""
        with self.db:
            return self.db.execute("INSERT OR IGNORE INTO claims (unit, owner) VALUES (?, ?)", (unit, owner)).rowcount == 1

    def finish(self, unit: str, seconds: float | None = None) -> None:
        with self.db:
            self.db.execute("UPDATE claims SET done=1, seconds=? WHERE unit=?", (seconds, unit))

    def claim_seconds(self) -> dict[int, dict[str, float]]:
        """owner -> unit kind (the key's part before the first ':') -> seconds, over the finished units."""
        out: dict[int, dict[str, float]] = {}
        for unit, owner, sec in self.db.execute("SELECT unit, owner, seconds FROM claims WHERE done=1"):
            kinds, kind = out.setdefault(owner, {}), unit.split(":", 1)[0]
            kinds[kind] = kinds.get(kind, 0.0) + (sec or 0.0)
        return out

    def claims(self) -> dict[str, tuple[int, bool]]:
        """unit -> (owner, done) of every unit claimed in this attempt."""
        return {u: (o, bool(d)) for u, o, d in self.db.execute("SELECT unit, owner, done FROM claims")}

    def stats(self, name: str) -> dict[tuple, float | None]:
        cur = self.db.execute("SELECT variant, benchmark, src, tgt, idx, value FROM sentence_stats WHERE name=?", (name,))
        return {(v, b, s, t, i): val for v, b, s, t, i, val in cur}
