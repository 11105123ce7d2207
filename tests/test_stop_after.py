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


def test_a_deadline_already_past_when_a_command_starts_is_said_in_one_line(monkeypatch, capsys):
    """``$FORGETBENCH_STOP_AT`` in the past at the start (``date -d 00:45`` read as today's): the run would stop
    after its first step, so the command says so first, with the deadline and a fix; a future one says nothing."""
    import time

    monkeypatch.setenv(STOP_AT_ENV, str(time.time() - 7200))
    set_stop_after(None)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is 2.0 h in the past" in err and "stops after its first step" in err
    monkeypatch.setenv(STOP_AT_ENV, str(time.time() + 600))
    set_stop_after(None)
    assert capsys.readouterr().err == ""


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


def _signal_at(monkeypatch, module, at: int, sig) -> None:
    """A kill point by hook: ``sig`` sent to this process while the loop sets step ``at``'s learning rate."""
    import os
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only; this test runs elsewhere")
    real, sent = module.inverse_sqrt, []

    def hooked(step, *a):
        if step == at and not sent:
            sent.append(step)
            os.kill(os.getpid(), sig)
        return real(step, *a)
    monkeypatch.setattr(module, "inverse_sqrt", hooked)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_distill_after_its_step_with_a_checkpoint_and_it_resumes_to_the_same_weights(
        sig, tiny_dir, tmp_path, monkeypatch):
    """resources rule 7: the step the signal came in finishes, its checkpoint is written (not the last periodic
    one: checkpoint_minutes is an hour), the handlers are put back, and the same command resumes."""
    import signal

    from forgetbench.distill import loop
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    cfg = toy_setup(tmp_path, tiny_dir, extra_train=", checkpoint_minutes: 60.0")
    quiet = {"progress": False, "log": lambda *_: None}
    full = distill(load_distill_config(cfg), tmp_path / "full", **quiet)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with monkeypatch.context() as m:
        _signal_at(m, loop, 3, getattr(signal, sig))
        stopped = distill(load_distill_config(cfg), tmp_path / "cut", **quiet)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert json.loads((tmp_path / "cut" / "checkpoint" / "state.json").read_text())["step"] == 3
    rec = json.loads((stopped / "training.json").read_text())
    assert rec["steps"] == 3 and rec["stopped_by"] == f"{sig} (a checkpoint written; the same command resumes)"
    assert not past_stop_at()  # the stop belonged to that run
    resumed = distill(load_distill_config(cfg), tmp_path / "cut", **quiet)
    assert json.loads((resumed / "training.json").read_text())["steps"] == 8
    assert _same(full / "model.safetensors", resumed / "model.safetensors")


def test_a_stop_signal_ends_train_mt_after_its_step_and_it_resumes_to_the_same_weights(tmp_path, monkeypatch):
    import signal

    from forgetbench.train import loop
    from forgetbench.train.mt import train

    _shared(tmp_path / "shared")
    quiet = {"progress": False, "log": lambda *_: None}
    full = train(_config(tmp_path, 6), tmp_path / "full", **quiet)
    with monkeypatch.context() as m:
        _signal_at(m, loop, 2, signal.SIGTERM)
        stopped = train(_config(tmp_path, 6), tmp_path / "cut", **quiet)
    rec = json.loads((stopped / "training.json").read_text())
    assert rec["steps"] == 2 and rec["stopped_by"].startswith("SIGTERM (a checkpoint written")
    resumed = train(_config(tmp_path, 6), tmp_path / "cut", **quiet)
    assert json.loads((resumed / "training.json").read_text())["steps"] == 6
    assert _same(full / "model.safetensors", resumed / "model.safetensors")
