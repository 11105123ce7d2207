"""A wall deadline (``--stop-after``, ``$FORGETBENCH_STOP_AT``; ``resources`` rule 6): the training loops write a
checkpoint and stop after the step that passes it, and the same command resumes to the uninterrupted run's weights."""

import json

import pytest
import torch
from safetensors.torch import load_file

from forgetbench.errors import ForgetbenchError
from forgetbench.resources import STOP_AT_ENV, past_stop_at, set_stop_after

from .test_distill import toy_setup
from .test_train_mt import _config, _shared


def _same(a, b):
    a, b = load_file(str(a)), load_file(str(b))
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_deadline_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(STOP_AT_ENV, raising=False)
    assert not past_stop_at()
    set_stop_after(0)
    assert past_stop_at()
    set_stop_after(60)
    assert not past_stop_at()
    monkeypatch.setenv(STOP_AT_ENV, "soon")
    with pytest.raises(ForgetbenchError, match="give a Unix time"):
        past_stop_at()
    with pytest.raises(ForgetbenchError, match="--stop-after -1"):
        set_stop_after(-1)


def test_train_mt_stops_at_the_deadline_and_resumes_to_the_same_weights(tmp_path, monkeypatch):
    from forgetbench.train.mt import train

    _shared(tmp_path / "shared")
    quiet = {"progress": False, "log": lambda *_: None}
    full = train(_config(tmp_path, 6), tmp_path / "full", **quiet)
    monkeypatch.setenv(STOP_AT_ENV, "0")  # long past: the run stops after its first step
    stopped = train(_config(tmp_path, 6), tmp_path / "cut", **quiet)
    rec = json.loads((stopped / "training.json").read_text())
    assert rec["steps"] == 1 and rec["stopped_by"] == "the wall deadline (--stop-after)"
    monkeypatch.delenv(STOP_AT_ENV)
    resumed = train(_config(tmp_path, 6), tmp_path / "cut", **quiet)
    assert json.loads((resumed / "training.json").read_text())["steps"] == 6
    assert _same(full / "model.safetensors", resumed / "model.safetensors")


def test_distill_stops_at_the_deadline_and_resumes_to_the_same_weights(tiny_dir, tmp_path, monkeypatch):
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    cfg = toy_setup(tmp_path, tiny_dir)
    quiet = {"progress": False, "log": lambda *_: None}
    full = distill(load_distill_config(cfg), tmp_path / "full", **quiet)
    monkeypatch.setenv(STOP_AT_ENV, "0")
    stopped = distill(load_distill_config(cfg), tmp_path / "cut", **quiet)
    rec = json.loads((stopped / "training.json").read_text())
    assert rec["steps"] == 1 and rec["stopped_by"] == "the wall deadline (--stop-after)"
    monkeypatch.delenv(STOP_AT_ENV)
    resumed = distill(load_distill_config(cfg), tmp_path / "cut", **quiet)
    assert json.loads((resumed / "training.json").read_text())["steps"] == 8
    assert _same(full / "model.safetensors", resumed / "model.safetensors")
