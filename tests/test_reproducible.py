"""Same inputs, same bytes: compress artefacts and model hashes, the second aligner, a whole sweep's numbers."""

import json

from forgetbench.cli import main
from forgetbench.eval.alignment import fastalign_align
from forgetbench.models.load import weights_sha256


def test_two_identical_compress_runs_write_the_same_bytes(tiny_dir, tmp_path):
    for recipe in ("prune-30", "ptq-int8"):
        a, b = tmp_path / f"{recipe}-a", tmp_path / f"{recipe}-b"
        for out in (a, b):
            assert main(["compress", str(tiny_dir), "--recipe", recipe, "--out", str(out), "--quiet"]) == 0
        files = sorted(p.name for p in a.iterdir())
        assert files == sorted(p.name for p in b.iterdir())
        for f in files:
            if f != "compression.json":  # it records seconds and the load average
                assert (a / f).read_bytes() == (b / f).read_bytes(), (recipe, f)
        assert weights_sha256(a) == weights_sha256(b)
        ra, rb = (json.loads((d / "compression.json").read_text()) for d in (a, b))
        for r in (ra, rb):
            r.pop("seconds"), r.pop("environment"), r.pop("model_dir", None)
            for st in r["steps"]:
                st.pop("seconds")
        assert ra == rb


def test_the_second_aligner_is_deterministic_and_aligns_a_toy_pair():
    ctx = [("the doctor said", "der arzt sagte"), ("the nurse said", "die krankenschwester sagte"),
           ("a doctor came", "ein arzt kam"), ("the house", "das haus")] * 5
    srcs, hyps = ["the doctor came", "the nurse came home"], ["der arzt kam", "die krankenschwester kam nach hause"]
    first = fastalign_align(srcs, hyps, [1, 1], ctx)
    assert first == [1, 1]  # doctor -> arzt, nurse -> krankenschwester
    assert all(fastalign_align(srcs, hyps, [1, 1], ctx) == first for _ in range(3))
    assert fastalign_align(["x"], [""], [0], ctx) == [None]


def test_two_identical_sweeps_give_the_same_numbers(tiny_dir, tmp_path):
    from .test_eval import FLORES, _sweep_config

    extra = (f"bias: {{mt_gender: {{path: {FLORES.parent / 'mt_gender'}, languages: [de], sentences: 4, "
             f"aligner_context: {FLORES}}}}}\n")
    cfg = _sweep_config(tmp_path, tiny_dir, name="rep", sentences=3, pairs="[en-de, de-en]", extra=extra)
    runs = [tmp_path / "a", tmp_path / "b"]
    for r in runs:
        assert main(["sweep", str(cfg), "--out", str(r), "--quiet"]) == 0
    a, b = (json.loads((r / "report" / "summary.json").read_text()) for r in runs)
    for s in (a, b):
        s.pop("run")  # wall times, load average
    assert json.dumps(a) == json.dumps(b)  # the same numbers in the same order (no set's iteration order in it)
    assert a["bias"]["aligner_comparison"]["items"] > 0


def test_the_posterior_fallback_links_a_word_no_target_word_chose():
    """``best_target``: where no target word's Viterbi choice is the source word, the target word with the highest
    posterior for it is linked; a found link is the same with or without the fallback."""
    srcs, hyps = ["the cat sat on the mat"], ["le chat"]
    viterbi = [fastalign_align(srcs, hyps, [i])[0] for i in range(6)]
    fallback = [fastalign_align(srcs, hyps, [i], best_target=True)[0] for i in range(6)]
    assert None in viterbi and None not in fallback and all(0 <= j < 2 for j in fallback)
    assert all(v == f for v, f in zip(viterbi, fallback, strict=True) if v is not None)
