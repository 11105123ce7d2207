"""Dozat's regularisation (thesis §5.4, §6.3; ``parsing/layers/regularise.py``): word and tag dropout hold their
rates, independently, with the compensating scale; the LSTM's input and recurrent masks hold their rates and are
the same at every time step; without dropout (or in evaluation) the LSTM is ``nn.LSTM``'s own."""

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from forgetbench.parsing.layers.regularise import SharedDropout, VariationalLSTM, word_tag_dropout


def test_word_and_tag_dropout_rates_independence_and_scale():
    torch.manual_seed(0)
    h = torch.ones(400, 50, 7)  # 20,000 tokens: word columns 0-4, tag columns 5-6
    out = word_tag_dropout(h, slice(5, 7), 0.33)
    w, t = out[..., 0], out[..., 5]
    assert torch.equal(out[..., :5], w.unsqueeze(-1).expand_as(out[..., :5]))  # a whole word, all its columns
    assert torch.equal(out[..., 5:], t.unsqueeze(-1).expand_as(out[..., 5:]))
    drop_w, drop_t = (w == 0).float().mean().item(), (t == 0).float().mean().item()
    assert abs(drop_w - 0.33) < 0.015 and abs(drop_t - 0.33) < 0.015
    both = ((w == 0) & (t == 0)).float().mean().item()
    assert abs(both - 0.33 ** 2) < 0.01  # independent
    assert set(torch.unique(w).tolist()) == {0.0, 1.0, 2.0}  # kept alone: × 2
    assert torch.equal(w[(w > 0) & (t == 0)], torch.full_like(w[(w > 0) & (t == 0)], 2.0))
    assert torch.equal(w[(w > 0) & (t > 0)], torch.ones_like(w[(w > 0) & (t > 0)]))
    assert torch.equal(word_tag_dropout(h, slice(5, 7), 0.33, training=False), h)


def test_shared_dropout_keeps_one_mask_over_time():
    torch.manual_seed(0)
    d = SharedDropout(0.33).train()
    out = d(torch.ones(300, 40, 20))
    assert torch.equal(out, out[:, :1].expand_as(out))  # the same at every time step
    assert abs((out[:, 0] == 0).float().mean().item() - 0.33) < 0.02
    assert torch.allclose(out[out > 0], torch.tensor(1 / 0.67))


def _packed(B=6, L=9, D=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, L, D, generator=g)
    lengths = torch.tensor([9, 3, 7, 1, 9, 5][:B])
    return x, lengths, pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)


def test_the_step_loop_is_the_lstm_without_dropout_and_nn_lstm_in_evaluation():
    """With masks of ones (p → 0 would draw none) the loop gives nn.LSTM's outputs, both directions, ragged
    lengths; in evaluation the forward is nn.LSTM's own."""
    torch.manual_seed(0)
    lstm = VariationalLSTM(5, 4, num_layers=2, batch_first=True, bidirectional=True, dropout=0.0,
                           recurrent_dropout=1e-12)
    plain = nn.LSTM(5, 4, num_layers=2, batch_first=True, bidirectional=True)
    plain.load_state_dict(lstm.state_dict())
    x, lengths, packed = _packed()
    ref, _ = pad_packed_sequence(plain(packed)[0], batch_first=True)
    got, _ = pad_packed_sequence(lstm.train()(packed)[0], batch_first=True)
    assert torch.allclose(got, ref, atol=1e-6), (got - ref).abs().max()
    ev, _ = pad_packed_sequence(lstm.eval()(packed)[0], batch_first=True)
    assert torch.equal(ev, ref)


def test_recurrent_and_input_masks_hold_their_rate_and_are_the_same_at_every_step():
    """The masks drawn (one per sequence, layer and direction) hold the rate; the outputs equal a reference
    recurrence that applies those very masks at every time step (so no step drew its own)."""
    torch.manual_seed(0)
    B, H = 2000, 16
    lstm = VariationalLSTM(5, H, num_layers=2, batch_first=True, bidirectional=True, dropout=0.33,
                           recurrent_dropout=0.33).train()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, 6, 5, generator=g)
    lengths = torch.randint(1, 7, (B,), generator=g)
    out, _ = pad_packed_sequence(lstm(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))[0],
                                 batch_first=True, total_length=6)
    masks = lstm.last_masks
    assert [(m["layer"], m["direction"]) for m in masks] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for m in masks:
        assert m["recurrent"].shape == (B, H)  # one per sequence: nothing indexes it by time
        assert abs((m["recurrent"] == 0).float().mean().item() - 0.33) < 0.01
        assert (m["input"] is None) == (m["layer"] == 0)  # layer 0's input: the parser's own shared dropout
        if m["input"] is not None:
            assert m["input"].shape == (B, 2 * H) and abs((m["input"] == 0).float().mean().item() - 0.33) < 0.01

    def reference(inp, layer, d, m):
        w_ih, w_hh, b_ih, b_hh = (getattr(lstm, f"{n}_l{layer}{'_reverse' if d else ''}")
                                  for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
        hs = torch.zeros(B, 6, H)
        for b in range(B):
            n = int(lengths[b])
            steps = range(n) if d == 0 else range(n - 1, -1, -1)
            h = c = torch.zeros(H)
            for t in steps:
                xi = inp[b, t] * (m["input"][b] if m["input"] is not None else 1)
                i, f, gg, o = (xi @ w_ih.T + b_ih + b_hh + (h * m["recurrent"][b]) @ w_hh.T).chunk(4)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(gg)
                h = torch.sigmoid(o) * torch.tanh(c)
                hs[b, t] = h
        return hs

    with torch.no_grad():
        sub = slice(0, 40)  # the reference is a Python loop: 40 sequences are enough
        B = 40
        x0, lengths = x[sub], lengths[sub]
        cut = [dict(m, input=None if m["input"] is None else m["input"][sub], recurrent=m["recurrent"][sub])
               for m in masks]
        l0 = torch.cat([reference(x0, 0, 0, cut[0]), reference(x0, 0, 1, cut[1])], -1)
        l1 = torch.cat([reference(l0, 1, 0, cut[2]), reference(l0, 1, 1, cut[3])], -1)
    valid = torch.arange(6).expand(B, 6) < lengths.unsqueeze(1)
    assert torch.allclose(out[sub][valid], l1[valid], atol=1e-5)


def test_a_parser_with_the_thesis_regularisation_trains_parses_and_reloads(tmp_path):
    """ParserConfig's embed_dropout and recurrent_dropout: the parser trains (training path), parses (nn.LSTM's
    path) and reloads to the same parses; a parser without them stores its config as before."""
    from forgetbench.parsing.data.conll import read_conllu
    from forgetbench.parsing.parsers.model import ParserConfig
    from forgetbench.parsing.train import evaluate, load_parser, train

    from .test_parser import _toy_treebank

    tr = _toy_treebank(tmp_path / "train.conllu", 60, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 15, 1)
    info = train(tr, dv, tmp_path / "m", minutes=None, max_epochs=3, max_tokens=100, progress=False, lstm_hidden=16,
                 lstm_layers=3, arc_mlp=16, rel_mlp=8, word_dim=8, char_dim=4, char_hidden=8, tag_dim=4,
                 embed_dropout=0.33, recurrent_dropout=0.33)
    model, vocab = load_parser(tmp_path / "m")
    assert isinstance(model.lstm, VariationalLSTM) and model.cfg.recurrent_dropout == 0.33
    assert evaluate(model, vocab, read_conllu(dv)).las == info["dev"]["las"]
    assert "embed_dropout" not in ParserConfig(1, 1, 1, 1).to_dict()
    with pytest.raises(ValueError, match="PackedSequence"):
        model.lstm.train()(torch.zeros(1, 2, model.lstm.input_size))


def test_the_thesis_network_from_the_command_line(tmp_path):
    """``parse train --network thesis``: the parser's sizes and dropouts, the tagger's two layers and recurrent
    dropout, the annealed rate in the record; refused for another architecture."""
    import json

    from forgetbench.cli import main

    from .test_parser import _toy_treebank

    tr = _toy_treebank(tmp_path / "train.conllu", 40, 0)
    dv = _toy_treebank(tmp_path / "dev.conllu", 10, 1)
    args = ["parse", "train", "--train", str(tr), "--dev", str(dv), "--max-steps", "4", "--eval-every", "2",
            "--network", "thesis", "--jackknife", "2", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "m")]) == 0
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert (cfg["lstm_layers"], cfg["lstm_hidden"], cfg["arc_mlp"], cfg["rel_mlp"]) == (3, 200, 400, 100)
    assert cfg["embed_dropout"] == cfg["recurrent_dropout"] == 0.33
    tagger = json.loads((tmp_path / "m" / "tagger" / "config.json").read_text())
    assert (tagger["lstm_layers"], tagger["recurrent_dropout"]) == (2, 0.5)
    rec = json.loads((tmp_path / "m" / "training.json").read_text())
    assert rec["optimiser"]["anneal"] == [0.75, 5000]
    assert main([*args, "--arch", "syntr", "--out", str(tmp_path / "s")]) == 2 and not (tmp_path / "s").exists()


def test_the_annealed_rate_by_hand():
    from forgetbench.parsing.train import lr_schedule

    f = lr_schedule(0, (0.75, 5000))
    assert f(0) == 1.0 and abs(f(5000) - 0.75) < 1e-12 and abs(f(10000) - 0.5625) < 1e-12
    g = lr_schedule(100, None)
    assert g(0) == 0.01 and g(99) == 1.0 and g(20000) == 1.0
    assert abs(lr_schedule(100, (0.75, 5000))(49) - 0.5 * 0.75 ** (49 / 5000)) < 1e-15
