"""Calibration in the evaluation pair's target language (``calibration: {choice: target}``): rows translating into
one language; in a sweep, one model per target language, each pair translated by its target language's model."""

import json

import pytest
import torch

from forgetbench.cli import main
from forgetbench.compress.calibration import choose, read_calibration_tsv
from forgetbench.compress.recipe import parse_recipe

from .conftest import CALIB, FLORES, flores_sweep


def _spec(**kw):
    cal = {"data": str(CALIB), "max_sentences": 8, "choice": "target"} | kw
    return parse_recipe({"steps": [{"prune": {"method": "wanda", "sparsity": 0.45, "calibration": cal}}]})


def test_target_rows_translate_into_the_language():
    rows = choose(read_calibration_tsv(CALIB), _spec(language="sw").steps[0].calibration)
    assert len(rows) == 8 and {r[1] for r in rows} == {"sw"} and {r[0] for r in rows} == {"en"}
    into_en = choose(read_calibration_tsv(CALIB), _spec(language="en").steps[0].calibration)
    assert {r[1] for r in into_en} == {"en"} and len({r[0] for r in into_en}) > 1
    r = _spec()
    assert r.routed_by_target and not r.for_target("de").routed_by_target
    assert r.for_target("de").steps[0].calibration.language == "de"


def test_target_without_a_language_is_refused_outside_a_sweep(tmp_path, tiny_dir, capsys):
    rec = tmp_path / "r.yaml"
    rec.write_text(json.dumps({"name": "r", "steps": [{"prune": {"method": "wanda", "sparsity": 0.3, "calibration": {
        "data": str(CALIB), "max_sentences": 8, "choice": "target"}}}]}))
    capsys.readouterr()
    assert main(["compress", str(tiny_dir), "--recipe", str(rec), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "choice target without language" in err[0], err
    assert not (tmp_path / "o").exists()


def _cfg(tmp_path, tiny_dir, max_sentences=8):
    rec = tmp_path / "wanda-target.yaml"
    rec.write_text(json.dumps({"name": "wanda-target", "steps": [{"prune": {"method": "wanda", "sparsity": 0.45,
        "calibration": {"data": str(CALIB), "max_sentences": max_sentences, "choice": "target"}}}]}))
    return flores_sweep(tmp_path / "s.yaml", tiny_dir, f"{{base: null, wanda-target: {rec}}}", "[en-de, de-en, en-sw]", 4, 10,
                        "[de, sw]")


def test_a_sweep_routes_each_pair_to_its_target_languages_model(tmp_path, tiny_dir):
    from forgetbench.compress.pipeline import load_compressed
    from forgetbench.eval.backends import TorchTranslator
    from forgetbench.eval.store import Store

    run = tmp_path / "run"
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir)), "--out", str(run), "--quiet"]) == 0
    folder = run / "variants" / "wanda-target"
    assert sorted(p.name for p in folder.iterdir()) == ["de", "en", "sw"]
    for lang in ("de", "en", "sw"):
        cal = json.loads((folder / lang / "compression.json").read_text())["steps"][0]["prune"]["calibration"]
        assert cal["choice"] == "target" and cal["language"] == lang and cal["sentences"] == 8
        assert all(d.endswith(f"-{lang}") for d in cal["directions"])
    store = Store(run / "store.sqlite")
    try:
        info = store.variants()["wanda-target"]
        assert info["routed"] == ["de", "en", "sw"] and info["calibration"]["choice"] == "target"
        got = {(r["src"], r["tgt"]): [] for r in store.translations("wanda-target")}
        for r in store.translations("wanda-target"):
            got[(r["src"], r["tgt"])].append(r["hyp"])
    finally:
        store.close()
    src_lines = {"en": (FLORES / "eng.devtest").read_text().splitlines()[:4],
                 "de": (FLORES / "deu.devtest").read_text().splitlines()[:4]}
    members = {x: TorchTranslator(*load_compressed(folder / x)[:2]) for x in ("de", "en")}
    for (s, t), hyps in got.items():
        if t in members:
            assert members[t].translate(src_lines[s], s, t, 1, 10) == hyps, (s, t)
    fc1 = {x: m.model.model.encoder.layers[0].fc1.weight == 0 for x, m in members.items()}
    assert not torch.equal(fc1["de"], fc1["en"])  # each language's calibration gives its own masks


def test_a_target_language_without_enough_rows_is_refused_before_any_work(tmp_path, tiny_dir, capsys):
    capsys.readouterr()
    assert main(["sweep", str(_cfg(tmp_path, tiny_dir, max_sentences=17)), "--out", str(tmp_path / "run")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "the model for de" in err[0] and "16 rows with target language de" in err[0], err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("bad,match", [({"choice": "uniform", "language": "de"}, "goes with choice: language or target")])
def test_language_goes_with_language_or_target_only(bad, match):
    from forgetbench.errors import ForgetbenchError

    with pytest.raises(ForgetbenchError, match=match):
        parse_recipe({"steps": [{"prune": {"method": "wanda", "sparsity": 0.3, "calibration": {"data": str(CALIB)} | bad}}]})
