"""The teacher trainer on a miniature 'shared' folder: leakage filter, M2M format, bit-exact resume."""

import pytest
import torch
import yaml
from safetensors.torch import load_file

from forgetbench.errors import ForgetbenchError
from forgetbench.train.mt import load_config, train

from .conftest import calib_rows


def _shared(root):
    """WMT-news and Tatoeba layout with NTREX calibration pairs; one German pair's English side is a
    FLORES devtest sentence, so it must be filtered out."""
    rows = calib_rows()
    de = [(r[2], r[3]) if r[0] == "en" else (r[3], r[2]) for r in rows if {r[0], r[1]} == {"en", "de"}]
    fr = [(r[2], r[3]) if r[0] == "en" else (r[3], r[2]) for r in rows if {r[0], r[1]} == {"en", "fr"}]
    (root / "flores101" / "devtest").mkdir(parents=True)
    (root / "flores101" / "devtest" / "eng.devtest").write_text(de[0][0] + "\n")
    w = root / "wmt_news" / "eng-deu"
    w.mkdir(parents=True)
    (w / "newstest.deu").write_text("\n".join(x for _, x in de[:20]) + "\n")
    (w / "newstest.eng").write_text("\n".join(e for e, _ in de[:20]) + "\n")
    for folder, iso, pairs in (("deu-eng", "deu", de[20:]), ("eng-fra", "fra", fr)):
        t = root / "tatoeba" / "test-v2021-08-07" / folder
        t.mkdir(parents=True)
        (t / f"tatoeba-test-v2021-08-07.{iso}").write_text("\n".join(x for _, x in pairs) + "\n")
        (t / "tatoeba-test-v2021-08-07.eng").write_text("\n".join(e for e, _ in pairs) + "\n")
    return de


def _config(tmp_path, steps, **train):
    cfg = {"data": {"shared": str(tmp_path / "shared"), "languages": ["de", "fr"], "dev_per_language": 2},
           "spm": {"vocab_size": 300, "sample_per_language": 1000},
           "model": {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "heads": 2, "ffn": 64},
           "train": {"seed": 3, "max_tokens": 600, "warmup": 4, "steps": steps, "checkpoint_minutes": 0,
                     "dev_every": 0, "threads": 1} | train}
    p = tmp_path / f"cfg{steps}{'x' if train else ''}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return load_config(p)


def test_train_mt_filters_leaks_loads_as_m2m_and_resumes_bit_exactly(tmp_path):
    de = _shared(tmp_path / "shared")
    full = train(_config(tmp_path, 8), tmp_path / "full", progress=False, log=lambda *_: None)
    import json

    info = json.loads((full / "training.json").read_text())
    # NTREX's English side is shared by all languages: the leaked sentence goes from fr too
    assert info["corpus"]["dropped_eval_overlap"] == {"de": 1, "fr": 1} and info["steps"] == 8
    c = info["corpus"]
    assert c["raw"]["de"] == len(de) == sum(c[k]["de"] for k in ("train", "dev", "dropped_eval_overlap", "dropped_length",
                                                                 "duplicates"))

    from transformers import M2M100ForConditionalGeneration, M2M100Tokenizer

    tok = M2M100Tokenizer.from_pretrained(str(full))
    tok.src_lang, tok.tgt_lang = "en", "de"
    enc = tok("Hello world", text_target="Hallo Welt")
    assert enc["input_ids"][0] == tok.get_lang_id("en") and enc["labels"][0] == tok.get_lang_id("de")
    M2M100ForConditionalGeneration.from_pretrained(str(full))

    # interrupted after 4 steps, rerun with the full length: the same weights, bit for bit
    train(_config(tmp_path, 4), tmp_path / "resumed", progress=False, log=lambda *_: None)
    train(_config(tmp_path, 8), tmp_path / "resumed", progress=False, log=lambda *_: None)
    a, b = load_file(str(full / "model.safetensors")), load_file(str(tmp_path / "resumed" / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    # resuming with settings that shape the weights differently is refused
    with pytest.raises(ForgetbenchError, match="other data/model/optimiser settings"):
        train(_config(tmp_path, 10, lr=0.01), tmp_path / "resumed", progress=False, log=lambda *_: None)


def test_a_run_resumes_where_its_data_has_moved_and_from_a_checkpoint_of_the_path_fingerprint(tmp_path):
    """The fingerprint holds what the data is, not where it lies (docs/METHOD.md §5): a run folder trained beside
    one copy of the shared folder resumes beside another (a GPU machine's, another checkout's) to the weights of
    the uninterrupted run, bit for bit; a checkpoint whose state holds the earlier, path-holding fingerprint of
    the same settings resumes too and carries the new one after."""
    import json
    import shutil

    from forgetbench.train.config import fingerprint

    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    _shared(here / "shared")
    full = train(_config(here, 8), here / "full", progress=False, log=lambda *_: None)
    train(_config(here, 4), here / "run", progress=False, log=lambda *_: None)
    cfg6 = _config(here, 6)
    assert fingerprint(cfg6) != fingerprint(cfg6, legacy=True)
    state = here / "run" / "checkpoint" / "state.json"
    state.write_text(json.dumps(json.loads(state.read_text()) | {"fingerprint": fingerprint(cfg6, legacy=True)}))
    train(cfg6, here / "run", progress=False, log=lambda *_: None)
    assert json.loads(state.read_text())["fingerprint"] == fingerprint(cfg6)

    shutil.copytree(here / "shared", there / "shared")
    shutil.copytree(here / "run", there / "run")
    shutil.rmtree(here / "shared")  # nothing of the old place is read
    cfg8 = _config(there, 8)
    assert fingerprint(cfg8) == fingerprint(cfg6) and cfg8.data.shared == str((there / "shared").resolve())
    train(cfg8, there / "run", progress=False, log=lambda *_: None)
    a, b = load_file(str(full / "model.safetensors")), load_file(str(there / "run" / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_autocast_follows_the_cpus_amx_and_is_recorded(monkeypatch, tmp_path):
    import forgetbench.env as env
    from forgetbench.train.arithmetic import choose

    def flags(*f):
        monkeypatch.setattr(env, "cpu", lambda: {"model": "test", "cores": 2, "flags": list(f)})

    flags("avx2", "avx512f", "amx_int8", "amx_bf16")
    a = choose("cpu", "auto")
    assert (a.device, a.bf16) == ("cpu", True) and "AMX" in a.reason
    flags("avx2")  # an AVX2-only host: bfloat16 would run emulated
    a = choose("cpu", "auto")
    assert (a.device, a.bf16) == ("cpu", False) and "without AMX" in a.reason
    assert a.record() == {"device": "cpu", "autocast": "none (float32)", "why": a.reason}
    assert choose("cpu", True).bf16 and not choose("cpu", False).bf16  # an explicit setting wins
    if not torch.cuda.is_available():
        assert choose("auto", "auto").device == "cpu"
        with pytest.raises(ForgetbenchError, match="torch sees no CUDA GPU"):
            choose("cuda", "auto")
    for bad in ({"device": "gpu"}, {"bf16": "yes"}, {"bf16": 1}):
        with pytest.raises(ForgetbenchError, match="train.(device|bf16)"):
            choose(bad.get("device", "cpu"), bad.get("bf16", "auto"))


def test_a_model_continues_on_own_data_in_its_own_vocabulary(tmp_path):
    """``spm: {from: MODEL}``: a run on other data takes MODEL's vocabulary (files copied, no SPM trained), so
    ``--warm-start MODEL`` is accepted; its cached ids are MODEL's tokenizer's ids of the new corpus. Without it
    the warm start is refused with the line that names ``spm.from``. A reused vocabulary is fingerprinted by
    content, not path; configs without the key keep their fingerprint."""
    import json
    import shutil
    from dataclasses import asdict

    import numpy as np
    from transformers import M2M100Tokenizer

    from forgetbench.train.config import fingerprint, settings_hash, where_free

    de = _shared(tmp_path / "shared")
    base = train(_config(tmp_path, 4), tmp_path / "base", progress=False, log=lambda *_: None)
    own = tmp_path / "own.tsv"
    pairs = [(" ".join(e.split()[::-1]), " ".join(x.split()[::-1])) for e, x in de[:24]]  # in no evaluation set
    own.write_text("".join(f"{e}\t{x}\n" for e, x in pairs), encoding="utf-8")

    def config(name, model=None, **spm):
        raw = {"data": {"shared": "", "languages": ["de"], "corpora": {"de": str(own)}, "dev_per_language": 2},
               "spm": spm or {"vocab_size": 300, "sample_per_language": 1000},
               "model": model or {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "heads": 2, "ffn": 64},
               "train": {"seed": 3, "max_tokens": 600, "warmup": 4, "steps": 2, "checkpoint_minutes": 0,
                         "dev_every": 0, "threads": 1, "lr": 2e-4}}
        (tmp_path / name).write_text(yaml.safe_dump(raw))
        return load_config(tmp_path / name)

    with pytest.raises(ForgetbenchError, match=r"spm: \{from: .*base/model\} to train on that model's vocabulary"):
        train(config("own.yaml"), tmp_path / "refused", progress=False, log=lambda *_: None, warm_from=base)

    cfg = config("reuse.yaml", model={"from": str(base)}, **{"from": str(base)})  # base's vocabulary and shape
    assert fingerprint(cfg) == fingerprint(config("shape.yaml", **{"from": str(base)}))  # as if written out
    out = train(cfg, tmp_path / "tuned", progress=False, log=lambda *_: None, warm_from=base)
    for f in ("sentencepiece.bpe.model", "vocab.json"):
        assert (out / f).read_bytes() == (base / f).read_bytes()
    info, first = (json.loads((d / "training.json").read_text()) for d in (out, base))
    assert info["spm_sha256"] == first["spm_sha256"] and info["warm_start"]["optimiser"] == "restarted"
    assert info["config"]["spm"] == {"from": str(base)} and info["config"]["model"]["from"] == str(base)
    assert {k: info["config"]["model"][k] for k in ("d_model", "heads", "ffn")} == {"d_model": 32, "heads": 2, "ffn": 64}
    tok = M2M100Tokenizer.from_pretrained(str(base))
    z = np.load(tmp_path / "tuned" / "train.npz")
    cached = {tuple(z["src"][a:b]) for a, b in zip(z["src_off"][:-1], z["src_off"][1:], strict=True)}
    assert cached and cached <= {tuple(tok.convert_tokens_to_ids(tok.tokenize(t))) for p in pairs for t in p}

    moved = tmp_path / "elsewhere"
    shutil.copytree(base, moved)
    assert fingerprint(config("moved.yaml", **{"from": str(moved)})) == fingerprint(cfg)
    plain = _config(tmp_path, 4)
    d = asdict(plain)
    d["spm"].pop("from_model")
    d["model"].pop("embeddings")
    assert fingerprint(plain, legacy=True) == settings_hash(d)
    d["data"] = where_free(d["data"])
    assert fingerprint(plain) == settings_hash(d)

    for spm, said in (({"from": str(base), "vocab_size": 300}, r"\['vocab_size'\] do not apply"),
                      ({"from": str(tmp_path / "shared")}, "no sentencepiece.bpe.model and vocab.json there"),
                      ({"from_model": str(base)}, "the key is spm.from")):
        with pytest.raises(ForgetbenchError, match=said):
            config("bad.yaml", **spm)


def test_model_from_a_folder_takes_its_shape_and_refuses_what_does_not_apply(tmp_path):
    """``model: {from: DIR}``: DIR's ``config.json`` gives the shape (the shipped own-data config takes the teacher's);
    only dropout may be given beside it; a folder without an M2M-100 config, or with encoder and decoder widths that
    differ, is one line."""
    import json
    import shutil
    from dataclasses import asdict

    from .conftest import REPO

    cfg = load_config(REPO / "configs" / "teacher-own-data.yaml")
    teacher = json.loads((REPO / "artifacts" / "teacher" / "config.json").read_text())
    assert asdict(cfg.model) == {"d_model": teacher["d_model"], "encoder_layers": teacher["encoder_layers"],
                                 "decoder_layers": teacher["decoder_layers"], "heads": teacher["encoder_attention_heads"],
                                 "ffn": teacher["encoder_ffn_dim"], "dropout": teacher["dropout"],
                                 "max_positions": teacher["max_position_embeddings"], "embeddings": {}}
    assert cfg.model_from == str((REPO / "artifacts" / "teacher").resolve())

    def load(model):
        raw = yaml.safe_load((REPO / "configs" / "teacher-own-data.yaml").read_text())
        raw["model"] = model
        raw["data"]["corpora"] = {k: str((REPO / "configs" / v).resolve()) for k, v in raw["data"]["corpora"].items()}
        raw["spm"] = {"vocab_size": 300}
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(raw))
        return load_config(tmp_path / "c.yaml")

    teacher_dir = str(REPO / "artifacts" / "teacher")
    assert load({"from": teacher_dir, "dropout": 0.3}).model.dropout == 0.3
    odd = tmp_path / "odd"
    shutil.copytree(REPO / "artifacts" / "teacher", odd, ignore=shutil.ignore_patterns("*.safetensors"))
    (odd / "config.json").write_text(json.dumps(teacher | {"decoder_ffn_dim": 2048}))
    for model, said in (({"from": teacher_dir, "d_model": 512}, r"\['d_model'\] do not apply"),
                        ({"from": str(tmp_path)}, "cannot read its config.json"),
                        ({"from": str(odd)}, r"encoder_ffn_dim and decoder_ffn_dim \[1024, 2048\]")):
        with pytest.raises(ForgetbenchError, match=said):
            load(model)
    (odd / "config.json").write_text(json.dumps(teacher | {"model_type": "marian"}))
    with pytest.raises(ForgetbenchError, match="model_type 'marian', not m2m_100"):
        load({"from": str(odd)})


def test_train_mt_stops_early_on_dev_chrf_and_exports_the_best_step(tmp_path):
    """``train.patience`` on the teacher trainer: the mean dev chrF of ``dev_directions`` every ``dev_every``
    steps; with a min_delta no change can pass, the first measurement stays the best, the run stops ``patience``
    measurements later and exports that step's weights; a config with patience and no dev directions is refused."""
    import json

    _shared(tmp_path / "shared")
    cfg = _config(tmp_path, 30, dev_every=2, patience=2, min_delta=1000.0, dev_directions=["en-de"], dev_sentences=2)
    final = train(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    rec = json.loads((final / "training.json").read_text())
    es = rec["early_stop"]
    assert rec["steps"] == 6 and rec["stopped_by"].startswith("early stop") and es["best_step"] == 2
    assert [s for s, _ in es["scores"]] == [2, 4, 6] and es["exported"] == "best"
    best, out = (load_file(str(p / "model.safetensors")) for p in (tmp_path / "run" / "best", final))
    assert all(torch.equal(best[k], out[k]) for k in best if k in out)
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "dev_score" in r] == [2, 4, 6] and "en-de" in log[0]["dev_chrf"]
    with pytest.raises(ForgetbenchError, match="dev_directions, which is empty"):
        _config(tmp_path, 30, dev_every=2, patience=2)
