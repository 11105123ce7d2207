"""Every shipped config loads (validated as its command would), and the no-KD twin differs from the KD
student's config in nothing but its name and kd.source."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from .conftest import REPO

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


def user_clone(tmp_path: Path) -> Path:
    """The repository as a user's clone lays it out: nothing beside it, so no config's ``../../shared/data`` exists
    on any host. ``configs`` is copied (a symlinked folder would resolve ``..`` inside the repository); the rest is
    linked."""
    clone = tmp_path / "a" / "clone"
    clone.mkdir(parents=True)
    shutil.copytree(REPO / "configs", clone / "configs")
    for part in ("artifacts", "data", "scripts"):
        (clone / part).symlink_to(REPO / part)
    return clone


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_loads(path: Path, tmp_path):
    """Each shipped config, validated as its command would in a user's clone (the training and distillation configs
    on the shipped corpus sample where the study's corpora are absent)."""
    raw = yaml.safe_load(path.read_text())
    path = user_clone(tmp_path) / "configs" / path.name
    if "teacher" in raw and "student" in raw:
        from forgetbench.distill.config import load_distill_config

        cfg = load_distill_config(path)
        assert cfg.pairs and len(cfg.pairs) == 2 * len(cfg.data.languages)
        assert not raw["data"].get("shared") or (cfg.data_note and "corpus-sample" in cfg.data_note)
    elif "spm" in raw:
        from forgetbench.train.config import config_record, load_config

        loaded = load_config(path)
        cfg = config_record(loaded)
        assert not raw["data"]["shared"] or (loaded.data_note and not cfg["data"]["shared"])  # on the sample
        paths = ("shared", "sample", "corpora", "from")  # resolved against the config's folder
        for f in [*cfg["data"]["corpora"].values(), cfg["spm"].get("from", REPO)]:
            assert Path(f).exists() and Path(f).is_absolute()
        for section, values in raw.items():  # every value written reaches the loaded config
            assert {k: cfg[section][k] for k in values if k not in paths} == {k: v for k, v in values.items()
                                                                               if k not in paths}
        record = json.loads((REPO / "artifacts" / "teacher" / "training.json").read_text())
        segments = [s for s in record["segments"] if Path(s["config"]).name == path.name]
        if segments:  # the shipped teacher was trained in segments with these configs
            shipped = record["config"]  # the last segment's, whole
            assert {k: cfg[k] for k in ("spm", "model")} == {k: shipped[k] for k in ("spm", "model")}
            assert {k: v for k, v in cfg["data"].items() if k not in paths} == \
                {k: v for k, v in shipped["data"].items() if k not in paths}
            for s in segments:
                assert (s["max_tokens"], s["lr"], s["warmup"], s["dev_sentences"]) == tuple(
                    cfg["train"][k] for k in ("max_tokens", "lr", "warmup", "dev_sentences"))
            if path.name == Path(record["segments"][-1]["config"]).name:
                new = {"patience": 0, "min_delta": 0.0,  # settings added since, at their defaults (early stopping off,
                       "temperature": 1.0, "snapshot_every": 0}  # the corpus as it is, no snapshots)
                assert {k: v for k, v in cfg["train"].items() if k not in new or v != new[k]} == shipped["train"]
    elif "runs" in raw:  # the GPU queue (scripts/gpu_queue.py)
        import importlib.util

        spec = importlib.util.spec_from_file_location("gpu_queue", REPO / "scripts" / "gpu_queue.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        assert mod.load_queue(path)
    elif not (path.parent / str((raw.get("bias") or {}).get("mt_geneval", {}).get("path", "."))).exists():
        from forgetbench.errors import ForgetbenchError
        from forgetbench.sweep import load_sweep

        with pytest.raises(ForgetbenchError, match=r"mt-geneval.yaml: bias.mt_geneval: MT-GenEval: .* not found \(the "
                                                   r"MT-GenEval test split's layout"):
            load_sweep(path)  # the whole test split is not shipped: one line saying what the folder must hold
    else:
        from forgetbench.sweep import load_sweep

        cfg = load_sweep(path)
        assert cfg.jobs


@pytest.mark.shared_data
def test_the_whole_mt_geneval_split_config_loads_beside_the_data(shared_data):
    from forgetbench.sweep import load_sweep

    cfg = load_sweep(REPO / "configs" / "mt-geneval.yaml")
    assert {lang: sum(it.set == "counterfactual" for it in its) // 2 for lang, (its, _) in cfg.bias.mt_geneval.items()} \
        == dict.fromkeys(["ar", "de", "es", "fr", "hi", "it", "ru"], 300)
    assert cfg.bias.mt_geneval_skipped == {"pt": "not a language the model was trained on (teacher/training.json)"}


@pytest.mark.parametrize("suffix", ["", "-long"])
def test_the_no_kd_twin_differs_only_in_kd_source_and_name(suffix):
    kd = yaml.safe_load((REPO / "configs" / f"distill-kd{suffix}.yaml").read_text())
    nokd = yaml.safe_load((REPO / "configs" / f"distill-nokd{suffix}.yaml").read_text())
    assert kd.pop("name") == f"student-kd{suffix}" and nokd.pop("name") == f"student-nokd{suffix}"
    assert kd["kd"].pop("source") == "cache" and nokd["kd"].pop("source") == "none"
    if suffix:  # the twin runs --steps-of the early-stopped KD run: a fixed number of steps
        assert kd["train"].pop("patience") == 3 and nokd["train"].pop("patience") == 0
    assert kd == nokd


def test_the_ctranslate2_demo_differs_only_in_backend_and_name():
    a = yaml.safe_load((REPO / "configs" / "demo.yaml").read_text())
    b = yaml.safe_load((REPO / "configs" / "demo-ctranslate2.yaml").read_text())
    assert b.pop("backend") == "ctranslate2" and "backend" not in a
    assert (a.pop("name"), b.pop("name")) == ("demo", "demo-ctranslate2") and a == b


def test_the_readmes_annotated_sweep_config_is_valid(tmp_path):
    """The README's one annotated example loads as written (its ``../`` paths read from configs/)."""
    from forgetbench.sweep import load_sweep

    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## The sweep config", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    cfg = tmp_path / "readme.yaml"
    cfg.write_text(block.replace("../", f"{REPO}/"))
    loaded = load_sweep(cfg)
    assert loaded.name == "demo" and len(loaded.jobs) == 8 and loaded.processes == 2
    assert set(yaml.safe_load(block)["variants"]) == {"base", "prune-30", "ptq-int8"}


def test_recipes_resolve_by_file_name_or_name_in_a_string_or_a_mapping(tiny_dir, tmp_path):
    from forgetbench.compress.recipe import find_recipe
    from forgetbench.sweep import load_sweep

    own = tmp_path / "my-variant.yaml"
    own.write_text("name: thirty-percent\nsteps:\n  - prune: {sparsity: 0.3}\n")
    cfg = tmp_path / "s.yaml"
    cfg.write_text(f"model: {tiny_dir}\nvariants: {{base: null, a: my-variant.yaml, b: {{recipe: my-variant.yaml}}, "
                   f"c: prune-30, d: {{recipe: prune-30.yaml}}}}\nlanguages: [de]\npairs: [en-de]\n"
                   f"benchmarks: [{{name: f, kind: flores101, path: {REPO / 'data' / 'flores101'}}}]\n")
    s = load_sweep(cfg)
    assert s.variants["a"].name == s.variants["b"].name == "thirty-percent"
    assert s.variants["c"].name == s.variants["d"].name == "prune-30"
    for name in ("ptq-int8", "ptq-int8.yaml"):
        assert find_recipe(name) == REPO / "configs" / "recipes" / "ptq-int8.yaml"


def test_compress_help_names_every_shipped_recipe(capsys):
    from forgetbench.cli import main

    assert main(["compress", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert all(p.stem in text for p in (REPO / "configs" / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("command", [["train-mt", "configs/teacher.yaml"], ["distill", "configs/distill-kd.yaml"]],
                         ids=["train-mt", "distill"])
def test_the_shipped_training_configs_run_from_a_clone_without_shared_data(command, tmp_path, capsys):
    """A clone has no ../shared: the configs fall back to the shipped sample corpus, with a warning line."""
    from forgetbench.cli import main

    clone = user_clone(tmp_path)
    cfg = clone / command[1]
    assert main([command[0], str(cfg), "--steps", "2", "--out", str(clone / "runs" / "x"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "data.shared" in err and "are not in" in err and "corpus-sample" in err and "data.corpora" in err
    info = json.loads((clone / "runs" / "x" / "model" / "training.json").read_text())
    assert info["steps"] == 2


def test_the_graphmerge_study_arms_differ_only_in_the_embeddings(tmp_path):
    """Baseline and GraphMerge arms: the same data, vocabulary, model size, seed, steps and schedule."""
    study = yaml.safe_load((REPO / "configs" / "graphmerge-study" / "study.yaml").read_text())
    arms = {a: yaml.safe_load((REPO / "configs" / "graphmerge-study" / p).read_text()) for a, p in study["arms"].items()}
    emb = arms["graphmerge"]["model"].pop("embeddings")["graphmerge"]
    assert emb["hops"] == 2 and emb["mode"] == "gnn" and "embeddings" not in arms["baseline"]["model"]
    assert arms["baseline"] == arms["graphmerge"]
    from forgetbench.train.config import load_config

    clone = user_clone(tmp_path)
    for p in study["arms"].values():
        assert load_config(clone / "configs" / "graphmerge-study" / p).train.threads == 1


def test_the_pretraining_configs_differ_only_in_the_variant():
    from forgetbench.pretrain.config import load_pretrain_config

    d = REPO / "configs" / "pretrain"
    raws = {v: yaml.safe_load((d / f"{v}.yaml").read_text()) for v in ("mlm", "usl-mlm", "ud-prlm")}
    assert {v: r["model"].pop("variant") for v, r in raws.items()} == {v: v for v in raws}
    assert raws["mlm"] == raws["usl-mlm"] == raws["ud-prlm"]
    cfg = load_pretrain_config(d / "ud-prlm.yaml")  # treebank folders checked: each has its train split
    assert len(cfg.data.treebanks) == 5 and cfg.train.threads == 1


def test_the_shipped_encoders_are_one_study_pre_trained_from_these_configs():
    """``artifacts/encoders/{mlm,usl-mlm,ud-prlm}`` (the expected-label form, METHOD §5c): each loads as its variant; the three share the vocabulary,
    data, seed and 6,000 steps of ``configs/pretrain`` (their settings are the configs' but for the variant, the
    host's paths and a lent GPU's time budget), their segments cover steps 1–6,000, and each is under 30 MB of
    fp16."""
    import json

    from forgetbench.parsing.layers.pretrained import load_encoder

    spms, configs = set(), {}
    for v in ("mlm", "usl-mlm", "ud-prlm"):
        d = REPO / "artifacts" / "encoders" / v
        model, sp, labels = load_encoder(d)
        rec = json.loads((d / "training.json").read_text())
        assert model.config.variant == rec["variant"] == v and rec["steps"] == 6000 and sp.get_piece_size() == 8000
        assert model.config.structure == "expected-label"  # made before the paper's USI: the named ablation
        segs = rec["segments"]
        assert segs[0]["first_step"] == 1 and segs[-1]["last_step"] == 6000
        assert all(a["last_step"] + 1 == b["first_step"] for a, b in zip(segs, segs[1:], strict=False))
        assert (d / "model.safetensors").stat().st_size < 30e6 and rec["shipped"]["dtype"] == "float16"
        spms.add((d / "spm.model").read_bytes())
        cfg = rec["config"]
        assert cfg["model"].pop("variant") == v
        configs[v] = {k: cfg[k] for k in ("spm", "model", "objective")} | {
            "train": {k: x for k, x in cfg["train"].items() if k != "time_budget_minutes"}, "data": {k: x for k, x in cfg["data"].items() if k not in ("shared", "treebanks")}}
        shipped = yaml.safe_load((REPO / "configs" / "pretrain" / f"{v}.yaml").read_text())
        assert shipped["train"]["seed"] == cfg["train"]["seed"]  # the configs now run until the held-out loss stops
    assert len(spms) == 1 and configs["mlm"] == configs["usl-mlm"] == configs["ud-prlm"]


TRAINING = [p for p in [*CONFIGS, *sorted((REPO / "configs" / "graphmerge-study").glob("*.yaml"))]
            if str((yaml.safe_load(p.read_text()).get("data") or {}).get("shared", "")).endswith("shared/data")]


@pytest.mark.shared_data
@pytest.mark.parametrize("path", TRAINING, ids=[str(p.relative_to(REPO / "configs")) for p in TRAINING])
def test_shipped_training_configs_read_the_study_corpora_beside_the_project(path: Path, shared_data):
    """Beside the developers' data folder the shipped training and distillation configs read it (no warning, the
    sample unused): the runs of RESULTS and the shipped models' cards."""
    raw = yaml.safe_load(path.read_text())
    if "teacher" in raw and "student" in raw:
        from forgetbench.distill.config import load_distill_config

        cfg = load_distill_config(path)
        assert cfg.data_note is None and Path(cfg.data.shared).resolve() == shared_data.resolve()
    else:
        from forgetbench.train.config import load_config

        cfg = load_config(path)
        assert cfg.data_note is None and Path(cfg.data.shared).resolve() == shared_data.resolve()
