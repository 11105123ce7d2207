"""Hashes and atomic writes (files: temporary file, fsync, replace; folders: temporary folder, rename), shared by every layer."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from forgetbench.errors import ForgetbenchError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_HASHED: dict[tuple, str] = {}  # (device, inode, size, mtime in ns) -> SHA-256: a file hashed once per state
_SETTLED_S = 2.0  # a file modified this recently is hashed every time: its clock tick can hide a rewrite


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """A file's SHA-256, remembered for the process while the file's inode, size and modification time stay (a
    run's fingerprint, its cache keys and its record hash the same weights and corpora several times). A file
    modified in the last ``_SETTLED_S`` seconds is not remembered: the filesystem's time stamps move in clock
    ticks, so a same-size rewrite within one tick would keep its time stamp (git's "racy" entries)."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _HASHED:
        return _HASHED[key]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    if time.time() - st.st_mtime > _SETTLED_S:
        _HASHED[key] = h.hexdigest()
    return h.hexdigest()


def content_sha256(path: str | os.PathLike) -> str:
    """A file's SHA-256, or a folder's: every file in it, by relative name and content (not where it lies)."""
    p = Path(path)
    if p.is_file():
        return sha256_file(p)
    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        h.update(str(f.relative_to(p)).encode() + bytes.fromhex(sha256_file(f)))
    return h.hexdigest()


def training_counts(path: str | os.PathLike) -> dict:
    """The training-pair counts per language of a model's ``training.json`` (``corpus.train``; a file of bare
    ``train`` counts too); {} where it has none or is not JSON."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    counts = d.get("corpus", d).get("train", d.get("train", {})) if isinstance(d, dict) else {}
    return counts if isinstance(counts, dict) else {}


def trim_jsonl(path: str | os.PathLike, step: int) -> int:
    """Drop a run log's records of steps after ``step`` (a resumed run's checkpoint step: what came after it is
    trained again, and the log must tell each step once); every other line is kept byte for byte, but a torn last
    line (cut by a kill, no line feed) is dropped. Atomic; returns the lines dropped."""
    p = Path(path)
    if not p.exists():
        return 0
    keep, dropped = [], 0
    for line in p.read_text(encoding="utf-8").splitlines(keepends=True):
        try:
            rec = json.loads(line)
        except ValueError:
            dropped += not line.endswith("\n")  # a line cut by a kill: not a record
            if line.endswith("\n"):
                keep.append(line)
            continue
        if isinstance(rec, dict) and isinstance(rec.get("step"), int) and rec["step"] > step:
            dropped += 1
        else:
            keep.append(line if line.endswith("\n") else line + "\n")
    if dropped:
        atomic_write_text(p, "".join(keep))
    return dropped


def read_run_log(path: str | os.PathLike) -> list[dict]:
    """A run log's records (``train_log.jsonl``, ``signals.jsonl``), each step's record of each kind (training,
    held-out, a signal split) once, the last written: a log written before resumes trimmed it (``trim_jsonl``)
    holds the steps after a checkpoint twice, the discarded run's and the resumed run's."""
    rows = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]
    last: dict = {}
    for n, r in enumerate(rows):
        kind = (r.get("split"), any(k.startswith("dev_") for k in r))
        last[(r["step"], kind) if isinstance(r.get("step"), int) else n] = n
    keep = set(last.values())
    return [r for n, r in enumerate(rows) if n in keep]


def read_text(path: str | os.PathLike, what: str = "") -> str:
    """A UTF-8 text file; invalid UTF-8 is refused with the line it is on."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ForgetbenchError(f"{path}:{line}: {what + ' ' if what else ''}is not valid UTF-8 (byte {e.start}); "
                               "re-encode the file as UTF-8") from None


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """``data`` to ``path`` through a temporary sibling, fsync and replace."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_leftovers(out: Path) -> list[Path]:
    """Remove the temporary siblings ``.<name>.<pid>.*.partial`` that killed runs left for ``out`` (their process
    is gone); a live process's folder is left alone. Returns what was removed."""
    removed = []
    if not out.parent.is_dir():
        return removed
    for d in out.parent.glob(f".{out.name}.*.partial"):
        parts = d.name[len(out.name) + 2:].split(".")
        if parts and parts[0].isdigit() and _alive(int(parts[0])) and int(parts[0]) != os.getpid():
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def umask_modes(folder: Path) -> None:
    """Files a library wrote private (``mkstemp``'s 0600: safetensors through transformers) get the mode a plain
    ``open`` gives under the process's umask, as every other output file has."""
    mode = 0o666 & ~_umask()
    for f in folder.rglob("*"):
        if f.is_file() and not f.is_symlink() and (f.stat().st_mode & 0o777) != mode:
            os.chmod(f, mode)


@contextlib.contextmanager
def atomic_directory(out_dir: str | os.PathLike, replace: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling directory that becomes ``out_dir`` only if the block succeeds.

    Refuses an existing ``out_dir`` (nothing is ever overwritten) unless ``replace``: then the old folder is
    moved aside and removed only after the new one is in place (a kill in between leaves ``.<name>.old``,
    removed by the next run). Leftovers of killed runs are cleaned first (``clean_leftovers``).
    """
    out = Path(out_dir)
    if out.exists() and not replace:
        raise ForgetbenchError(f"output directory {out} already exists; choose another --out or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(out)
    old = out.with_name(f".{out.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.{os.getpid()}.", suffix=".partial"))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        umask_modes(tmp)
        if out.exists():
            os.rename(out, old)
        os.rename(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
