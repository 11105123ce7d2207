"""The direct decoder step and the greedy loop's batching: the same logits as the model's own forward, bit for bit
(teacher, tiny M2M-100 and SMaLL-100-format models, with rows leaving the batch), the cases that must take the
model's forward, and the encoder run by length groups."""

import pytest
import torch

from tests.conftest import REPO, calib_rows


def _steps(model, enc, n_steps, drop_at=3, keep=None):
    """Logits of HFStep and DirectStep fed the same tokens (the HF step's argmax), rows dropped at one step."""
    from forgetbench.models.decoder_step import DirectStep, HFStep
    from forgetbench.models.generation import encode_by_length

    with torch.no_grad():
        hidden = encode_by_length(model.get_encoder(), enc["input_ids"], enc["attention_mask"])
        a = HFStep(model, hidden, enc["attention_mask"])
        b = DirectStep(model, hidden, enc["attention_mask"], n_steps)
        tokens = torch.full((hidden.shape[0],), model.config.decoder_start_token_id)
        pairs = []
        for t in range(n_steps):
            la, lb = a(tokens), b(tokens)
            pairs.append((la, lb))
            tokens = la.argmax(-1)
            if t == drop_at:
                rows = torch.tensor(keep if keep is not None else list(range(0, hidden.shape[0], 2)))
                a.select(rows)
                b.select(rows)
                tokens = tokens[rows]
    return pairs


@pytest.mark.parametrize("blocks", [True, False])
def test_direct_step_gives_the_forward_logits_bit_for_bit_on_the_teacher(monkeypatch, blocks):
    """20 and 64 padded FLORES sources, rows leaving the batch; the output projection blocked from 4 rows or
    whole (rule 3: the step takes the faster, timed here)."""
    from forgetbench.models import decoder_step

    monkeypatch.setattr(decoder_step, "_blocks_faster", lambda w, x: blocks)
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.models.decoder_step import direct_supported
    from forgetbench.models.generation import encode_sources

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    assert direct_supported(model)
    srcs, _ = open_benchmark("flores101", "flores101", REPO / "data" / "flores101").pair("sw", "en")
    # 64 → 40 and 8 → 5 rows: the blocked head on both sides of the drop; 6 → 3 rows: blocked, then not
    for n, keep in ((20, None), (64, list(range(40))), (8, [0, 2, 3, 5, 7]), (6, [1, 4, 5])):
        enc = encode_sources(tok, srcs[:n], "sw", "en")
        assert n < 20 or enc["attention_mask"].float().mean() < 0.8  # really padded
        for la, lb in _steps(model, enc, 8, keep=keep):
            assert torch.equal(la, lb)


def test_direct_step_gives_the_forward_logits_bit_for_bit_in_bfloat16_on_the_cpu():
    """``hardware: {dtype: bfloat16}``: the teacher loaded in bf16 takes the direct step, and its logits are the
    forward's, bit for bit, as in fp32."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.models.decoder_step import direct_supported
    from forgetbench.models.generation import encode_sources
    from forgetbench.models.hardware import Hardware, place

    model, tok = load_model_dir(REPO / "artifacts" / "teacher", placement=place(Hardware(dtype="bfloat16"), "t", count=0))
    assert next(model.parameters()).dtype == torch.bfloat16 and direct_supported(model)
    srcs, _ = open_benchmark("flores101", "flores101", REPO / "data" / "flores101").pair("sw", "en")
    for n, keep in ((20, None), (6, [1, 4, 5])):
        for la, lb in _steps(model, encode_sources(tok, srcs[:n], "sw", "en"), 8, keep=keep):
            assert la.dtype == torch.bfloat16 and torch.equal(la, lb)


def test_the_head_plan_is_timed_once_per_shape_and_row_range_and_blocks_give_the_same_values(monkeypatch):
    from forgetbench.models import decoder_step

    monkeypatch.setattr(decoder_step, "_head_plans", {})
    torch.manual_seed(0)
    w = torch.randn(3000, 64)
    for rows in (5, 40, 7, 63, 64):
        x = torch.randn(rows, 64)
        assert isinstance(decoder_step._blocks_faster(w, x), bool)
        assert torch.equal(decoder_step._blocks(x, w), torch.nn.functional.linear(x, w))
    assert sorted(decoder_step._head_plans) == [((3000, 64), torch.float32, k) for k in (3, 6, 7)]  # 4-7, 32-63, 64+


@pytest.mark.parametrize("small100", [False, True])
def test_direct_step_equals_the_forward_on_tiny_models_and_greedy_tokens_match_generate(tiny_dir, small100):
    from forgetbench.models.decoder_step import direct_supported
    from forgetbench.models.generation import encode_sources, generation_kwargs, greedy_generate
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", small100=small100, with_signature=False)
    assert direct_supported(model)
    srcs = [r[2] for r in calib_rows() if r[0] == "en"][:24]
    enc = encode_sources(tok, srcs, "en", "de")
    for la, lb in _steps(model, enc, 10):
        assert torch.equal(la, lb)
    bos = generation_kwargs(tok, "de").get("forced_bos_token_id")
    direct = greedy_generate(model, enc["input_ids"], enc["attention_mask"], bos, 20, direct=True)
    forward = greedy_generate(model, enc["input_ids"], enc["attention_mask"], bos, 20, direct=False)
    with torch.no_grad():
        ref = model.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=20,
                             **({"forced_bos_token_id": bos} if bos is not None else {}))
    assert direct == forward
    assert tok.batch_decode(ref, skip_special_tokens=True) == tok.batch_decode(direct, skip_special_tokens=True)


def test_hooks_the_step_runs_are_kept_and_the_others_send_the_model_to_its_forward(tiny):
    """Hooks on the modules the direct step calls run; a hook or a replaced forward on a block it does not call,
    training mode or SDPA: the model's forward."""
    from forgetbench.models.decoder_step import direct_supported
    from forgetbench.models.generation import encode_sources, greedy_generate

    model, tok = tiny
    assert direct_supported(model)
    calls = []
    h = model.model.decoder.layers[0].fc1.register_forward_hook(lambda *_: calls.append(1))
    assert direct_supported(model)
    enc = encode_sources(tok, [r[2] for r in calib_rows()[:3]], "en", "de")
    out = greedy_generate(model, enc["input_ids"], enc["attention_mask"], tok.get_lang_id("de"), 6)
    assert len(calls) == max(len(o) for o in out)  # once per step: the hook ran
    h.remove()
    for block in (model.model.decoder.layers[1], model.model.decoder.layers[0].encoder_attn, model.model.decoder):
        h = block.register_forward_pre_hook(lambda *_: None)
        assert not direct_supported(model)
        h.remove()
    layer = model.model.decoder.layers[0]
    layer.forward = layer.forward  # a replaced forward that is not an op scope
    assert not direct_supported(model)
    del layer.forward
    assert direct_supported(model)
    model.train()
    assert not direct_supported(model)
    model.eval()
    model.set_attn_implementation("sdpa")
    assert not direct_supported(model)
    model.set_attn_implementation("eager")
    assert direct_supported(model)


def test_fake_quantised_model_takes_the_direct_step_with_every_site_and_the_same_logits(tiny):
    """PTQ with every site kind (linear input/weight, Q·Kᵀ and softmax·V operands, residual operands): the direct
    step passes the operands to the op scopes' sites and gives the forward's logits bit for bit; every site runs
    as often as through the forward."""
    from forgetbench.compress.calibration import seq2seq_calibration
    from forgetbench.compress.ptq import QuantConfig, quantize
    from forgetbench.models.decoder_step import direct_supported
    from forgetbench.models.generation import encode_sources

    model, tok = tiny
    state = quantize(model, QuantConfig(calibrator="max"), seq2seq_calibration(tok, calib_rows()[:16], batch_size=8))
    assert direct_supported(model)
    kinds = {q.kind for q in state.registry.quantizers.values()}
    assert kinds == {"linear_input", "attn_qk", "attn_pv", "residual"}
    enc = encode_sources(tok, [r[2] for r in calib_rows() if r[0] == "en"][:20], "en", "de")
    before = {n: q.calls for n, q in state.registry.quantizers.items()}
    pairs = _steps(model, enc, 6, drop_at=99)
    for la, lb in pairs:
        assert torch.equal(la, lb)
    # each decoder site ran equally often through both steps: twice the calls of one step's worth per step
    ran = {n: q.calls - before[n] for n, q in state.registry.quantizers.items() if q.calls > before[n]}
    assert any(".decoder.layers.0.residual.2.1" in n for n in ran) and any("encoder_attn.pv.0" in n for n in ran)
    assert all(c % 2 == 0 for n, c in ran.items() if ".decoder." in n and "encoder_attn.k_proj" not in n)


def test_encoder_by_length_groups_gives_the_batch_states_of_real_tokens():
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.models.generation import encode_by_length, encode_sources

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    srcs, _ = open_benchmark("flores101", "flores101", REPO / "data" / "flores101").pair("de", "en")
    enc = encode_sources(tok, srcs[:40], "de", "en")
    calls = []
    h = model.get_encoder().register_forward_pre_hook(lambda _m, _a, kw: calls.append(kw["input_ids"].shape), with_kwargs=True)
    with torch.no_grad():
        whole = model.get_encoder()(**enc).last_hidden_state
        calls.clear()
        grouped = encode_by_length(model.get_encoder(), enc["input_ids"], enc["attention_mask"], rows=16)
    real = enc["attention_mask"].bool()
    # exact on the shipped teacher with the CPU kernels of both families here (AVX2 EPYC, AVX-512 Xeon); the tiny test
    # model differs in the 8th digit, which is why no stored value depends on a padding (the layout rule)
    assert torch.equal(whole[real], grouped[real])
    assert [c[0] for c in calls] == [16, 16, 8] and max(c[1] for c in calls) == enc["input_ids"].shape[1]
    assert sum(c[0] * c[1] for c in calls) < 0.75 * enc["input_ids"].numel()  # less padding encoded
    left = {k: v.flip(1) for k, v in enc.items()}  # a left-padded batch: one call over the whole batch
    calls.clear()
    with torch.no_grad():
        encode_by_length(model.get_encoder(), left["input_ids"], left["attention_mask"], rows=16)
    h.remove()
    assert len(calls) == 1


def test_attention_pass_batches_by_joint_length_give_each_sentence_the_same_variance():
    """λ's pass groups its store writes by source + hypothesis length (``pair_batches``); each sentence is
    teacher-forced alone (the layout rule, docs/METHOD.md §2.9), so its variance is the same in any group."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.eval.hallucination import cross_attention_variance
    from forgetbench.eval.translate import length_batches, pair_batches

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    srcs, _ = open_benchmark("flores101", "flores101", REPO / "data" / "flores101").pair("en", "sw")
    srcs = srcs[:24]
    hyps = {i: (" ".join(s.split()[: 3 + i % 5]) * (1 + 4 * (i % 7 == 0))) for i, s in enumerate(srcs)}  # some long
    whole = length_batches(list(range(24)), srcs, 64)[0]
    ref = dict(zip(whole, cross_attention_variance(model, tok, [srcs[i] for i in whole], [hyps[i] for i in whole],
                                                   "en", "sw"), strict=True))
    batches = pair_batches(list(range(24)), srcs, hyps, 8)
    assert sorted(i for b in batches for i in b) == list(range(24)) and [len(b) for b in batches] == [8, 8, 8]
    for b in batches:
        got = cross_attention_variance(model, tok, [srcs[i] for i in b], [hyps[i] for i in b], "en", "sw")
        assert got == [ref[i] for i in b]


def _rows_independent_from(model, limit=64) -> int:
    """The fewest rows from which every row of the model's linear maps (each weight shape) is computed as it is in
    a product of ``limit`` rows: the BLAS kernel decides (rule 4), so the cohort tests size their cohorts from it
    (``_cohort_rows``). ``limit`` when no smaller count qualifies."""
    shapes = {tuple(m.weight.shape): m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)}
    worst = 1
    torch.manual_seed(0)
    with torch.no_grad():
        for w in shapes.values():
            x = torch.randn(limit, w.shape[1])
            full = torch.nn.functional.linear(x, w)
            for n in range(limit - 1, 0, -1):
                if not torch.equal(torch.nn.functional.linear(x[:n], w), full[:n]):
                    worst = max(worst, n + 1)
                    break
    return worst


def _cohort_rows(model, available: int) -> int:
    """Rows each cohort keeps so that rule 4 holds on this host: the probed threshold; skips, with the measured
    threshold, where the test's ``available`` rows (or the probe's 64) cannot make cohorts that large. Rule 4 is a property of the BLAS, not of forgetbench: below the
    threshold a cohort's logits may differ in the last bits and its tokens stay a valid greedy decode."""
    need = _rows_independent_from(model, limit=64)
    if need > min(available, 63):
        pytest.skip(f"this host's BLAS computes a row of a product of fewer than {need} rows differently from the same "
                    f"row of a larger product; cohorts of {need} rows need more than the {available} this test has")
    return need


def _assert_cohorts_get_their_own_logits(model, enc_a, enc_b, join_at, n_steps, keep_a):
    """Every logit of either cohort in the joint step equals that cohort's own step's (``_cohort_logits``)."""
    for lj, la, lb in _cohort_logits(model, enc_a, enc_b, join_at, n_steps, keep_a):
        n = la.shape[0]
        assert torch.equal(lj[:n], la)
        assert lb is None or torch.equal(lj[n:], lb)


def _cohort_logits(model, enc_a, enc_b, join_at, n_steps, keep_a):
    """Logits of one DirectStep into which cohort B joins cohort A at step ``join_at`` (then A keeps its first
    ``keep_a`` rows and B its odd rows), and of a DirectStep per cohort alone fed the same tokens."""
    from forgetbench.models.decoder_step import DirectStep
    from forgetbench.models.generation import encode_by_length

    enc_ = model.get_encoder()
    with torch.no_grad():
        ha = encode_by_length(enc_, enc_a["input_ids"], enc_a["attention_mask"])
        hb = encode_by_length(enc_, enc_b["input_ids"], enc_b["attention_mask"])
        joint = DirectStep(model, ha, enc_a["attention_mask"], n_steps + join_at)
        alone = [DirectStep(model, ha, enc_a["attention_mask"], n_steps + join_at), None]
        start = model.config.decoder_start_token_id
        ta, tb = torch.full((ha.shape[0],), start), None
        out = []
        for t in range(n_steps + join_at):
            if t == join_at:
                joint.add(hb, enc_b["attention_mask"])
                alone[1] = DirectStep(model, hb, enc_b["attention_mask"], n_steps)
                tb = torch.full((hb.shape[0],), start)
            lj = joint(ta if tb is None else torch.cat([ta, tb]))
            la = alone[0](ta)
            lb = None if tb is None else alone[1](tb)
            out.append((lj, la, lb))
            ta = la.argmax(-1)
            tb = None if lb is None else lb.argmax(-1)
            if t == join_at + 2:  # rows of both cohorts leave
                ka, kb = torch.arange(keep_a), torch.arange(1, hb.shape[0], 2)
                joint.select(torch.cat([ka, len(ta) + kb]))
                alone[0].select(ka)
                alone[1].select(kb)
                ta, tb = ta[ka], tb[kb]
    return out


def test_a_cohort_joining_a_decoding_batch_gets_the_logits_of_its_rows_decoded_alone():
    """Rule 4 on the teacher: FLORES rows joining a batch 3 steps into its decoding (their own source padding and
    step count), then rows of both cohorts leaving; every logit of either cohort equals that cohort's own step's.
    Rule 4 holds for cohorts of at least as many rows as this host's BLAS needs for row-independent products
    (probed first; each cohort keeps that many rows, 16 at least)."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.models.generation import encode_sources

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    srcs, _ = open_benchmark("flores101", "flores101", REPO / "data" / "flores101").pair("en", "de")
    keep = max(16, _cohort_rows(model, 63))
    a = encode_sources(tok, srcs[: keep + 8], "en", "de")  # A keeps its first `keep` rows
    b = encode_sources(tok, srcs[keep + 24 : 3 * keep + 24], "en", "fr")  # B keeps its odd rows: `keep` of them
    assert a["input_ids"].shape[1] != b["input_ids"].shape[1]  # two source paddings in one batch
    _assert_cohorts_get_their_own_logits(model, a, b, 3, 6, keep_a=keep)


def test_a_cohort_joining_a_fake_quantised_batch_runs_every_site_on_its_own_rows(tiny):
    from forgetbench.compress.calibration import seq2seq_calibration
    from forgetbench.compress.ptq import QuantConfig, quantize
    from forgetbench.models.generation import encode_sources

    model, tok = tiny
    quantize(model, QuantConfig(calibrator="max"), seq2seq_calibration(tok, calib_rows()[:16], batch_size=8))
    en = [r[2] for r in calib_rows() if r[0] == "en"]
    keep = max(8, _cohort_rows(model, len(en) // 3))  # each cohort keeps `keep` rows (probed)
    a, b = encode_sources(tok, en[: keep + 4], "en", "de"), encode_sources(tok, en[keep + 4 : 3 * keep + 4], "en", "fr")
    _assert_cohorts_get_their_own_logits(model, a, b, 2, 5, keep_a=keep)


def test_a_stream_keeps_its_batch_full_and_gives_each_nominal_batchs_tokens():
    """``greedy_stream`` over 3 nominal batches of 32 FLORES rows (two pairs, sorted by length as a sweep sorts
    them): the tokens of ``greedy_generate`` on each nominal batch for every row, rows admitted before earlier
    ones ended (cohorts); the encoder states it keeps are those of the real tokens."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.models import decoder_step
    from forgetbench.models.generation import encode_rows, greedy_generate, greedy_stream

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    bench = open_benchmark("flores101", "flores101", REPO / "data" / "flores101")
    rows = [(x, s, t) for s, t in (("en", "sw"), ("de", "en")) for x in bench.pair(s, t)[0][:48]]
    rows.sort(key=lambda r: len(r[0]))
    enc = encode_rows(tok, rows)
    codes = torch.tensor([tok.get_lang_id(t) for _, _, t in rows])
    steps, adds = [], []  # (cohorts, rows) per step; rows of each added cohort
    call, add = decoder_step.DirectStep.__call__, decoder_step.DirectStep.add
    decoder_step.DirectStep.__call__ = lambda self, x: steps.append((len(self.cohorts), len(x))) or call(self, x)
    decoder_step.DirectStep.add = lambda self, h, m: adds.append(h.shape[0]) or add(self, h, m)
    states = {}
    try:
        got = dict(greedy_stream(model, enc["input_ids"], enc["attention_mask"], codes, 60, width=32, states=states))
        stream, steps[:] = list(steps), []
        refs = []
        for b in range(0, 96, 32):
            sub = encode_rows(tok, rows[b : b + 32])
            refs.append((b, sub, greedy_generate(model, sub["input_ids"], sub["attention_mask"], codes[b : b + 32], 60)))
    finally:
        decoder_step.DirectStep.__call__, decoder_step.DirectStep.add = call, add
    assert sorted(got) == list(range(96)) and len(adds) >= 3 and max(c for c, _ in stream) >= 2
    for b, sub, ref in refs:
        assert [got[b + k] for k in range(32)] == ref
        real = sub["attention_mask"].bool()
        with torch.no_grad():
            hidden = model.get_encoder()(**sub).last_hidden_state
        for k in range(32):
            assert torch.equal(states[b + k], hidden[k][real[k]])
    # while rows wait, the batch stays at least 3/4 full (ended rows not yet gone aside); batch by batch it does not
    last_add = max(k for k, (c, r) in enumerate(stream) if k and r > stream[k - 1][1])
    assert min(r for _, r in stream[:last_add]) >= 24 and min(r for _, r in steps[:120]) < 8


def test_a_stream_with_a_short_limit_lets_expired_cohorts_leave_and_the_forward_step_goes_batch_by_batch(tiny_dir):
    """A tiny random model rarely ends before max_new_tokens: cohorts expire while later ones decode. Width 4,
    10 rows: the stream's tokens are each nominal batch's; ``direct=False`` (HFStep) decodes batch after batch."""
    from forgetbench.models.generation import encode_rows, greedy_generate, greedy_stream
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", small100=False, with_signature=False)
    rows = [(r[2], "en", "de") for r in calib_rows() if r[0] == "en"][:10]
    enc = encode_rows(tok, rows)
    bos = tok.get_lang_id("de")
    for direct in (True, False):
        got = dict(greedy_stream(model, enc["input_ids"], enc["attention_mask"], bos, 5, width=4, direct=direct))
        for b in range(0, 10, 4):
            sub = encode_rows(tok, rows[b : b + 4])
            ref = greedy_generate(model, sub["input_ids"], sub["attention_mask"], bos, 5, direct=direct)
            assert [got[b + k] for k in range(len(ref))] == ref


def test_first_argmax_is_torchs_argmax_with_ties_nan_and_infinities():
    from forgetbench.models.generation import first_argmax

    torch.manual_seed(0)
    x = torch.randn(64, 8111)
    x[1, 5] = x[1, 7] = 100.0  # a tie: the first
    x[2, 9], x[2, 3] = float("nan"), 50.0  # NaN counts as the maximum
    x[3] = 1.0  # all equal
    x[4] = float("-inf")
    x[5, 8000] = float("inf")
    for t in (x, x.double(), x[:, ::2], x.half()):
        got = first_argmax(t)
        assert got.dtype == torch.int64 and torch.equal(got, t.argmax(-1))


def test_rows_ended_early_leave_before_their_cohort_outlives_the_step_limit(tiny_dir, monkeypatch):
    """Rows that end (EOS) stay in the batch until enough rows end to compact it, and their cohort keeps stepping.
    Width 16, 31 rows: 15 of the first cohort end at their second token (they leave: compaction), the 16th at its
    third, beside a second cohort that runs to the limit. The lingering row must leave before its cohort's step
    count passes max_new_tokens: the direct step's position table has max_new_tokens rows."""
    from forgetbench.models import generation
    from forgetbench.models.generation import encode_rows, greedy_stream
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", small100=False, with_signature=False)
    eos = model.generation_config.eos_token_id
    real, calls = generation.first_argmax, []

    def first_argmax(logits):
        t = real(logits)
        t[t == eos] = eos + 1  # nobody ends unless told here
        calls.append(len(t))
        if len(calls) == 1:
            t[:15] = eos  # the first cohort but its last row
        elif len(calls) == 2:
            t[0] = eos  # that last row, now first in the batch
        return t

    monkeypatch.setattr(generation, "first_argmax", first_argmax)
    rows = [(r[2], "en", "de") for r in calib_rows() if r[0] == "en"][:31]
    enc = encode_rows(tok, rows)
    got = dict(greedy_stream(model, enc["input_ids"], enc["attention_mask"], tok.get_lang_id("de"), 6, width=16,
                             direct=True))
    assert sorted(got) == list(range(31))
    assert [len(got[r]) for r in range(16)] == [2] * 15 + [3] and all(len(got[r]) == 6 for r in range(16, 31))
