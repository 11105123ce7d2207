import pytest
import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.models.device_map import plan
from forgetbench.models.generation import translate
from forgetbench.models.load import load
from forgetbench.models.tokenizers import load_tokenizer

from .conftest import REPO


def test_language_codes_do_not_leak_into_decoded_text(tiny_dir):
    tok = load_tokenizer(tiny_dir)
    ids = [tok.get_lang_id("de"), *tok("Hallo Welt")["input_ids"][1:-1], tok.eos_token_id]
    assert "__de__" not in tok.decode(ids, skip_special_tokens=True)
    assert tok.get_lang_id("de") == tok.convert_tokens_to_ids("__de__")


def test_small100_tokenizer_reproduces_the_documented_format(tiny_dir):
    m2m = load_tokenizer(tiny_dir)
    s100 = load_tokenizer(tiny_dir, small100=True)
    body = m2m.convert_tokens_to_ids(m2m.sp_model.encode("Hello world", out_type=str))
    s100.tgt_lang = "fr"
    s100.src_lang = "en"  # ignored by SMaLL-100: the target code goes on the source side
    enc = s100("Hello world", text_target="Bonjour le monde")
    tgt_body = m2m.convert_tokens_to_ids(m2m.sp_model.encode("Bonjour le monde", out_type=str))
    assert enc["input_ids"] == [s100.get_lang_id("fr"), *body, s100.eos_token_id]  # [__tgt__] tokens </s>
    assert enc["labels"] == [*tgt_body, s100.eos_token_id]  # tokens </s>
    m2m.src_lang, m2m.tgt_lang = "en", "fr"
    assert m2m("Hello world")["input_ids"] == [m2m.get_lang_id("en"), *body, m2m.eos_token_id]


def test_small100_sources_carry_each_pairs_target_code_whatever_came_before(tiny_dir):
    """Pairs one after another (a sweep's order): the teacher-forced labels of en-fr set the tokenizer's target
    language; the next pair's sources must still start with that pair's own target code."""
    from forgetbench.models.generation import encode_sources, target_ids

    s100 = load_tokenizer(tiny_dir, small100=True)
    body = s100.convert_tokens_to_ids(s100.sp_model.encode("Hello world", out_type=str))
    for src, tgt in [("en", "fr"), ("en", "de"), ("de", "en"), ("en", "ru")]:
        ids = encode_sources(s100, ["Hello world"], src, tgt, return_tensors=None, padding=False)["input_ids"]
        assert ids == [[s100.get_lang_id(tgt), *body, s100.eos_token_id]], (src, tgt)
        target_ids(s100, ["Bonjour"], tgt)


def test_small100_calibration_batches_carry_their_pairs_target_code(tiny_dir):
    from forgetbench.compress.calibration import seq2seq_calibration

    s100 = load_tokenizer(tiny_dir, small100=True)
    s100.tgt_lang = "ru"  # left by an earlier use
    rows = [("en", "fr", "Hello world", "Bonjour"), ("en", "de", "Good day", "Guten Tag"), ("de", "en", "Hallo", "Hi")]
    seen = []

    class Recorder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, input_ids, labels, **kw):
            seen.append((input_ids[0, 0].item(), labels[0, -1].item()))

    seq2seq_calibration(s100, rows)(Recorder())
    # pairs in sorted order: de-en, en-de, en-fr; labels end in </s> (no target code in SMaLL-100 labels)
    assert seen == [(s100.get_lang_id(t), s100.eos_token_id) for t in ("en", "de", "fr")]


def test_load_with_cpu_and_disk_offload_matches_plain(tiny_dir, tmp_path):
    m0, tok, sig = load(tiny_dir)
    assert len(sig.weights_sha256) == 64 and str(sig).startswith(f"model:{tiny_dir}|config:")
    m1, tok1, _ = load(tiny_dir, device_map="auto", max_memory={"cpu": 800_000}, offload_folder=tmp_path / "off")
    assert set(m1.hf_device_map.values()) == {"cpu", "disk"} and not m1.training
    srcs = ["The weather is nice today.", "I like green apples and red cars."]
    assert translate(m0, tok, srcs, "en", "de", max_new_tokens=8) == translate(m1, tok1, srcs, "en", "de", max_new_tokens=8)
    tok.tgt_lang = "de"
    enc = tok(srcs, text_target=srcs, return_tensors="pt", padding=True)
    with torch.no_grad():
        assert torch.equal(m0(**enc).logits, m1(**enc).logits)
    with pytest.raises(ForgetbenchError, match="nothing in memory"):
        load(tiny_dir, device_map="auto", max_memory={"cpu": 1000}, offload_folder=tmp_path / "off2")


def test_8bit_needs_a_gpu_and_says_so(tiny_dir):
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    with pytest.raises(ForgetbenchError, match="CUDA GPU"):
        load(tiny_dir, load_in_8bit=True)


@pytest.mark.parametrize("gpus,mem", [(2, "40GiB"), (4, "40GiB"), (8, "40GiB"), (2, "80GiB"), (4, "80GiB"), (8, "80GiB")])
def test_plan_devices_12b_keeps_tied_weights_together(gpus, mem):
    r = plan("m2m100_12B", gpus, mem, "bf16")
    assert round(r["parameters"] / 1e9, 1) == 11.8
    assert len(set(r["tied_devices"].values())) == 1
    used = {str(d) for d in r["device_map"].values()}
    assert used <= {str(i) for i in range(gpus)}
    assert sum(r["bytes_per_device"].values()) == r["parameters"] * 2  # bf16, tied matrix counted once
    if gpus > 1:
        assert len(used) > 1  # balanced, not everything on GPU 0


def test_plan_devices_small100_and_errors():
    r = plan("small100", 1, "24GiB", "fp32")
    assert 0.3e9 < r["parameters"] < 0.36e9  # ~330M
    with pytest.raises(ForgetbenchError):
        plan("nope", 2, "40GiB")
    with pytest.raises(ForgetbenchError):
        plan("small100", 2, "forty")


def test_greedy_loop_gives_hf_generate_tokens_on_the_teacher():
    """On the shipped teacher (real EOS behaviour, rows ending at different steps) the loop that drops
    finished rows returns exactly HF generate's hypotheses, for M2M (forced BOS) decoding."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.models.generation import (
        encode_sources,
        generation_kwargs,
        greedy_generate,
        greedy_supported,
    )

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    assert greedy_supported(model)
    srcs, _ = open_benchmark("flores101", "flores101", REPO / "data" / "flores101").pair("en", "sw")
    enc = encode_sources(tok, srcs[:24], "en", "sw")
    bos = generation_kwargs(tok, "sw")["forced_bos_token_id"]
    with torch.no_grad():
        ref = model.generate(**enc, forced_bos_token_id=bos, num_beams=1, do_sample=False, max_new_tokens=60)
    ours = greedy_generate(model, enc["input_ids"], enc["attention_mask"], bos, 60)
    assert len({len(o) for o in ours}) > 3  # rows really end at different steps
    assert tok.batch_decode(ref, skip_special_tokens=True) == tok.batch_decode(ours, skip_special_tokens=True)
    model.generation_config.no_repeat_ngram_size = 3  # a logits processor the loop does not implement: HF path
    assert not greedy_supported(model)


def test_rows_of_several_pairs_decode_as_each_pair_alone(tiny_dir):
    """A batch filled across pairs (the sweep's translation units): one encoding per pair, padded together as the
    tokenizer pads one pair's batch; each row forced to its own target code (M2M-100) or carrying it on the
    encoder side (SMaLL-100); the teacher's hypotheses equal those of each pair translated alone; the Hugging Face
    path (beam search, logits processors) runs one generate call per pair."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.models.generation import (
        encode_rows,
        encode_sources,
        greedy_generate,
        translate,
        translate_rows,
    )
    from forgetbench.models.load import load

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    bench = open_benchmark("flores101", "flores101", REPO / "data" / "flores101")
    pairs = [("en", "sw"), ("de", "en"), ("en", "de")]
    texts = {p: bench.pair(*p)[0][:12] for p in pairs}
    rows = [(texts[p][k], *p) for k in range(12) for p in pairs]  # interleaved: every batch mixes the pairs
    one = encode_sources(tok, texts[("de", "en")], "de", "en")
    both = encode_rows(tok, [(x, "de", "en") for x in texts[("de", "en")]])
    assert torch.equal(one["input_ids"], both["input_ids"]) and torch.equal(one["attention_mask"], both["attention_mask"])
    enc = encode_rows(tok, rows)
    codes = torch.tensor([tok.get_lang_id(t) for _, _, t in rows])
    first = greedy_generate(model, enc["input_ids"], enc["attention_mask"], codes, 3)
    assert [o[0] for o in first] == codes.tolist()
    alone = {p: translate(model, tok, texts[p], *p, 1, 60) for p in pairs}
    assert translate_rows(model, tok, rows, 1, 60) == [alone[p][k] for k in range(12) for p in pairs]
    assert translate_rows(model, tok, rows[:6], 2, 20) == [translate(model, tok, [x], s, t, 2, 20)[0] for x, s, t in rows[:6]]
    s100, stok, _ = load(tiny_dir, dtype="fp32", small100=True, with_signature=False)
    assert translate_rows(s100, stok, rows[:9], 1, 10) == [translate(s100, stok, [x], s, t, 1, 10)[0] for x, s, t in rows[:9]]


def test_lambda_on_the_translation_encoder_states_equals_a_fresh_encoding_on_the_teacher():
    """The sweep computes λ right after translating, on the encoder states the greedy loop kept: on the shipped
    teacher the attention is bit for bit that of the pass that encodes each source again (the layout rule:
    test_lambda.py holds it on the tiny model); a state of the wrong length is not used."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.eval.hallucination import cross_attention
    from forgetbench.models.generation import translate_rows

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    srcs = open_benchmark("flores101", "flores101", REPO / "data" / "flores101").pair("en", "de")[0][:20]
    rows = [(x, "en", "de") for x in srcs]
    states: dict = {}
    hyps = translate_rows(model, tok, rows, 1, 60, states=states)
    assert set(states) == set(rows)
    calls = []
    model.get_encoder().register_forward_hook(lambda *a: calls.append(1))
    for k in (slice(0, 7), slice(7, 20)):
        kept = [states[r] for r in rows[k]]
        fresh = cross_attention(model, tok, srcs[k], hyps[k], "en", "de")
        n = len(calls)
        reused = cross_attention(model, tok, srcs[k], hyps[k], "en", "de", states=kept)
        assert len(calls) == n  # the encoder did not run
        assert all(torch.equal(a[0], b[0]) for a, b in zip(fresh, reused, strict=True))
    bad = [states[rows[0]][:-1]] + [states[r] for r in rows[1:3]]
    assert all(torch.equal(a[0], b[0]) for a, b in zip(cross_attention(model, tok, srcs[:3], hyps[:3], "en", "de"),
                                                        cross_attention(model, tok, srcs[:3], hyps[:3], "en", "de",
                                                                        states=bad), strict=True))
