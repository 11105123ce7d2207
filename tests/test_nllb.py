"""NLLB-200 through every command, on a tiny random NLLB-shaped model (M2M100 architecture, a real SPM vocabulary in
NLLB's token layout, the 202 codes): the codes and source layout against transformers' own ``NllbTokenizer``
(legacy and not), the forced target code against ``generate(forced_bos_token_id=…)``, compression (magnitude,
Wanda, PTQ), a sweep with the torch and CTranslate2 backends, FLORES-200 files, plan-devices, a short
distillation, and bad input."""

import json
import shutil
import textwrap

import pytest

from forgetbench.cli import main

from .conftest import CALIB, FLORES, REPO, calib_rows

ENG = [ln for ln in (FLORES / "eng.devtest").read_text(encoding="utf-8").splitlines()][:6]


def test_the_tiny_model_has_nllbs_token_layout(nllb_dir):
    import sentencepiece as spm
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    from forgetbench.models.load import load

    model, tok, _ = load(nllb_dir)
    n = spm.SentencePieceProcessor(model_file=str(nllb_dir / "sentencepiece.bpe.model")).get_piece_size()
    assert tok.convert_tokens_to_ids(["<s>", "<pad>", "</s>", "<unk>"]) == [0, 1, 2, 3]
    ids = tok.convert_tokens_to_ids(list(FAIRSEQ_LANGUAGE_CODES))
    assert ids == list(range(n + 1, n + 203))  # the codes right after the SPM pieces, as 256001 … 256202
    assert tok.convert_tokens_to_ids("eng_Latn") == n + 47 and tok.convert_tokens_to_ids("<mask>") == n + 203
    assert len(tok) == n + 204 and model.config.vocab_size == n + 206  # two spare rows, as 256206
    assert json.loads((nllb_dir / "tokenizer_config.json").read_text())["tokenizer_class"] == "NllbTokenizer"
    # the project's names map both ways
    assert tok.get_lang_id("de") == tok.get_lang_id("deu_Latn") == tok.convert_tokens_to_ids("deu_Latn")
    assert tok.get_lang_token("sw") == "swh_Latn" and tok.lang_code_to_id["zh"] == tok.lang_code_to_id["zho_Hans"]


@pytest.mark.parametrize("legacy", [False, True])
def test_sources_labels_and_the_forced_code_are_transformers_nllbs(nllb_dir, legacy):
    from transformers import AutoTokenizer

    from forgetbench.models.generation import encode_sources, target_ids, translate_rows
    from forgetbench.models.load import load
    from forgetbench.models.tokenizers import load_nllb_tokenizer

    model, _, _ = load(nllb_dir, with_signature=False)
    tok = load_nllb_tokenizer(nllb_dir, legacy_behaviour=legacy)
    ref = AutoTokenizer.from_pretrained(str(nllb_dir), src_lang="eng_Latn", tgt_lang="deu_Latn",
                                        legacy_behaviour=legacy)
    ours = encode_sources(tok, ENG[:3], "en", "de", return_tensors=None, padding=False)["input_ids"]
    assert ours == ref(ENG[:3])["input_ids"]
    code, eos = ref.convert_tokens_to_ids("eng_Latn"), ref.eos_token_id
    assert all((x[-2:] == [eos, code]) if legacy else (x[0] == code and x[-1] == eos) for x in ours)
    # labels: NLLB's training layout (target code first) whatever the source layout
    body = ref("Hallo Welt", add_special_tokens=False)["input_ids"]
    assert target_ids(tok, ["Hallo Welt"], "de")[0].tolist() == [ref.convert_tokens_to_ids("deu_Latn"), *body, eos]
    # the forced first token and the hypotheses: transformers' generate with NllbTokenizer's own forced_bos id
    enc = ref(ENG[:3], return_tensors="pt", padding=True)
    gen = model.generate(**enc, forced_bos_token_id=ref.convert_tokens_to_ids("deu_Latn"), num_beams=1,
                         do_sample=False, max_new_tokens=10)
    assert gen[:, :2].tolist() == [[2, ref.convert_tokens_to_ids("deu_Latn")]] * 3
    rows = [(x, "en", "de") for x in ENG[:3]]
    direct = translate_rows(model, tok, rows, max_new_tokens=10)
    assert direct == [t.strip() for t in ref.batch_decode(gen, skip_special_tokens=True)]
    assert direct == translate_rows(model, tok, rows, max_new_tokens=10, greedy_loop=False)


@pytest.mark.parametrize("recipe", ["prune-30", "wanda-45-uniform", "ptq-int8"])
def test_compress_runs_each_method_on_an_nllb_model(nllb_dir, tmp_path, recipe):
    from safetensors.torch import load_file

    from forgetbench.models.load import load

    assert main(["compress", str(nllb_dir), "--recipe", recipe, "--out", str(tmp_path / "v"), "--quiet"]) == 0
    model, tok, _ = load(tmp_path / "v", with_signature=False)
    assert type(tok).__name__ == "NllbCodesTokenizer" and tok.get_lang_id("de") == tok.convert_tokens_to_ids("deu_Latn")
    w = model.model.encoder.layers[0].fc1.weight
    if recipe != "ptq-int8":
        frac = float((w == 0).float().mean())
        assert frac == pytest.approx(0.3 if recipe == "prune-30" else 0.45, abs=0.02)
    else:
        assert any(k.endswith("int8") or "scale" in k for k in load_file(str(next((tmp_path / "v").glob("*.safetensors")))))


def test_make_tiny_and_compress_stream_keep_the_nllb_tokenizer(tmp_path, capsys):
    from forgetbench.models.load import load

    assert main(["make-tiny", str(CALIB), "--out", str(tmp_path / "m"), "--family", "nllb", "--vocab", "1100",
                 "--d-model", "32"]) == 0
    assert "NLLB-200-shaped" in capsys.readouterr().out
    assert main(["compress-stream", str(tmp_path / "m"), "--recipe", "prune-30", "--out", str(tmp_path / "s")]) == 0
    for d in ("m", "s"):
        model, tok, _ = load(tmp_path / d, with_signature=False)
        assert type(tok).__name__ == "NllbCodesTokenizer" and tok.get_lang_token("de") == "deu_Latn"
    assert float((model.model.decoder.layers[0].fc2.weight == 0).float().mean()) == pytest.approx(0.3, abs=0.02)


def test_a_sweep_with_both_backends_and_flores200_files(nllb_dir, tmp_path):
    from forgetbench.models.load import load
    from forgetbench.sweep import load_sweep, run_sweep

    f200 = tmp_path / "flores200" / "devtest"
    f200.mkdir(parents=True)
    for iso3, code in (("eng", "eng_Latn"), ("deu", "deu_Latn"), ("swh", "swh_Latn")):
        shutil.copy(FLORES / f"{iso3}.devtest", f200 / f"{code}.devtest")
    cfg = tmp_path / "s.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        name: nllb
        model: {nllb_dir}
        variants: {{base: null, p30: prune-30}}
        benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}},
                     {{name: flores200, kind: flores200, path: {f200.parent}}}]
        pairs: [en-de, en-sw]
        sentences: 6
        generation: {{num_beams: 1, max_new_tokens: 10, batch_size: 4}}
        analysis: {{bleu_filter: 0, resamples: 50}}
        backend: ctranslate2
        """))
    S = run_sweep(load_sweep(cfg), tmp_path / "run", progress=False).to_dict()  # as summary.json holds it
    assert S["backends"]["base"].startswith("ctranslate2") and S["backends"]["base@torch"] == "torch"
    got = {(p["benchmark"], f"{p['src']}-{p['tgt']}") for p in S["pairs"]}
    assert got == {(b, p) for b in ("flores101", "flores200") for p in ("en-de", "en-sw")}
    # the same sentences under both names give the same scores
    by = {(p["benchmark"], f"{p['src']}-{p['tgt']}"): p["scores"]["base@torch"]["chrF"] for p in S["pairs"]}
    assert by[("flores101", "en-sw")] == by[("flores200", "en-sw")]
    # an NLLB model's sweep groups pairs by NLLB-200's own resource labels too (swh_Latn: 2.18 M public pairs)
    assert {p["tier"]["nllb-200"] for p in S["pairs"]} == {"High"}
    assert {p["tier"]["thesis"] for p in S["pairs"] if p["tgt"] == "sw"} == {"Low"}
    # CTranslate2 translates with the forced NLLB code: its hypotheses are the torch loop's
    from forgetbench.models import ct2

    model, tok, _ = load(nllb_dir, with_signature=False)
    tr = ct2.Ct2Translator(ct2.convert(model, tok, tmp_path / "c", "float32"), tok, compute_type="float32")
    rows = [(x, "en", "sw") for x in ENG]
    from forgetbench.models.generation import translate_rows

    assert tr.translate_rows(rows, max_new_tokens=10) == translate_rows(model, tok, rows, max_new_tokens=10)


@pytest.mark.parametrize("name,params", [("nllb-200-distilled-600M", 0.62), ("nllb-200-1.3B", 1.37),
                                         ("nllb-200-3.3B", 3.34)])
def test_plan_devices_knows_the_nllb_configs(name, params, capsys):
    assert main(["plan-devices", name, "--gpus", "1", "--gpu-memory", "80GiB", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["parameters"] / 1e9 == pytest.approx(params, abs=0.005)


def test_a_short_distillation_from_an_nllb_teacher(nllb_dir, tmp_path):
    from forgetbench.distill.config import load_distill_config
    from forgetbench.distill.run import distill
    from forgetbench.models.generation import encode_sources, is_small100, translate_rows
    from forgetbench.models.load import load

    from .test_distill import toy_setup

    cfg = load_distill_config(toy_setup(tmp_path, nllb_dir, steps=4))
    out = distill(cfg, tmp_path / "run", progress=False, log=lambda *_: None)
    model, tok, _ = load(out, with_signature=False)
    assert type(tok).__name__ == "NllbCodesTokenizer" and is_small100(tok) and model.config.decoder_layers == 1
    ids = encode_sources(tok, ENG[:1], "en", "de", return_tensors=None, padding=False)["input_ids"][0]
    assert ids[0] == tok.convert_tokens_to_ids("deu_Latn")  # SMaLL-100 format: the target code on the encoder side
    assert len(translate_rows(model, tok, [(ENG[0], "en", "de")], max_new_tokens=4)) == 1


def test_nllb_resource_labels_follow_the_papers_one_million_rule():
    from forgetbench.eval.languages import pair_tier
    from forgetbench.eval.nllb_tiers import LOW_BELOW, PUBLIC_BITEXT, nllb_tiers, resource

    assert len(PUBLIC_BITEXT) == 202 and LOW_BELOW == 1_000_000
    # either side of the bound: Basque 1,003,513 and Twi 996,277 public pairs; Amharic 336,621; Cebuano 915,739
    assert resource("eus_Latn") == "High" and resource("twi_Latn") == "Low"
    t = nllb_tiers()
    assert (t["am"], t["amh_Ethi"], t["ceb"], t["sw"], t["bn"], t["en"]) == ("Low", "Low", "Low", "High", "High", "High")
    assert sum(v == "High" for k, v in t.items() if "_" in k) == 54  # of 202 codes
    assert pair_tier("en", "am", t) == "Low" and pair_tier("de", "sw", t) == "High"


@pytest.mark.parametrize("spec,want", [("{nllb: {table: nllb-200}}", None),
                                       ("{nllb: {table: nllb-100}}", "a shipped table is named alone"),
                                       ("{nllb: {table: nllb-200, thresholds: [1, 2, 3]}}", "a shipped table")])
def test_a_sweep_names_the_nllb_table_as_a_tier_view(spec, want, tmp_path):
    from forgetbench.errors import ForgetbenchError
    from forgetbench.sweep import load_sweep

    cfg = tmp_path / "s.yaml"
    cfg.write_text(f"model: {REPO / 'artifacts' / 'teacher'}\nbenchmarks: [{{name: f, kind: flores101, path: {FLORES}}}]\n"
                   f"pairs: [en-sw]\ntiers: {spec}\n")
    if want:
        with pytest.raises(ForgetbenchError, match=want):
            load_sweep(cfg)
        return
    views = {v.name: v.tiers for v in load_sweep(cfg).tier_views}
    assert list(views) == ["thesis", "nllb"] and (views["nllb"]["sw"], views["nllb"]["am"]) == ("High", "Low")  # an M2M-100 model: no view by itself


def test_a_sweep_takes_nllb_codes_of_the_101_languages_and_refuses_the_others(tmp_path):
    from forgetbench.errors import ForgetbenchError
    from forgetbench.sweep import load_sweep

    cfg = tmp_path / "s.yaml"
    head = f"model: {REPO / 'artifacts' / 'teacher'}\nbenchmarks: [{{name: f, kind: flores101, path: {FLORES}}}]\n"
    cfg.write_text(head + "pairs: [eng_Latn-swh_Latn, deu_Latn-en]\n")
    assert [(j.src, j.tgt) for j in load_sweep(cfg).jobs] == [("en", "sw"), ("de", "en")]
    cfg.write_text(head + "languages: [ace_Arab]\n")
    with pytest.raises(ForgetbenchError, match="ace_Arab is an NLLB-200 language outside the 101 FLORES-101"):
        load_sweep(cfg)


def _snapshot(root):
    return sorted(str(p) for p in root.rglob("*"))


@pytest.mark.parametrize("case", ["code-the-model-lacks", "no-nllb-mapping", "flores200-file-missing",
                                  "code-the-model-lacks-sampled"])
def test_bad_nllb_input_is_one_line_exit_2_nothing_written(case, nllb_dir, tmp_path, capsys):
    w = tmp_path / "w"
    w.mkdir()
    if case == "flores200-file-missing":
        (w / "f200").mkdir()
        shutil.copy(FLORES / "eng.devtest", w / "f200" / "eng_Latn.devtest")
        (w / "s.yaml").write_text(textwrap.dedent(f"""\
            name: s
            model: {nllb_dir}
            variants: {{base: null}}
            benchmarks: [{{name: f200, kind: flores200, path: {w / 'f200'}}}]
            pairs: [en-de]
            sentences: 2
            """))
        argv, want = ["sweep", str(w / "s.yaml"), "--out", str(w / "run"), "--quiet"], "no FLORES-200 file deu_Latn.devtest"
    else:
        lang = "xyz_Latn" if case.startswith("code-the-model-lacks") else "br"
        rows = [r for r in calib_rows() if r[:2] == ("en", "de")]
        (w / "c.tsv").write_text("".join(f"en\t{lang}\t{rows[i % len(rows)][2]}\t{rows[i % len(rows)][3]}\n"
                                         for i in range(200)), encoding="utf-8")
        recipe = "wanda-45-uniform"
        if case.endswith("sampled"):  # a plain sample (no choice) of the calibration rows is checked as well
            recipe = str(tmp_path / "wanda-sampled.yaml")
            (tmp_path / "wanda-sampled.yaml").write_text(
                f"name: wanda-sampled\nsteps:\n  - prune: {{method: wanda, sparsity: 0.45, calibration: "
                f"{{data: {w / 'c.tsv'}, max_sentences: 64}}}}\n")
        argv = ["compress", str(nllb_dir), "--recipe", recipe, "--calibration", str(w / "c.tsv"),
                "--out", str(w / "v"), "--quiet"]
        want = "no code xyz_Latn" if case.startswith("code-the-model-lacks") else "'br' has no NLLB-200 code"
    before = _snapshot(w)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and want in err[0], err
    assert _snapshot(w) == before
