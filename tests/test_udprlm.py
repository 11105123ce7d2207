"""UD-PrLM's parts (docs/METHOD.md §5c): the subword-tree conversion, S_US and H_US against hand numbers, BERT
masking proportions, Algorithm 1's schedule, and the three encoder variants' losses and gradients."""

import math

import pytest
import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.parsing.layers.pretrained import EncoderConfig, PretrainedEncoder
from forgetbench.parsing.layers.structure import (
    ExpectedLabelIntegration,
    StructureIntegration,
    structure_tensor,
)
from forgetbench.parsing.structures.subword_trees import SUBWORD, first_pieces, subword_tree
from forgetbench.pretrain.masking import IGNORE, mask_tokens
from forgetbench.pretrain.schedule import JOINT, MLM, USL_MLM, Schedule, losses


def test_subword_trees_hand_made():
    # "Unbelievably short talks": Unbeliev|ably (2 pieces) ← talks, short (1) ← talks, talks (3: ta|lk|s) root
    heads, labels = subword_tree([2, 1, 3], [3, 3, 0], ["advmod", "amod", "root"])
    #          <s>   Unbeliev ably  short  ta  lk  s    </s>
    assert heads == [IGNORE, 4, 1, 4, 0, 4, 4, IGNORE]
    assert labels == [None, "advmod", SUBWORD, "amod", "root", SUBWORD, SUBWORD, None]
    assert first_pieces([2, 1, 3]) == [1, 3, 4]
    # every word one piece: the word tree shifted by <s>
    assert subword_tree([1, 1], [0, 1], ["root", "obj"]) == ([IGNORE, 0, 1, IGNORE], [None, "root", "obj", None])
    # a one-word sentence of several pieces: the root on its first piece
    assert subword_tree([3], [0], ["root"])[0] == [IGNORE, 0, 1, 1, IGNORE]


@pytest.mark.parametrize("pieces,heads,want", [([1, 0], [0, 1], "word 2 has no subword pieces"),
                                               ([1, 1], [0, 2], "word 2 has head 2"),
                                               ([1, 1], [0, 3], "word 2 has head 3"),
                                               ([1], [0, 1], "1 words, 2 heads")])
def test_subword_trees_refuse_bad_words(pieces, heads, want):
    with pytest.raises(ForgetbenchError, match=want):
        subword_tree(pieces, heads, ["x"] * len(heads), "s.conllu sentence 4")


def _hand_structure():
    # 3 positions, 2 labels; dependent 0's arc scores [0, ln 3, −1e9] → P_arc = [1/4, 3/4, 0];
    # its label scores at every head [0, ln 4] → P_label = [1/5, 4/5]
    arc = torch.tensor([[[0.0, math.log(3), -1e9], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])
    rel = torch.zeros(1, 3, 3, 2)
    rel[0, 0, :, 1] = math.log(4)
    return structure_tensor(arc, rel), torch.tensor([[[2.0, 0.0], [0.0, 4.0], [8.0, 8.0]]])


def test_structure_tensor_by_hand():
    s, _ = _hand_structure()
    assert s.shape == (1, 3, 3, 2)
    torch.testing.assert_close(s[0, 0], torch.tensor([[0.05, 0.2], [0.15, 0.6], [0.0, 0.0]]))
    torch.testing.assert_close(s[0, 1], torch.full((3, 2), 1 / 6))  # uniform rows: 1/3 · 1/2
    torch.testing.assert_close(s.sum((2, 3)), torch.ones(1, 3))


def test_the_papers_usi_by_hand():
    """§3.4 on 3 words, 2 labels, H 2: one map per label (W_0 the identity, W_1 the swap), H_O flattened in (m, k)
    order, a Linear with bias and GELU."""
    s, h = _hand_structure()
    usi = StructureIntegration(2, 2)
    assert usi.maps.shape == (2, 2, 2) and usi.linear.weight.shape == (2, 4)
    with torch.no_grad():
        usi.maps.copy_(torch.stack([torch.eye(2), torch.tensor([[0.0, 1.0], [1.0, 0.0]])]))
        usi.linear.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0]]))
        usi.linear.bias.copy_(torch.tensor([0.0, -1.0]))
    out = usi(s, h)
    # position 0: Ĥ[:, k=0] = 0.05·(2, 0) + 0.15·(0, 4) = (0.1, 0.6); Ĥ[:, k=1] = 0.2·(2, 0) + 0.6·(0, 4) = (0.4, 2.4)
    # H_O[:, 0] = W_0ᵀ-side map of (0.1, 0.6) = (0.1, 0.6); H_O[:, 1] = (2.4, 0.4) (swapped)
    # flattened (m, k): [0.1, 2.4, 0.6, 0.4] → Linear → (0.1, 2.4 + 0.6 + 0.4 − 1 = 2.4) → GELU
    def gelu(x):
        return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))

    torch.testing.assert_close(out[0, 0], torch.tensor([gelu(0.1), gelu(2.4)]))
    # position 1: uniform S_US = 1/6: Ĥ[:, k] = (10, 12)/6 for both labels; H_O[:, 0] = (10, 12)/6, H_O[:, 1] = (12, 10)/6
    torch.testing.assert_close(out[0, 1], torch.tensor([gelu(10 / 6), gelu((12 + 12 + 10) / 6 - 1)]))
    torch.testing.assert_close(usi.reference(s, h), out)
    # random sizes: the fast order equals rule 2 term by term, values and gradients
    torch.manual_seed(0)
    usi = StructureIntegration(6, 4)
    s = torch.randn(2, 5, 5, 4).softmax(-1)
    h = torch.randn(2, 5, 6)
    a = usi(s, h)
    ga = torch.autograd.grad(a.sum(), [usi.maps, usi.linear.weight])
    b = usi.reference(s, h)
    gb = torch.autograd.grad(b.sum(), [usi.maps, usi.linear.weight])
    torch.testing.assert_close(a, b)
    for x, y in zip(ga, gb, strict=True):
        torch.testing.assert_close(x, y)


def test_the_expected_label_ablation_by_hand():
    s, h = _hand_structure()
    usi = ExpectedLabelIntegration(2, 2)
    with torch.no_grad():
        usi.head.weight.copy_(torch.eye(2))
        usi.labels.weight.copy_(torch.eye(2))
    out = usi(s, h)
    # position 0: 1/4·(2, 0) + 3/4·(0, 4) + 1/5·(1, 0) + 4/5·(0, 1) = (0.7, 3.8)
    torch.testing.assert_close(out[0, 0], torch.tensor([0.7, 3.8]))
    # position 1: 1/3·((2, 0) + (0, 4) + (8, 8)) + 1/2·(1, 1)
    torch.testing.assert_close(out[0, 1], torch.tensor([10 / 3 + 0.5, 4.0 + 0.5]))


def test_bert_masking_proportions_on_a_fixed_seed():
    ids = torch.randint(5, 1000, (200, 500), generator=torch.Generator().manual_seed(0))
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True
    out, labels = mask_tokens(ids, special, mask_id=4, vocab_size=1000, first_normal=5,
                              generator=torch.Generator().manual_seed(7))
    chosen = labels != IGNORE
    assert not chosen[special].any() and torch.equal(labels[chosen], ids[chosen])
    assert chosen.float().mean().item() == pytest.approx(0.15 * 498 / 500, abs=0.003)
    n = chosen.sum().item()
    masked = (out[chosen] == 4).sum().item() / n
    same = (out[chosen] == ids[chosen]).sum().item() / n
    assert masked == pytest.approx(0.8, abs=0.01) and same == pytest.approx(0.1 + 0.1 / 995, abs=0.01)
    assert torch.equal(out[~chosen], ids[~chosen])
    again = mask_tokens(ids, special, 4, 1000, 5, torch.Generator().manual_seed(7))
    assert torch.equal(again[0], out) and torch.equal(again[1], labels)


def test_algorithm_1_schedule_on_a_fixed_seed():
    s = Schedule(joint_steps=5, p=0.8, seed=3)
    assert [s.kind(step) for step in range(1, 6)] == [JOINT] * 5  # phase 1 (m steps): both losses on H^(L)
    later = [s.kind(step) for step in range(6, 16)]
    assert later == [USL_MLM] * 8 + [MLM] * 2  # numpy's draws for seed 3, steps 6…15
    assert [s.kind(step) for step in range(6, 16)] == later  # a resumed run draws the same
    many = [Schedule(joint_steps=0, p=0.3, seed=1).kind(step) for step in range(1, 4001)]
    assert many.count(USL_MLM) / 4000 == pytest.approx(0.3, abs=0.02) and set(many) == {USL_MLM, MLM}
    # what each kind computes, per variant: (USL loss, MLM through USI)
    assert [losses(k, "ud-prlm") for k in (JOINT, USL_MLM, MLM)] == [(True, False), (True, True), (False, True)]
    assert [losses(k, "usl-mlm") for k in (JOINT, USL_MLM, MLM)] == [(True, False), (True, False), (False, False)]
    assert [losses(k, "usi-mlm") for k in (JOINT, USL_MLM, MLM)] == [(False, False), (False, True), (False, True)]
    assert [losses(k, "mlm") for k in (JOINT, USL_MLM, MLM)] == [(False, False)] * 3


def _encoder(variant, seed=0, **kw):
    torch.manual_seed(seed)
    usi = variant in ("ud-prlm", "usi-mlm")
    c = EncoderConfig(vocab_size=50, n_rels=0 if variant == "mlm" else 3, d_model=16, layers=2 - usi, heads=2, ffn=32,
                      dropout=0.0, head_mlp=8, dep_mlp=4, usi=usi, supervised=variant != "usi-mlm", **kw)
    assert c.variant == variant
    return PretrainedEncoder(c)


@pytest.mark.parametrize("variant", ["mlm", "usl-mlm", "usi-mlm", "ud-prlm"])
def test_each_variant_computes_its_losses_and_gradients(variant):
    m = _encoder(variant)
    ids = torch.tensor([[2, 7, 8, 9, 3], [2, 10, 3, 0, 0]])
    h, mask = m.encode(ids)
    assert h.shape == (2, 5, 16) and mask.tolist()[1] == [True, True, True, False, False]
    labels = torch.full_like(ids, IGNORE)
    labels[0, 2] = 8
    loss = m.mlm_loss(h, labels)
    if variant != "mlm":
        heads = torch.tensor([[IGNORE, 0, 1, 1, IGNORE], [IGNORE, 0, IGNORE, IGNORE, IGNORE]])
        rels = torch.tensor([[IGNORE, 0, 2, 1, IGNORE], [IGNORE, 0, IGNORE, IGNORE, IGNORE]])
        loss = loss + m.usl_loss(h, mask, heads, rels)
    loss.backward()
    assert torch.isfinite(loss) and m.embed.weight.grad.abs().sum() > 0
    out, _ = m.representations(ids)
    assert out.shape == (2, 5, 16)
    # padding does not change a sentence's representation
    alone, _ = m.representations(ids[1:, :3])
    torch.testing.assert_close(alone[0], out[1, :3], atol=1e-5, rtol=1e-5)


def test_the_usl_head_is_the_papers():
    """§3.3-§4: ReLU MLPs, heads of H_head units and dependents of H_dep, U₁ of H_dep × H_head (+ the bias row and
    column) per output."""
    m = _encoder("ud-prlm")
    assert [m.mlp[k].linear.out_features for k in ("arc_head", "arc_dep", "rel_head", "rel_dep")] == [8, 4, 8, 4]
    assert all(m.mlp[k].relu for k in m.mlp)
    assert m.scorer["arc"].weight.shape == (1, 5, 9) and m.scorer["rel"].weight.shape == (3, 5, 9)
    x = torch.tensor([[-1.0, 2.0]])
    lin = m.mlp["arc_head"]
    assert torch.equal(lin(torch.zeros(1, 16)), torch.relu(lin.linear(torch.zeros(1, 16)))) and x.relu().min() == 0


def _parts(m):
    return {"encoder": [p for n, p in m.named_parameters() if n.startswith(("embed.", "positions.", "layers.", "norm."))],
            "usl": [p for n, p in m.named_parameters() if n.startswith(("mlp.", "scorer."))],
            "usi": [p for n, p in m.named_parameters() if n.startswith("usi")],
            "mlm_head": [p for n, p in m.named_parameters() if n.startswith("mlm_")]}


def _reached(m):
    return {k: any(p.grad is not None and p.grad.abs().sum() > 0 for p in ps) for k, ps in _parts(m).items() if ps}


@pytest.mark.parametrize("variant", ["mlm", "usl-mlm", "usi-mlm", "ud-prlm"])
def test_each_step_of_algorithm_1_takes_its_losses(variant):
    """A step's loss is what Algorithm 1 says (lines 4, 7, 9) and reaches the parameters it should: phase 1 never
    the USI layer; phase 2 reads MLM through USI every step, plus the USL loss with probability p. The USL loss
    equals the encoder's on the tree batch and the MLM loss the encoder's on the step's masked text."""
    from collections import Counter

    from forgetbench.pretrain.masking import mask_tokens
    from forgetbench.pretrain.run import make_step_loss
    from forgetbench.train.arithmetic import choose
    from forgetbench.train.loop import step_seed

    text = torch.tensor([[2, 7, 8, 9, 11, 12, 3], [2, 10, 13, 14, 3, 0, 0]])
    tree = {"tree_ids": torch.tensor([[2, 20, 21, 22, 3]]), "heads": torch.tensor([[IGNORE, 2, 0, 2, IGNORE]]),
            "rels": torch.tensor([[IGNORE, 0, 1, 2, IGNORE]])}
    batch = {"text": text} | (tree if variant in ("usl-mlm", "ud-prlm") else {})
    sched = Schedule(joint_steps=1, p=0.5, seed=3)
    kinds = {s: sched.kind(s) for s in range(1, 40)}
    for kind in (JOINT, USL_MLM, MLM):
        step = min(s for s, k in kinds.items() if k == kind)
        m = _encoder(variant)
        state = {"step": step - 1, "epoch": 0}
        taken = Counter()
        loss, _ = make_step_loss(m, sched, state, 1, 0.3, choose("cpu", False), taken)(batch)
        assert taken == {kind: 1}
        usl, through = losses(kind, variant)
        with torch.no_grad():  # the same numbers, by hand
            g = torch.Generator().manual_seed(step_seed(1, step))
            ids, labels = mask_tokens(text, text < 5, 4, 50, 5, g, 0.3)
            h, mask = m.encode(ids)
            want = m.mlm_loss(m.integrate(h, mask) if through else h, labels)
            if usl:
                th, tm = m.encode(tree["tree_ids"])
                want = want + m.usl_loss(th, tm, tree["heads"], tree["rels"])
        torch.testing.assert_close(loss, want)
        loss.backward()
        reached = _reached(m)
        assert reached["encoder"] and reached["mlm_head"]
        if "usi" in reached:
            assert reached["usi"] == through, (kind, reached)
        if "usl" in reached:  # the USL head learns from its own loss, or from MLM through USI
            assert reached["usl"] == (usl or through), (kind, reached)


def test_layer_parity_keeps_the_variants_parameter_counts():
    """§4: an encoder with USI has one Transformer layer fewer below it, so the four variants of one config run the
    same number of Transformer layers and hold the same parameters apart from the structure heads (USL's MLPs and
    biaffines, USI's maps and Linear, and the LayerNorm over USI's Transformer layer)."""
    from forgetbench.pretrain.config import (
        Objective,
        PretrainConfig,
        PretrainData,
        PretrainModel,
        PretrainSpm,
    )
    from forgetbench.pretrain.run import encoder_config
    from forgetbench.train.config import TrainCfg

    counts = {}
    for variant in ("mlm", "usl-mlm", "usi-mlm", "ud-prlm"):
        cfg = PretrainConfig(PretrainData(), PretrainSpm(), PretrainModel(variant=variant, d_model=16, layers=3, heads=2,
                                                                          ffn=32), Objective(), TrainCfg())
        m = PretrainedEncoder(encoder_config(cfg, 50, 3))
        runs = len(m.layers) + (1 if hasattr(m, "usi_layer") else 0)
        heads = sum(p.numel() for n, p in m.named_parameters() if n.startswith(("mlp.", "scorer.", "usi.", "usi_norm.")))
        counts[variant] = (runs, sum(p.numel() for p in m.parameters()) - heads)
    assert len(set(counts.values())) == 1, counts
    assert counts["mlm"][0] == 3


# ---- pre-training runs ----

def _tiny_run(tmp_path, variant="ud-prlm", steps=12, treebank=None):
    from .conftest import REPO

    tb = tmp_path / "tb"
    if treebank is None:
        tb.mkdir(exist_ok=True)
        for split, n in (("train", 40), ("dev", 5)):
            src = (REPO / "data" / "ud" / "UD_Wolof-WTB" / f"wo_wtb-ud-{split}.conllu").read_text().split("\n\n")
            (tb / f"wo_tiny-ud-{split}.conllu").write_text("\n\n".join(src[:n]) + "\n\n")
    cfg = tmp_path / f"{variant}.yaml"
    cfg.write_text(f"""data: {{shared: "", treebanks: [{treebank or tb}], raw_languages: [en], max_pieces: 64}}
spm: {{vocab_size: 300}}
model: {{variant: {variant}, d_model: 16, layers: 2, heads: 2, ffn: 32, dropout: 0.1, head_mlp: 8, dep_mlp: 4}}
objective: {{joint_steps: 4, p: 0.5}}
train: {{seed: 1, max_tokens: 600, lr: 0.001, warmup: 2, steps: {steps}, threads: 1}}
""")
    return cfg


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("variant", ["mlm", "usl-mlm", "usi-mlm", "ud-prlm"])
def test_each_variant_pretrains_exports_and_loads(variant, tmp_path, capsys):
    import json

    from forgetbench.cli import main
    from forgetbench.parsing.layers.pretrained import load_encoder

    assert main(["pretrain-encoder", str(_tiny_run(tmp_path, variant)), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    rec = json.loads((tmp_path / "run" / "model" / "training.json").read_text())
    assert rec["steps"] == 12 and rec["variant"] == variant and rec["data"]["tree_sentences"] > 30
    # the step kinds Algorithm 1 drew: the same for every variant (4 joint steps, then p = 0.5)
    sched = Schedule(4, 0.5, 1)
    want = {k: [sched.kind(s) for s in range(1, 13)].count(k) for k in (JOINT, USL_MLM, MLM)}
    assert rec["objectives"] == {k: v for k, v in want.items() if v} and want[JOINT] == 4
    model, sp, labels = load_encoder(tmp_path / "run" / "model")
    assert model.config.variant == variant and labels[-1] == SUBWORD and sp.piece_to_id("<mask>") == 4
    ids = torch.tensor([[2, *sp.encode("Ndax dafa baax"), 3]])
    assert model.representations(ids)[0].shape == (1, ids.shape[1], 16)
    # parse eval takes the encoder folder: its USL head parses the dev sentences (an MLM-only encoder has none)
    dev = tmp_path / "tb" / "wo_tiny-ud-dev.conllu"
    code = main(["parse", "eval", str(tmp_path / "run" / "model"), str(dev)])
    out, err = capsys.readouterr()
    if variant in ("mlm", "usi-mlm"):
        assert code == 2 and "USL head" in err and len(err.strip().splitlines()) == 1
    else:
        r = json.loads(out.strip().splitlines()[-1])
        assert code == 0 and r["arch"] == f"usl-head ({variant})" and r["sentences"] == 5 and 0 <= r["las"] <= r["uas"]


def test_a_resumed_pretraining_run_equals_an_uninterrupted_one(tmp_path):
    from forgetbench.cli import main

    cfg = _tiny_run(tmp_path)
    assert main(["pretrain-encoder", str(cfg), "--out", str(tmp_path / "straight"), "--quiet"]) == 0
    assert main(["pretrain-encoder", str(cfg), "--out", str(tmp_path / "cut"), "--steps", "5", "--quiet"]) == 0
    assert main(["pretrain-encoder", str(cfg), "--out", str(tmp_path / "cut"), "--quiet"]) == 0
    a, b = _weights(tmp_path / "straight" / "model"), _weights(tmp_path / "cut" / "model")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_an_exported_encoder_continues_from_its_step_with_a_restarted_optimiser(tmp_path, capsys):
    """``--continue-from``: an encoder exported at step 5 and continued in a new run folder reaches step 12 through
    the uninterrupted run's objectives and batches (the same tokens, epoch and position in it); only the restarted
    optimiser, recorded, makes its weights differ. An encoder of other settings is refused in one line.
    ``scripts/ship_encoder.py`` ships the two segments as one pre-training (fp16 weights that load as an encoder,
    each segment's steps and tokens) and refuses a continuation without the segment it continues."""
    import json

    from forgetbench.cli import main
    from forgetbench.parsing.layers.pretrained import load_encoder

    from .conftest import REPO, python

    cfg = _tiny_run(tmp_path)
    straight, cut, cont = tmp_path / "straight", tmp_path / "cut", tmp_path / "cont"
    assert main(["pretrain-encoder", str(cfg), "--out", str(straight), "--quiet"]) == 0
    assert main(["pretrain-encoder", str(cfg), "--out", str(cut), "--steps", "5", "--quiet"]) == 0
    assert main(["pretrain-encoder", str(cfg), "--out", str(cont), "--continue-from", str(cut / "model"), "--quiet"]) == 0
    a, b = (json.loads((r / "model" / "training.json").read_text()) for r in (straight, cont))
    assert (b["steps"], b["epochs"], b["tokens"], b["objectives"]) == (a["steps"], a["epochs"], a["tokens"], a["objectives"])
    assert b["continued_from"]["step"] == 5 and b["continued_from"]["optimiser"] == "restarted"
    sa, sb = (json.loads((r / "checkpoint" / "state.json").read_text()) for r in (straight, cont))
    assert (sb["epoch"], sb["batch"]) == (sa["epoch"], sa["batch"])
    wa, wb = _weights(straight / "model"), _weights(cont / "model")
    assert not all(torch.equal(wa[k], wb[k]) for k in wa)
    (tmp_path / "o").mkdir()
    other = _tiny_run(tmp_path / "o", variant="usl-mlm")
    capsys.readouterr()
    assert main(["pretrain-encoder", str(other), "--out", str(tmp_path / "x"), "--continue-from", str(cut / "model"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "pre-trained with other settings" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()  # refused before any work
    ship = REPO / "scripts" / "ship_encoder.py"
    assert python(ship, cut / "model", cont / "model", tmp_path / "shipped").returncode == 0
    rec, ws = json.loads((tmp_path / "shipped" / "training.json").read_text()), _weights(tmp_path / "shipped")
    c = json.loads((cut / "model" / "training.json").read_text())
    assert [(s["first_step"], s["last_step"], s["tokens"], s["optimiser"]) for s in rec["segments"]] == [
        (1, 5, c["tokens"], "new"), (6, 12, b["tokens"] - c["tokens"], "restarted")]
    assert ws.keys() == wb.keys() and all(ws[k].dtype == torch.float16 and torch.equal(ws[k], wb[k].half()) for k in wb)
    model, _, _ = load_encoder(tmp_path / "shipped")
    assert all(torch.equal(v, wb[k].half().float()) for k, v in model.state_dict().items() if k in wb)
    alone = python(ship, cont / "model", tmp_path / "shipped2")
    assert alone.returncode != 0 and "continues an encoder at step 5" in alone.stderr


def test_bad_pretraining_input_is_one_line_exit_2(tmp_path, capsys):
    from forgetbench.cli import main
    from forgetbench.parsing.layers.pretrained import load_encoder

    from .conftest import REPO

    with pytest.raises(ForgetbenchError, match="not a pre-trained encoder folder .*'m2m_100'"):
        load_encoder(REPO / "artifacts" / "teacher")
    tb = tmp_path / "cyc"
    tb.mkdir()
    (tb / "x-ud-train.conllu").write_text("1\ta\ta\tX\t_\t_\t2\tdep\t_\t_\n2\tb\tb\tX\t_\t_\t1\tdep\t_\t_\n"
                                          "3\tc\tc\tX\t_\t_\t0\troot\t_\t_\n\n")
    assert main(["pretrain-encoder", str(_tiny_run(tmp_path, treebank=tb)), "--out", str(tmp_path / "r"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "x-ud-train.conllu" in err[0] and "cycle" in err[0], err
    assert not (tmp_path / "r").exists()


def test_the_usl_head_parses_by_first_pieces_mst_and_no_subword_label():
    from types import SimpleNamespace

    from forgetbench.parsing.parsers.usl_parser import parse_sentences

    class Sp:  # "ab" → 2 pieces, "c" → 1
        def encode(self, w):
            return [10, 11] if w == "ab" else [12]

    # positions: <s> 0, ab 1-2, c 3, </s> 4; S_arc[dep, head]
    arc = torch.full((1, 5, 5), -5.0)
    arc[0, 1, 0] = 2.0  # ab ← root
    arc[0, 3, 1] = 3.0  # c ← ab (first piece)
    arc[0, 3, 2] = 9.0  # c ← ab's second piece: not a word, never chosen
    arc[0, 1, 3] = 1.0  # ab ← c: loses to the root attachment
    labels = ["nsubj", "root", SUBWORD]
    rel = torch.zeros(1, 3, 5, 5)  # [B, R, dep, head]
    rel[0, 2] = 10.0  # "subword" scores best everywhere: never given to a word
    rel[0, 1, 1, 0] = 5.0
    rel[0, 0, 3, 1] = 5.0
    model = SimpleNamespace(config=SimpleNamespace(max_positions=5), encode=lambda ids: (None, None),
                            usl=lambda h, m: (arc, None, None), scorer={"rel": lambda a, b: rel})
    sent = SimpleNamespace(forms=["ab", "c"])
    preds, too_long = parse_sentences(model, Sp(), labels, [sent, SimpleNamespace(forms=["ab", "ab", "c"])])
    assert preds[0] == ([0, 1], ["root", "nsubj"]) and too_long == 1  # 7 positions do not fit 5: a chain
    assert preds[1] == ([0, 1, 2], ["dep", "dep", "dep"])


def test_the_pretraining_probe_times_steps_and_keeps_nothing_trained(tmp_path, capsys, monkeypatch):
    from forgetbench.cli import main
    from forgetbench.train import probe as probe_mod

    seen, real = {}, probe_mod.figures

    def spy(sec, tok, epoch, hours):
        seen.update(sec=sec, tok=tok, epoch=epoch)
        return real(sec, tok, epoch, hours)

    monkeypatch.setattr(probe_mod, "figures", spy)
    out = tmp_path / "probe"
    assert main(["pretrain-encoder", str(_tiny_run(tmp_path)), "--out", str(out), "--probe", "--steps", "1",
                 "--hours", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    r = real(seen["sec"], seen["tok"], seen["epoch"], 1.0)
    assert len(seen["sec"]) == 1 and seen["tok"][0] > 0 and f"an epoch is {seen['epoch']:,} tokens" in text
    assert f"{r['steps_per_hour']:,.0f} steps/hour" in text and text.startswith("ud-prlm: ")
    # an epoch's tokens: every text sentence once, plus the tree chunks paired with them (4 batches here)
    from forgetbench.pretrain.data import Batches

    d = Batches(out, with_trees=True)
    batches = d.batches(600, 1, 0)
    assert seen["epoch"] == sum(len(d.text[i]) for t, _ in batches for i in t) + sum(
        len(d.tree_ids[i]) for _, g in batches for i in g)
    assert not (out / "checkpoint").exists() and not (out / "model").exists()
    # the probed folder then trains as a fresh run
    assert main(["pretrain-encoder", str(_tiny_run(tmp_path)), "--out", str(out), "--steps", "2", "--quiet"]) == 0


# ---- the encoder as a parser reads it ----

def test_words_are_read_in_windows_of_whole_words():
    from forgetbench.parsing.layers.pretrained import windows

    assert windows([[7, 7], [7], [7, 7, 7]], 6) == [[0, 1], [2]]  # 4 positions between <s> and </s>
    assert windows([[7] * 10, [7]], 6) == [[0], [1]]  # a word too long for any window: alone, cut to fit
    assert windows([], 6) == [[]]


@pytest.mark.parametrize("usi", [False, True])
def test_first_piece_pooling_equals_encoding_each_sentence_alone(usi):
    from forgetbench.parsing.layers.pretrained import PretrainedWords

    torch.manual_seed(0)
    c = EncoderConfig(vocab_size=40, n_rels=3, d_model=8, layers=1, heads=2, ffn=16, dropout=0.0, max_positions=7,
                      arc_mlp=4, rel_mlp=4, usi=usi)
    m = PretrainedWords(c).eval()
    # sentence 0: words of 2, 1, 1 pieces (6 positions with <s>, </s>); sentence 1: 1 word; padding beyond
    pieces = torch.zeros(2, 4, 2, dtype=torch.long)
    pieces[0, 1], pieces[0, 2, 0], pieces[0, 3, 0], pieces[1, 1, 0] = torch.tensor([10, 11]), 12, 13, 14
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    out = m(pieces, mask)
    h0, _ = m.encoder.representations(torch.tensor([[2, 10, 11, 12, 13, 3]]))
    torch.testing.assert_close(out[0], h0[0, [0, 1, 3, 4]], atol=1e-5, rtol=1e-5)  # root = <s>; first pieces
    h1, _ = m.encoder.representations(torch.tensor([[2, 14, 3]]))
    torch.testing.assert_close(out[1, :2], h1[0, :2], atol=1e-5, rtol=1e-5)
    assert out[1, 2:].abs().sum() == 0
    # longer than 7 positions: two windows of whole words, each read alone
    long = torch.zeros(1, 5, 2, dtype=torch.long)
    long[0, 1], long[0, 2], long[0, 3], long[0, 4] = (torch.tensor(x) for x in ([10, 11], [12, 13], [14, 15], [16, 17]))
    got = m(long, torch.ones(1, 5, dtype=torch.bool))
    a, _ = m.encoder.representations(torch.tensor([[2, 10, 11, 12, 13, 3]]))
    b, _ = m.encoder.representations(torch.tensor([[2, 14, 15, 16, 17, 3]]))
    torch.testing.assert_close(got[0], torch.stack([a[0, 0], a[0, 1], a[0, 3], b[0, 1], b[0, 3]]), atol=1e-5, rtol=1e-5)


def test_a_frozen_encoder_reads_each_sentence_alone_and_its_memo_is_exact(monkeypatch):
    """Frozen: a sentence's features are the same bits alone or beside a longer sentence (no batch layout in them);
    inside memo_frozen each sentence is read once and reused, outside it nothing is kept; a fine-tuned encoder is
    never memoised (its weights move)."""
    from forgetbench.parsing.layers.pretrained import PretrainedWords, memo_frozen

    torch.manual_seed(0)
    c = EncoderConfig(vocab_size=40, n_rels=3, d_model=8, layers=1, heads=2, ffn=16, dropout=0.1, max_positions=7,
                      arc_mlp=4, rel_mlp=4, usi=True)
    m = PretrainedWords(c)
    for q in m.parameters():
        q.requires_grad_(False)
    m.train()  # a parser in training: a frozen encoder still reads without dropout
    short = torch.zeros(1, 5, 2, dtype=torch.long)
    short[0, 1, 0], short[0, 2, 0] = 12, 13
    both = torch.zeros(2, 5, 2, dtype=torch.long)
    both[0] = short[0]
    both[1, 1], both[1, 2], both[1, 3], both[1, 4] = (torch.tensor(x) for x in ([10, 11], [12, 13], [14, 15], [16, 17]))
    m_short, m_both = torch.tensor([[True] * 3 + [False] * 2]), torch.tensor([[True] * 3 + [False] * 2, [True] * 5])
    alone = m(short, m_short)
    assert torch.equal(m(both, m_both)[0], alone[0]) and not alone.requires_grad
    reads = []
    real = PretrainedWords._read
    monkeypatch.setattr(PretrainedWords, "_read", lambda self, *a: reads.append(len(a[0])) or real(self, *a))
    with memo_frozen(m):
        first, again = m(both, m_both), m(both, m_both)
        assert len(m.memo) == 2 and len(reads) == 2  # each sentence once
        assert torch.equal(first, again) and torch.equal(first[0], alone[0])
    assert m.memo is None
    m(short, m_short)
    assert len(reads) == 3  # outside: read again
    for q in m.parameters():
        q.requires_grad_(True)
    with memo_frozen(m):
        assert m.memo is None
        m(both, m_both)
    assert reads[-1] == 2  # fine-tuned: one batch of both sentences, nothing kept


def test_a_frozen_encoders_parser_trains_the_same_with_and_without_its_memo(tmp_path, capsys, monkeypatch):
    """The memo changes no bit of a frozen-encoder parser's training: the saved weights and dev scores equal those
    of the same run reading every sentence anew each epoch."""
    import contextlib
    import json

    from forgetbench.cli import main
    from forgetbench.parsing import train as train_mod

    assert main(["pretrain-encoder", str(_tiny_run(tmp_path, steps=4)), "--out", str(tmp_path / "enc"), "--quiet"]) == 0
    tb = tmp_path / "tb"

    def run(out):
        argv = ["parse", "train", "--train", str(tb / "wo_tiny-ud-train.conllu"), "--dev",
                str(tb / "wo_tiny-ud-dev.conllu"), "--out", str(out), "--tags", "gold", "--max-epochs", "3",
                "--encoder", str(tmp_path / "enc" / "model"), "--encoder-lr-scale", "0", "--quiet", "--threads", "1"]
        assert main(argv) == 0, capsys.readouterr().err
        return _weights(out), json.loads((out / "training.json").read_text())["history"]

    from forgetbench.parsing.layers.pretrained import PretrainedWords

    reads = []
    real = PretrainedWords._read
    monkeypatch.setattr(PretrainedWords, "_read", lambda self, *a: reads.append(1) or real(self, *a))
    w_memo, h_memo = run(tmp_path / "memo")
    n_memo = len(reads)
    monkeypatch.setattr(train_mod, "memo_frozen", lambda model: contextlib.nullcontext())
    w_plain, h_plain = run(tmp_path / "plain")
    assert n_memo == 45 and len(reads) - n_memo == 3 * 45  # 40 training + 5 dev sentences, once against every epoch
    assert w_memo.keys() == w_plain.keys() and all(torch.equal(w_memo[k], w_plain[k]) for k in w_memo)
    strip = [{k: v for k, v in r.items() if k in ("epoch", "dev_las", "dev_uas")} for r in h_memo]
    assert strip == [{k: v for k, v in r.items() if k in ("epoch", "dev_las", "dev_uas")} for r in h_plain]
    assert len(strip) == 3


def test_pieces_tensor_holds_each_words_pieces():
    from forgetbench.parsing.layers.pretrained import MAX_PIECES_PER_WORD, pieces_tensor

    class Sp:
        def encode(self, w):
            return {"ab": [10, 11], "c": [12], "": [], "long": list(range(20, 40))}[w]

    t = pieces_tensor(Sp(), [["ab", "c"], ["", "long"]], 4)
    assert t.shape == (2, 4, MAX_PIECES_PER_WORD) and t[0, 0].sum() == 0  # the root row empty
    assert t[0, 1, :3].tolist() == [10, 11, 0] and t[0, 2, 0] == 12 and t[1, 1, 0] == 1  # no pieces: <unk>
    assert t[1, 2].tolist() == list(range(20, 20 + MAX_PIECES_PER_WORD))


@pytest.mark.parametrize("arch", ["biaffine", "syntr", "rngtr"])
def test_a_parser_reads_a_pretrained_encoder_frozen_or_fine_tuned(arch, tmp_path, capsys):
    from safetensors.torch import load_file

    from forgetbench.cli import main
    from forgetbench.parsing.parsers import interface as parsers

    assert main(["pretrain-encoder", str(_tiny_run(tmp_path, steps=4)), "--out", str(tmp_path / "enc"), "--quiet"]) == 0
    enc = tmp_path / "enc" / "model"
    tb = tmp_path / "tb"
    runs = {}
    for scale in ("0", "1"):
        out = tmp_path / f"{arch}-{scale}"
        # selected on its own training sentences, so that a later epoch is kept: the biaffine scorers start at zero,
        # so the first update reaches nothing below them
        argv = ["parse", "train", "--arch", arch, "--train", str(tb / "wo_tiny-ud-train.conllu"), "--dev",
                str(tb / "wo_tiny-ud-train.conllu"), "--out", str(out), "--tags", "gold", "--max-epochs", "3",
                "--encoder", str(enc), "--encoder-lr-scale", scale, "--quiet"]
        assert main(argv) == 0, capsys.readouterr().err
        runs[scale] = out
    before = _weights(enc)
    for scale, out in runs.items():
        w = load_file(str(out / "model.safetensors"))
        got = {k[len("words.encoder."):]: v for k, v in w.items() if k.startswith("words.encoder.")}
        assert got.keys() == {k for k in before if not k.startswith("mlm_")}  # the MLM head, unused, is not kept
        same = all(torch.equal(got[k], before[k]) for k in got)
        assert same == (scale == "0"), scale  # frozen: the encoder's own weights; fine-tuned: moved
        assert (out / "spm.model").read_bytes() == (enc / "spm.model").read_bytes()
        rec = __import__("json").loads((out / "training.json").read_text())
        assert rec["encoder"]["lr_scale"] == float(scale) and rec["encoder"]["variant"] == "ud-prlm"
        # reloaded, it parses as trained: the dev LAS of the saved model
        p = parsers.load(out)
        assert p.vocab.sp is not None and p.model.words is not None
        code = main(["parse", "eval", str(out), str(tb / "wo_tiny-ud-train.conllu")])
        r = __import__("json").loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert code == 0 and r["las"] == pytest.approx(rec["dev"]["las"])
        frozen = not any(q.requires_grad for q in p.model.words.encoder.parameters())
        assert frozen == (scale == "0")  # loaded as trained: a frozen encoder reads each sentence alone again
    # the fine-tuned parser goes through the recipe runner, its encoder's layers pruned and quantised too (Wanda
    # reads every projection's inputs: the attention's own modules, not a packed matrix no hook sees)
    rep = tmp_path / f"compress-{arch}"
    assert main(["parse", "compress", "--models", str(runs["1"]), "--test", str(tb / "wo_tiny-ud-dev.conllu"),
                 "--dev", str(tb / "wo_tiny-ud-train.conllu"), "--recipes", "prune-45", "wanda-45-uniform",
                 "ptq-int8", "--out", str(rep)]) == 0
    S = __import__("json").loads((rep / "summary.json").read_text())
    assert set(S["treebanks"][0]["variants"]) == {"prune-45", "wanda-45-uniform", "ptq-int8"}
    from forgetbench.compress import PruneConfig, prune
    from forgetbench.compress.ptq import weight_matrices

    model = parsers.load(runs["1"]).model
    sites = {n for n, _, _ in weight_matrices(model)}
    assert {f"words.encoder.layers.0.self_attn.{p}_proj.weight" for p in "qkv"} | {
        "words.encoder.layers.0.self_attn.out_proj.weight"} <= sites
    report = prune(model, PruneConfig(sparsity=0.45, scope="layer"))
    unit = next(u for u in report.units if u.name == "pretrained.layers.0")
    assert unit.sparsity == pytest.approx(0.45, abs=0.01)  # the layer's smallest 45 %, attention maps among them
    for w in (model.words.encoder.layers[0].linear1.weight, model.words.encoder.layers[0].self_attn.q_proj.weight):
        assert 0.3 < float((w == 0).float().mean()) < 0.6


def test_the_encoder_layer_computes_torchs_layer_and_reads_its_packed_weights():
    """``parsing.layers.encoder_layer.EncoderLayer`` loads ``nn.TransformerEncoderLayer(norm_first=True)``'s state dict
    (the packed ``in_proj`` rows split into q, k, v) and gives its outputs, padded keys masked."""
    from torch import nn

    from forgetbench.parsing.layers.encoder_layer import EncoderLayer

    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(16, 4, 32, 0.1, activation="gelu", batch_first=True, norm_first=True).eval()
    new = EncoderLayer(16, 4, 32, 0.1).eval()
    new.load_state_dict(ref.state_dict())  # strict: every key mapped
    assert torch.equal(new.self_attn.k_proj.weight, ref.self_attn.in_proj_weight[16:32])
    x, pad = torch.randn(3, 7, 16), torch.zeros(3, 7, dtype=torch.bool)
    pad[1, 5:], pad[2, 2:] = True, True
    with torch.no_grad():
        want, got = ref(x, src_key_padding_mask=pad), new(x, pad)
    assert torch.allclose(got[~pad], want[~pad], atol=1e-5)  # torch's fused kernels against ours: to rounding


def test_an_architecture_that_reads_its_own_features_refuses_an_encoder(tmp_path, capsys):
    from forgetbench.cli import main

    assert main(["pretrain-encoder", str(_tiny_run(tmp_path, steps=2)), "--out", str(tmp_path / "enc"), "--quiet"]) == 0
    tb = tmp_path / "tb"
    argv = ["parse", "train", "--arch", "g2gtr", "--train", str(tb / "wo_tiny-ud-train.conllu"), "--dev",
            str(tb / "wo_tiny-ud-dev.conllu"), "--out", str(tmp_path / "p"), "--tags", "gold", "--max-epochs", "1",
            "--encoder", str(tmp_path / "enc" / "model"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "g2gtr reads its own features" in err[0] and not (tmp_path / "p").exists()


def test_encoder_learning_rates_decay_layer_by_layer():
    from forgetbench.parsing.parsers.model import BiaffineParser, ParserConfig
    from forgetbench.parsing.train import encoder_groups

    c = EncoderConfig(vocab_size=30, n_rels=3, d_model=8, layers=2, heads=2, ffn=16, arc_mlp=4, rel_mlp=4).to_dict()
    m = BiaffineParser(ParserConfig(n_words=5, n_chars=5, n_tags=4, n_rels=3, pretrained=c))
    groups = encoder_groups(m, 1.0, 0.5, 0.1)
    lr_of = {id(p): g.get("lr", 1.0) for g in groups for p in g["params"]}
    enc = m.words.encoder
    assert lr_of[id(m.mlp["arc_dep"].linear.weight)] == 1.0  # the parser's own layers
    assert lr_of[id(enc.usi_layer.linear1.weight)] == 0.5  # the encoder's top
    assert lr_of[id(enc.layers[1].linear1.weight)] == pytest.approx(0.05)  # last layer: one decay
    assert lr_of[id(enc.layers[0].linear1.weight)] == pytest.approx(0.005)
    assert lr_of[id(enc.embed.weight)] == pytest.approx(0.0005)
    assert sum(len(g["params"]) for g in groups) == len(list(m.parameters()))
    frozen = encoder_groups(m, 1.0, 0.0, 1.0)
    assert len(frozen) == 1 and not enc.embed.weight.requires_grad


@pytest.mark.parametrize("variant", ["mlm", "usl-mlm", "ud-prlm"])
def test_a_parser_holds_only_the_encoder_it_runs(variant):
    """``PretrainedWords`` keeps what ``representations`` computes: never the MLM head, and the USL head only with
    USI (UD-PrLM), so compression never meets a matrix no input reaches. The whole encoder's state dict loads
    (strictly) into it, the heads ignored, and the representations are the whole encoder's."""
    from forgetbench.parsing.layers.pretrained import PretrainedWords

    n_rels = 0 if variant == "mlm" else 4
    c = EncoderConfig(vocab_size=40, n_rels=n_rels, d_model=16, layers=1, heads=2, ffn=32, dropout=0.0,
                      max_positions=16, arc_mlp=8, rel_mlp=8, usi=variant == "ud-prlm")
    torch.manual_seed(0)
    whole = PretrainedEncoder(c).eval()
    words = PretrainedWords(c).eval()
    words.encoder.load_state_dict(whole.state_dict())
    kept = {k.split(".")[0] for k in words.encoder.state_dict()}
    assert not kept & {"mlm_dense", "mlm_norm", "mlm_bias"}
    assert ({"mlp", "scorer"} <= kept) == (variant == "ud-prlm")
    ids = torch.tensor([[2, 7, 8, 9, 3, 0]])
    with torch.no_grad():
        assert torch.equal(words.encoder.representations(ids)[0], whole.representations(ids)[0])


@pytest.mark.parametrize("arch", ["biaffine", "syntr"])
def test_features_beside_the_inputs_add_nothing_when_the_encoder_outputs_zero(arch):
    """§4's downstream parser: the scratch parser's word, character and UPOS inputs plus the encoder's projected
    first-piece features. Built after the scratch modules, so with the same seed its own weights are the scratch
    parser's, and with an encoder that outputs zeros its forward is the scratch parser's."""
    from forgetbench.parsing.parsers.graph_parser import GraphParser, GraphParserConfig
    from forgetbench.parsing.parsers.model import BiaffineParser, ParserConfig

    cls, ccls = (BiaffineParser, ParserConfig) if arch == "biaffine" else (GraphParser, GraphParserConfig)
    enc = EncoderConfig(vocab_size=30, n_rels=3, d_model=16, layers=1, heads=2, ffn=32, dropout=0.0, max_positions=16,
                        head_mlp=8, dep_mlp=4).to_dict()
    dims = {"n_words": 20, "n_chars": 15, "n_tags": 6, "n_rels": 4}
    torch.manual_seed(0)
    scratch = cls(ccls(**dims)).eval()
    torch.manual_seed(0)
    beside = cls(ccls(**dims, pretrained=enc)).eval()
    assert beside.cfg.pretrained_mode == "beside" and beside.feature_proj.weight.shape == (300, 16)
    own = {k: v for k, v in beside.state_dict().items() if not k.startswith(("words.", "feature_proj."))}
    first = "lstm.weight_ih_l0" if arch == "biaffine" else "proj.weight"
    for k, v in scratch.state_dict().items():  # the scratch weights, the first layer's widened by 300 columns
        got = own.pop(k)
        assert torch.equal(got[:, : v.shape[1]] if k.startswith(first) else got, v), k
    assert not own
    words = torch.tensor([[2, 5, 6, 7], [2, 8, 0, 0]])
    tags = torch.tensor([[2, 3, 4, 5], [2, 3, 0, 0]])
    chars = torch.randint(1, 15, (2, 4, 5), generator=torch.Generator().manual_seed(1))
    pieces = torch.randint(5, 30, (2, 4, 2), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():  # the biaffine scorers start at zero (every score 0): give both the same nonzero weights
        for k in ("arc", "rel"):
            scratch.scorer[k].weight.normal_(generator=torch.Generator().manual_seed(3))
            beside.scorer[k].weight.copy_(scratch.scorer[k].weight)
        for p in beside.words.encoder.norm.parameters():  # H^(L+1)'s LayerNorm at zero: the encoder outputs zeros
            p.zero_()
        for p in beside.words.encoder.usi_norm.parameters():
            p.zero_()
        assert beside.words(pieces, words != 0).abs().sum() == 0
        a, b = scratch(words, chars, tags), beside(words, (chars, pieces), tags)
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(y, x, atol=1e-4, rtol=1e-4)  # the wider matrix products round otherwise
        # a real encoder output changes the scores
        beside.words.encoder.usi_norm.weight.fill_(1.0)
        assert not torch.allclose(beside(words, (chars, pieces), tags)[0], a[0])


def test_a_parser_saved_before_the_mode_existed_replaces_its_inputs():
    from forgetbench.parsing.parsers.model import BiaffineParser, ParserConfig

    enc = EncoderConfig(vocab_size=30, n_rels=3, d_model=16, layers=1, heads=2, ffn=32, dropout=0.0,
                        max_positions=16).to_dict()
    stored = {"n_words": 20, "n_chars": 15, "n_tags": 6, "n_rels": 4, "pretrained": enc}
    m = BiaffineParser(ParserConfig(**ParserConfig.stored(stored)))
    assert m.cfg.pretrained_mode == "replace" and m.lstm is None and m.char_lstm is None
    assert ParserConfig.stored({"n_words": 1}) == {"n_words": 1}
    legacy = {k: v for k, v in enc.items() if k not in ("structure", "head_mlp", "dep_mlp", "supervised")}
    assert EncoderConfig.from_dict(legacy).structure == "expected-label"


def test_pretraining_stops_early_on_its_held_out_loss_and_exports_the_best_step(tmp_path):
    """``train.patience``: the held-out MLM loss (the treebanks' dev sentences; UD-PrLM's read through USI after
    the joint steps) measured every ``dev_every`` steps after them; with a min_delta no change can pass, the first
    measurement stays the best and the run stops ``patience`` measurements later, exporting that step's weights. Run
    again with more steps, it trains no further."""
    import json

    from forgetbench.cli import main

    cfg = _tiny_run(tmp_path, steps=40)
    cfg.write_text(cfg.read_text().replace("threads: 1}", "threads: 1, dev_every: 2, patience: 2, min_delta: 100}"))
    out = tmp_path / "run"
    assert main(["pretrain-encoder", str(cfg), "--out", str(out), "--quiet"]) == 0
    rec = json.loads((out / "model" / "training.json").read_text())
    es = rec["early_stop"]
    assert rec["steps"] == 10 and rec["stopped_by"].startswith("early stop") and es["best_step"] == 6
    assert [s for s, _ in es["scores"]] == [6, 8, 10] and es["exported"] == "best" and es["start"] == 4
    best, exported = _weights(out / "best"), _weights(out / "model")
    assert all(torch.equal(best[k], exported[k]) for k in exported)
    log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
    dev = [r for r in log if "dev_score" in r]
    assert [r["step"] for r in dev] == [6, 8, 10] and all(r["dev_mlm_loss"] > 0 and r["dev_usl_loss"] > 0 for r in dev)
    assert dev[0]["dev_score"] == pytest.approx(-dev[0]["dev_mlm_loss"], abs=1e-4)
    assert main(["pretrain-encoder", str(cfg), "--out", str(out), "--steps", "80", "--quiet"]) == 0
    assert json.loads((out / "model" / "training.json").read_text())["steps"] == 10


def test_pretraining_batches_put_like_lengths_together_within_the_padded_budget():
    import numpy as np

    from forgetbench.pretrain.data import POOL, buckets

    lengths = np.random.default_rng(0).integers(3, 120, 2500)
    lengths[7] = 900  # longer than the budget: alone
    out = buckets(np.random.default_rng(1).permutation(2500), lengths, 1024, np.random.default_rng(2))
    flat = np.concatenate(out)
    assert sorted(flat.tolist()) == list(range(2500))  # every sentence once
    assert all(len(b) * lengths[b].max() <= 1024 or len(b) == 1 for b in out) and [7] in [b.tolist() for b in out]
    padded = sum(len(b) * lengths[b].max() for b in out)
    assert padded < 1.1 * lengths.sum()  # like lengths together (random batches pad several times over)
    again = buckets(np.random.default_rng(1).permutation(2500), lengths, 1024, np.random.default_rng(2))
    assert all(np.array_equal(a, b) for a, b in zip(out, again, strict=True)) and POOL == 1000


def test_snapshots_keep_the_weights_of_fixed_steps_and_do_not_change_the_run(tmp_path):
    """``train.snapshot_every``: every N steps the encoder as parsers read it goes to ``snapshots/step-NNNNNN``
    (the weights of that step: the same as a run stopped there), and the run's own weights and fingerprint are
    those of a run without snapshots (the setting only says what to keep)."""
    import json

    from forgetbench.cli import main
    from forgetbench.parsing.layers.pretrained import load_encoder

    cfg = _tiny_run(tmp_path)
    snap = tmp_path / "snap.yaml"
    snap.write_text(cfg.read_text().replace("threads: 1}", "threads: 1, snapshot_every: 5}"))
    assert main(["pretrain-encoder", str(snap), "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert main(["pretrain-encoder", str(cfg), "--out", str(tmp_path / "plain"), "--quiet"]) == 0
    assert main(["pretrain-encoder", str(cfg), "--out", str(tmp_path / "five"), "--steps", "5", "--quiet"]) == 0
    assert sorted(p.name for p in (tmp_path / "s" / "snapshots").iterdir()) == ["step-000005", "step-000010"]
    at5, five = _weights(tmp_path / "s" / "snapshots" / "step-000005"), _weights(tmp_path / "five" / "model")
    assert all(torch.equal(at5[k], five[k]) for k in five)
    full, plain = _weights(tmp_path / "s" / "model"), _weights(tmp_path / "plain" / "model")
    assert all(torch.equal(full[k], plain[k]) for k in plain)
    rec = json.loads((tmp_path / "s" / "snapshots" / "step-000010" / "training.json").read_text())
    assert rec["steps"] == 10 and rec["snapshot"] is True
    assert rec["fingerprint"] == json.loads((tmp_path / "plain" / "model" / "training.json").read_text())["fingerprint"]
    assert load_encoder(tmp_path / "s" / "snapshots" / "step-000010")[0].config.variant == "ud-prlm"


def test_an_encoder_vocabulary_too_small_for_its_text_is_refused_in_one_line(tmp_path, capsys):
    """The encoders' SentencePiece model comes from the one ``models.vocabulary.train_spm``: a vocabulary smaller
    than the characters the treebank text needs is the one-line error, exit 2, as for every other vocabulary."""
    from forgetbench.cli import main

    cfg = _tiny_run(tmp_path, "mlm")
    cfg.write_text(cfg.read_text().replace("vocab_size: 300", "vocab_size: 20"))
    assert main(["pretrain-encoder", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "vocabulary size 20 is smaller than the" in err and "spm.vocab_size" in err
