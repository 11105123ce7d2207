"""One recipe dispatcher for every path: MT in memory, parsers, streamed checkpoints."""

import dataclasses
import shutil

import pytest
import torch
from safetensors.torch import load_file

from forgetbench.cli import main
from forgetbench.compress import PruneConfig, apply_recipe, prune
from forgetbench.compress import apply as applymod
from forgetbench.compress import recipe as recipe_mod
from forgetbench.compress.bnb import BnbConfig
from forgetbench.compress.kinds import KINDS
from forgetbench.compress.ptq import QuantConfig, quantize_weights, weight_matrices
from forgetbench.compress.recipe import parse_recipe
from forgetbench.compress.smooth import SmoothConfig
from forgetbench.compress.streaming import stream_compress
from forgetbench.errors import ForgetbenchError
from forgetbench.parsing.train import load_parser, parser_skeleton

WEIGHTS_ONLY = {"linear_input": False, "linear_weight": True, "attn_qk": False, "attn_pv": False, "residual": False}


@pytest.fixture
def parser_dir(tiny_parser):
    return tiny_parser


def test_a_step_runs_through_its_kind_whose_config_type_it_carries():
    assert set(KINDS) == {"prune", "smooth", "quantize", "bitsandbytes"}
    assert {k.config_type for k in KINDS.values()} == {PruneConfig, SmoothConfig, QuantConfig, BnbConfig}

    @dataclasses.dataclass(frozen=True)
    class Other:
        needs_calibration = False

    r = parse_recipe({"steps": [{"prune": {"sparsity": 0.3}}]}, source="r.yaml")
    r = dataclasses.replace(r, steps=(dataclasses.replace(r.steps[0], config=Other()),))
    with pytest.raises(ForgetbenchError, match=r"r.yaml: step 1: no handler for Other"):
        apply_recipe(torch.nn.Linear(2, 2), r)


def test_a_new_step_kind_is_one_module_and_one_registry_line(monkeypatch):
    """A toy kind (here its module's contents inline): registered, recipes accept it, its options are checked by
    the one validator, its parse and check run before any work and its run does the work through apply_recipe."""
    from forgetbench.compress import kinds
    from forgetbench.compress.step_kind import Step, StepKind, fail

    @dataclasses.dataclass(frozen=True)
    class ScaleConfig:
        factor: float = 1.0

    def parse(opts, where, ctx):
        if opts.get("factor", 1.0) <= 0:
            fail(where, "scale.factor must be positive")
        return Step("scale", ScaleConfig(**opts))

    def run(target, step, calibrate):
        with torch.no_grad():
            for p in target.model.parameters():
                p.mul_(step.config.factor)
        return {"scale": {"factor": step.config.factor}}, None

    monkeypatch.setattr(kinds, "KINDS", dict(kinds.KINDS))
    monkeypatch.setattr(recipe_mod, "KINDS", kinds.KINDS)
    monkeypatch.setattr(applymod, "KINDS", kinds.KINDS)
    kinds.register(StepKind("scale", ScaleConfig, frozenset({"factor"}), "multiply every weight", parse,
                            lambda step, streamed, calibrate: "not streamed" if streamed else None, run))  # the line
    m = torch.nn.Linear(2, 2, bias=False)
    before = m.weight.detach().clone()
    rep, q = apply_recipe(m, parse_recipe({"steps": [{"scale": {"factor": 2.0}}]}, source="s.yaml"))
    assert torch.equal(m.weight, 2 * before) and rep["steps"][0]["scale"] == {"factor": 2.0} and q is None
    with pytest.raises(ForgetbenchError, match=r"s.yaml: step 1: unknown key\(s\) \['fator'\]; allowed: factor"):
        parse_recipe({"steps": [{"scale": {"fator": 2.0}}]}, source="s.yaml")
    with pytest.raises(ForgetbenchError, match=r"s.yaml: step 1: scale.factor must be positive"):
        parse_recipe({"steps": [{"scale": {"factor": -1}}]}, source="s.yaml")
    assert "scale" in recipe_mod.step_kinds()


def test_every_path_runs_through_the_one_dispatcher(tiny_dir, parser_dir, tmp_path, monkeypatch):
    calls = []
    for name, k in list(KINDS.items()):
        def spy(target, step, calibrate, _run=k.run, _kind=name):
            calls.append((_kind, target.streamed))
            return _run(target, step, calibrate)
        monkeypatch.setitem(KINDS, name, dataclasses.replace(k, run=spy))
    assert main(["compress", str(tiny_dir), "--recipe", "prune-30", "--out", str(tmp_path / "a" / "b" / "mt"),
                 "--quiet"]) == 0  # missing parents are created (mkdir -p)
    assert calls == [("prune", False)]
    assert main(["compress-stream", str(tiny_dir), "--recipe", "prune-30", "--out", str(tmp_path / "c" / "d" / "st")]) == 0
    assert calls[1:] == [("prune", True)]
    d = parser_dir
    assert main(["parse", "compress", "--models", str(d / "p"), "--test", str(d / "dev.conllu"), "--dev",
                 str(d / "dev.conllu"), "--recipes", "prune-30", "ptq-int8", "--out", str(tmp_path / "pc")]) == 0
    assert calls[2:] == [("prune", False), ("quantize", False)]


def test_streamed_weight_quantisation_covers_lstm_weights_like_in_memory(parser_dir, tmp_path, capsys):
    r = parse_recipe({"steps": [{"prune": {"sparsity": 0.3}}, {"quantize": {"sites": WEIGHTS_ONLY}}]})
    rep = stream_compress(parser_dir / "p", r, tmp_path / "s", skeleton=parser_skeleton(parser_dir / "p"))
    model, _ = load_parser(parser_dir / "p")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    prune(model, r.steps[0].config)
    quantize_weights(model)
    streamed = load_file(str(tmp_path / "s" / "model.safetensors"))
    lstm = [n for n, _, m in weight_matrices(model) if isinstance(m, torch.nn.LSTM)]
    assert len(lstm) == 2 * 2 * 2 + 2 * 2  # 2-layer BiLSTM (ih, hh per direction) + character BiLSTM
    assert set(rep["steps"][1]["quantize"]["weights"]) == {n for n, _, _ in weight_matrices(model)}
    for k, v in model.state_dict().items():
        assert torch.equal(streamed[k], v), k
    assert not torch.equal(before[lstm[0]], streamed[lstm[0]])
    # the CLI streams a parser folder too
    assert main(["compress-stream", str(parser_dir / "p"), "--recipe", "prune-30", "--out", str(tmp_path / "c")]) == 0
    # data-aware pruning of a parser is in memory: streamed, one line and exit 2, nothing written
    wanda = tmp_path / "wanda.yaml"
    wanda.write_text(f"steps:\n  - prune: {{method: wanda, sparsity: 0.3, calibration: {{data: {parser_dir / 'dev.conllu'}}}}}\n")
    capsys.readouterr()
    assert main(["compress-stream", str(parser_dir / "p"), "--recipe", str(wanda), "--out", str(tmp_path / "w")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "prune a parser in memory" in err[0], err
    assert not (tmp_path / "w").exists()


def test_parser_ptq_recipe_with_conllu_calibration_works_and_mt_calibration_is_refused(parser_dir, tmp_path, capsys):
    d = parser_dir
    recipe = tmp_path / "ptq-ud.yaml"
    recipe.write_text(f"steps:\n  - quantize: {{calibrator: max, calibration: {{data: {d / 'dev.conllu'}, max_sentences: 5}}}}\n")
    assert main(["parse", "compress", "--models", str(d / "p"), "--test", str(d / "dev.conllu"), "--recipes", str(recipe),
                 "--out", str(tmp_path / "ok")]) == 0
    import json

    S = json.loads((tmp_path / "ok" / "summary.json").read_text())
    assert S["treebanks"][0]["variants"]["ptq-ud"]["sizes"]["nominal_ratio"] == 0.25
    capsys.readouterr()
    # the shipped ptq-int8 calibrates on an MT TSV: refused for parsers, in one line, before any work
    assert main(["parse", "compress", "--models", str(d / "p"), "--test", str(d / "dev.conllu"), "--recipes", "ptq-int8",
                 "--out", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 1 (quantize): parsers calibrate on CoNLL-U" in err[0]
    assert not (tmp_path / "no").exists()


def test_streamed_activation_quantisation_is_refused_before_any_work(tiny_dir, tmp_path, capsys):
    shutil.copytree(tiny_dir, tmp_path / "m")
    assert main(["compress-stream", str(tmp_path / "m"), "--recipe", "ptq-int8", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step 1 (quantize): activation quantisation" in err[0] and "cannot be streamed" in err[0]
    assert not (tmp_path / "s").exists()
