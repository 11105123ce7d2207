"""The shared data a lent GPU's queue reads, packed to travel with the call (../shared does not).

    python scripts/pack_shared.py --out build/gpu-data/shared-data.tar.xz [--queue configs/gpu-queue.yaml]

For every run of the queue that reads the shared data folder (``train-mt`` and ``distill``: the corpora of
``data.languages`` not given as ``data.corpora``; ``pretrain-encoder``: those of ``data.raw_languages``), the
WMT-news and Tatoeba files it reads, copied with every evaluation sentence's line emptied
(``train.corpus.filtered_copy``: each reader keeps what it keeps from the original, so a run on the GPU machine
prepares the same ids as here), with the sources' MANIFEST.md files and a PACK.md saying what it holds. Written as
``data/…`` in an xz tar (≈ 12 MB for the teacher's 14 languages and the encoders' four); ``gpu_call.sh device``
unpacks it to ``../shared`` beside the checkout, where the configs look. The licences are the sources' (WMT news:
research use; Tatoeba: CC BY 2.0 FR): the pack goes to the lent machine only, never into the repository.
"""

from __future__ import annotations

import argparse
import lzma
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from forgetbench.errors import ForgetbenchError  # noqa: E402


def languages_read(command: str, config: Path) -> tuple[str, list[str]]:
    """(the shared folder, the languages whose corpora it gives) of one queued run; ("", []) where it reads none."""
    if command == "pretrain-encoder":
        from forgetbench.pretrain.config import load_pretrain_config

        cfg = load_pretrain_config(config)
        foreign = [x for x in cfg.data.raw_languages if x != "en"]
        return cfg.data.shared, (foreign or ["de"]) if cfg.data.raw_languages else []
    if command == "distill":
        from forgetbench.distill.config import load_distill_config

        cfg = load_distill_config(config)
    else:
        from forgetbench.train.config import load_config

        cfg = load_config(config)
    return cfg.data.shared, [x for x in cfg.data.languages if x not in cfg.data.corpora]


def pack(queue: Path, out: Path, log=print) -> dict:
    """The pack of ``queue``'s shared data at ``out`` (new); returns what it holds."""
    sys.path.insert(0, str(REPO / "scripts"))
    from gpu_queue import load_queue

    from forgetbench.train.corpus import filtered_copy

    if out.exists():
        raise ForgetbenchError(f"{out} exists; give a new path (or remove it)")
    shared, langs, runs = None, [], []
    for r in load_queue(queue):
        folder, ls = languages_read(r["command"], Path(r["config"]))
        if not ls:
            continue
        if not folder:
            raise ForgetbenchError(f"{r['config']}: data.shared is not here; the pack is made where the shared data "
                                   "folder is (../shared/data beside the checkout)")
        if shared is not None and Path(folder).resolve() != shared:
            raise ForgetbenchError(f"{r['config']}: data.shared {folder} is not {shared}, the other runs'; one shared "
                                   "folder per pack")
        shared = Path(folder).resolve()
        langs += [x for x in ls if x not in langs]
        runs.append(r["name"])
    if shared is None:
        raise ForgetbenchError(f"{queue}: no run reads the shared data folder; nothing to pack")
    t0 = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        data = Path(tmp) / "data"
        emptied = filtered_copy(shared, langs, data)
        lines = "\n".join(f"| {f} | {n:,} |" for f, n in sorted(emptied.items()))
        (data / "PACK.md").write_text(
            f"# The shared data of {queue.name}'s runs\n\n"
            f"Made by scripts/pack_shared.py from {shared} for {', '.join(runs)}: the WMT-news and Tatoeba files "
            f"of {', '.join(langs)}, every line that is an evaluation sentence (FLORES-101 devtest, NTREX-128, "
            "TICO-19; train.corpus.eval_sentences) emptied, line numbers kept "
            "(train.corpus.filtered_copy), and flores101/devtest/eng.devtest. Not for redistribution: each "
            "source's MANIFEST.md gives its licence.\n\n| file | lines emptied |\n|---|---:|\n" + lines + "\n",
            encoding="utf-8")
        part = out.with_name(f".{out.name}.{os.getpid()}.partial")
        with lzma.open(part, "wb", preset=9 | lzma.PRESET_EXTREME) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
            tar.add(data, arcname="data")
        os.replace(part, out)
    info = {"out": str(out), "bytes": out.stat().st_size, "languages": langs, "runs": runs,
            "files": len(emptied), "lines_emptied": sum(emptied.values()),
            "seconds": round(time.perf_counter() - t0, 1)}
    log(f"pack_shared: {out}: {info['bytes'] / 2**20:.1f} MiB, {info['files']} files of {len(langs)} languages "
        f"({info['lines_emptied']:,} evaluation lines emptied) for {len(runs)} runs, {info['seconds']} s")
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="the pack to write (new): an xz tar of data/…")
    ap.add_argument("--queue", type=Path, default=REPO / "configs" / "gpu-queue.yaml", help="the queue whose runs' data")
    args = ap.parse_args(argv)
    try:
        pack(args.queue, args.out)
    except ForgetbenchError as e:
        print(f"pack_shared: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
