"""train.early_stop (docs/METHOD.md §5, "Early stopping"): a run stops where its dev score stops improving, keeps
the best step's weights, and trains no further when run again."""

import json

import pytest
import torch

from forgetbench.train import early_stop, loop
from forgetbench.train.config import TrainCfg


class Source:
    def batches(self, max_tokens, seed, epoch):
        return list(range(4))

    def collate(self, idx):
        return {"x": torch.full((2, 3), float(idx + 1))}


def _run(tmp_path, scores, steps=40, patience=2, min_delta=0.0, state=None, start=0):
    tmp_path.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    tc = TrainCfg(steps=steps, warmup=1, lr=0.01, dev_every=2, patience=patience, min_delta=min_delta,
                  checkpoint_minutes=1e9)
    state = state or loop.new_state("fp")
    ckpt = tmp_path / "checkpoint"
    if ckpt.is_dir():
        state = loop.resume(model, opt, ckpt, "fp", log=lambda *a: None)
    seen, weights = [], {}

    def dev(step):
        assert not model.training  # measured in eval mode
        seen.append(step)
        weights[step] = model.weight.detach().clone()
        return scores[len(seen) - 1], {"dev_x": step}

    def step_loss(b):
        return (model(b["x"]) ** 2).mean(), 6

    stopped = loop.run(model, opt, Source(), step_loss, tc, state, ckpt, tmp_path / "log.jsonl", None, False,
                       dev=dev, dev_start=start)
    return model, state, stopped, seen, weights


def test_the_run_stops_after_patience_measurements_without_improvement(tmp_path):
    # measured at steps 2, 4, 6, …: 1, 2, 3 improve; 2.9 and 3.0 do not (3.0 is not above 3 + 0): stop at step 10
    model, state, stopped, seen, weights = _run(tmp_path, [1.0, 2.0, 3.0, 2.9, 3.0, 9.0])
    es = state["early_stop"]
    assert seen == [2, 4, 6, 8, 10] and state["step"] == 10 and es["best_step"] == 6 and es["best"] == 3.0
    assert stopped.startswith("early stop") and es["stopped"] == stopped and es["scores"][-1] == [10, 3.0]
    # the best step's weights are kept; the model's own have moved on
    from safetensors.torch import load_file

    best = load_file(str(tmp_path / "best" / "model.safetensors"))
    assert torch.equal(best["weight"], weights[6]) and not torch.equal(model.weight.detach(), weights[6])
    assert early_stop.restore_best(model, es, tmp_path) and torch.equal(model.weight.detach(), weights[6])
    # the checkpoint holds the stop: running the folder again (even with more steps) trains no further
    saved = json.loads((tmp_path / "checkpoint" / "state.json").read_text())
    assert saved["step"] == 10 and saved["early_stop"]["stopped"] == stopped
    _, state2, stopped2, seen2, _ = _run(tmp_path, [99.0], steps=80)
    assert stopped2 == stopped and state2["step"] == 10 and seen2 == []
    log = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "dev_score" in r] == [2, 4, 6, 8, 10] and log[-1]["best_step"] == 6


def test_min_delta_start_and_patience_zero(tmp_path):
    # a rise of 0.05 is not above min_delta 0.1; nothing is measured before step 4
    _, state, stopped, seen, _ = _run(tmp_path / "a", [1.0, 1.05, 1.08], min_delta=0.1, start=4)
    assert seen == [6, 8, 10] and state["early_stop"]["best_step"] == 6 and state["step"] == 10
    # patience 0: measured and logged, never stopped
    _, state, stopped, seen, _ = _run(tmp_path / "b", [float(-i) for i in range(20)], steps=12, patience=0)
    assert stopped == "steps" and seen == [2, 4, 6, 8, 10, 12] and state["early_stop"]["best_step"] == 2


def test_a_resumed_run_counts_on_where_it_stood(tmp_path):
    """Interrupted after the best (one measurement without improvement counted), the resumed run stops at the same
    step as an uninterrupted one."""
    scores = [1.0, 2.0, 1.5, 1.4, 1.3]
    _, straight, s1, _, _ = _run(tmp_path / "s", scores)
    _, cut, _, seen_a, _ = _run(tmp_path / "c", scores, steps=6)
    assert cut["early_stop"]["since"] == 1 and seen_a == [2, 4, 6]
    _, resumed, s2, seen_b, _ = _run(tmp_path / "c", scores[3:], steps=40)
    assert seen_b == [8] and resumed["step"] == straight["step"] == 8 and s2 == s1


def test_bad_settings_are_one_line(tmp_path):
    from forgetbench.errors import ForgetbenchError
    from forgetbench.train.config import train_section

    with pytest.raises(ForgetbenchError, match="patience and train.min_delta must be >= 0"):
        train_section({"patience": -1}, tmp_path / "c.yaml")
    with pytest.raises(ForgetbenchError, match="needs train.dev_every > 0"):
        train_section({"patience": 2, "dev_every": 0}, tmp_path / "c.yaml")
