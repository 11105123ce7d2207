"""Bad input, as a hostile new user gives it, to every subcommand: exit 2, exactly one stderr line naming the
problem, and nothing written or changed (every file under the test folder, outputs included, is byte-identical
afterwards; the path-escape cases also check a file outside the model folder)."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from forgetbench.cli import main

from .conftest import CALIB, REPO
from .test_parser import _toy_treebank

UD = REPO / "data" / "ud" / "UD_Wolof-WTB"


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def parser_dir(tiny_parser):
    return tiny_parser / "p"


def _model_copy(tiny_dir, w: Path, name="m") -> Path:
    d = w / name
    shutil.copytree(tiny_dir, d)
    return d


def _sweep_cfg(w: Path, tiny_dir, extra: str = "", **over) -> Path:
    body = {"model": str(tiny_dir), "variants": "{base: null}", "languages": "[de]", "pairs": "[en-de]",
            "benchmarks": f"[{{name: flores101, kind: flores101, path: {REPO / 'data' / 'flores101'}}}]", "sentences": "2"}
    body |= over
    p = w / "sweep.yaml"
    p.write_text("".join(f"{k}: {v}\n" for k, v in body.items()) + extra)
    return p


def _treebank(w: Path, edit=None, name="t.conllu") -> Path:
    p = _toy_treebank(w / name, 3, 0)
    if edit:
        lines = p.read_text().splitlines()
        p.write_text("\n".join(edit(lines)) + "\n")
    return p


def _set_col(lines, k, col, value):
    """Set column ``col`` of the k-th token line."""
    toks = [i for i, ln in enumerate(lines) if ln and not ln.startswith("#")]
    cols = lines[toks[k]].split("\t")
    cols[col] = value
    lines[toks[k]] = "\t".join(cols)
    return lines


def _write(p: Path, data) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data) if isinstance(data, bytes) else p.write_text(data)
    return p


def _existing_run_like(w: Path) -> Path:
    d = w / "mine"
    _write(d / "config.yaml", "my own notes\n")
    _write(d / "report" / "summary.json", '{"mine": true}\n')
    return d


def _fairseq_empty(w):
    return _write(w / "empty.pt", b"")


def _damaged_store(w, how):
    run = w / "run"
    run.mkdir()
    if how == "garbage":
        _write(run / "store.sqlite", b"this is not a database" * 100)
    else:
        from forgetbench.eval.store import Store

        s = Store(run / "store.sqlite")
        s.db.execute("INSERT INTO meta VALUES ('config_source', '{not json')")
        s.db.commit()
        s.close()
    return run


def _truncated(tiny_dir, w):
    d = _model_copy(tiny_dir, w)
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return d


def _mismatched(tiny_dir, w):
    d = _model_copy(tiny_dir, w)
    cfg = json.loads((d / "config.json").read_text())
    cfg["d_model"], cfg["encoder_ffn_dim"] = 96, 200
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def _nan(tiny_dir, w):
    from safetensors.torch import load_file, save_file

    d = _model_copy(tiny_dir, w)
    sd = load_file(str(d / "model.safetensors"))
    k = next(k for k in sd if "fc1.weight" in k)
    sd[k][0, 0] = float("nan")
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
    return d


def _escaping_index(tiny_dir, w, shard):
    d = _model_copy(tiny_dir, w, "sharded")
    (d / "model.safetensors").rename(d / "model-00001-of-00001.safetensors")
    from safetensors import safe_open

    with safe_open(str(d / "model-00001-of-00001.safetensors"), "pt") as f:
        names = list(f.keys())
    outside = _write(w / "outside.safetensors", (d / "model-00001-of-00001.safetensors").read_bytes())
    target = str(outside) if shard == "absolute" else "../outside.safetensors"
    wm = {n: ("model-00001-of-00001.safetensors" if i else target) for i, n in enumerate(names)}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    return d


def _truncated_shard(tiny_dir, w):
    d = _model_copy(tiny_dir, w)
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-1000])
    return d


def _recipe(w, text):
    return _write(w / "r.yaml", text)


TRAIN_CFG = ("data: {{shared: {shared}, languages: [de]}}\nspm: {{vocab_size: 300}}\n"
             "model: {{d_model: 32, encoder_layers: 1, decoder_layers: 1, heads: 2, ffn: 64}}\ntrain: {{steps: 2{extra}}}\n")


def _train_cfg(w, extra=""):
    shared = _write(w / "shared" / "keep.txt", "x").parent
    return _write(w / "t.yaml", TRAIN_CFG.format(shared=shared, extra=extra))


# (id, function(w, tiny_dir, parser_dir) -> argv, fragment of the one error line)
CASES = [
    # compress
    ("compress-out-exists", lambda w, t, p: ["compress", str(t), "--recipe", "prune-30", "--out", str(_write(w / "o" / "keep.txt", "mine").parent)], "exists and is never overwritten"),
    ("compress-unknown-recipe", lambda w, t, p: ["compress", str(t), "--recipe", "prune-99", "--out", str(w / "o")], "recipe 'prune-99' not found"),
    ("compress-sparsity", lambda w, t, p: ["compress", str(t), "--recipe", str(_recipe(w, "steps:\n  - prune: {sparsity: 1.2}\n")), "--out", str(w / "o")], "sparsity must be in [0, 1)"),
    ("compress-recipe-yaml", lambda w, t, p: ["compress", str(t), "--recipe", str(_recipe(w, "steps: [prune: {sparsity: 0.3\n")), "--out", str(w / "o")], "not valid YAML"),
    ("compress-recipe-list", lambda w, t, p: ["compress", str(t), "--recipe", str(_recipe(w, "- prune: {sparsity: 0.3}\n")), "--out", str(w / "o")], "recipe is a YAML mapping"),
    ("compress-percentile", lambda w, t, p: ["compress", str(t), "--recipe", str(_recipe(w, f"steps:\n  - quantize: {{calibrator: percentile, percentile: abc, calibration: {{data: {CALIB}}}}}\n")), "--out", str(w / "o")], "percentile must be in (0, 100]"),
    ("compress-not-a-model", lambda w, t, p: ["compress", str(_write(w / "d" / "x.txt", "x").parent), "--recipe", "prune-30", "--out", str(w / "o")], "not a model folder"),
    ("compress-truncated-weights", lambda w, t, p: ["compress", str(_truncated(t, w)), "--recipe", "prune-30", "--out", str(w / "o")], "weights cannot be loaded"),
    ("compress-config-mismatch", lambda w, t, p: ["compress", str(_mismatched(t, w)), "--recipe", "prune-30", "--out", str(w / "o")], "shapes do not match config.json"),
    ("compress-nan-weights", lambda w, t, p: ["compress", str(_nan(t, w)), "--recipe", "prune-30", "--out", str(w / "o")], "contains NaN"),
    ("compress-parent-is-a-file", lambda w, t, p: ["compress", str(t), "--recipe", "prune-30", "--out", str(_write(w / "f", "x") / "o")], "is a file, not a folder"),
    ("compress-ancestor-is-a-file", lambda w, t, p: ["compress", str(t), "--recipe", "prune-30", "--out", str(_write(w / "f", "x") / "a" / "b" / "o")], "f is a file, not a folder"),
    ("sweep-ancestor-is-a-file", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t)), "--out", str(_write(w / "f", "x") / "a" / "o")], "f is a file, not a folder"),
    ("train-ancestor-is-a-file", lambda w, t, p: ["train-mt", str(_train_cfg(w)), "--out", str(_write(w / "f", "x") / "a" / "o")], "f is a file, not a folder"),
    ("compress-calibration-missing", lambda w, t, p: ["compress", str(t), "--recipe", "ptq-int8", "--calibration", str(w / "nope.tsv"), "--out", str(w / "o")], "nope.tsv not found"),
    ("compress-threads-zero", lambda w, t, p: ["compress", str(t), "--recipe", "prune-30", "--threads", "0", "--out", str(w / "o")], "must be at least 1"),
    # compress-stream
    ("stream-absolute-shard", lambda w, t, p: ["compress-stream", str(_escaping_index(t, w, "absolute")), "--recipe", "prune-30", "--out", str(w / "o")], "not a plain file name"),
    ("stream-dotdot-shard", lambda w, t, p: ["compress-stream", str(_escaping_index(t, w, "dotdot")), "--recipe", "prune-30", "--out", str(w / "o")], "not a plain file name"),
    ("stream-activation-quant", lambda w, t, p: ["compress-stream", str(t), "--recipe", "ptq-int8", "--out", str(w / "o")], "cannot be streamed"),
    ("stream-truncated-shard", lambda w, t, p: ["compress-stream", str(_truncated_shard(t, w)), "--recipe", "prune-30", "--out", str(w / "o")], "truncated"),
    # make-tiny
    ("tiny-vocab-zero", lambda w, t, p: ["make-tiny", str(CALIB), "--vocab", "0", "--out", str(w / "o")], "--vocab 0: must be at least 16"),
    ("tiny-text-missing", lambda w, t, p: ["make-tiny", str(w / "nope.txt"), "--out", str(w / "o")], "nope.txt not found"),
    ("tiny-invalid-utf8", lambda w, t, p: ["make-tiny", str(_write(w / "x.txt", b"ok\n\xff\xfe bad\n")), "--out", str(w / "o")], "x.txt:2: is not valid UTF-8"),
    ("tiny-out-exists", lambda w, t, p: ["make-tiny", str(CALIB), "--out", str(_write(w / "o.txt", "mine"))], "exists and is never overwritten"),
    # train-mt
    ("train-invalid-yaml", lambda w, t, p: ["train-mt", str(_write(w / "t.yaml", "train: {steps: [\n")), "--out", str(w / "o")], "not valid YAML"),
    ("train-not-a-mapping", lambda w, t, p: ["train-mt", str(_write(w / "t.yaml", "- a\n- b\n")), "--out", str(w / "o")], "YAML mapping"),
    ("train-wrong-type", lambda w, t, p: ["train-mt", str(_train_cfg(w, ", threads: many")), "--out", str(w / "o")], "train.threads: expected an integer, got 'many'"),
    ("train-unknown-section", lambda w, t, p: ["train-mt", str(_write(w / "t.yaml", "optimiser: {lr: 1}\n")), "--out", str(w / "o")], "unknown section(s) ['optimiser']"),
    ("train-out-not-a-run", lambda w, t, p: ["train-mt", str(_train_cfg(w)), "--out", str(_write(w / "o" / "notes.txt", "mine").parent)], "not a train-mt run folder"),
    ("train-steps-zero", lambda w, t, p: ["train-mt", str(_train_cfg(w)), "--steps", "0", "--out", str(w / "o")], "--steps 0"),
    # sweep / eval
    ("sweep-invalid-yaml", lambda w, t, p: ["sweep", str(_write(w / "s.yaml", "model: [\n")), "--out", str(w / "o")], "not valid YAML"),
    ("sweep-threads-many", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, threads="many")), "--out", str(w / "o")], "threads must be a positive integer"),
    ("sweep-variants-list", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, variants="[base]")), "--out", str(w / "o")], "variants must be a mapping"),
    ("sweep-tiers-list", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, tiers="[training]")), "--out", str(w / "o")], "tiers: expected a mapping"),
    ("sweep-tier-view-escapes", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, tiers=f"{{'../x': {{counts: {REPO / 'artifacts/teacher/training.json'}}}}}")), "--out", str(w / "o")], "not a plain file name"),
    ("sweep-metrics-unknown-key", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, extra="metrics: {spm_file: x.model}\n")), "--out", str(w / "o")], "metrics: unknown key(s) ['spm_file']; allowed: spm, spm_official"),
    ("sweep-bias-missing-path", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, extra="bias: {mucow: {pairs: [en-de]}}\n")), "--out", str(w / "o")], "bias.mucow needs 'path'"),
    ("sweep-benchmark-utf8", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, benchmarks=_flores_list(w, BAD_UTF8))), "--out", str(w / "o")], "is not valid UTF-8"),
    ("sweep-benchmark-empty-line", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, benchmarks=_flores_list(w, EMPTY_LINE))), "--out", str(w / "o")], "empty line"),
    ("sweep-out-not-a-run", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t)), "--out", str(_existing_run_like(w))], "not a sweep run folder"),
    ("sweep-language-did-you-mean", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, languages="[frr]", pairs="english-centric")), "--out", str(w / "o")], "sweep.yaml: languages: unknown language code 'frr'; did you mean 'fr'"),
    ("sweep-pair-did-you-mean", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, pairs="[en-dee]")), "--out", str(w / "o")], "sweep.yaml: pairs (en-dee): unknown language code 'dee'; did you mean 'de'"),
    ("sweep-recipe-did-you-mean", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, variants="{base: null, mine: prune30}")), "--out", str(w / "o")], "sweep.yaml: variants.mine: recipe 'prune30' not found (not a file, not a shipped recipe); did you mean 'prune-30'"),
    ("sweep-unknown-language", lambda w, t, p: ["sweep", str(_sweep_cfg(w, t, languages="[xx]", pairs="english-centric")), "--out", str(w / "o")], "xx"),
    ("eval-config-missing", lambda w, t, p: ["eval", str(w / "nope.yaml"), "--out", str(w / "o")], "nope.yaml not found"),
    # report
    ("report-not-a-run", lambda w, t, p: ["report", str(_write(w / "r" / "x.txt", "x").parent)], "not a run folder"),
    ("report-corrupt-store", lambda w, t, p: ["report", str(_damaged_store(w, "garbage"))], "not a readable forgetbench run store"),
    ("report-corrupt-metadata", lambda w, t, p: ["report", str(_damaged_store(w, "meta"))], "metadata 'config_source' is damaged"),
    # plan-devices
    ("plan-zero-memory", lambda w, t, p: ["plan-devices", "m2m100_418M", "--gpus", "1", "--gpu-memory", "0GiB"], "must be more than zero"),
    ("plan-does-not-fit", lambda w, t, p: ["plan-devices", "m2m100_12B", "--gpus", "2", "--gpu-memory", "1GiB"], "does not fit"),
    ("plan-zero-gpus", lambda w, t, p: ["plan-devices", "m2m100_418M", "--gpus", "0", "--gpu-memory", "4GiB"], "must be at least 1"),
    # convert-fairseq
    ("fairseq-empty-checkpoint", lambda w, t, p: ["convert-fairseq", str(_fairseq_empty(w)), "--dict", str(w / "d.txt"), "--spm", str(w / "s.model"), "--out", str(w / "o")], "empty or truncated checkpoint"),
    ("fairseq-out-exists", lambda w, t, p: ["convert-fairseq", str(_fairseq_empty(w)), "--dict", str(w / "d.txt"), "--spm", str(w / "s.model"), "--out", str(_write(w / "o" / "k", "x").parent)], "exists and is never overwritten"),
    # parse train / eval / predict / compress
    ("parse-head-not-integer", lambda w, t, p: ["parse", "train", "--train", str(_treebank(w, lambda ls: _set_col(ls, 1, 6, "two"))), "--out", str(w / "o")], "HEAD 'two' is not an integer"),
    ("parse-missing-columns", lambda w, t, p: ["parse", "train", "--train", str(_treebank(w, lambda ls: _set_col(ls, 2, 9, "_\textra"))), "--out", str(w / "o")], "11 tab-separated columns"),
    ("parse-empty-file", lambda w, t, p: ["parse", "train", "--train", str(_write(w / "e.conllu", "")), "--out", str(w / "o")], "no sentence found"),
    ("parse-cycle", lambda w, t, p: ["parse", "train", "--train", str(_treebank(w, lambda ls: _set_col(_set_col(ls, 0, 6, "2"), 1, 6, "1"))), "--out", str(w / "o")], "invalid"),
    ("parse-head-out-of-range", lambda w, t, p: ["parse", "train", "--train", str(_treebank(w, lambda ls: _set_col(ls, 0, 6, "40"))), "--out", str(w / "o")], "HEAD 40 is out of range"),
    ("parse-train-out-exists", lambda w, t, p: ["parse", "train", "--train", str(_treebank(w)), "--out", str(_write(w / "o" / "k", "x").parent)], "exists and is never overwritten"),
    ("parse-eval-empty", lambda w, t, p: ["parse", "eval", str(p), str(_write(w / "e.conllu", "# just a comment\n\n"))], "no sentence found"),
    ("parse-eval-no-model", lambda w, t, p: ["parse", "eval", str(w / "nope"), str(_treebank(w))], "not a parser folder"),
    ("parse-predict-out-exists", lambda w, t, p: ["parse", "predict", str(p), str(_treebank(w)), "--out", str(_write(w / "pred.conllu", "mine\n"))], "exists and is never overwritten"),
    ("parse-compress-out-exists", lambda w, t, p: ["parse", "compress", "--models", str(p), "--test", str(_treebank(w)), "--dev", str(_treebank(w, name="d.conllu")), "--out", str(_write(w / "rep" / "report.md", "mine").parent)], "exists and is never overwritten"),
    ("parse-compress-mt-calibration", lambda w, t, p: ["parse", "compress", "--models", str(p), "--test", str(_treebank(w)), "--recipes", "ptq-int8", "--out", str(w / "rep")], "parsers calibrate on CoNLL-U"),
    ("parse-minutes-negative", lambda w, t, p: ["parse", "train", "--train", str(_treebank(w)), "--minutes", "-1", "--out", str(w / "o")], "positive number of minutes"),
]


BAD_UTF8, EMPTY_LINE = b"ok\n\xff\n", b"ok\n\nok\n"


def _flores_list(w: Path, de: bytes) -> str:
    return f"[{{name: f, kind: flores101, path: {_bad_flores(w, de)}}}]"


def _bad_flores(w: Path, de: bytes) -> Path:
    d = w / "flores"
    n = de.count(b"\n")
    _write(d / "eng.devtest", "".join(f"sentence {i}\n" for i in range(n)))
    _write(d / "deu.devtest", de)
    return d


def test_there_are_enough_cases_over_every_subcommand():
    assert len(CASES) >= 40
    covered = {c[0].split("-")[0] for c in CASES}
    assert covered == {"compress", "stream", "tiny", "train", "sweep", "eval", "report", "plan", "fairseq", "parse"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exit_2_one_line_nothing_written(case, tiny_dir, parser_dir, tmp_path, capsys, monkeypatch):
    name, make, fragment = case
    w = tmp_path / "w"
    w.mkdir()
    monkeypatch.chdir(w)
    argv = make(w, tiny_dir, parser_dir)
    before = _snapshot(tmp_path)
    capsys.readouterr()
    with torch.no_grad():
        rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, (name, err)
    assert len(lines) == 1 and lines[0].startswith("forgetbench: error: "), (name, err)
    assert fragment in lines[0], (name, lines[0])
    assert _snapshot(tmp_path) == before, f"{name}: files were written or changed"


@pytest.mark.parametrize("argv", [
    ["compress", "{t}", "--recipe", "prune-30", "--out", "{w}/ro/a/b/o"],
    ["make-tiny", str(CALIB), "--out", "{w}/ro/a/o"],
    ["parse", "train", "--train", "{w}/t.conllu", "--out", "{w}/ro/a/o"],
], ids=["compress", "make-tiny", "parse-train"])
def test_an_output_under_a_folder_that_cannot_be_written_is_refused_with_nothing_made(argv, tiny_dir, tmp_path,
                                                                                      capsys, monkeypatch):
    """Root writes anywhere, so the not-writable case comes through the one check's seam (``os.access``)."""
    import forgetbench.outputs as outputs

    w = tmp_path / "w"
    (w / "ro").mkdir(parents=True)
    _treebank(w)
    real = os.access
    monkeypatch.setattr(outputs.os, "access", lambda path, mode: Path(path) != w / "ro" and real(path, mode))
    before = _snapshot(tmp_path)
    assert main([a.format(t=tiny_dir, w=w) for a in argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"its folder {w / 'ro'} is not writable" in lines[0], lines
    assert _snapshot(tmp_path) == before


def test_forgetbench_threads_must_be_a_positive_integer(tiny_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORGETBENCH_THREADS", "abc")
    assert main(["compress", str(tiny_dir), "--recipe", "prune-30", "--out", str(tmp_path / "o")]) == 2
    assert "$FORGETBENCH_THREADS='abc'" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_an_unexpected_error_is_one_line_with_a_debug_hint(tmp_path, capsys, monkeypatch):
    import forgetbench.cli as cli

    def broken(args):
        return 1 / 0

    real = cli.build_parser

    def parser():
        p = real()
        p._subparsers._group_actions[0].choices["recipes"].set_defaults(func=broken)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    assert cli.main(["recipes"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unexpected ZeroDivisionError" in err[0] and "--debug" in err[0]
    # --debug before or after the command (and after a nested one): the traceback instead of the line
    for argv in (["--debug", "recipes"], ["recipes", "--debug"]):
        with pytest.raises(ZeroDivisionError):
            cli.main(argv)
    assert cli.build_parser().parse_args(["parse", "eval", "m", "t.conllu", "--debug"]).debug is True
    assert cli.build_parser().parse_args(["parse", "eval", "m", "t.conllu"]).debug is False


def test_bitsandbytes_below_the_transformers_floor_is_refused_naming_both_versions(monkeypatch):
    import importlib.metadata
    import importlib.util

    from forgetbench.compress import bnb
    from forgetbench.errors import ForgetbenchError

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "bitsandbytes" else None)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.43.3")
    with pytest.raises(ForgetbenchError, match=r"bitsandbytes 0.43.3 is installed and the installed transformers needs "
                                               r">= 0.46.1"):
        bnb.check_available("variants.int8", cuda=True)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.47.0")
    bnb.check_available("variants.int8", cuda=True)  # a recent one passes


def test_every_config_section_refuses_unknown_keys_with_the_same_line():
    """``configs.known_keys``: the one check behind every section (sweep, distill, train-mt, pretrain-encoder,
    recipes, hardware, backend): the keys, the allowed ones sorted, a note, a close match where there is one."""
    from forgetbench.configs import known_keys
    from forgetbench.errors import ForgetbenchError

    with pytest.raises(ForgetbenchError) as e:
        known_keys({"sentnces": 3, "rounds": 2}, {"sentences", "rounds"}, "c.yaml: speed")
    assert str(e.value) == "c.yaml: speed: unknown key(s) ['sentnces']; allowed: rounds, sentences; did you mean 'sentences'?"
    with pytest.raises(ForgetbenchError) as e:
        known_keys({"x": 1, "y": 2}, {"data"}, "t.yaml", kind="section(s)")
    assert str(e.value) == "t.yaml: unknown section(s) ['x', 'y']; allowed: data"
    known_keys({"data": 1}, {"data", "train"}, "t.yaml")  # nothing unknown: no error
