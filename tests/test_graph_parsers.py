"""Graph-to-graph parsers: relation ids, graph-input attention, RNGTr refinement, the SWAP oracles, G2GTr."""

import json
import random
from pathlib import Path

import pytest
import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.parsing.data.conll import read_conllu
from forgetbench.parsing.layers.graph_attention import GraphSelfAttention
from forgetbench.parsing.metrics import tree_problems
from forgetbench.parsing.parsers.g2gtr import G2GConfig, G2GTransitionParser, parse_batch
from forgetbench.parsing.parsers.graph_parser import GraphParser, GraphParserConfig
from forgetbench.parsing.parsers.refine import refine
from forgetbench.parsing.structures.relations import graph_of, relation_ids
from forgetbench.parsing.structures.transition import SWAP, oracle, projective_order, run
from forgetbench.parsing.train import train

from .test_parser import _toy_treebank

UD = Path(__file__).resolve().parents[1] / "data" / "ud"
TREEBANKS = {"en_lines": "UD_English-LinES", "tr_imst": "UD_Turkish-IMST", "wo_wtb": "UD_Wolof-WTB"}
TINY = dict(word_dim=16, char_dim=8, char_hidden=16, tag_dim=8, arc_mlp=32, rel_mlp=16)
TINY_TR = TINY | dict(d_model=32, layers=2, heads=2, ffn=64)


def test_relation_ids_of_a_known_tree():
    # "the dog barks": the <- dog <- barks <- ROOT; positions 0 (root) .. 3; labels det=0, nsubj=1, root=2
    heads = torch.tensor([[-100, 2, 3, 0]])
    rels = torch.tensor([[-100, 0, 1, 2]])
    U = relation_ids(heads)[0]
    assert U.tolist() == [[0, 0, 0, 2],  # the root's dependent is "barks"
                          [0, 0, 1, 0],  # "the": its head is "dog"
                          [0, 2, 0, 1],  # "dog": dependent "the", head "barks"
                          [1, 0, 2, 0]]  # "barks": head ROOT, dependent "dog"
    L = relation_ids(heads, rels)[0]
    assert L[1, 2] == 1 + 2 * 0 and L[2, 1] == 2 + 2 * 0  # det, both directions
    assert L[2, 3] == 1 + 2 * 1 and L[3, 2] == 2 + 2 * 1  # nsubj
    assert L[3, 0] == 1 + 2 * 2 and L[0, 3] == 2 + 2 * 2  # root
    assert (L.diagonal() == 0).all()
    h, r = graph_of(relation_ids(heads, rels))
    assert h[0, 1:].tolist() == [2, 3, 0] and r[0, 1:].tolist() == [0, 1, 2]
    # unattached words (-1, an empty or partial graph) contribute no arc
    assert relation_ids(torch.tensor([[-1, -1, 3, -1]])).count_nonzero() == 2


@pytest.mark.parametrize("kind", ["g2g", "syng2g"])
@pytest.mark.parametrize("norm", [False, True])
def test_all_none_graph_with_zero_relation_embeddings_is_plain_attention(kind, norm):
    torch.manual_seed(0)
    att = GraphSelfAttention(16, 4, n_relations=7, kind=kind, relation_norm=norm, dropout=0.0).eval()
    for emb in (att.rel_key, att.rel_value):
        if emb is not None:
            emb.weight.data.zero_()
    x, mask = torch.randn(2, 5, 16), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    plain = att(x, mask)
    assert torch.allclose(att(x, mask, torch.zeros(2, 5, 5, dtype=torch.long)), plain, atol=1e-6)
    # and a real graph changes it once the embeddings are not zero
    torch.nn.init.normal_(att.rel_key.weight)
    assert not torch.allclose(att(x, mask, torch.randint(0, 7, (2, 5, 5))), plain, atol=1e-4)


def test_syng2g_relations_touch_query_and_key_but_leave_values_unchanged():
    torch.manual_seed(1)
    att = GraphSelfAttention(16, 4, n_relations=5, kind="syng2g", dropout=0.0).eval()
    assert att.rel_value is None
    x, mask, P = torch.randn(2, 6, 16), torch.ones(2, 6, dtype=torch.bool), torch.randint(0, 5, (2, 6, 6))
    out, w = att(x, mask, P, return_weights=True)
    v = att._split(att.v_proj(x))
    by_hand = att.out_proj(torch.matmul(w, v).transpose(1, 2).reshape(2, 6, 16))  # values: x W^V only
    assert torch.allclose(out, by_hand, atol=1e-6)
    # the scores: (q·k + q·r + r·k) / sqrt(d)
    q, k = att._split(att.q_proj(x)), att._split(att.k_proj(x))
    r = att.rel_key(P)
    e = (q @ k.transpose(-1, -2) + torch.einsum("bhid,bijd->bhij", q, r) + torch.einsum("bijd,bhjd->bhij", r, k)) / 2.0
    assert torch.allclose(w, e.softmax(-1), atol=1e-6)
    # the g2g kind, from the same weights: keys q·(k + r) (no r·k term) and relations on the value side too,
    # z = Σ_j w_ij (v_j + r^V_ij), so its output differs from syng2g's
    g2g = GraphSelfAttention(16, 4, n_relations=5, kind="g2g", dropout=0.0).eval()
    missing, unexpected = g2g.load_state_dict(att.state_dict(), strict=False)
    assert missing == ["rel_value.weight"] and unexpected == []
    torch.nn.init.normal_(g2g.rel_value.weight)
    out2, w2 = g2g(x, mask, P, return_weights=True)
    assert torch.allclose(w2, ((q @ k.transpose(-1, -2) + torch.einsum("bhid,bijd->bhij", q, r)) / 2.0).softmax(-1),
                          atol=1e-6)
    z = w2 @ v + torch.einsum("bhij,bijd->bhid", w2, g2g.rel_value(P))
    assert torch.allclose(out2, g2g.out_proj(z.transpose(1, 2).reshape(2, 6, 16)), atol=1e-6)
    assert not torch.allclose(out2, out, atol=1e-3)


def test_relation_layernorm_is_a_real_switch():
    torch.manual_seed(2)
    on = GraphSelfAttention(16, 4, n_relations=5, relation_norm=True, dropout=0.0).eval()
    off = GraphSelfAttention(16, 4, n_relations=5, relation_norm=False, dropout=0.0).eval()
    off.load_state_dict({k: v for k, v in on.state_dict().items() if not k.startswith("rel_norm.")})
    x, mask, P = torch.randn(2, 6, 16), torch.ones(2, 6, dtype=torch.bool), torch.randint(0, 5, (2, 6, 6))
    y_on, y_off = on(x, mask, P), off(x, mask, P)
    assert not torch.allclose(y_on, y_off, atol=1e-4)  # on: the LayerNorm is applied ...
    on.rel_norm.weight.data.mul_(3.0)
    assert not torch.allclose(on(x, mask, P), y_on, atol=1e-4)  # ... and its parameters act on the output
    assert off.rel_norm is None  # off: no LayerNorm exists to be (mis)applied; the key side is q·(k + r) exactly
    q, k, v = off._split(off.q_proj(x)), off._split(off.k_proj(x)), off._split(off.v_proj(x))
    w = ((q @ k.transpose(-1, -2) + torch.einsum("bhid,bijd->bhij", q, off.rel_key(P))) / 2.0).softmax(-1)
    z = w @ v + torch.einsum("bhij,bijd->bhid", w, off.rel_value(P))
    assert torch.allclose(y_off, off.out_proj(z.transpose(1, 2).reshape(2, 6, 16)), atol=1e-6)


def _inversions(order: list[int]) -> int:
    return sum(order[i] > order[j] for i in range(len(order)) for j in range(i + 1, len(order)))


def test_lazy_and_eager_swap_oracles_rebuild_every_shipped_training_tree():
    """Both oracles rebuild every training tree (projective and not). Per sentence: no SWAP exactly when the tree is
    projective; lazy swaps <= eager swaps <= the inversions of the projective order (a SWAP puts one inverted pair
    in order); per treebank the lazy oracle swaps strictly less (Nivre et al. 2009's point)."""
    for code, folder in TREEBANKS.items():
        sents = read_conllu(UD / folder / f"{code}-ud-train.conllu")
        totals = {True: 0, False: 0}
        non_projective = 0
        for s in sents:
            swaps = {}
            for lazy in (True, False):
                seq = oracle(s.heads, list(range(len(s.heads))), lazy=lazy)
                c = run(len(s.heads), seq)  # every transition checked valid
                assert c.terminal and c.heads[1:] == s.heads and c.rels[1:] == list(range(len(s.heads)))
                swaps[lazy] = sum(t == SWAP for t, _ in seq)
                totals[lazy] += swaps[lazy]
            order = projective_order(s.heads)[1:]
            projective = order == sorted(order)
            non_projective += not projective
            assert (swaps[True] == 0) == (swaps[False] == 0) == projective, (code, s.heads)
            assert swaps[True] <= swaps[False] <= _inversions(order), (code, s.heads, swaps)
        assert non_projective > 0 and totals[True] < totals[False], (code, non_projective, totals)


def test_refinement_stops_when_the_graph_no_longer_changes():
    torch.manual_seed(3)
    cfg = GraphParserConfig(n_words=20, n_chars=10, n_tags=6, n_rels=4, graph="labelled", **TINY_TR)
    model = GraphParser(cfg).eval()
    B, L = 3, 7
    words = torch.randint(3, 20, (B, L))
    words[2, 5:] = 0
    chars, tags = torch.randint(1, 10, (B, L, 4)), torch.randint(3, 6, (B, L))
    empty = torch.full((B, L), -1)
    res = refine(model, words, chars, tags, empty, empty, iterations=3, record=True)
    assert len(res["per_iteration"]) == 3
    for k, n in enumerate((6, 6, 4)):
        assert tree_problems(res["heads"][k, 1 : n + 1].tolist()) is None  # the final graph is an MST tree
    # a refiner that ignores its input graph: G¹ is the MST of its scores, G² their argmax (the MST again where the
    # argmax is a tree), G³ = G² → every sentence stops by iteration 3 of at most 4, and its tree never changes
    for layer in model.encoder.layers:
        layer.self_attn.rel_key.weight.data.zero_()
        layer.self_attn.rel_value.weight.data.zero_()
        layer.self_attn.rel_norm = None
    res = refine(model, words, chars, tags, empty, empty, iterations=4, record=True)
    assert all(r in (2, 3) for r in res["iterations"])
    assert all(torch.equal(h, res["heads"]) for h, _ in res["per_iteration"])


def test_rngtr_protocol_g1_by_mst_no_self_loop_two_cycles_dropped_and_the_stop_in_training():
    """The thesis's protocol as the authors' code runs it: G¹ is the MST (a tree) and later graphs the argmax, no
    word ever its own head, a 2-cycle enters the next input with both arcs dropped, and a sentence whose graph
    stops changing leaves the training loss."""
    from forgetbench.parsing.parsers import refine as R
    from forgetbench.parsing.structures.relations import relation_ids

    # 2-cycles by hand: words 1 and 2 head each other, 3 → 1; position 0 is the root
    heads = torch.tensor([[-1, 2, 1, 1, -1]])
    assert R.without_two_cycles(heads).tolist() == [[-1, -1, -1, 1, -1]]
    assert R.without_two_cycles(torch.tensor([[-1, 0, 1, 2]])).tolist() == [[-1, 0, 1, 2]]  # a tree keeps all
    torch.manual_seed(5)
    cfg = GraphParserConfig(n_words=20, n_chars=10, n_tags=6, n_rels=4, graph="labelled", **TINY_TR)
    model = GraphParser(cfg).eval()
    B, L = 3, 7
    words = torch.randint(3, 20, (B, L))
    chars, tags = torch.randint(1, 10, (B, L, 4)), torch.randint(3, 6, (B, L))
    arc = torch.zeros(B, L, L)
    arc[:, :, :] = -5.0
    for d in range(L):
        arc[:, d, d] = 10.0  # each word prefers itself: never chosen
        arc[:, d, 0] = 1.0
    h, _ = R.argmax_graph(model, arc, *model.encode(words, chars, tags, relation_ids(torch.full((B, L), -1)))[1:],
                          words != 0)
    assert (h[:, 1:] == 0).all()  # the self-loop lost to the next best head, the root
    seen = []
    real = model.encode

    def spy(w, c, t, P):
        seen.append(P.clone())
        return real(w, c, t, P)

    model.encode = spy
    empty = torch.full((B, L), -1)
    R.refine(model, words, chars, tags, empty, empty, iterations=3)
    g1 = seen[1]  # the input of iteration 2 is G¹: one head per word, and a tree
    from forgetbench.parsing.structures.relations import graph_of

    g1_heads, _ = graph_of(g1)
    for k in range(B):
        assert tree_problems(g1_heads[k, 1:].tolist()) is None
    # training: a refiner that ignores its input graph stops every sentence at iteration 3 (G³ = G²) at the latest,
    # so T = 5 adds no term after that: the loss equals the one with T = 3 (the same graphs, the same mean)
    for layer in model.encoder.layers:
        layer.self_attn.rel_key.weight.data.zero_()
        layer.self_attn.rel_value.weight.data.zero_()
        layer.self_attn.rel_norm = None
    model.encode = real
    from forgetbench.parsing.parsers.architectures import loss_fn

    gold_h = torch.randint(0, L, (B, L)).masked_fill(torch.arange(L) == 0, -100)
    gold_r = torch.randint(0, 4, (B, L)).masked_fill(torch.arange(L) == 0, -100)
    with torch.no_grad():
        one = R.refinement_loss(model, words, chars, tags, empty, empty, gold_h, gold_r, loss_fn, 1)
        many = R.refinement_loss(model, words, chars, tags, empty, empty, gold_h, gold_r, loss_fn, 5)
    assert torch.allclose(one, many)  # every iteration scores alike; stopped sentences add no term
    calls = []
    model.encode = lambda *a: calls.append(1) or real(*a)
    with torch.no_grad():
        R.refinement_loss(model, words, chars, tags, empty, empty, gold_h, gold_r, loss_fn, 5)
    assert 2 <= len(calls) <= 3  # the stop fired in training: no 4th or 5th pass


def test_warm_started_refiner_with_zero_relations_equals_its_syntr():
    torch.manual_seed(4)
    syn = GraphParser(GraphParserConfig(n_words=20, n_chars=10, n_tags=6, n_rels=4, **TINY_TR)).eval()
    ref = GraphParser(GraphParserConfig(n_words=20, n_chars=10, n_tags=6, n_rels=4, graph="labelled",
                                        relation_norm=False, **TINY_TR)).eval()
    missing, unexpected = ref.load_state_dict(syn.state_dict(), strict=False)
    assert not unexpected and all(".rel_" in k for k in missing)
    for layer in ref.encoder.layers:
        layer.self_attn.rel_key.weight.data.zero_()
        layer.self_attn.rel_value.weight.data.zero_()
    words, chars, tags = torch.randint(3, 20, (2, 6)), torch.randint(1, 10, (2, 6, 3)), torch.randint(3, 6, (2, 6))
    P = torch.randint(0, 9, (2, 6, 6))
    assert torch.allclose(ref.encode(words, chars, tags, P)[0], syn.encode(words, chars, tags)[0], atol=1e-5)
    with pytest.raises(ValueError, match="refiner"):
        ref.encode(words, chars, tags)


def test_g2gtr_greedy_decoding_always_ends_in_a_single_root_tree():
    torch.manual_seed(5)
    model = G2GTransitionParser(G2GConfig(n_words=20, n_chars=10, n_tags=6, n_rels=4, d_model=16, layers=1, heads=2,
                                          ffn=16, mlp=16, **{k: v for k, v in TINY.items() if "mlp" not in k})).eval()
    rng = random.Random(0)
    for _ in range(5):
        n = [rng.randint(1, 12) for _ in range(4)]
        L = max(n) + 1
        words = torch.zeros(4, L, dtype=torch.long)
        for k, m in enumerate(n):
            words[k, : m + 1] = torch.randint(3, 20, (m + 1,))
        b = {"words": words, "chars": torch.randint(1, 10, (4, L, 3)) * (words != 0).unsqueeze(-1),
             "tags": torch.randint(3, 6, (4, L)) * (words != 0)}
        cs, steps = parse_batch(model, b)
        for c, m in zip(cs, n, strict=True):
            assert c.terminal and tree_problems(c.heads[1 : m + 1]) is None
        assert steps >= 2 * max(n)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    d = tmp_path_factory.mktemp("g2g")
    tr, dv = _toy_treebank(d / "train.conllu", 120, 0), _toy_treebank(d / "dev.conllu", 30, 1)
    # epoch budgets only (the time budgets are too large to bind): the same parsers on any host
    train(tr, dv, d / "biaffine", minutes=60, max_epochs=10, max_tokens=100, progress=False, tags="predicted",
          tagger_minutes=10, tagger_epochs=5, jackknife=2, lstm_hidden=32, **TINY)
    common = dict(minutes=60, max_tokens=100, progress=False, tags="predicted", tagger_from=d / "biaffine")
    train(tr, dv, d / "syntr", arch="syntr", max_epochs=15, **common, **TINY_TR)
    train(tr, dv, d / "rngtr", arch="rngtr", max_epochs=6, initial=d / "biaffine", warm_start=d / "syntr",
          train_iterations=2, **common)
    train(tr, dv, d / "g2gtr", arch="g2gtr", max_epochs=10, **(common | {"max_tokens": 60}), mlp=32,
          **{k: v for k, v in TINY_TR.items() if "mlp" not in k})
    return d, tr, dv


def test_every_architecture_learns_the_toy_language_and_loads_back(toy):
    from forgetbench.parsing.evaluate import evaluate_parser

    d, tr, dv = toy
    for arch in ("biaffine", "syntr", "rngtr", "g2gtr"):
        info = json.loads((d / arch / "training.json").read_text())
        s = evaluate_parser(d / arch, dv)
        assert s["arch"] == arch and s["tags"] == "predicted" and s["invalid_trees"] == 0
        assert s["las"] == pytest.approx(info["dev"]["las"]) and s["las"] > 80, (arch, info["history"])
    info = json.loads((d / "rngtr" / "training.json").read_text())
    assert info["warm_start"] == str(d / "syntr") and info["train_iterations"] == 2 and info["initial"] == str(d / "biaffine")
    assert (d / "rngtr" / "initial" / "model.safetensors").is_file() and not (d / "rngtr" / "initial" / "tagger").exists()
    # the refiner's tagger and training tags are the biaffine parser's
    assert (d / "rngtr" / "tagger" / "model.safetensors").read_bytes() == (d / "biaffine" / "tagger" / "model.safetensors").read_bytes()
    s = evaluate_parser(d / "rngtr", dv)
    assert s["initial"] == "biaffine" and len(s["per_iteration"]) == 3 and sum(s["sentences_by_iterations_run"].values()) == 30
    assert s["per_iteration"][-1]["las"] == pytest.approx(s["las"])
    e = evaluate_parser(d / "rngtr", dv, initial="empty", iterations=2)
    assert e["initial"] == "empty" and e["max_iterations"] == 2 and len(e["per_iteration"]) == 2


def test_parse_cli_trains_and_evaluates_a_refiner_and_refuses_bad_input(toy, tmp_path, capsys):
    from forgetbench.cli import main

    d, tr, dv = toy
    assert main(["parse", "eval", str(d / "rngtr"), str(dv), "--initial", "empty", "--iterations", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["arch"] == "rngtr" and out["initial"] == "empty" and len(out["per_iteration"]) == 1
    bad = [
        ({"--arch": "syntr", "--initial": d / "biaffine"}, "initial parser of an RNGTr"),
        ({"--arch": "rngtr", "--warm-start": d / "biaffine"}, "warm-started from a syntr"),
        ({"--arch": "rngtr", "--initial": d / "g2gtr"}, "must be biaffine or syntr"),
        ({"--arch": "syntr", "--tagger-from": d / "biaffine", "--train": dv}, "another training file"),
        ({"--arch": "syntr", "--tags": "gold", "--tagger-from": d / "biaffine"}, "needs --tags predicted"),
    ]
    for k, (extra, msg) in enumerate(bad):
        opts = {"--train": tr, "--dev": dv, "--out": tmp_path / f"m{k}", "--minutes": "10"} | extra
        assert main(["parse", "train", "--quiet", *(str(x) for kv in opts.items() for x in kv)]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, extra
        assert not (tmp_path / f"m{k}").exists()
    assert main(["parse", "eval", str(d / "syntr"), str(dv), "--iterations", "2"]) == 2
    assert "RNGTr parsers only" in capsys.readouterr().err
    # the thesis's T by default: 4 from the empty graph, 3 from an initial parser, training and test alike
    for k, extra in enumerate(([], ["--initial", str(d / "biaffine"), "--refiner-graphs", "empty"])):
        out = tmp_path / f"t{k}"
        assert main(["parse", "train", "--quiet", "--arch", "rngtr", "--train", str(tr), "--dev", str(dv), "--out",
                     str(out), "--max-steps", "2", "--eval-every", "1", "--patience", "1", *extra]) == 0
        rec = json.loads((out / "training.json").read_text())
        assert rec["iterations"] == rec["train_iterations"] == (4, 3)[k], rec


def test_parse_compress_covers_the_refiner_and_its_initial_parser_and_says_which_forgets_more(toy, tmp_path):
    from forgetbench.parsing.compress_eval import run

    d, tr, dv = toy
    S = run([str(d / "biaffine"), str(d / "rngtr"), str(d / "g2gtr")], [str(dv)] * 3, [str(dv)] * 3,
            ["prune-45", "ptq-int8"], resamples=200)
    archs = [tb["arch"] for tb in S["treebanks"]]
    assert archs == ["biaffine", "rngtr", "g2gtr"]
    sizes = S["treebanks"][1]["variants"]["ptq-int8"]["sizes"]
    assert set(sizes["networks"]) == {"refiner", "initial.parser"} and sizes["int8_ratio"] < 0.6
    assert sizes["dense_bytes"] == sum(v["dense_bytes"] for v in sizes["networks"].values())
    # the same resamples for every model of one test file: the contrast is paired
    cs = {(c["model"], c["recipe"]): c for c in S["contrasts"]}
    assert set(cs) == {(str(d / m), r) for m in ("rngtr", "g2gtr") for r in ("prune-45", "ptq-int8")}
    c = cs[(str(d / "rngtr"), "prune-45")]
    ref = S["treebanks"][0]["variants"]["prune-45"]
    other = S["treebanks"][1]["variants"]["prune-45"]
    base_ref, base_other = S["treebanks"][0]["base"]["las"], S["treebanks"][1]["base"]["las"]
    assert c["delta"] == pytest.approx((other["las"] - base_other) - (ref["las"] - base_ref))
    assert c["delta_ci"][0] <= c["delta"] + 1e-9 <= c["delta_ci"][1] + 2e-9
    from forgetbench.report.parsing import write_parse_report

    write_parse_report(S, tmp_path / "rep")
    assert "Which forgets more" in (tmp_path / "rep" / "report.md").read_text()
    assert len((tmp_path / "rep" / "parse_contrasts.csv").read_text().splitlines()) == 1 + 4


def test_las_gain_is_the_corpus_las_difference_with_a_paired_interval():
    from forgetbench.parsing.evaluate import las_gain

    gold = [([2, 0], ["det", "root"]), ([0, 1, 1], ["root", "obj", "punct"]), ([0], ["root"])]
    a = [([2, 0], ["det", "root"]), ([0, 1, 2], ["root", "obj", "punct"]), ([0], ["dep"])]  # 4 of 6 words right
    b = [([2, 0], ["det", "root"]), ([0, 1, 1], ["root", "obj", "punct"]), ([0], ["dep"])]  # 5 of 6
    g = las_gain(gold, a, b, resamples=500)
    assert g["delta"] == pytest.approx(100 / 6)
    assert g["delta_ci"][0] >= 0 and g["delta_ci"][0] <= g["delta"] <= g["delta_ci"][1]
    same = las_gain(gold, a, a, resamples=200)
    assert same["delta"] == 0 and same["delta_ci"] == [0.0, 0.0]


def test_refiner_trained_on_kfold_predictions_of_its_initial_parser(toy, tmp_path):
    d, tr, dv = toy
    info = train(tr, dv, tmp_path / "kf", arch="rngtr", minutes=0.2, max_epochs=1, max_tokens=100, progress=False,
                 tags="predicted", tagger_from=d / "biaffine", initial=d / "biaffine", warm_start=d / "syntr",
                 refiner_graphs="kfold", folds=2, fold_minutes=0.05, train_iterations=2)
    k = info["kfold"]
    assert info["refiner_training_graphs"].startswith("2-fold predictions") and len(k["fold_dev_las"]) == 2
    assert 0 < k["train_graph_las"] <= 100 and k["seconds"] > 0 and not (tmp_path / "kf" / "_kfold").exists()
    # the training graphs reach the refiner: batchify carries them
    from forgetbench.parsing.data.batching import Vocab, batchify, with_initial_graphs

    sents = read_conllu(dv)[:2]
    vocab = Vocab.build(sents)
    b = batchify(with_initial_graphs(sents, [(s.heads, s.deprels) for s in sents]), vocab)
    assert b["g0_heads"][0, 1 : len(sents[0].words) + 1].tolist() == sents[0].heads
    assert b["g0_rels"][0, 1 : len(sents[0].words) + 1].tolist() == [vocab.r2i[r] for r in sents[0].deprels]
    with pytest.raises(Exception, match="kfold"):
        train(tr, dv, tmp_path / "bad", arch="rngtr", refiner_graphs="kfold", progress=False)
    # --minutes bounds the whole run, the k-fold parsers inside it: a budget they would eat is refused up front
    with pytest.raises(ForgetbenchError, match=r"--minutes 1.0 must exceed --folds 2 x --fold-minutes 0.5"):
        train(tr, dv, tmp_path / "bad2", arch="rngtr", minutes=1.0, initial=d / "biaffine", refiner_graphs="kfold",
              folds=2, fold_minutes=0.5, progress=False)
    assert not (tmp_path / "bad2").exists()


def test_fold_parsers_say_which_fold_they_train(toy, tmp_path, capsys):
    d, tr, dv = toy
    train(tr, dv, tmp_path / "kf", arch="rngtr", minutes=0.2, max_epochs=1, max_tokens=100, progress=True,
          tags="predicted", tagger_from=d / "biaffine", initial=d / "biaffine", refiner_graphs="kfold", folds=2,
          fold_minutes=0.05, train_iterations=1)
    err = capsys.readouterr().err
    assert "fold 1/2: biaffine parser" in err and "fold 2/2: biaffine parser" in err, err[-2000:]


def test_a_graph_parser_streams_through_compress_stream_and_loads_back(toy, tmp_path, capsys):
    from forgetbench.cli import main
    from forgetbench.parsing.evaluate import evaluate_parser

    d, tr, dv = toy
    recipe = tmp_path / "p30.yaml"
    recipe.write_text("name: p30\nsteps:\n  - prune: {sparsity: 0.3, scope: layer}\n")
    assert main(["compress-stream", str(d / "rngtr"), "--recipe", str(recipe), "--out", str(tmp_path / "s")]) == 0
    # the refiner is pruned; its tagger and its initial parser come along, so it parses as before
    assert (tmp_path / "s" / "tagger" / "model.safetensors").is_file() and (tmp_path / "s" / "initial").is_dir()
    rep = json.loads((tmp_path / "s" / "compression.json").read_text())
    assert "encoder.layers.0" in {u["name"] for u in rep["steps"][0]["prune"]["units"]}
    s = evaluate_parser(tmp_path / "s", dv)
    assert s["arch"] == "rngtr" and s["tags"] == "predicted" and s["initial"] == "biaffine"


def test_parser_study_script_scores_every_system_it_finds(toy, tmp_path):
    """``scripts/parser_study.py`` on the toy parsers laid out as a study's run folder: each system's LAS is the
    CoNLL 2018 LAS of its predictions, each contrast is ``las_gain`` on the same sentences."""
    import subprocess
    import sys

    from forgetbench.parsing.evaluate import evaluate_parser

    d, tr, dv = toy
    runs, data = tmp_path / "runs", tmp_path / "ud"
    runs.mkdir()
    for code, folder in TREEBANKS.items():
        (data / folder).mkdir(parents=True)
        (data / folder / f"{code}-ud-test.conllu").write_bytes(dv.read_bytes())
        for arch in ("biaffine", "syntr", "rngtr", "g2gtr"):
            (runs / f"{code}-{arch}").symlink_to(d / arch)
    r = subprocess.run([sys.executable, str(UD.parents[1] / "scripts" / "parser_study.py"), str(runs), "--data", str(data),
                        "--out", str(tmp_path / "study.json")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    study = json.loads((tmp_path / "study.json").read_text())["treebanks"]["wo_wtb"]
    assert set(study["systems"]) == {"biaffine", "SynTr", "biaffine+RNGTr (empty)", "SynTr+RNGTr (empty)",
                                     "empty+RNGTr (empty)", "G2GTr"}
    for name, arch in (("biaffine", "biaffine"), ("SynTr", "syntr"), ("biaffine+RNGTr (empty)", "rngtr"),
                       ("G2GTr", "g2gtr")):
        assert study["systems"][name]["las"] == pytest.approx(evaluate_parser(d / arch, dv)["las"]), name
    g = study["gains"]["biaffine+RNGTr (empty) − biaffine"]
    assert g["delta"] == pytest.approx(study["systems"]["biaffine+RNGTr (empty)"]["las"] - study["systems"]["biaffine"]["las"])
    assert "### UD_Wolof-WTB (test, 30 sentences)" in r.stdout
