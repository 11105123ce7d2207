"""A model that outputs nothing (end-of-sentence first: early checkpoints, heavily pruned or quantised models)
goes through a sweep with every pass — metrics, off-target, λ, attention maps, gender and word-sense suites —
and its report says how many outputs were empty, per pair."""

import json
import shutil

import torch

from forgetbench.cli import main

from .conftest import FLORES, REPO, flores_sweep


def _silent_model(tiny_dir, out):
    """The tiny model with its decoder's output fixed to the end-of-sentence embedding: every step's argmax is
    </s>, so after the forced target-language code every hypothesis is empty."""
    from transformers import AutoModelForSeq2SeqLM

    shutil.copytree(tiny_dir, out)
    model = AutoModelForSeq2SeqLM.from_pretrained(str(tiny_dir))
    eos = model.config.eos_token_id
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb[eos] = torch.randn(emb.shape[1], generator=torch.Generator().manual_seed(0))
        norm = model.model.decoder.layer_norm
        norm.weight.zero_()
        norm.bias.copy_(emb[eos] * 10)
    model.save_pretrained(str(out))
    return out


def test_a_model_with_only_empty_outputs_goes_through_every_pass(tiny_dir, tmp_path):
    silent = _silent_model(tiny_dir, tmp_path / "silent")
    extra = (f"bias:\n  mt_gender: {{path: {REPO / 'data' / 'mt_gender'}, languages: [de], sentences: 4, "
             f"aligner_context: {FLORES}}}\n"
             f"  mucow: {{path: {REPO / 'data' / 'mucow'}, pairs: [en-de], sentences: 3}}\n"
             "attention_maps: {sentences: 1}\n")
    cfg = flores_sweep(tmp_path / "e.yaml", silent, "{base: null, prune-30: prune-30}", "[en-de, de-en]", 3, 8,
                       "[de]", extra)
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    for p in S["pairs"]:
        assert p["empty_outputs"] == {"base": 3, "prune-30": 3}, p
    html = (run / "report" / "report.html").read_text()
    assert "Empty outputs: base 6 of 6 (most in en-de: 3 of 3); prune-30 6 of 6" in html
    csv = (run / "report" / "pairs_prune-30.csv").read_text().splitlines()
    assert csv[0].endswith("base empty,prune-30 empty,kept") and all(r.endswith(",3,3,yes") for r in csv[1:])


def test_cross_attention_of_no_sentence_is_no_row(tiny):
    from forgetbench.eval.hallucination import cross_attention, cross_attention_variance

    model, tok = tiny
    assert cross_attention(model, tok, [], [], "en", "de") == []
    assert cross_attention_variance(model, tok, [], [], "en", "de") == []
    (alpha, _, labels), = cross_attention(model, tok, ["A sentence."], [""], "en", "de")  # an empty hypothesis
    assert labels == [tok.get_lang_id("de"), tok.eos_token_id] and alpha.shape[0] == 2


def test_eval_of_the_shipped_teacher_with_defaults_says_why_nothing_is_kept_and_shows_every_pair(tmp_path):
    """The default filter (base spBLEU ≥ 12, the thesis's) keeps none of the small teacher's pairs: the first
    paragraph says so with the key to change, and the per-pair scores are in the report, not only summary.json."""
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"model: {REPO / 'artifacts' / 'teacher'}\nvariants: {{base: null}}\npairs: [en-de, de-en]\n"
                   f"sentences: 4\ngeneration: {{max_new_tokens: 24}}\n"
                   f"benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]\n")
    assert main(["eval", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    rep = tmp_path / "run" / "report"
    S = json.loads((rep / "summary.json").read_text())
    assert not any(p["kept"] for p in S["pairs"]) and S["thresholds"]["bleu_filter"] == 12
    html = (rep / "report.html").read_text()
    first = html[html.index("<p>"):html.index("<h2")]
    assert "No pair passed the filter" in first and "analysis.bleu_filter = 12" in first and "Lower" in first
    md = (rep / "report.md").read_text()
    assert "No pair passed the filter" in md.split("## ")[0]
    rows = (rep / "pair_scores.csv").read_text().splitlines()
    assert rows[0] == "pair,benchmark,tier,kept,base spBLEU,base chrF,base empty" and len(rows) == 3
    for p, row in zip(S["pairs"], rows[1:], strict=True):
        assert row.startswith(f"{p['src']}-{p['tgt']},flores101,") and f"{p['scores']['base']['chrF']:.2f}" in row
    assert "Scores per pair" in html and "Scores per pair" in md


def test_sizes_of_a_compressed_folder_and_of_a_student_are_their_own(tiny_dir, tmp_path):
    """A compress output translated as a model (``eval`` of it): its own record's nominal size and dense file, the
    artefacts beside it not counted as weights; a student: its parameters against the sweep model's."""
    from forgetbench.compress.pipeline import compress_dir
    from forgetbench.compress.recipe import load_recipe
    from forgetbench.eval.analysis import Thresholds, VariantRow
    from forgetbench.eval.summary import Summary
    from forgetbench.models.tiny import build_tiny_m2m100
    from forgetbench.report.tables import method_of
    from forgetbench.sweep.plan import source_size
    from forgetbench.sweep.run import model_sizes

    out = tmp_path / "p45"
    compress_dir(tiny_dir, load_recipe("prune-45"), out, progress=False)
    own = model_sizes(out, out, None)
    assert own["nominal_ratio"] == 0.55 and own["dense_bytes"] == (out / "model.safetensors").stat().st_size
    assert "sparse_bytes" in own and own["dense_bytes"] < sum(f.stat().st_size for f in out.glob("*.safetensors"))
    sents = [ln.split("\t")[-1] for ln in (REPO / "data" / "calibration" / "ntrex128-calib.tsv").read_text().splitlines()[:300]]
    build_tiny_m2m100(tmp_path / "small", sents, spm_vocab=1000, d_model=32, layers=1, heads=2, ffn=64, seed=0)
    s = model_sizes(tmp_path / "small", tiny_dir, None)
    params, base = source_size(tmp_path / "small")[1], source_size(tiny_dir)[1]
    assert s["parameters"] == params and s["base_parameters"] == base and s["nominal_ratio"] == params / base < 0.5
    assert model_sizes(tiny_dir, tiny_dir, None)["nominal_ratio"] == 1.0
    S = Summary("base", [], Thresholds(), {}, variant_table=[VariantRow("student", s, None, None, 0),
                                                             VariantRow("p45", own, None, None, 0)])
    assert method_of(S, "student") == "other model" and method_of(S, "p45") == "pruning"


def test_an_empty_small100_hypothesis_has_no_attention_row():
    """A SMaLL-100-format student's empty hypothesis has no label token: teacher-forcing it alone gives an α with no
    row (its variance undefined, NaN), as in a batch, instead of an index error."""
    import math

    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.hallucination import cross_attention, cross_attention_variance

    model, tok = load_model_dir(REPO / "artifacts" / "student-kd")
    (alpha, src_ids, labels), (full, _, _) = cross_attention(model, tok, ["A sentence.", "A sentence."],
                                                             ["", "Ein Satz."], "en", "de")
    assert labels == [] and alpha.shape == (0, len(src_ids)) and full.shape[0] > 0
    assert math.isnan(cross_attention_variance(model, tok, ["A sentence."], [""], "en", "de")[0])
