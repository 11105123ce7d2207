"""A sweep's reported scores recomputed from what it stored, by sacrebleu's command line alone: corpus chrF and
spBLEU per pair and variant (summary.json) and sentence chrF (the run store), the SPM file being the one whose hash
the spBLEU signature names. Not circular: no forgetbench metric code runs in the recomputation."""

import hashlib
import json
import os
import shutil

from forgetbench.cli import main
from forgetbench.eval.benchmarks import open_benchmark
from forgetbench.eval.store import Store

from .conftest import REPO, python

TEACHER = REPO / "artifacts" / "teacher"
FLORES = REPO / "data" / "flores101"


def _sacrebleu(env, ref, hyp, *args) -> list[float]:
    r = python("-m", "sacrebleu", ref, "-i", hyp, "-b", "-w", "8", *args, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return [float(x) for x in r.stdout.split()]


def test_reported_scores_are_sacrebleus_on_the_stored_hypotheses(tmp_path):
    cfg = tmp_path / "m.yaml"
    cfg.write_text(f"""name: m
model: {TEACHER}
variants: {{base: null, prune-30: prune-30}}
benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]
languages: [de, fr]
pairs: [en-de, fr-en]
sentences: 12
generation: {{max_new_tokens: 48, batch_size: 12}}
analysis: {{bleu_filter: 0}}
""")
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    sig = S["signatures"]
    # the SPM the signature names is the model's; sacrebleu's flores101 tokenizer reads it from its own folder
    spm = TEACHER / "sentencepiece.bpe.model"
    sha = hashlib.sha256(spm.read_bytes()).hexdigest()
    assert sig["spm_sha256"] == sha and f"spm:{sha[:16]}" in sig["spBLEU"]
    home = tmp_path / "sacrebleu"
    (home / "models").mkdir(parents=True)
    shutil.copy(spm, home / "models" / "sacrebleu_tokenizer_spm.model")  # present: nothing is downloaded
    env = dict(os.environ, SACREBLEU=str(home))
    assert sig["spBLEU"].startswith("spBLEU-local|spm:") and "beta:3" in sig["chrF"] and "nw:0" in sig["chrF"] and "tok:none" in sig["spBLEU"]
    chrf = ["-m", "chrf", "--chrf-beta", "3", "--chrf-word-order", "0"]
    store = Store(run / "store.sqlite")
    bench = open_benchmark("flores101", "flores101", FLORES)
    checked = 0
    for p in S["pairs"]:
        refs = bench.pair(p["src"], p["tgt"])[1]
        for v in ("base", "prune-30"):
            rows = sorted(store.translations(v, "flores101", p["src"], p["tgt"]), key=lambda r: r[4])
            assert [r[4] for r in rows] == list(range(12))
            hyp, ref = tmp_path / f"{v}.{p['src']}{p['tgt']}.hyp", tmp_path / f"{p['src']}{p['tgt']}.ref"
            hyp.write_text("".join(r[5] + "\n" for r in rows), encoding="utf-8")
            ref.write_text("".join(refs[r[4]] + "\n" for r in rows), encoding="utf-8")
            (corpus_chrf,) = _sacrebleu(env, ref, hyp, *chrf)
            (corpus_bleu,) = _sacrebleu(env, ref, hyp, "-m", "bleu", "-tok", "flores101")
            sentence = _sacrebleu(env, ref, hyp, *chrf, "--sentence-level")
            assert abs(p["scores"][v]["chrF"] - corpus_chrf) < 1e-6, (p["src"], p["tgt"], v)
            assert abs(p["scores"][v]["spBLEU"] - corpus_bleu) < 1e-6, (p["src"], p["tgt"], v)
            assert len(sentence) == 12 and all(abs(r[6] - x) < 1e-6 for r, x in zip(rows, sentence, strict=True))
            checked += corpus_bleu > 1  # a real score, not 0 against 0
    assert checked >= 2
