import itertools

import numpy as np
import pytest
import torch

from forgetbench.parsing.data.conll import read_conllu, with_predictions
from forgetbench.parsing.metrics import score, tree_problems
from forgetbench.parsing.structures.decode import eisner, mst, tree_score


def _trees(n, projective=False):
    for heads in itertools.product(range(n + 1), repeat=n):
        h = list(heads)
        if tree_problems(h) is not None:
            continue
        if projective and not _is_projective(h):
            continue
        yield h


def _is_projective(heads):
    arcs = [(min(h, d), max(h, d)) for d, h in enumerate(heads, 1)]
    for (a, b), (c, d) in itertools.combinations(arcs, 2):
        if a < c < b < d or c < a < d < b:
            return False
    return True


def _best(S, projective):
    return max(tree_score(S, np.array([-1, *h])) for h in _trees(len(S) - 1, projective))


@pytest.mark.parametrize("seed", range(40))
def test_mst_and_eisner_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 6))
    S = rng.normal(size=(n + 1, n + 1))
    if seed % 3 == 0:
        S[0, 1:] += 3.0  # tempt several root children
    h = mst(S)
    assert tree_problems(h) is None
    assert tree_score(S, np.array([-1, *h])) == pytest.approx(_best(S, False))
    (he,) = eisner(torch.tensor(S)[None], [n])
    assert tree_problems(he) is None and _is_projective(he)
    assert tree_score(S, np.array([-1, *he])) == pytest.approx(_best(S, True))


def test_eisner_batched_with_padding_equals_one_by_one():
    rng = np.random.default_rng(7)
    lens = [3, 5, 2]
    S = torch.tensor(rng.normal(size=(3, 6, 6)))
    batched = eisner(S, lens)
    for b, n in enumerate(lens):
        assert batched[b] == eisner(S[b : b + 1, : n + 1, : n + 1], [n])[0]


def test_metrics_hand_computed(tmp_path):
    gold = [([2, 0, 2, 3], ["nsubj", "root", "obj:ext", "punct"])]
    system = [([2, 0, 2, 2], ["nsubj", "root", "obj", "det"])]
    s = score(gold, system)
    # UAS: heads 2,0,2 right, 3 vs 2 wrong -> 3/4 ; LAS: obj:ext == obj after stripping -> 3/4
    assert s.uas == 75.0 and s.las == 75.0
    # CLAS: gold content {nsubj, root, obj} = 3, system content {nsubj, root, obj} = 3 (det is functional), correct 3
    assert s.clas == 100.0
    s2 = score(gold, [([2, 0, 1, 3], ["nsubj", "root", "nmod", "punct"])])
    # word 3 gets the wrong head (so it is wrong for UAS, LAS, CLAS); words 1, 2, 4 are right -> 3/4
    # content: gold 3, system 3 (nmod), correct 2 -> F1 = 4/6
    assert s2.uas == 75.0 and s2.las == 75.0 and s2.clas == pytest.approx(100 * 4 / 6)
    assert score(gold, [([0, 0, 2, 3], ["root"] * 4)]).invalid_trees == 1
    assert tree_problems([2, 1, 0]) == "cycle"


def test_conllu_multiword_tokens_and_empty_nodes(tmp_path):
    text = ("# text = Vámonos al mar.\n"
            "1-2\tVámonos\t_\t_\t_\t_\t_\t_\t_\t_\n1\tVamos\tir\tVERB\t_\t_\t0\troot\t_\t_\n"
            "2\tnos\tnosotros\tPRON\t_\t_\t1\tobj\t_\t_\n3-4\tal\t_\t_\t_\t_\t_\t_\t_\t_\n"
            "3\ta\ta\tADP\t_\t_\t5\tcase\t_\t_\n4\tel\tel\tDET\t_\t_\t5\tdet\t_\t_\n"
            "4.1\tpues\t_\tADV\t_\t_\t_\t_\t1:advmod\t_\n"
            "5\tmar\tmar\tNOUN\t_\t_\t1\tobl\t_\t_\n6\t.\t.\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n")
    p = tmp_path / "x.conllu"
    p.write_text(text)
    (s,) = read_conllu(p)
    assert s.forms == ["Vamos", "nos", "a", "el", "mar", "."] and s.heads == [0, 1, 5, 5, 1, 1]
    out = with_predictions(s, [0, 1, 1, 5, 1, 1], ["root", "obj", "case", "det", "obl", "punct"]).serialize()
    # only what the model predicted: the input's gold lemma and UPOS are not copied
    assert "1-2\tVámonos" in out and "4.1\tpues" in out and "3\ta\t_\t_\t_\t_\t1\tcase" in out
    out = with_predictions(s, [0, 1, 1, 5, 1, 1], ["root", "obj", "case", "det", "obl", "punct"],
                           ["VERB", "PRON", "ADP", "DET", "NOUN", "PUNCT"]).serialize()
    assert "3\ta\t_\tADP\t_\t_\t1\tcase" in out


def test_biaffine_scores_at_given_heads_equal_the_full_tensor():
    from forgetbench.parsing.layers.modules import Biaffine

    torch.manual_seed(0)
    b = Biaffine(7, 5)
    b.weight.data.normal_()
    dep, head = torch.randn(3, 6, 7), torch.randn(3, 6, 7)
    heads = torch.randint(0, 6, (3, 6))
    heads[0, 0] = -100  # ignored positions are clamped, not an error
    full = b(dep, head)  # [B, O, D, H]
    ref = full.gather(3, heads.clamp(min=0)[:, None, :, None].expand(-1, 5, -1, 1)).squeeze(3)
    assert torch.allclose(b.at_heads(dep, head, heads), ref, atol=1e-5)


def test_biaffine_scores_equal_x_w_y_per_output_for_unequal_sides():
    """s[b, o, d, h] = [x_d; 1]ᵀ W_o [y_h; 1] term by term (UD-PrLM's 64-wide dependents against 128-wide heads in
    small), whatever the order of the two products; ``scores_last`` is the same numbers as [B, D, H, O]."""
    from forgetbench.parsing.layers.biaffine import Biaffine

    torch.manual_seed(0)
    b = Biaffine(3, 4, d_head=5)
    b.weight.data.normal_()
    dep, head = torch.randn(2, 6, 3), torch.randn(2, 6, 5)
    x = torch.cat([dep, torch.ones(2, 6, 1)], -1)
    y = torch.cat([head, torch.ones(2, 6, 1)], -1)
    w = b.weight.detach()
    ref = torch.tensor([[[[float(x[s, d] @ w[o] @ y[s, h]) for h in range(6)] for d in range(6)]
                         for o in range(4)] for s in range(2)])
    assert b(dep, head).shape == (2, 4, 6, 6) and torch.allclose(b(dep, head), ref, atol=1e-5)
    assert b.scores_last(dep, head).is_contiguous() and torch.equal(b.scores_last(dep, head), b(dep, head).permute(0, 2, 3, 1))


def test_time_budget_stops_before_an_epoch_would_overrun():
    import time

    from forgetbench.parsing.epochs import epoch_would_overrun

    now = time.perf_counter()
    assert epoch_would_overrun(now - 50, 1, 1.0)  # 50 s per epoch, 10 s left
    assert not epoch_would_overrun(now - 50, 6, 1.0)  # 8.3 s per epoch, 10 s left: one more fits
    assert epoch_would_overrun(now - 100, 1, 10.0, t_first=now - 10) is False  # taggers took 90 s, epochs 10 s


def test_a_budget_shorter_than_an_epoch_ends_the_epoch_early(monkeypatch):
    """The budget binds inside an epoch (a clock by hook: 1 s per reading): training stops after the batch that
    would leave less than the last evaluation's time, the partial epoch is evaluated, saved and marked."""
    import random
    import types

    import torch

    from forgetbench.parsing import epochs

    clock = [0.0]

    def tick():
        clock[0] += 1.0
        return clock[0]

    monkeypatch.setattr(epochs, "time", types.SimpleNamespace(perf_counter=tick))
    monkeypatch.setattr(epochs, "batches", lambda sents, *a, **k: [[s] for s in sents])
    monkeypatch.setattr(epochs, "batchify", lambda bs, vocab, device=None: {"words": torch.full((1, 3), 5)})
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen, saved = [], []

    def loss(b, words):
        seen.append(1)
        return model.weight.sum() ** 2

    n, history = epochs.train_epochs(model, opt, list(range(20)), None, random.Random(0), 100, loss,
                                     lambda e: (1.0, {"epoch": e}), lambda e, h: saved.append(e), minutes=0.2,
                                     max_epochs=5, t0=0.0, progress=False)
    assert n == 1 and saved == [1]
    assert history == [{"epoch": 1, "step": len(seen), "partial": True, "stop": "minutes: 0.2 (inside an epoch)"}]
    assert 0 < len(seen) < 20  # the epoch ended early: 12 s of budget, about 1 s a batch


def test_las_per_relation_class_by_hand():
    import numpy as np

    from forgetbench.eval import bootstrap as bs
    from forgetbench.parsing.compress_eval import class_changes
    from forgetbench.parsing.metrics import class_las_counts, relation_class

    assert relation_class("nsubj:pass") == "core" and relation_class("case") == "function"
    assert relation_class("punct") == "other" and relation_class("made-up") == "other"
    gold = [([2, 0, 2], ["nsubj", "root", "obj"]), ([0, 1], ["root", "nmod:poss"])]
    sys_ = [([2, 0, 1], ["nsubj", "root", "obj"]), ([0, 1], ["root", "amod"])]
    c = class_las_counts(gold, sys_)
    assert c["core"] == [(1, 2), (0, 0)] and c["other"] == [(1, 1), (1, 1)] and c["nominal"] == [(0, 0), (0, 1)]
    w = bs.counts(2, 200, 1)
    ch = class_changes(gold, gold, sys_, w)
    assert set(ch) == {"core", "nominal", "other"}  # classes without words are left out
    assert ch["core"]["las_base"] == 100 and ch["core"]["las"] == 50 and ch["core"]["delta"] == -50
    assert ch["nominal"]["delta"] == -100 and ch["other"]["delta"] == 0 and ch["core"]["words"] == 2
    lo, hi = ch["core"]["delta_ci"]
    assert np.isfinite(lo) and lo <= -50 <= hi


def _scripted_loop(monkeypatch, scores, budget, sentences=7, minutes=None, clock=None):
    """``train_epochs`` on a toy: one sentence a batch, dev scores read from ``scores`` in turn (a score per
    measurement); returns (epochs, history, saved (epoch, step) pairs, updates)."""
    import random
    import types

    from forgetbench.parsing import epochs

    if clock is not None:
        monkeypatch.setattr(epochs, "time", types.SimpleNamespace(perf_counter=clock))
    monkeypatch.setattr(epochs, "batches", lambda sents, *a, **k: [[s] for s in sents])
    monkeypatch.setattr(epochs, "batchify", lambda bs, vocab, device=None: {"words": torch.full((1, 3), 5)})
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    updates, saved, it = [], [], iter(scores)

    def loss(b, words):
        updates.append(1)
        return model.weight.sum() ** 2

    def evaluate(e):
        return next(it), {"epoch": e}

    n, history = epochs.train_epochs(model, opt, list(range(sentences)), None, random.Random(0), 100, loss, evaluate,
                                     lambda e, h: saved.append((e, h[-1]["step"])), minutes=minutes, max_epochs=5,
                                     t0=0.0, progress=False, steps=budget)
    return n, history, saved, len(updates)


def test_patience_in_steps_stops_a_toy_run_at_the_hand_computed_step(monkeypatch):
    """Dev every 3 steps; the best at step 6; patience 7: the measurements at 9 and 12 are within it, step 15 is
    9 past the best (>= 7): the run stops there, across epoch ends (7 batches an epoch), and says why."""
    from forgetbench.parsing.epochs import StepBudget

    n, history, saved, updates = _scripted_loop(monkeypatch, [1.0, 2.0, 2.0, 1.5, 1.9, 9.9],
                                                StepBudget(max_steps=100, patience=7, eval_every=3))
    assert updates == 15 and [h["step"] for h in history] == [3, 6, 9, 12, 15] and n == 3  # epochs 1-2 whole, 3 begun
    assert saved == [(1, 3), (1, 6)]  # only improvements are saved (2.0 again at step 9 is not one)
    assert history[-1]["stop"] == "patience: no dev improvement in 7 steps after step 6 (best 2.00)"


def test_max_steps_ends_on_a_measurement_and_patience_0_never_stops_early(monkeypatch):
    from forgetbench.parsing.epochs import StepBudget

    n, history, saved, updates = _scripted_loop(monkeypatch, [5.0, 1.0, 1.0, 1.0, 1.0],
                                                StepBudget(max_steps=10, patience=0, eval_every=4))
    assert updates == 10 and [h["step"] for h in history] == [4, 8, 10] and saved == [(1, 4)]
    assert history[-1]["stop"] == "max_steps: 10 steps"


def test_the_minutes_safety_stop_is_reported_not_silent(monkeypatch):
    """With a budget in steps the clock is only a safety stop: when it fires, the steps since the last measurement
    are measured and the record names it."""
    from forgetbench.parsing.epochs import StepBudget

    t = [0.0]

    def tick():
        t[0] += 1.0
        return t[0]

    n, history, saved, updates = _scripted_loop(monkeypatch, [1.0, 2.0, 3.0, 4.0], StepBudget(100, 50, 4),
                                                sentences=50, minutes=0.2, clock=tick)
    assert 0 < updates < 50 and history[-1]["step"] == updates and history[-1]["partial"] is True
    assert history[-1]["stop"].startswith(f"safety stop: --minutes 0.2 of wall time at step {updates}")


def test_step_budgets_refuse_bad_numbers():
    from forgetbench.parsing.epochs import StepBudget

    for bad in ({"max_steps": 0}, {"patience": -1}, {"eval_every": 0}, {"max_steps": 1.5}):
        with pytest.raises(ValueError):
            StepBudget(**bad)
