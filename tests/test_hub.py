"""Hub ids wherever a model is named: a model in the Hugging Face cache (``$HF_HOME``) is found offline, as a
sweep's ``model: org/name`` and as ``compress org/name``; its revision is recorded; a missing id is one line."""

import json
import shutil

from forgetbench.cli import main

from .conftest import flores_sweep

SHA = "0123456789abcdef0123456789abcdef01234567"


def _cache_with(tiny_dir, home, repo="someorg/tiny-m2m"):
    """``tiny_dir`` laid out as the hub cache lays out a downloaded snapshot."""
    root = home / "hub" / f"models--{repo.replace('/', '--')}"
    shutil.copytree(tiny_dir, root / "snapshots" / SHA)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(SHA)
    return repo


def test_a_hub_id_in_the_cache_is_a_model_offline(tiny_dir, tmp_path, monkeypatch, capsys):
    home = tmp_path / "hf"
    repo = _cache_with(tiny_dir, home)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["compress", repo, "--recipe", "prune-30", "--out", str(tmp_path / "c"), "--quiet"]) == 0
    assert (tmp_path / "c" / "model.safetensors").is_file()
    cfg = flores_sweep(tmp_path / "h.yaml", repo, "{base: null}", "[en-de]", 2, 4)
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    S = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    assert S["model_source"]["hub_id"] == repo and S["model_source"]["revision"] == SHA
    capsys.readouterr()
    # an id that is not there: one line naming the cache, nothing written
    assert main(["compress", "someorg/absent", "--recipe", "prune-30", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'someorg/absent' is not in the Hugging Face cache" in err[0] and str(home / "hub") in err[0]
    assert "HF_HUB_OFFLINE=0" in err[0] and not (tmp_path / "d").exists()
