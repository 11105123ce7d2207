"""GraphMerge (train.graph, train.graphmerge): transfer ratios and the merged adjacency by hand on a toy bitext with
fixed alignments, one hop by the formula on a 5-word vocabulary, the parameter-free variant, export that keeps the
training-time translations, a seeded rerun, and bad settings."""

from collections import Counter

import pytest
import torch
import yaml
from safetensors.torch import load_file

from forgetbench.cli import main
from forgetbench.train.graph import GraphSettings, link_counts, merged_adjacency, transfer_ratios
from forgetbench.train.graphmerge import GraphMerge

from .test_train_mt import _shared

# a 6-sentence English–x toy bitext over subword ids; en ids 10-13, x ids 20-23; links fixed by hand
PAIRS = [([10, 11], [20, 21]), ([10, 12], [20, 22]), ([10, 11], [23, 21]),
         ([11, 13], [21, 22]), ([10], [20]), ([12, 13], [22, 23])]
LINKS = [{(0, 0), (1, 1)}, {(0, 0), (1, 1)}, {(0, 0), (1, 1)},
         {(0, 0), (1, 1)}, {(0, 0)}, {(0, 0), (1, 1)}]


def dense(idx, val, shape):
    return torch.sparse_coo_tensor(torch.from_numpy(idx), torch.from_numpy(val), shape, check_invariants=True).to_dense()


def test_the_authors_rare_token_rule_by_hand():
    """A row none of whose counts reaches the threshold keeps its raw counts (the authors' code: its filter leaves
    an emptied row as it was), weighed against the other directions' ratios by the merged row's normalisation;
    ``strict`` drops it."""
    from forgetbench.train.graph import rare_rows

    c = Counter({(1, 5): 12, (1, 6): 3, (2, 7): 4, (2, 8): 2, (3, 7): 10})
    assert transfer_ratios(c, 10, "strict") == {1: {5: 1.0}, 3: {7: 1.0}}
    assert transfer_ratios(c, 10, "authors") == {1: {5: 1.0}, 2: {7: 4.0, 8: 2.0}, 3: {7: 1.0}}
    assert rare_rows(c, 10) == (1, 2)  # row 2, its two links
    rev = Counter({(j, i): n for (i, j), n in c.items()})
    R = transfer_ratios(rev, 10, "authors")  # 5: {1: 12} -> 1.0; 6: {1: 3} raw; 7: {2: 4, 3: 10} -> {3: 1.0}; 8: raw
    assert R == {5: {1: 1.0}, 6: {1: 3.0}, 7: {3: 1.0}, 8: {2: 2.0}}
    A = dense(*merged_adjacency([transfer_ratios(c, 10, "authors"), R], 10, fixed={0}))
    assert A[2, 7] == pytest.approx(4 / 6) and A[2, 8] == pytest.approx(2 / 6) and A[6, 1] == 1.0
    assert torch.allclose(A.sum(1), torch.ones(10))
    # a row with ratios in one direction and raw counts in another: summed, then normalised (the authors' merge)
    A = dense(*merged_adjacency([{4: {5: 1.0}}, {4: {6: 3.0}}], 10, fixed={0}))
    assert A[4, 5] == pytest.approx(1 / 4) and A[4, 6] == pytest.approx(3 / 4)


def test_transfer_ratios_and_the_merged_adjacency_by_hand():
    c = link_counts(PAIRS, LINKS)
    assert c == Counter({(10, 20): 3, (10, 23): 1, (11, 21): 3, (12, 22): 2, (13, 22): 1, (13, 23): 1})
    T = transfer_ratios(c, min_count=1)
    assert T[10] == {20: 0.75, 23: 0.25} and T[11] == {21: 1.0} and T[13] == {22: 0.5, 23: 0.5}
    assert transfer_ratios(c, min_count=2) == {10: {20: 1.0}, 11: {21: 1.0}, 12: {22: 1.0}}
    rev = transfer_ratios(Counter({(j, i): n for (i, j), n in c.items()}), min_count=1)
    assert rev[22] == {12: pytest.approx(2 / 3), 13: pytest.approx(1 / 3)} and rev[23] == {10: 0.5, 13: 0.5}
    idx, val, shape = merged_adjacency([T, rev], 24, alpha=1.0, fixed={0, 1, 2, 3})
    A = dense(idx, val, shape)
    assert torch.allclose(A.sum(1), torch.ones(24))  # row-stochastic
    assert A[10, 20] == pytest.approx(0.75) and A[10, 10] == 0  # alpha 1: no self weight on linked rows
    assert A[22, 12] == pytest.approx(2 / 3) and A[5, 5] == 1 and A[0, 0] == 1  # unlinked rows and specials: identity
    idx, val, _ = merged_adjacency([T, rev], 24, alpha=0.8, fixed={0, 1, 2, 3})
    A = dense(idx, val, shape)
    assert A[10, 20] == pytest.approx(0.6) and A[10, 10] == pytest.approx(0.2)
    # two directions merged before the row normalisation: T_a + T_b, then / row sum
    idx, val, _ = merged_adjacency([{1: {2: 1.0}}, {1: {3: 0.5, 2: 0.5}}], 4, fixed=set())
    A = dense(idx, val, (4, 4))
    assert A[1].tolist() == [0, 0, 0.75, 0.25]


def _five_word_graph():
    A = torch.tensor([[1, 0, 0, 0, 0], [0, 0, 0.5, 0.5, 0], [0, 1, 0, 0, 0], [0, 0.5, 0, 0, 0.5],
                      [0, 0, 0, 1, 0]], dtype=torch.float32)
    return A, A.to_sparse()


def test_one_hop_is_the_formula_on_a_five_word_vocabulary():
    A, sparse = _five_word_graph()
    gm = GraphMerge(sparse, 2, GraphSettings(hops=1, dropout=0.0))
    with torch.no_grad():
        gm.neighbour[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        gm.neighbour[0].bias.copy_(torch.tensor([0.5, 0.0]))
        gm.own[0].weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
        gm.own[0].bias.zero_()
    E = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]])
    out = gm(E)
    # word 1: A E = 0.5 e2 + 0.5 e3 = (6, 7); W_nb → (6, 14) + (0.5, 0); W_self e1 = (4, 3) → (10.5, 17)
    assert out[1].tolist() == [10.5, 17.0]
    # word 0 (a self-loop): W_nb e0 + b = (1.5, 4); W_self e0 = (2, 1) → (3.5, 5)
    assert out[0].tolist() == [3.5, 5.0]
    two = GraphMerge(sparse, 2, GraphSettings(hops=2, dropout=0.0))
    with torch.no_grad():
        h1 = torch.nn.functional.elu(two.neighbour[0](A @ E) + two.own[0](E))
        assert torch.allclose(two(E), two.neighbour[1](A @ h1) + two.own[1](h1))  # ELU between hops, none after


def test_the_weighted_sum_variant_has_no_parameters():
    A, sparse = _five_word_graph()
    ws = GraphMerge(sparse, 2, GraphSettings(hops=2, mode="weighted-sum", dropout=0.0))
    assert sum(p.numel() for p in ws.parameters()) == 0
    E = torch.randn(5, 2)
    M = 0.5 * (A + torch.eye(5))
    assert torch.allclose(ws(E), M @ M @ E, atol=1e-6)


def _gm_config(tmp_path, name, train=None, **gm):
    """A toy GraphMerge config, float32 unless ``train`` says otherwise (its numbers hold on any host)."""
    cfg = {"data": {"shared": str(tmp_path / "shared"), "languages": ["de", "fr"], "dev_per_language": 2},
           "spm": {"vocab_size": 300, "sample_per_language": 1000},
           "model": {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "heads": 2, "ffn": 64,
                     "embeddings": {"graphmerge": {"hops": 2, "min_count": 1, "dropout": 0.0,
                                                   "aligner": "fast_align"} | gm}},
           "train": {"seed": 3, "max_tokens": 600, "warmup": 4, "steps": 6, "checkpoint_minutes": 0,
                     "dev_every": 0, "threads": 1, "bf16": False} | (train or {})}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_graphmerge_trains_under_bfloat16_autocast(tmp_path):
    """Under bf16 autocast (forced here, so every host runs it; ``auto`` takes it on AMX and CUDA) the hops'
    sparse product stays float32, backward included: the steps run, and they move the hop layers and the table."""
    import json

    from forgetbench.train import loop
    from forgetbench.train.config import fingerprint
    from forgetbench.train.mt import load_config, setup, train

    _shared(tmp_path / "shared")
    cfg = load_config(_gm_config(tmp_path, "b", train={"bf16": True, "steps": 2}))
    fresh = setup(cfg, tmp_path / "fresh", log=lambda *_: None).model
    out = train(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    assert json.loads((out / "training.json").read_text())["arithmetic"]["autocast"] == "bfloat16"
    S = setup(cfg, tmp_path / "run", log=lambda *_: None)
    loop.resume(S.model, S.opt, tmp_path / "run" / "checkpoint", fingerprint(cfg), lambda *_: None)
    for name in ("graphmerge.neighbour.0.weight", "graphmerge.own.1.weight", "model.shared.weight"):
        trained, init = S.model.get_parameter(name), fresh.get_parameter(name)
        assert torch.isfinite(trained).all() and not torch.equal(trained, init), name


def test_export_is_the_final_table_and_translates_as_the_training_time_model(tmp_path):
    import json

    from forgetbench.models.generation import translate
    from forgetbench.models.load import load
    from forgetbench.train import graphmerge
    from forgetbench.train.mt import load_config, setup, train

    _shared(tmp_path / "shared")
    cfg = load_config(_gm_config(tmp_path, "g"))
    out = train(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    rec = json.loads((out / "training.json").read_text())["graphmerge"]
    assert rec["settings"]["hops"] == 2 and rec["graph"]["cross_edges"] > 0 and rec["graph"]["sha256"]
    exported, tok, _ = load(out, with_signature=False)
    assert not any("graphmerge" in k for k in load_file(str(out / "model.safetensors")))
    # the training-time model: the same run resumed from its checkpoint (the hop layers attached again)
    S = setup(cfg, tmp_path / "run", log=lambda *_: None)
    from forgetbench.train import loop
    from forgetbench.train.config import fingerprint

    loop.resume(S.model, S.opt, tmp_path / "run" / "checkpoint", fingerprint(cfg), lambda *_: None)
    S.model.eval()
    T = graphmerge.final_table(S.model)
    assert torch.equal(exported.model.shared.weight, T) and torch.equal(exported.lm_head.weight, T)
    tok.src_lang, tok.tgt_lang = "en", "de"
    b = tok(["Hello world", "A house"], text_target=["Hallo Welt", "Ein Haus"], return_tensors="pt", padding=True)
    from transformers.models.m2m_100.modeling_m2m_100 import shift_tokens_right

    dec = shift_tokens_right(b["labels"], 1, 2)
    with torch.no_grad():
        a = graphmerge.logits(S.model, b["input_ids"], b["attention_mask"], dec)
        e = exported(input_ids=b["input_ids"], attention_mask=b["attention_mask"], decoder_input_ids=dec).logits
    assert torch.allclose(a, e, atol=1e-5)
    with graphmerge.materialised(S.model):
        during = translate(S.model, tok, ["Hello world"], "en", "de", max_new_tokens=8)
    assert during == translate(exported, tok, ["Hello world"], "en", "de", max_new_tokens=8)


def test_a_rerun_with_the_same_seed_gives_the_same_weights(tmp_path):
    from forgetbench.train.mt import load_config, train

    _shared(tmp_path / "shared")
    a = train(load_config(_gm_config(tmp_path, "a")), tmp_path / "a", progress=False, log=lambda *_: None)
    b = train(load_config(_gm_config(tmp_path, "b")), tmp_path / "b", progress=False, log=lambda *_: None)
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("gm,msg", [({"hops": 0}, "hops: 0; GraphMerge takes 1 to 5 hops"),
                                    ({"hops": 6}, "hops: 6; GraphMerge takes 1 to 5 hops"),
                                    ({"tie": "no"}, "tie: expected true or false"),
                                    ({"aligner": "giza"}, "aligner: 'giza'; choose auto or eflomal or fast_align"),
                                    ({"mode": "sum"}, "mode: 'sum'"),
                                    ({"min_count": 0}, "min_count: 0")])
def test_bad_graph_settings_are_one_line_exit_2(tmp_path, capsys, gm, msg):
    _shared(tmp_path / "shared")
    p = _gm_config(tmp_path, "bad", **gm)
    assert main(["train-mt", str(p), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err
    assert not (tmp_path / "run").exists()


def test_a_language_without_bitext_is_one_line(tmp_path):
    from forgetbench.errors import ForgetbenchError
    from forgetbench.train.graph import build_graph

    with pytest.raises(ForgetbenchError, match=r"no bitext for \['sw'\]"):
        build_graph({"de": PAIRS, "sw": []}, 24, GraphSettings(aligner="fast_align"), set())


def test_embedding_alignment_is_the_mean_cosine_of_linked_subwords(tiny_dir):
    from forgetbench.eval.embedding_alignment import aligned_pairs, alignment_scores, script_of
    from forgetbench.models.load import load

    from .conftest import FLORES

    def bitext(iso3):
        en = (FLORES / "eng.devtest").read_text(encoding="utf-8").splitlines()[:40]
        return list(zip(en, (FLORES / f"{iso3}.devtest").read_text(encoding="utf-8").splitlines()[:40], strict=True))

    assert [script_of([x for _, x in bitext(f)]) for f in ("deu", "rus", "ara", "heb")] == [
        "Latin", "Cyrillic", "Arabic", "Hebrew"]
    model, tok, _ = load(tiny_dir, with_signature=False)
    links = aligned_pairs(tok, bitext("rus"), "ru")
    special = set(tok.all_special_ids) | set(tok.lang_code_to_id.values())
    assert links and all(a != b and a not in special and b not in special for a, b in links)
    with torch.no_grad():  # every row the same direction: cosine 1 for every linked pair
        model.get_input_embeddings().weight.copy_(torch.ones_like(model.get_input_embeddings().weight))
    S = alignment_scores(model, tok, {"ru": bitext("rus"), "de": bitext("deu")}, resamples=100)
    assert S["languages"]["ru"]["mean_cosine"] == pytest.approx(1.0) and S["languages"]["ru"]["pairs"] == len(links)
    assert S["languages"]["ru"]["isotropy"] == pytest.approx(1.0) and S["aligner"] == "fast_align"  # all alike
    assert S["languages"]["ru"]["script_pair"] == "Latin–Cyrillic" and set(S["script_pairs"]) == {
        "Latin–Cyrillic", "Latin–Latin"}
    with torch.no_grad():  # rows ±1 by the parity of the id: cosine +1 for same-parity pairs, −1 otherwise
        w = model.get_input_embeddings().weight
        w.copy_(torch.where((torch.arange(len(w)) % 2 == 0)[:, None], 1.0, -1.0).expand_as(w))
    want = sum(1 if a % 2 == b % 2 else -1 for a, b in links) / len(links)
    assert alignment_scores(model, tok, {"ru": bitext("rus")})["languages"]["ru"]["mean_cosine"] == pytest.approx(
        want, abs=1e-4)


# a toy bitext whose alignment is certain: each English id has one x id that always appears with it, in place
TOY = [([10 + a, 10 + b, 10 + c], [20 + a, 20 + b, 20 + c]) for a, b, c in
       [(0, 1, 2), (1, 2, 3), (2, 3, 0), (3, 0, 1), (0, 2, 1), (1, 3, 2), (2, 0, 3), (3, 1, 0)] * 6]


def test_the_eflomal_graph_of_a_toy_bitext_is_the_hand_count():
    """eflomal (the paper's aligner), intersected: every English id i is linked to x id i + 10 in every sentence,
    so c(i, i + 10) = 36 (each id is in 6 of the 8 triples, each triple 6 times), nothing else: A[i, i + 10] = 1."""
    pytest.importorskip("eflomal", reason="eflomal is the optional extra graphmerge (pip install -e '.[graphmerge]')")
    from forgetbench.train.graph import align, build_graph

    links = align(TOY, "eflomal")
    assert link_counts(TOY, links) == Counter({(10 + k, 20 + k): 36 for k in range(4)})
    g = build_graph({"de": TOY}, 24, GraphSettings(aligner="auto", min_count=10), set(range(4)))
    A = dense(g["indices"], g["values"], g["shape"])
    assert g["record"]["aligner"] == "eflomal" and g["record"]["languages"]["de"] == {
        "pairs": 48, "links": 144, "kept_pairs": 4, "rare_rows": {"en": 0, "de": 0}, "rare_links": 0}
    assert all(A[10 + k, 20 + k] == 1 and A[20 + k, 10 + k] == 1 for k in range(4)) and A.sum() == 24


def test_the_streamed_build_from_the_prepared_ids_equals_the_in_memory_build(tmp_path):
    """``graph_chunks`` over a run's prepared ids, 7 pairs at a time, builds the graph ``build_graph`` builds from
    the same pairs held as lists (``graph_pairs``); the auto aligner falls back to fast_align without eflomal."""
    import numpy as np
    from transformers import M2M100Tokenizer

    from forgetbench.train.data import Examples, prepare
    from forgetbench.train.graph import build_graph, build_graph_streamed, resolved_aligner
    from forgetbench.train.graphmerge import graph_chunks, graph_pairs
    from forgetbench.train.mt import load_config

    _shared(tmp_path / "shared")
    cfg = load_config(_gm_config(tmp_path, "s"))
    meta = prepare(cfg, tmp_path / "run", log=lambda *_: None)
    tok = M2M100Tokenizer.from_pretrained(str(tmp_path / "run" / "tokenizer"))
    data = Examples(tmp_path / "run" / "train.npz", 64)
    st = GraphSettings(aligner="fast_align", min_count=2, chunk=7, pairs_per_language=40)
    chunks = list(graph_chunks(data, tok, ["de", "fr"], 40, 7, seed=3))
    held = graph_pairs(data, tok, 40, seed=3)
    assert max(len(c) for _, c in chunks) == 7 and sum(len(c) for _, c in chunks) == sum(map(len, held.values()))
    streamed = build_graph_streamed(iter(chunks), ["de", "fr"], meta["vocab_size"], st, set(range(4)), lambda *_: None)
    memory = build_graph(held, meta["vocab_size"], st, set(range(4)), lambda *_: None)
    for k in ("indices", "values"):
        assert np.array_equal(streamed[k], memory[k])
    assert streamed["record"]["languages"] == memory["record"]["languages"] and streamed["record"]["cross_edges"] > 0
    assert resolved_aligner("fast_align") == "fast_align" and resolved_aligner("auto") in ("eflomal", "fast_align")


def test_up_to_five_hops_by_the_formula():
    A, sparse = _five_word_graph()
    ws = GraphMerge(sparse, 2, GraphSettings(hops=5, mode="weighted-sum", dropout=0.0))
    E = torch.randn(5, 2)
    M = 0.5 * (A + torch.eye(5))
    assert torch.allclose(ws(E), torch.linalg.matrix_power(M, 5) @ E, atol=1e-5)


def test_without_tie_the_output_projection_is_the_original_table_and_the_export_has_two(tmp_path):
    """The paper's w/o Tie: inputs from the graph's table T, logits from the original table E; the export keeps T as
    the shared input embedding and E as an untied lm_head, and loads as a plain M2M-100 with the same logits."""
    import json

    from transformers.models.m2m_100.modeling_m2m_100 import shift_tokens_right

    from forgetbench.models.load import load
    from forgetbench.train import graphmerge, loop
    from forgetbench.train.config import fingerprint
    from forgetbench.train.mt import load_config, setup, train

    _shared(tmp_path / "shared")
    cfg = load_config(_gm_config(tmp_path, "u", tie=False))
    out = train(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    assert json.loads((out / "training.json").read_text())["graphmerge"]["settings"]["tie"] is False
    exported, tok, _ = load(out, with_signature=False)
    S = setup(cfg, tmp_path / "run", log=lambda *_: None)
    loop.resume(S.model, S.opt, tmp_path / "run" / "checkpoint", fingerprint(cfg), lambda *_: None)
    S.model.eval()
    T, E = graphmerge.final_table(S.model), S.model.model.shared.weight.detach()
    assert not torch.equal(T, E)
    assert torch.equal(exported.model.shared.weight, T) and torch.equal(exported.lm_head.weight, E)
    assert exported.lm_head.weight.data_ptr() != exported.model.shared.weight.data_ptr()
    tok.src_lang, tok.tgt_lang = "en", "de"
    b = tok(["Hello world"], text_target=["Hallo Welt"], return_tensors="pt")
    dec = shift_tokens_right(b["labels"], 1, 2)
    with torch.no_grad():
        a = graphmerge.logits(S.model, b["input_ids"], b["attention_mask"], dec)
        e = exported(input_ids=b["input_ids"], attention_mask=b["attention_mask"], decoder_input_ids=dec).logits
    assert torch.allclose(a, e, atol=1e-5)


def test_the_isotropy_control_is_the_hand_value_on_a_toy_table():
    """Appendix A.6's control: each word's mean cosine to 50 random subwords, averaged over the words. Rows of unit
    length at fixed angles make every draw's cosine known: word rows (1, 0) and (0, 1); candidate rows (0.6, ±0.8)
    give cosine 0.6 to the first word and ±0.8 to the second; with the draws fixed by the seed the value is
    (0.6 + 0.8 · (share of + draws − share of − draws)) / 2, counted here by hand from the same draws."""
    import numpy as np

    from forgetbench.eval.embedding_alignment import ISOTROPY_SAMPLES, isotropy

    E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.6, -0.8], [0.6, 0.8]])
    candidates = np.array([2, 3, 4])
    got = isotropy(E, [0, 1], candidates, np.random.default_rng(7))
    drawn = candidates[np.random.default_rng(7).integers(0, 3, (2, ISOTROPY_SAMPLES))]
    plus = (drawn[1] != 3).mean()
    assert got == pytest.approx((0.6 + 0.8 * (plus - (1 - plus))) / 2, abs=1e-6)
    assert isotropy(E, [0], candidates, np.random.default_rng(1)) == pytest.approx(0.6)


def test_the_similarity_measure_uses_the_aligner_that_did_not_build_the_graph():
    from forgetbench.eval.embedding_alignment import independent_aligner

    assert independent_aligner("eflomal") == "fast_align" and independent_aligner(None) == "fast_align"
    try:
        import eflomal  # noqa: F401
        want = "eflomal"
    except ImportError:
        want = "fast_align"
    assert independent_aligner("fast_align") == want


@pytest.mark.parametrize("T", [1, 2, 5])
def test_temperature_sampling_gives_each_language_the_formulas_share(tmp_path, T):
    """An epoch under temperature T holds round(N · n_ℓ^(1/T) / Σ n^(1/T)) examples of language ℓ (both directions
    of its pairs), each of its examples at most once more than any other; T = 1 is every example once."""
    import numpy as np

    from forgetbench.train.data import Examples, _save_ids, language_shares

    n = {10: 600, 11: 60, 12: 6}  # language codes; 9 is English, on one side of every example
    src, tgt, sl, tl = [], [], [], []
    for code, k in n.items():
        for i in range(k):
            src.append([5, i % 7 + 5])
            tgt.append([6])
            sl.append(9 if i % 2 else code)
            tl.append(code if i % 2 else 9)
    _save_ids(tmp_path / "t.npz", src, tgt, sl, tl)
    data = Examples(tmp_path / "t.npz", 16, temperature=T)
    N = sum(n.values())
    want = np.array([v ** (1 / T) for v in n.values()])
    assert np.allclose(language_shares(np.array(list(n.values())), T), want / want.sum())
    picked = np.concatenate(data.batches(10_000, seed=1, epoch=0))
    langs = data.languages()[picked]
    got = [int((langs == c).sum()) for c in n]
    assert got == [int(round(N * w / want.sum())) for w in want]
    for code in n:  # repeats spread evenly: no example twice before every example once
        uses = np.bincount(picked[langs == code], minlength=len(data))[data.languages() == code]
        assert uses.max() - uses.min() <= 1
    if T == 1:
        assert sorted(picked.tolist()) == list(range(N))


def test_a_temperature_of_one_keeps_the_fingerprint_and_a_bad_one_is_refused(tmp_path, capsys):
    from forgetbench.train.config import fingerprint
    from forgetbench.train.mt import load_config

    _shared(tmp_path / "shared")
    a = fingerprint(load_config(_gm_config(tmp_path, "a")))
    assert fingerprint(load_config(_gm_config(tmp_path, "b", train={"temperature": 1.0}))) == a
    assert fingerprint(load_config(_gm_config(tmp_path, "c", train={"temperature": 5}))) != a
    assert main(["train-mt", str(_gm_config(tmp_path, "d", train={"temperature": 0})), "--out",
                 str(tmp_path / "run"), "--quiet"]) == 2
    assert "train.temperature: 0; a positive number" in capsys.readouterr().err


def test_a_run_keeps_its_graph_over_its_own_subwords_and_rebuilds_one_made_over_others(tmp_path):
    """``graph.json``'s key holds the run's SentencePiece model's SHA-256: a graph carried in from another machine
    (``gpu_queue --carried``) serves a run prepared there only over the same subwords; over others it is rebuilt."""
    import json

    from forgetbench.train.mt import load_config, setup

    _shared(tmp_path / "shared")
    cfg = load_config(_gm_config(tmp_path, "k"))
    said: list[str] = []
    setup(cfg, tmp_path / "run", log=said.append)
    rec_path = tmp_path / "run" / "graph.json"
    rec = json.loads(rec_path.read_text())
    spm = json.loads((tmp_path / "run" / "prepared.json").read_text())["spm_sha256"]
    assert rec["key"]["vocabulary"] == spm and sum("graphmerge: graph of" in x for x in said) == 1
    said.clear()
    setup(cfg, tmp_path / "run", log=said.append)
    assert not any("graphmerge: graph of" in x for x in said)  # its own: reused
    rec_path.write_text(json.dumps(rec | {"key": rec["key"] | {"vocabulary": "0" * 64}}))
    setup(cfg, tmp_path / "run", log=said.append)
    assert sum("graphmerge: graph of" in x for x in said) == 1
    assert json.loads(rec_path.read_text())["key"]["vocabulary"] == spm


def test_isotropy_of_a_hand_table():
    """Rows (1, 0), (0, 1), (1, 0): norms 1; pairs' cosines 0, 1, 0 (mean 1/3); singular values √2 and 1, so the
    effective rank is exp(H(√2/(1+√2), 1/(1+√2)))."""
    import math

    from forgetbench.train.graphmerge import isotropy

    r = isotropy(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]))
    p = [math.sqrt(2) / (1 + math.sqrt(2)), 1 / (1 + math.sqrt(2))]
    assert r["rows"] == 3 and r["mean_row_norm"] == 1.0 and abs(r["random_pair_cosine"] - 1 / 3) < 1e-6
    assert abs(r["effective_rank"] - math.exp(-sum(x * math.log(x) for x in p))) < 1e-4
    big = isotropy(torch.randn(500, 16, generator=torch.Generator().manual_seed(0)), pairs=2000)
    assert abs(big["random_pair_cosine"]) < 0.02 and big["effective_rank"] > 14  # a random table: no floor


def test_the_identity_start_keeps_the_table_and_the_torch_start_collapses_it():
    """The step-0 probe on a toy graph model with an M2M-100-scale table (std 0.02): identity init gives T = E with
    one hop (norm ratio 1, the same floor) and T = ELU(E) with two (by hand); nn.Linear's default start gives rows
    several times E's norm at a high random-pair cosine (the earlier, collapsed start)."""
    import torch.nn.functional as F

    from forgetbench.train.graphmerge import isotropy

    _, sparse = _five_word_graph()
    torch.manual_seed(0)
    E = torch.randn(5, 64) * 0.02
    one = GraphMerge(sparse, 64, GraphSettings(hops=1, dropout=0.0)).eval()
    assert torch.equal(one(E), E)
    two = GraphMerge(sparse, 64, GraphSettings(hops=2, dropout=0.0)).eval()
    assert torch.allclose(two(E), F.elu(E), atol=1e-7)
    base, t = isotropy(E), isotropy(two(E))
    assert abs(t["mean_row_norm"] / base["mean_row_norm"] - 1) < 0.02
    assert abs(t["random_pair_cosine"] - base["random_pair_cosine"]) < 0.01
    torch.manual_seed(0)
    old = GraphMerge(sparse, 64, GraphSettings(hops=2, dropout=0.0, init="torch")).eval()
    with torch.no_grad():
        c = isotropy(old(E))
    assert c["mean_row_norm"] > 2 * base["mean_row_norm"] and c["random_pair_cosine"] > 0.5


def test_a_graphmerge_run_records_its_table_at_step_0_and_at_the_end(tmp_path):
    import json

    from forgetbench.train.mt import load_config, train

    _shared(tmp_path / "shared")
    cfg = load_config(_gm_config(tmp_path, "g"))
    lines = []
    out = train(cfg, tmp_path / "run", progress=False, log=lines.append)
    probe = json.loads((out / "training.json").read_text())["table_probe"]
    assert set(probe) == {"step0", "final"} and probe["step0"]["rows"] == probe["final"]["rows"]
    assert abs(probe["step0"]["random_pair_cosine"]) < 0.3  # the identity start: no collapsed table
    assert any(ln.startswith("table at step 0: mean row norm") for ln in lines)


def test_the_edge_and_non_edge_similarity_and_the_pivot_pairs_by_hand():
    """On a toy table: two of three linked pairs are graph edges (one of them linked the other way round); the
    cosine above the floor on each side is the hand mean; the pivot pairs join two languages through English."""
    import numpy as np

    from forgetbench.eval.embedding_alignment import edge_split, graph_edges, pivot_pairs

    E = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [0.8, 0.6], [1.0, 0.0], [-1.0, 0.0]])
    links = [(0, 2), (0, 3), (1, 5)]  # cosines 0.6, 0.8, 0.0
    edges = graph_edges(np.array([[2, 0, 4, 1], [0, 3, 4, 1]]))  # 2→0 and 0→3; the diagonal entries are no links
    assert edges == {(2, 0), (0, 3)}
    r = edge_split(E, links, edges, floor=0.1)
    assert r["edge_share"] == round(2 / 3, 4) and (r["edge_pairs"], r["non_edge_pairs"]) == (2, 1)
    assert r["edge_above_floor"] == pytest.approx(0.6) and r["non_edge_above_floor"] == pytest.approx(-0.1)
    piv = pivot_pairs({"de": [(0, 2), (1, 3)], "fr": [(0, 4), (0, 2), (7, 5)]}, special={9})
    assert piv == {"de-fr": [(2, 4)]}  # through English 0: (2, 4); (2, 2) is the same id, left out
