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
    """A kill point by hook: ``sig`` sent to this process while the loop sets step ``at``'s learning rate (its
    schedule function: ``cooled`` in the distillation loop, ``inverse_sqrt`` in the others)."""
    import os
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only; this test runs elsewhere")
    name = "inverse_sqrt" if hasattr(module, "inverse_sqrt") else "cooled"
    real, sent = getattr(module, name), []

    def hooked(step, *a):
        if step == at and not sent:
            sent.append(step)
            os.kill(os.getpid(), sig)
        return real(step, *a)
    monkeypatch.setattr(module, name, hooked)


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


def test_a_signal_relayed_twice_by_a_launcher_is_one_stop_request(tiny_dir, tmp_path, monkeypatch):
    """Under ``accelerate launch`` a worker gets the signal it was sent and the launcher's relay of it in the same
    instant (and Ctrl-C reaches the whole process group): the two are one request — the step finishes, the
    checkpoint is written — not "a second signal ends the process" (which lost a distillation's last 328 steps)."""
    import os
    import signal

    from forgetbench.distill import loop
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    cfg = toy_setup(tmp_path, tiny_dir, extra_train=", checkpoint_minutes: 60.0")
    quiet = {"progress": False, "log": lambda *_: None}
    full = distill(load_distill_config(cfg), tmp_path / "full", **quiet)
    real = loop.cooled

    def hooked(step, *a):
        if step == 3 and not hooked.sent:
            hooked.sent = True
            os.kill(os.getpid(), signal.SIGTERM)  # sent to the worker
            os.kill(os.getpid(), signal.SIGTERM)  # relayed by its launcher
        return real(step, *a)
    hooked.sent = False
    with monkeypatch.context() as m:
        m.setattr(loop, "cooled", hooked)
        stopped = distill(load_distill_config(cfg), tmp_path / "cut", **quiet)
    assert json.loads((tmp_path / "cut" / "checkpoint" / "state.json").read_text())["step"] == 3
    assert json.loads((stopped / "training.json").read_text())["stopped_by"].startswith("SIGTERM (a checkpoint")
    resumed = distill(load_distill_config(cfg), tmp_path / "cut", **quiet)
    assert _same(full / "model.safetensors", resumed / "model.safetensors")


def test_a_second_signal_after_the_repeat_window_ends_the_process(tmp_path):
    """The way out stays: a second signal later than ``SIGNAL_REPEAT_S`` after the first ends the process at once
    (its exit status says the signal), as without the handler."""
    import subprocess
    import sys

    script = (
        "import os, signal, time\n"
        "from forgetbench import resources as r\n"
        "clock = [100.0]\n"
        "time.monotonic = lambda: clock[0]\n"
        "with r.stop_on_signals():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('one request:', r.past_stop_at(), flush=True)\n"
        "    clock[0] += r.SIGNAL_REPEAT_S + 1\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(5)\n"
        "print('survived', flush=True)\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.stdout == "one request: True\n" and p.returncode == -signal_number("SIGTERM"), (p.stdout, p.stderr)


def signal_number(name: str) -> int:
    import signal

    return int(getattr(signal, name))


def test_a_resume_drops_the_log_records_after_its_checkpoint(tiny_dir, tmp_path, monkeypatch):
    """A run killed after its checkpoint (step 3) had logged steps 4–5 (and a torn line); the resume trains them
    again, so their records go first: the resumed run's log tells each step once, as the uninterrupted run's."""
    import signal

    from forgetbench.distill import loop
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    cfg = toy_setup(tmp_path, tiny_dir, extra_train=", checkpoint_minutes: 60.0, log_every: 1, signal_every: 1")
    quiet = {"progress": False, "log": lambda *_: None}
    distill(load_distill_config(cfg), tmp_path / "full", **quiet)
    with monkeypatch.context() as m:
        _signal_at(m, loop, 3, signal.SIGTERM)
        distill(load_distill_config(cfg), tmp_path / "cut", **quiet)
    for name in ("train_log.jsonl", "signals.jsonl"):
        with open(tmp_path / "cut" / name, "a", encoding="utf-8") as f:
            f.write('{"step": 4, "loss": 9.0}\n{"step": 5, "loss": 9.0}\n{"step": 6, "lo')
    distill(load_distill_config(cfg), tmp_path / "cut", **quiet)

    def story(run, name):
        keep = ("step", "phase", "split", "loss", "ce", "kd", "groups")
        return [{k: r[k] for k in keep if k in r} for r in map(json.loads, (tmp_path / run / name).open())]
    for name in ("train_log.jsonl", "signals.jsonl"):
        cut, full = story("cut", name), story("full", name)
        assert [r["step"] for r in cut] == [r["step"] for r in full] and len(full) >= 8
        assert cut == full


def test_trim_jsonl_keeps_what_came_before_byte_for_byte(tmp_path):
    from forgetbench.io import trim_jsonl

    p = tmp_path / "log.jsonl"
    p.write_text('{"step": 1, "a": 1.50}\nnot json\n{"note": "x"}\n{"step": 2}\n{"step": 3}\n{"step": 4')
    assert trim_jsonl(p, 2) == 2 and p.read_text() == '{"step": 1, "a": 1.50}\nnot json\n{"note": "x"}\n{"step": 2}\n'
    assert trim_jsonl(p, 2) == 0 and trim_jsonl(tmp_path / "absent.jsonl", 0) == 0


def test_read_run_log_tells_each_step_of_each_kind_once(tmp_path):
    """A log from before resumes trimmed it: the records of steps 2–3 written twice (the discarded run's first); each
    (step, kind) once, the last written, in the order written; a probe and a training split of one step both stay."""
    from forgetbench.io import read_run_log

    p = tmp_path / "signals.jsonl"
    rows = [{"step": 2, "split": "train", "v": 1}, {"step": 2, "split": "probe", "v": 1}, {"step": 3, "split": "train", "v": 1},
            {"step": 2, "split": "train", "v": 2}, {"step": 2, "split": "probe", "v": 2}, {"step": 3, "split": "train", "v": 2},
            {"step": 3, "dev_score": 1.0}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_run_log(p) == rows[3:]


def test_a_checkpoint_that_counted_one_processs_tokens_is_scaled_and_said(tiny_dir, tmp_path, monkeypatch):
    """A checkpoint written before the count held every process's tokens (no ``tokens_of``) carries the main
    process's share: the resume scales it by its processes and the record says to which step; a checkpoint of
    today resumes to the uninterrupted run's count exactly."""
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill

    cfg = toy_setup(tmp_path, tiny_dir)
    quiet = {"progress": False, "log": lambda *_: None}
    full = json.loads((distill(load_distill_config(cfg), tmp_path / "full", **quiet) / "training.json").read_text())
    assert "tokens_scaled_to_step" not in full and full["tokens"] > 0
    for name, legacy in (("today", False), ("old", True)):
        monkeypatch.setenv(STOP_AT_ENV, "0")
        distill(load_distill_config(cfg), tmp_path / name, **quiet)
        monkeypatch.delenv(STOP_AT_ENV)
        state_f = tmp_path / name / "checkpoint" / "state.json"
        if legacy:
            st = json.loads(state_f.read_text())
            st.pop("tokens_of")
            state_f.write_text(json.dumps(st))
        rec = json.loads((distill(load_distill_config(cfg), tmp_path / name, **quiet) / "training.json").read_text())
        assert rec["tokens"] == full["tokens"]  # one process: the share is the whole
        assert rec.get("tokens_scaled_to_step") == (1 if legacy else None)
