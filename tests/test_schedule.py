"""sweep.schedule: the units of a sweep, their order and readiness, exclusive claims between processes."""

import json
import threading

import pytest

from forgetbench.eval.store import Store
from forgetbench.sweep import load_sweep
from forgetbench.sweep.schedule import SweepAborted, done_count, job_groups, next_unit, units

from .test_eval import _sweep_config


@pytest.fixture
def cfg(tiny_dir, tmp_path):  # 16 sentences a job = UNIT_BATCHES batches of 4: a translation unit per job
    return load_sweep(_sweep_config(tmp_path, tiny_dir, sentences=16, pairs="[en-de, de-en]"))


def test_jobs_are_grouped_into_units_of_full_batches_and_lambda_needs_its_group(tiny_dir, tmp_path):
    from forgetbench.eval.translate import Job

    # the demo's shape: 40-sentence jobs, batches of 64 -> groups of 7 jobs (280 sentences >= 4 x 64)
    jobs = [Job(None, "en", f"x{i}", 40) for i in range(28)]
    assert job_groups(jobs, 64) == [tuple(range(k, k + 7)) for k in range(0, 28, 7)]
    # a job without a limit (a whole test set) is a group alone; a short remainder is a group too
    mixed = [Job(None, "en", "a", 100), Job(None, "en", "b"), Job(None, "en", "c", 300), Job(None, "en", "d", 10)]
    assert job_groups(mixed, 64) == [(0,), (1,), (2,), (3,)]
    assert job_groups(mixed[2:] + mixed[:1], 64) == [(0,), (1, 2)]
    # 6-sentence jobs, batches of 4: both jobs in one unit; λ per job needs that unit of the series and of the base
    cfg = load_sweep(_sweep_config(tmp_path, tiny_dir, sentences=6, pairs="[en-de, de-en, en-sw]"))
    by_key = {u.key: u for u in units(cfg)}
    assert [k for k in by_key if k.startswith("pairs:base")] == ["pairs:base:0"]
    assert by_key["pairs:base:0"].jobs == (0, 1, 2)
    assert by_key["xattn:prune-30:2"].jobs == (2,)
    assert by_key["xattn:prune-30:2"].needs == ("prepare:prune-30", "pairs:prune-30:0", "pairs:base:0")


def test_units_prepare_costliest_first_then_every_series_job_in_config_order(cfg):
    keys = [u.key for u in units(cfg)]
    # ptq calibrates (cost 5) before the pruning (1); the base (no recipe) is registered last
    assert keys[:3] == ["prepare:ptq-int8", "prepare:prune-30", "prepare:base"]
    assert keys[3:] == [f"{k}:{v}:{i}" for v in ("base", "prune-30", "ptq-int8") for k in ("pairs", "xattn") for i in (0, 1)]
    needs = {u.key: u.needs for u in units(cfg)}
    assert needs["pairs:prune-30:1"] == ("prepare:prune-30",)
    # λ reads the series' and the base's translations of the job (the base's spBLEU decides whether it is analysed)
    assert needs["xattn:prune-30:1"] == ("prepare:prune-30", "pairs:prune-30:1", "pairs:base:1")
    assert needs["xattn:base:0"] == ("prepare:base", "pairs:base:0")


def test_a_unit_waits_for_its_variant_and_each_is_claimed_once(cfg, tmp_path):
    a, b = Store(tmp_path / "s.sqlite"), Store(tmp_path / "s.sqlite")  # two processes' connections
    todo = [u for u in units(cfg) if u.kind != "xattn"]
    assert next_unit(a, todo, 0).key == "prepare:ptq-int8"
    # a launcher's rank 1 may not prepare: it waits (polling) until rank 0 has prepared the base
    assert next_unit(a, todo, 0).key == "prepare:prune-30"
    assert next_unit(a, todo, 0).key == "prepare:base"
    got, waiting = [], threading.Event()

    def rank1():  # `aborted` is asked each time a poll finds nothing ready: the wait is observed, not slept on
        got.append(next_unit(Store(tmp_path / "s.sqlite"), todo, 1, may_prepare=False,
                             aborted=lambda: waiting.set() or False))

    t = threading.Thread(target=rank1)
    t.start()
    assert waiting.wait(timeout=60) and not got  # it polled and found nothing ready: the base is claimed, not done
    a.finish("prepare:base")
    t.join(timeout=60)
    assert not t.is_alive() and got[0].key == "pairs:base:0"  # the first ready unit, though ptq and prune-30 come first
    assert next_unit(b, todo, 1).key == "pairs:base:1"
    a.finish("prepare:prune-30")
    assert [next_unit(b, todo, 1).key, next_unit(a, todo, 0).key] == ["pairs:prune-30:0", "pairs:prune-30:1"]
    owners = a.claims()
    assert owners["pairs:base:0"] == (1, False) and owners["prepare:base"] == (0, True)
    # ptq's units wait for its preparation; an aborted run stops the wait with one error instead of hanging
    with pytest.raises(SweepAborted):
        next_unit(b, todo, 1, aborted=lambda: True)
    a.finish("prepare:ptq-int8")
    assert [next_unit(a, todo, 0).key, next_unit(b, todo, 1).key] == ["pairs:ptq-int8:0", "pairs:ptq-int8:1"]
    assert next_unit(a, todo, 0) is None and next_unit(b, todo, 1) is None  # every unit claimed
    assert done_count(a) == 3
    # an xattn unit waits for both translations of its job
    xa = [u for u in units(cfg) if u.key == "xattn:prune-30:0"]
    a.finish("pairs:prune-30:0")
    with pytest.raises(SweepAborted):  # pairs:base:0 is claimed, not done
        next_unit(a, xa, 0, aborted=lambda: True)
    a.finish("pairs:base:0")
    assert next_unit(a, xa, 0).key == "xattn:prune-30:0"
    # a new attempt (rerun) starts with no claims
    a.reset_claims()
    assert b.claims() == {} and next_unit(b, todo, 1).key == "prepare:ptq-int8"


def test_claims_race_gives_each_unit_to_one_process(cfg, tmp_path):
    Store(tmp_path / "s.sqlite").close()
    todo = [u for u in units(cfg) if u.kind == "prepare"]
    got = {0: [], 1: [], 2: [], 3: []}

    def take(owner):
        s = Store(tmp_path / "s.sqlite")
        while (u := next_unit(s, todo, owner)) is not None:
            got[owner].append(u.key)

    threads = [threading.Thread(target=take, args=(r,)) for r in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    taken = sorted(k for ks in got.values() for k in ks)
    assert taken == sorted(u.key for u in todo)


def test_lambda_only_for_analysed_pairs_and_a_changed_filter_is_refused_then_resumed(tiny_dir, tmp_path):
    """λ (the costliest pass after translation) is computed for the pairs the analysis reads; a summary whose
    filter would read more refuses in one line, and rerunning the sweep computes what is missing."""
    from forgetbench.cli import main
    from forgetbench.errors import ForgetbenchError
    from forgetbench.sweep import summarise

    text = _sweep_config(tmp_path, tiny_dir, name="f", sentences=3, pairs="[en-de, de-en]").read_text()
    none = tmp_path / "none.yaml"
    none.write_text(text.replace("bleu_filter: 0", "bleu_filter: 1000"))  # no pair passes: nothing analysed
    every = tmp_path / "every.yaml"
    every.write_text(text)
    run = tmp_path / "run"
    assert main(["sweep", str(none), "--out", str(run), "--quiet"]) == 0
    s = Store(run / "store.sqlite")
    assert len(s.translations()) == 3 * 2 * 3 and s.stats("xattn_var") == {}
    with pytest.raises(ForgetbenchError, match="cross-attention λ is missing for analysed sentences"):
        summarise(load_sweep(every), run)
    assert main(["sweep", str(every), "--out", str(run), "--quiet"]) == 0  # resumes: only λ is computed
    assert len(s.stats("xattn_var")) == 3 * 2 * 3 and len(s.translations()) == 3 * 2 * 3
    fresh = tmp_path / "fresh"
    assert main(["sweep", str(every), "--out", str(fresh), "--quiet"]) == 0
    # a fresh run computes λ right after translating, on the encoder states the translation kept; the resumed run
    # encoded the sources again: the layout rule (each sentence teacher-forced alone) makes them the same bits
    fresh_var = Store(fresh / "store.sqlite").stats("xattn_var")
    assert fresh_var == s.stats("xattn_var")
    S = json.loads((run / "report" / "summary.json").read_text())
    F = json.loads((fresh / "report" / "summary.json").read_text())
    assert S["hallucination"] == F["hallucination"]
    H = S["hallucination"]["prune-30"]["all"]
    assert H["missing"] == 0 and H["n"] + H["off_target"] == 6  # λ reads the on-target ones
