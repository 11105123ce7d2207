"""Algorithm 1's switch (METHOD §5c): the USL head watched during phase 1 and the convergence verdict at m."""

import json

import pytest

from forgetbench.pretrain.switch import verdict

from .test_udprlm import _tiny_run


def test_the_verdict_reads_the_last_quarter_of_phase_1_by_hand():
    m = 1000
    flat = [[s, 1.0 + (0.5 if s < 700 else 0.01 * (1000 - s) / 300), 50.0, 40.0] for s in range(100, 1001, 100)]
    v = verdict(flat, m)  # 0.75·m = 750 → the measurement at 700 (nearest, the earlier on a tie) .. 1000
    assert v["converged"] is True and v["measured_at"] == 1000 and v["usl_dev_loss"] == 1.0
    assert "fell 1.0 % over steps 700–1000" in v["reason"]
    steep = [[s, 3.0 - s / 1000, 20.0 + s / 100, 10.0] for s in range(100, 1001, 100)]
    v = verdict(steep, m)  # 2.3 → 2.0: 13.0 %
    assert v["converged"] is False and v["reason"].startswith("still falling: USL dev loss fell 13.0 %")
    assert v["usl_dev_uas"] == 30.0 and v["curve"] == steep
    assert verdict([[1000, 1.0, 1, 1]], m)["converged"] is None  # one point: too few
    assert verdict([], m)["reason"] == "no phase-1 measurement"


@pytest.mark.parametrize("variant", ["ud-prlm", "mlm"])
def test_a_pretraining_run_logs_the_usl_head_in_phase_1_and_records_the_switch(variant, tmp_path):
    """Every dev_every steps up to m the USL head's held-out loss, UAS and LAS are logged (a variant without
    trees has none); training.json's ``switch`` holds the curve and the verdict; the measurements do not change
    the weights (the run without them trains the same)."""
    import torch
    from safetensors.torch import load_file

    from forgetbench.cli import main

    cfg = _tiny_run(tmp_path, variant=variant, steps=8)
    cfg.write_text(cfg.read_text().replace("threads: 1}", "threads: 1, dev_every: 2}"))
    out = tmp_path / "run"
    assert main(["pretrain-encoder", str(cfg), "--out", str(out), "--quiet"]) == 0
    rec = json.loads((out / "model" / "training.json").read_text())
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    watched = [r for r in log if "usl_dev_loss" in r]
    if variant == "mlm":
        assert not watched and rec["switch"] is None
        return
    assert [r["step"] for r in watched] == [2, 4]  # phase 1 is m = 4 steps
    assert all(r["usl_dev_loss"] > 0 and 0 <= r["usl_dev_las"] <= 100 and 0 <= r["usl_dev_uas"] <= 100
               for r in watched)
    sw = rec["switch"]
    assert sw["step"] == 4 and sw["measured_at"] == 4 and [p[0] for p in sw["curve"]] == [2, 4]
    assert sw["converged"] is None and "too few" in sw["reason"]  # two measurements cannot tell
    plain = tmp_path / "plain.yaml"
    plain.write_text(cfg.read_text().replace(", dev_every: 2}", "}"))
    assert main(["pretrain-encoder", str(plain), "--out", str(tmp_path / "plain"), "--quiet"]) == 0
    a, b = load_file(str(out / "model" / "model.safetensors")), load_file(str(tmp_path / "plain" / "model" /
                                                                                "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
