"""The one output policy of every command, checked before any work.

1. A **new** output (``new_output``) must not exist: files and folders are never overwritten.
   ``compress``, ``compress-stream``, ``make-tiny``, ``convert-fairseq``, ``parse train``,
   ``parse predict`` and ``parse compress`` write new outputs.
2. A **resumable** output (``resumable_output``) may exist only as an output of the same kind, told
   by its marker file: ``sweep``/``eval`` run folders (``store.sqlite``), ``train-mt`` run folders
   (``train-run.json``). Anything else at that path is refused.
3. Nothing is written outside the output: its missing parent folders are created (as ``mkdir -p``)
   only after the nearest existing ancestor is checked to be a folder we can write, so a refusal
   writes nothing; paths read from data files (shard names, tier-view names) are confined by
   ``confined_name``.
4. Every write is atomic (``io.atomic_write_text`` for files, ``io.atomic_directory`` for folders),
   and a rerun cleans the leftovers of killed runs (``io.atomic_directory``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from forgetbench.errors import ForgetbenchError

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _writable_parent(out: Path, flag: str) -> None:
    """Create ``out``'s missing parent folders, after checking that the nearest existing one is a writable folder."""
    parent = out.parent if str(out.parent) else Path(".")
    existing = parent
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ForgetbenchError(f"{flag} {out}: {existing} is a file, not a folder; choose another {flag}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ForgetbenchError(f"{flag} {out}: its folder {existing} is not writable; choose another {flag}")
    if existing != parent:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ForgetbenchError(f"{flag} {out}: its folder {parent} cannot be created ({e.strerror}); "
                                   f"choose another {flag}") from None


def new_output(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a new output: refused if anything exists there or its folder cannot be made or written."""
    out = Path(path)
    if out.exists() or out.is_symlink():
        what = "folder" if out.is_dir() else "file"
        raise ForgetbenchError(f"{flag} {out}: a {what} of that name exists and is never overwritten; "
                               f"choose a new {flag} or remove it")
    _writable_parent(out, flag)
    return out


def resumable_output(path: str | Path, marker: str, kind: str, flag: str = "--out") -> Path:
    """``path`` as an output that a rerun resumes: new, or a folder holding ``marker`` (an output of ``kind``)."""
    out = Path(path)
    if out.is_dir() and not any(out.iterdir()):
        return out  # an empty folder (a run killed before its first write) holds nothing to lose
    if out.exists():
        if not out.is_dir() or not (out / marker).is_file():
            raise ForgetbenchError(f"{flag} {out}: exists but is not a {kind} (no {marker}); only a {kind} is resumed "
                                   f"there; choose a new {flag}")
        if not os.access(out, os.W_OK | os.X_OK):
            raise ForgetbenchError(f"{flag} {out}: not writable")
        return out
    _writable_parent(out, flag)
    return out


def confined_name(name: str, what: str, where: str) -> str:
    """A name read from a data file that becomes a file name: one path component of safe characters."""
    if not isinstance(name, str) or not _SAFE.fullmatch(name) or name in (".", ".."):
        raise ForgetbenchError(f"{where}: {what} {name!r} is not a plain file name (letters, digits, '.', '_', '-'; "
                               "no folders): it would be written or read outside its folder")
    return name
