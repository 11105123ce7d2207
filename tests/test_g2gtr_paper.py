"""G2GTr as the paper defines it (SentTr + G2GTr, §3.2, §4.2–4.3): unlabelled k = 3 graph ids in attention, the
dependent's label embedding on its input, the label classifier by direction; the no-graph baseline; and a parser
saved before these settings loads as it was trained."""

import torch

from forgetbench.parsing.parsers.g2gtr import (
    PAD_ROLE,
    G2GConfig,
    G2GTransitionParser,
    config_tensors,
    label_of,
    parse_batch,
)
from forgetbench.parsing.structures.relations import DEPENDENT, HEAD
from forgetbench.parsing.structures.transition import LEFT, RIGHT, SHIFT, Configuration

TINY = dict(n_words=20, n_chars=10, n_tags=6, n_rels=4, d_model=16, layers=1, heads=2, ffn=16, mlp=16, word_dim=8,
            char_dim=4, char_hidden=8, tag_dim=4)


def _state():
    """A hand-built configuration of 3 words: SHIFT, SHIFT, LEFT with label 2 (word 1 ← word 2), SHIFT."""
    c = Configuration.start(3)
    for t, r in ((SHIFT, -1), (SHIFT, -1), (LEFT, 2), (SHIFT, -1)):
        c.apply(t, r)
    return c


def test_the_graph_input_is_unlabelled_and_the_label_rides_on_the_dependent():
    torch.manual_seed(0)
    model = G2GTransitionParser(G2GConfig(**TINY)).eval()
    assert model.cfg.graph == "unlabelled" and not model.cfg.roles and "role" not in model.embed
    c = _state()
    s = config_tensors([c], 5)
    assert s["heads"][0, 1] == 2 and s["rels"][0, 1] == 2 and (s["rels"][0, 2:4] == -1).all()
    seen = {}
    real = model.encoder.forward

    def spy(x, mask, relations=None):
        seen["x"], seen["rel"] = x, relations
        return real(x, mask, relations)

    model.encoder.forward = spy
    x0 = torch.randn(1, 5, 16)
    model.step(x0, s)
    P = seen["rel"][0]
    assert P[1, 2] == HEAD and P[2, 1] == DEPENDENT and int((P != 0).sum()) == 2  # k = 3: no label in the ids
    added = seen["x"][0] - x0[0]
    lab = model.embed["label"].weight
    assert torch.allclose(added[1], lab[3]) and torch.allclose(added[2], lab[0])  # label 2 → id 3; 0 = not attached
    assert torch.equal(lab[0], torch.zeros(16))  # padding: an unattached word gets nothing


def test_the_label_is_classified_given_the_arcs_direction():
    labels = torch.arange(2 * 2 * 3, dtype=torch.float).view(2, 2, 3)
    got = label_of(labels, torch.tensor([LEFT, RIGHT]))
    assert torch.equal(got, torch.stack([labels[0, 0], labels[1, 1]]))
    flat = torch.randn(2, 3)
    assert torch.equal(label_of(flat, torch.tensor([LEFT, RIGHT])), flat)


def test_the_no_graph_baseline_never_sees_the_parser_state():
    """graph none, no roles, no label input: the encoder's output is the same for every configuration of a
    sentence (the paper's SentTr), so the state enters only through which positions the classifiers read."""
    torch.manual_seed(1)
    model = G2GTransitionParser(G2GConfig(graph="none", label_input=False, **TINY)).eval()
    assert model.encoder.layers[0].self_attn.rel_key is None  # no relation parameters at all
    outs = []
    real = model.encoder.forward
    model.encoder.forward = lambda x, m, r=None: outs.append(real(x, m, r)) or outs[-1]
    x0 = torch.randn(1, 5, 16)
    model.step(x0, config_tensors([Configuration.start(3)], 5))
    model.step(x0, config_tensors([_state()], 5))
    assert torch.allclose(outs[0], outs[1])
    words = torch.randint(3, 20, (2, 5))
    b = {"words": words, "chars": torch.randint(1, 10, (2, 5, 3)), "tags": torch.randint(3, 6, (2, 5))}
    cs, _ = parse_batch(model, b)
    assert all(c.terminal for c in cs)


def test_a_g2gtr_saved_before_the_papers_settings_loads_as_it_was_trained():
    old = {**TINY, "lazy_oracle": True, "sampled_configurations": 8}  # a saved config of the earlier form
    cfg = G2GConfig(**G2GConfig.stored(old))
    assert (cfg.graph, cfg.roles, cfg.label_input, cfg.relation_by_direction) == ("labelled", True, False, False)
    model = G2GTransitionParser(cfg)
    assert "role" in model.embed and "label" not in model.embed
    assert model.classifier["relation"][-1].out_features == 4
    new = G2GConfig(**G2GConfig.stored({**TINY, "lazy_oracle": True, "roles": False}))
    assert new.graph == "unlabelled" and not new.roles
    s = config_tensors([_state()], 5)
    assert s["roles"][0, 0] != PAD_ROLE
