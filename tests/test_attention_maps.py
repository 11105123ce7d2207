"""Example cross-attention maps (base beside compressed) and the loser→winner movement between two variants:
values recomputed from the models and the store, not only that a figure exists."""

import json
import sqlite3

import pytest

from forgetbench.cli import main
from forgetbench.errors import ForgetbenchError
from forgetbench.eval.attention_maps import MapsConfig, pick_examples

from .conftest import REPO

FLORES = REPO / "data" / "flores101"
TEACHER = REPO / "artifacts" / "teacher"


def test_examples_are_the_most_moving_on_target_sentences():
    k = ("b", "en", "de")
    deltas = [(k, 0, -9.0), (k, 1, -20.0), (k, 2, -3.0), (k, 3, 0.2), (k, 4, 12.0), (k, 5, 4.0), (k, 6, 30.0)]
    on = {("base", *k, i): 1.0 for i in range(7)} | {("v", *k, i): 1.0 for i in range(7)}
    on[("v", *k, 1)] = 0.0  # sentence 1 went off-target: not an example
    on[("base", *k, 6)] = 0.0  # so did the base's 6
    ex = pick_examples(deltas, on, "base", "v", 0.5, 2)
    assert [i for _, i, _ in ex["losers"]] == [0, 2] and [i for _, i, _ in ex["winners"]] == [4, 5]
    with pytest.raises(ForgetbenchError, match="layers must be all, last or a list"):
        MapsConfig(layers="middle")


def test_maps_and_movement_from_a_sweep(tmp_path):
    from forgetbench.compress.pipeline import load_compressed, load_model_dir
    from forgetbench.eval.attention_maps import attention_map

    cfg = tmp_path / "m.yaml"
    cfg.write_text(f"""name: m
model: {TEACHER}
variants: {{base: null, prune-30: prune-30, prune-45: prune-45}}
benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]
pairs: [en-de, de-en]
sentences: 12
generation: {{max_new_tokens: 32, batch_size: 8}}
analysis: {{bleu_filter: 0, resamples: 200}}
attention_maps: {{sentences: 1, layers: all}}
movement: [[prune-30, prune-45]]
""")
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    con = sqlite3.connect(run / "store.sqlite")
    chrf = {(v, s, t, i): c for v, s, t, i, c in con.execute("SELECT variant, src, tgt, idx, chrf FROM translations")}
    on = {(v, s, t, i): x for v, s, t, i, x in
          con.execute("SELECT variant, src, tgt, idx, value FROM sentence_stats WHERE name = 'on_target'")}
    # the mapped loser: the lowest ΔchrF among sentences both hypotheses keep on target
    keys = [(s, t, i) for (v, s, t, i) in chrf if v == "base"]
    ok = [k for k in keys if on.get(("base", *k), 1) >= 1 and on.get(("prune-45", *k), 1) >= 1]
    worst = min(ok, key=lambda k: (chrf[("prune-45", *k)] - chrf[("base", *k)], "flores101", k))
    x = S["attention_maps"]["prune-45"]["losers"][0]
    assert (x["pair"], x["idx"]) == (f"{worst[0]}-{worst[1]}", worst[2])
    assert x["delta_chrF"] == pytest.approx(chrf[("prune-45", *worst)] - chrf[("base", *worst)])
    base, tok = load_model_dir(TEACHER)
    comp, _, _ = load_compressed(run / "variants" / "prune-45")
    s, t = worst[0], worst[1]
    for who, model, hyp in (("base_map", base, x["base"]), ("compressed_map", comp, x["compressed"])):
        again = attention_map(model, tok, x["source"], hyp, s, t)
        assert x[who] == again  # the stored map is the model's, to 4 decimals
        assert all(abs(sum(row) - 1) < 2e-3 for row in x[who]["alpha"])
        assert len(x[who]["alpha"]) == len(x[who]["output"]) and len(x[who]["alpha"][0]) == len(x[who]["source"])
    assert x["base_map"]["source"] == x["compressed_map"]["source"] and x["base_map"]["source"][0] == f"__{s}__"
    # movement: every analysed sentence by its category under prune-30 (rows) and prune-45 (columns)
    M = S["movement"]["prune-30|prune-45"]

    def cat(v, k):
        d = chrf[(v, *k)] - chrf[("base", *k)]
        return "loser" if d < -0.5 else "winner" if d > 0.5 else "neither"

    hand = {a: {b: sum(1 for k in keys if cat("prune-30", k) == a and cat("prune-45", k) == b)
                for b in ("loser", "neither", "winner")} for a in ("loser", "neither", "winner")}
    assert M["counts"] == hand and sum(map(sum, (r.values() for r in hand.values()))) == 24
    assert len(M["loser_to_winner"]) == min(5, hand["loser"]["winner"])
    html = (run / "report" / "report.html").read_text()
    assert 'alt="attention prune-45"' in html and "Losers and winners of prune-30 under prune-45" in html
    names = sorted(p.name for p in (run / "report").glob("mov*.csv"))  # safe file names: no '|'
    assert names == ["movement_prune-30_vs_prune-45.csv", "moves_prune-30_vs_prune-45.csv"]
