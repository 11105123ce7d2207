"""``scripts/pack_shared.py``: the shared data a GPU call's queue reads, packed with its evaluation lines emptied,
gives every reader what the shared folder gives; a queued ``train-mt --seed`` run is the GraphMerge study's run."""

import importlib.util
import tarfile
from types import SimpleNamespace

import yaml

from .conftest import REPO, python
from .test_train_mt import _config, _shared

SCRIPT = REPO / "scripts" / "pack_shared.py"


def test_the_pack_gives_the_corpus_and_raw_text_of_the_shared_folder_and_refuses_in_one_line(tmp_path):
    from forgetbench.pretrain.data import raw_text
    from forgetbench.train.corpus import build_corpus, eval_sentences, normalise

    de = _shared(tmp_path / "shared")  # de[0]'s English side is a FLORES devtest sentence (and a French pair's)
    _config(tmp_path, 4)  # cfg4.yaml: de and fr from the shared folder
    queue = tmp_path / "queue.yaml"
    queue.write_text(yaml.safe_dump({"runs": [{"name": "mt", "command": "train-mt", "config": str(tmp_path / "cfg4.yaml")}]}))
    out = tmp_path / "gpu-data" / "shared-data.tar.xz"
    p = python(SCRIPT, "--out", out, "--queue", queue, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 languages (2 evaluation lines emptied) for 1 runs" in p.stdout
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "there", filter="data")
    packed, shared = tmp_path / "there" / "data", tmp_path / "shared"
    eng = (packed / "wmt_news" / "eng-deu" / "newstest.eng").read_text().split("\n")
    assert eng[0] == "" and eng[1] == de[1][0] and len(eng) == 21  # the line emptied, the numbering kept
    assert eval_sentences(packed) <= eval_sentences(shared)
    assert "wmt_news/eng-deu/newstest.eng | 1 |" in (packed / "PACK.md").read_text()
    for seed in (1, 3):
        a, b = build_corpus(shared, ["de", "fr"], 2, 300, seed), build_corpus(packed, ["de", "fr"], 2, 300, seed)
        assert a[0] == b[0] and a[1] == b[1] and a[0]["de"] and a[2].dropped_eval_overlap["de"] == 1
    for langs in (["en", "de"], ["fr"]):
        text = [raw_text(SimpleNamespace(data=SimpleNamespace(shared=str(s), raw_languages=langs, raw_per_language=50),
                                         train=SimpleNamespace(seed=2)), eval_sentences(s), lambda *_: None)
                for s in (shared, packed)]
        assert text[0] == text[1] and all(text[0].values())
    assert normalise(de[0][0]) not in {normalise(s) for s in text[0].get("en", [])}

    again = python(SCRIPT, "--out", out, "--queue", queue)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "exists; give a new path" in again.stderr
    own = tmp_path / "own.tsv"
    own.write_text("".join(f"{e}\t{x}\n" for e, x in de[1:12]))
    cfg = yaml.safe_load((tmp_path / "cfg4.yaml").read_text())
    cfg["data"] = {"shared": "", "languages": ["de"], "corpora": {"de": str(own)}, "dev_per_language": 2}
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(cfg))
    queue.write_text(yaml.safe_dump({"runs": [{"name": "own", "command": "train-mt", "config": str(tmp_path / "own.yaml")}]}))
    none = python(SCRIPT, "--out", tmp_path / "none.tar.xz", "--queue", queue)
    assert none.returncode == 2 and "no run reads the shared data folder" in none.stderr
    assert not (tmp_path / "none.tar.xz").exists()


def test_a_queued_train_mt_seed_is_the_graphmerge_studys_run_of_that_seed(tmp_path):
    """``train-mt ARM --seed S`` (the queue's entries) has the fingerprint of the study's ``<arm>-s<S>`` run, whose
    config the study writes with absolute data paths elsewhere, so the study continues a run trained by the queue."""
    from forgetbench.train.config import fingerprint, load_config

    spec = importlib.util.spec_from_file_location("graphmerge_study", REPO / "scripts" / "graphmerge_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    queue = yaml.safe_load((REPO / "configs" / "gpu-queue.yaml").read_text())["runs"]
    arms = [r for r in queue if r["command"] == "train-mt"]
    assert sorted(r["name"] for r in arms) == ["baseline-s1", "baseline-s2", "graphmerge-s1", "graphmerge-s2"]
    for r in arms:
        seed = int(r["args"][r["args"].index("--seed") + 1])
        queued = load_config(REPO / r["config"])
        queued.train.seed = seed  # what --seed does
        derived = study.derived_config(REPO / r["config"], seed, 2000, tmp_path / f"{r['name']}.yaml")
        assert fingerprint(load_config(derived)) == fingerprint(queued)
        queued.train.seed = 3 - seed
        assert fingerprint(load_config(derived)) != fingerprint(queued)
