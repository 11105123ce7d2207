"""CTranslate2 backend: conversion by id (language codes at their ids), parity with the torch loop on tiny random
M2M-100 and SMaLL-100-format models, the sweep's backend rules and parity section, and its one-line errors."""

import json
import subprocess
import sys
import textwrap

import ctranslate2  # noqa: F401  (a declared dependency: a broken install fails here, not skips)
import pytest
import torch

from tests.conftest import REPO, calib_rows

PAIRS = [("en", "de"), ("de", "en"), ("en", "fr"), ("fr", "de"), ("en", "sw"), ("hi", "en")]
# The tiny random model's logits are nearly flat (std ~0.15; top-2 gaps down to 1e-4), so two correct fp32
# implementations may pick different tokens where two logits tie to the last bits. Parity is asserted on the rows
# whose torch decode keeps a top-2 gap of at least MARGIN at every step it takes: three orders of magnitude above
# fp32 kernel differences, so no kernel can flip them; those rows must match exactly, and they must be most rows.
MARGIN = 1e-3


def _sources(n=12):
    rows = [r for r in calib_rows() if r[0] == "en"]
    return [r[2] for r in rows[:n]]


def _clear_rows(model, tok, srcs, s, t, max_new_tokens=24) -> set[int]:
    """Rows of ``srcs`` (pair s-t) whose greedy decode has a top-2 logit gap >= MARGIN at every free step."""
    from forgetbench.models.generation import encode_sources, generation_kwargs

    kw = generation_kwargs(tok, t)
    with torch.no_grad():
        out = model.generate(**encode_sources(tok, srcs, s, t), num_beams=1, do_sample=False,
                             max_new_tokens=max_new_tokens, output_logits=True, return_dict_in_generate=True, **kw)
    top = torch.stack(out.logits, 1).topk(2, -1).values
    gap, gen = top[..., 0] - top[..., 1], out.sequences[:, 1:]  # gap[r, j]: the step that chose gen[r, j]
    first = 1 if kw else 0  # a forced language code is not chosen by the logits
    clear = set()
    for r in range(len(srcs)):
        ends = (gen[r] == model.config.eos_token_id).nonzero()
        n = int(ends[0]) + 1 if len(ends) else gen.shape[1]
        if n <= first or gap[r, first:n].min() >= MARGIN:
            clear.add(r)
    return clear


def _parity(model, tok, folder, compute_type="float32"):
    """(rows equal, clear-margin rows, all rows) over PAIRS; every clear-margin row must be among the equal."""
    from forgetbench.eval.backends import TorchTranslator
    from forgetbench.models.ct2 import Ct2Translator

    a, b = TorchTranslator(model, tok), Ct2Translator(folder, tok, compute_type=compute_type)
    same = clear = total = 0
    for s, t in PAIRS:
        srcs = _sources()
        x, y = a.translate(srcs, s, t, 1, 24), b.translate(srcs, s, t, 1, 24)
        rows = _clear_rows(model, tok, srcs, s, t)
        assert all(x[r] == y[r] for r in rows), [(x[r], y[r]) for r in rows if x[r] != y[r]]
        same += sum(p == q for p, q in zip(x, y, strict=True))
        clear += len(rows)
        total += len(x)
    return same, clear, total


@pytest.mark.parametrize("small100", [False, True])
def test_conversion_keeps_codes_at_their_ids_and_gives_the_torch_loop_tokens(tiny_dir, tmp_path, small100):
    from forgetbench.models import ct2 as conv
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", small100=small100, with_signature=False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = conv.convert(model, tok, tmp_path / "ct2", "float32", "sha")
    vocab = json.loads((out / "shared_vocabulary.json").read_text())
    assert len(vocab) == model.config.vocab_size
    codes = conv.language_codes(tok)
    assert len(codes) == 100
    assert all(vocab[i] == c for c, i in codes.items())  # every __xx__ at its id
    assert vocab[tok.get_lang_id("de")] == "__de__" and vocab[3] == "<unk>"
    same, clear, total = _parity(model, tok, out)
    assert same >= clear >= 0.5 * total, (same, clear, total)
    # int8 conversion must not touch the source model (CTranslate2 quantises the tensors it is given in place)
    conv.convert(model, tok, tmp_path / "ct2-int8", "int8", "sha")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert json.loads((tmp_path / "ct2-int8" / conv.MARKER).read_text())["small100"] is small100


def test_vocabulary_refuses_misplaced_codes_and_cached_conversion_reuses(tiny_dir, tmp_path):
    from forgetbench.errors import ForgetbenchError
    from forgetbench.models import ct2 as conv
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)

    class Shifted:  # a tokenizer whose language codes are not where its ids say (the madeupword trap)
        lang_code_to_id = {"__de__": 5}

        def __len__(self):
            return len(tok)

        def convert_ids_to_tokens(self, ids):
            return tok.convert_ids_to_tokens(ids)

    with pytest.raises(ForgetbenchError, match="__de__ has id 5"):
        conv.vocabulary(Shifted(), model.config.vocab_size)
    calls = []

    def loader():
        calls.append(1)
        return model, tok

    a = conv.cached_conversion(loader, tmp_path / "c", "int8", "h1")
    conv.cached_conversion(loader, tmp_path / "c", "int8", "h1")
    assert len(calls) == 1
    conv.cached_conversion(loader, tmp_path / "c", "int8", "h2")  # other weights: converted again
    assert len(calls) == 2 and a == tmp_path / "c"
    assert conv.disk_bytes(a) > 0


def _sweep_config(tmp_path, tiny_dir, backend="ctranslate2", extra=""):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        name: t
        model: {tiny_dir}
        variants: {{base: null, p30: prune-30, ptq: {{model: {tiny_dir}, recipe: {tmp_path / "ptq.yaml"}}}}}
        benchmarks: [{{name: flores101, kind: flores101, path: {REPO / "data" / "flores101"}}}]
        pairs: [en-de, de-en]
        sentences: 6
        generation: {{num_beams: 1, max_new_tokens: 12, batch_size: 4}}
        analysis: {{bleu_filter: 0, resamples: 50}}
        backend: {backend}
        """) + extra)
    (tmp_path / "ptq.yaml").write_text(textwrap.dedent(f"""\
        name: ptq
        steps:
          - quantize:
              calibrator: max
              calibration: {{data: {REPO / "data" / "calibration" / "ntrex128-calib.tsv"}, max_sentences: 8}}
        """))
    return cfg


def test_sweep_with_ctranslate2_compares_each_variant_with_its_backend_base(tiny_dir, tmp_path):
    from forgetbench.errors import ForgetbenchError
    from forgetbench.report.build import write_report
    from forgetbench.sweep import load_sweep, run_sweep

    cfg = load_sweep(_sweep_config(tmp_path, tiny_dir, extra="speed: {sentences: 2}\n"))
    assert cfg.series_names == ["base", "base@torch", "p30", "ptq"]
    summary = run_sweep(cfg, tmp_path / "run", progress=False)
    S = summary.to_dict()  # as summary.json holds it
    assert S["backends"] == {"base": "ctranslate2 int8 (cpu)", "base@torch": "torch",
                             "p30": "ctranslate2 int8 (cpu)", "ptq": "torch"}
    assert S["bases"] == {"p30": "base", "ptq": "base@torch"}  # fake-quantised: torch, against the torch base
    par = S["backend_parity"]["base@torch"]
    assert par["of"] == "base" and len(par["pairs"]) == 2 and par["sentences"] == 12
    for r in par["pairs"]:
        lo, hi = r["chrF"]["delta_ci"]
        assert lo <= r["chrF"]["delta"] <= hi
    # each variant's relative difference is against its own backend's base
    for p in S["pairs"]:
        for v, b in S["bases"].items():
            sb, sv = p["scores"][b]["chrF"], p["scores"][v]["chrF"]
            assert p["intervals"][v]["chrF"]["delta"] == pytest.approx(sv - sb)
    assert S["speed"]["p30"]["form"] == "ctranslate2 int8" and S["speed"]["base"]["batched"]["sentences"] == 4
    assert S["speed"]["base"]["disk_bytes"] > 0
    # the fake-quantised variant: its int8 artefact's size, no speed (no runtime here executes it)
    ptq = S["speed"]["ptq"]
    assert ptq["form"].startswith("int8 artefact") and "sentences_per_s" not in ptq
    assert ptq["disk_bytes"] == next(r for r in S["variant_table"] if r["variant"] == "ptq")["size"]["int8_bytes"]
    md = (write_report(summary, tmp_path / "report").parent / "report.md").read_text()
    assert "| – | – | – | – | – | not timed: no runtime here executes its form |" in md
    assert "## Backend parity: base@torch vs base" in md and "| ptq | torch | base@torch |" in md
    assert "ctranslate2 int8" in md
    torch_cfg = load_sweep(_sweep_config(tmp_path, tiny_dir, backend="torch"))
    with pytest.raises(ForgetbenchError, match="base was translated with backend ctranslate2 int8"):
        run_sweep(torch_cfg, tmp_path / "run", progress=False)  # resuming with another backend would mix them


def _cli(args, env_code="pass"):
    code = f"import sys; {env_code}; from forgetbench.cli import main; sys.exit(main({args!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)


def test_missing_ctranslate2_or_unsupported_model_is_one_line_and_exit_2(tiny_dir, tmp_path):
    cfg = _sweep_config(tmp_path, tiny_dir)
    r = _cli(["sweep", str(cfg), "--out", str(tmp_path / "run")], "sys.modules['ctranslate2'] = None")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "backend: ctranslate2 needs the ctranslate2 package" in r.stderr and "set backend: torch" in r.stderr
    assert not (tmp_path / "run").exists()
    other = tmp_path / "marian"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "marian"}))
    (other / "sentencepiece.bpe.model").write_bytes((tiny_dir / "sentencepiece.bpe.model").read_bytes())
    cfg2 = tmp_path / "s2.yaml"
    cfg2.write_text(cfg.read_text().replace(f"model: {tiny_dir}\n", f"model: {other}\n", 1)
                    .replace("p30: prune-30, ", ""))
    r = _cli(["sweep", str(cfg2), "--out", str(tmp_path / "run2")])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "not 'marian'" in r.stderr and "set backend: torch" in r.stderr
    cfg3 = tmp_path / "s3.yaml"
    cfg3.write_text(cfg.read_text().replace("backend: ctranslate2", "backend: {name: ctranslate2, compute_type: int4}"))
    r = _cli(["sweep", str(cfg3), "--out", str(tmp_path / "run3")])
    assert r.returncode == 2 and "unknown compute type 'int4'" in r.stderr


def test_rows_of_several_pairs_in_one_ctranslate2_batch(tiny_dir, tmp_path):
    """The CTranslate2 backend takes a batch filled across pairs (a target prefix per row) and gives each pair's
    own translation, and the same tokens as the torch loop on those rows."""
    from forgetbench.eval.backends import TorchTranslator
    from forgetbench.models import ct2 as conv
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)
    tr = conv.Ct2Translator(conv.convert(model, tok, tmp_path / "ct2", "float32", "sha"), tok, compute_type="float32")
    # its cached token maps are the tokenizer's, both ways (a token CTranslate2 pads the vocabulary with -> <unk>)
    assert tr.tokens == tok.convert_ids_to_tokens(list(range(len(tok))))
    assert [tr.ids.get(t, tok.unk_token_id) for t in [*tr.tokens, "madeupword3"]] == tok.convert_tokens_to_ids(
        [*tr.tokens, "madeupword3"])
    srcs = _sources(8)
    rows = [(x, s, t) for x in srcs for s, t in PAIRS]
    alone = {p: tr.translate(srcs, *p, 1, 24) for p in PAIRS}
    mixed = tr.translate_rows(rows, 1, 24)
    assert mixed == [alone[p][k] for k in range(len(srcs)) for p in PAIRS]
    torch_rows = TorchTranslator(model, tok).translate_rows(rows, 1, 24)
    clear = {k * len(PAIRS) + p for p, (s, t) in enumerate(PAIRS) for k in _clear_rows(model, tok, srcs, s, t)}
    assert len(clear) >= 0.5 * len(rows) and all(mixed[i] == torch_rows[i] for i in clear)


def test_restricted_output_vocabulary_decodes_only_the_listed_tokens(tiny_dir, tmp_path):
    """``ct2.restricted``: the folder's vmap.txt limits every step to the listed tokens (plus the runtime's <unk>,
    <s>, </s> and the target prefix); the unrestricted folder beside it is untouched; a token not in the vocabulary
    or a missing vmap.txt is one clear error."""
    from forgetbench.errors import ForgetbenchError
    from forgetbench.models import ct2 as conv
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)
    full = conv.convert(model, tok, tmp_path / "ct2", "float32", "sha")
    srcs = _sources(6)
    free = conv.Ct2Translator(full, tok, compute_type="float32")
    source = free.source_tokens(srcs, "en", "de")
    used = [t for r in free.translator.translate_batch(source, [["__de__"]] * len(srcs), beam_size=1,
                                                       max_decoding_length=16) for t in r.hypotheses[0]]
    common = [t for t, _ in __import__("collections").Counter(used).most_common()]
    allowed = [t for t in tok.convert_ids_to_tokens(list(range(10, len(tok)))) if t not in common[:3]][:40]
    folder = conv.restricted(full, tmp_path / "ct2-40", allowed)
    assert not (full / "vmap.txt").exists() and (folder / "model.bin").resolve() == (full / "model.bin").resolve()
    tr = conv.Ct2Translator(folder, tok, compute_type="float32", use_vmap=True)
    res = tr.translator.translate_batch(source, [["__de__"]] * len(srcs), beam_size=1, max_decoding_length=16,
                                        use_vmap=True)
    got = {t for r in res for t in r.hypotheses[0]}
    assert got and got <= set(allowed) | {"__de__", "</s>", "<unk>", "<s>"}
    assert not got & set(common[:3])  # the tokens the free model chose most are gone
    assert tr.translate(srcs, "en", "de", 1, 16) == [x.strip() for x in tok.batch_decode(
        [tok.convert_tokens_to_ids(r.hypotheses[0]) for r in res], skip_special_tokens=True)]
    with pytest.raises(ForgetbenchError, match="1 of 2 tokens are not in"):
        conv.restricted(full, tmp_path / "bad", [allowed[0], "no-such-token"])
    with pytest.raises(ForgetbenchError, match="has no vmap.txt"):
        conv.Ct2Translator(full, tok, compute_type="float32", use_vmap=True)
    assert not (tmp_path / "bad").exists()
