"""Where a named model lives: a local folder, or a Hugging Face hub id resolved through the hub cache.

Rules:

1. A name that is an existing path is a local folder; it must hold ``config.json``. A config's relative folder
   is resolved against the config's own folder first (``resolve_model(name, base=...)``).
2. Any other name of the form ``name`` or ``org/name`` (no ``./``, no trailing ``/``) is a hub id, looked up in
   the cache only (``huggingface_hub.try_to_load_from_cache``: no network): ``$HF_HUB_CACHE``, else
   ``$HF_HOME/hub``. The snapshot folder is then used as any local folder; its commit sha (the snapshot's folder
   name) is the revision a run records.
3. Nothing is downloaded unless the user asks for it by setting ``HF_HUB_OFFLINE=0``: then a missing id is fetched
   with ``huggingface_hub.snapshot_download`` into that cache. Otherwise a missing id → one line naming the cache
   looked in and the variable that allows a download; a missing folder → one line naming the path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from forgetbench.errors import ForgetbenchError

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


@dataclass(frozen=True)
class ModelSource:
    folder: Path
    hub_id: str | None = None
    revision: str | None = None  # the snapshot's commit sha (hub ids only)

    def record(self) -> dict:
        return {"folder": str(self.folder)} | ({"hub_id": self.hub_id, "revision": self.revision} if self.hub_id else {})


def is_hub_id(name: str) -> bool:
    return bool(_HUB_ID.fullmatch(name)) and ".." not in name


def downloads_allowed() -> bool:
    """Only an explicit ``HF_HUB_OFFLINE=0`` (or false/no/off) allows a download (rule 3)."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("0", "false", "no", "off")


def resolve_model(name: str | Path, where: str = "", base: Path | None = None) -> ModelSource:
    """The folder of ``name`` (rules 1–3); ``where`` prefixes a refusal (file and key, or the argument)."""
    prefix = f"{where}: " if where else ""
    text = str(name)
    local = Path(text) if base is None or Path(text).is_absolute() else (base / text)
    if local.exists() or not is_hub_id(text):
        if not (local / "config.json").is_file():
            raise ForgetbenchError(f"{prefix}{local} is not a model folder (no config.json); give a folder saved with "
                                   "save_pretrained, or a hub id such as facebook/m2m100_418M")
        return ModelSource(local.resolve())
    return ModelSource(*_snapshot(text, prefix, local))


def hub_cache() -> Path:
    """The hub cache as the environment names it now: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else the default."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _snapshot(repo_id: str, prefix: str, local: Path) -> tuple[Path, str, str]:
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    cache = hub_cache()
    try:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=str(cache))
    except HFValidationError as e:
        raise ForgetbenchError(f"{prefix}{repo_id!r} is neither a model folder nor a valid hub id ({e})") from None
    if isinstance(found, str):
        folder = Path(found).parent
    elif downloads_allowed():
        folder = _download(repo_id, cache, prefix)
    else:
        raise ForgetbenchError(f"{prefix}no folder {local}, and model {repo_id!r} is not in the Hugging Face cache "
                               f"{cache}; downloads are off: set HF_HUB_OFFLINE=0 to download it once, or give a "
                               "local folder")
    if not (folder / "config.json").is_file():
        raise ForgetbenchError(f"{prefix}hub model {repo_id!r} ({folder}) has no config.json: not a transformers model")
    return folder, repo_id, folder.name


def _download(repo_id: str, cache: Path, prefix: str) -> Path:
    """Rule 3: the download the user asked for (``HF_HUB_OFFLINE=0``), into ``cache``."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, cache_dir=str(cache)))
    except OSError as e:  # network errors, a gated or missing repository
        raise ForgetbenchError(f"{prefix}model {repo_id!r} could not be downloaded ({type(e).__name__}: "
                               f"{str(e).splitlines()[0][:200]}); check the id and your connection") from None
