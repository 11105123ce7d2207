"""MT-GenEval as a sweep's bias suite (``eval/mt_geneval_suite``): the items and the judged part of a contextual
translation by hand, the statistics and their paired intervals on known decisions, the config's refusals and
skips, a sweep on the tiny model with its report, and ``gender-score --mt-geneval``."""

import json

import pytest

from forgetbench.cli import main
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import mt_geneval as mg
from forgetbench.eval import mt_geneval_suite as suite

from .conftest import REPO, python
from .test_eval import _sweep_config
from .test_mt_geneval import _layout

DATA = REPO / "data" / "mt_geneval"


def _ctx(source: str) -> mg.Item:
    return mg.Item("contextual", None, 0, source, "r", "w")


def test_the_judged_part_of_a_contextual_translation():
    """Rule 3: the last s segments of a translation of at least e + s segments; fewer: unsplit (None)."""
    it = _ctx("She won. <sep> The author wrote.")
    assert suite.model_source(it) == "She won. The author wrote."
    assert suite.judged_part(it, "Sie gewann. Die Autorin schrieb.") == "Die Autorin schrieb."
    assert suite.judged_part(it, "Sie gewann, die Autorin schrieb.") is None  # merged: unsplit
    two = _ctx("Dr. Smith won. She was 40. <sep> The author wrote.")  # e = 3 (an abbreviation splits both sides)
    assert suite.judged_part(two, "Dr. Smith gewann. Sie war 40. Die Autorin schrieb.") == "Die Autorin schrieb."
    assert suite.judged_part(two, "Smith gewann. Die Autorin schrieb.") is None
    hi = _ctx("She won. <sep> The author wrote.")
    assert suite.judged_part(hi, "वह जीती। लेखिका ने लिखा।") == "लेखिका ने लिखा।"
    cf = mg.Item("counterfactual", "feminine", 0, "She won.", "r", "w")
    assert suite.judged_part(cf, "Sie gewann. Ja.") == "Sie gewann. Ja."


def test_a_smaller_sample_is_the_start_of_a_larger_one():
    big = mg.items(DATA, "de", limit=10)
    assert mg.items(DATA, "de", limit=4) == big[:12]
    assert [(i.set, i.gender, i.index) for i in big[:3]] == [("counterfactual", "feminine", 0),
                                                            ("counterfactual", "masculine", 0), ("contextual", None, 0)]
    a = suite.jobs(DATA, ["de"], 4)["de"][1].benchmark
    b = suite.jobs(DATA, ["de"], 10)["de"][1].benchmark
    assert a.digest == b.digest and a.sources == b.sources[:12]


class _Store:
    """The run store's ``translations`` over given hypotheses: series -> idx -> text."""

    def __init__(self, hyps):
        self.hyps = hyps

    def translations(self, v, name, below=None):
        return [{"idx": i, "hyp": h} for i, h in sorted(self.hyps.get(v, {}).items()) if below is None or i < below]


def test_statistics_and_paired_intervals_on_known_decisions(tmp_path):
    """base: every reference right (100 % everywhere); fem-wrong: each feminine source rendered by the masculine
    reference (feminine 0 %, masculine 100 %, gap 100) — the changes are exact, so their intervals are points."""
    root = _layout(tmp_path, fem=("a F sie", "b F sie", "c F sie"), masc=("a M er", "b M er", "c M er"))
    jobs = suite.jobs(root, ["de"], None)
    its = jobs["de"][0]
    base = {k: (f"Sie gewann. {it.right}" if it.set == "contextual" else it.right) for k, it in enumerate(its)}
    femw = {k: (it.wrong if it.gender == "feminine" else base[k]) for k, it in enumerate(its)}
    femw[next(k for k, it in enumerate(its) if it.set == "contextual")] = "merged"  # unsplit: left out
    res = suite.results(_Store({"base": base, "fem-wrong": femw}), jobs, "base", ["base", "fem-wrong"], resamples=200)
    b, v = res["languages"]["de"]["base"], res["languages"]["de"]["fem-wrong"]
    assert (b["feminine"], b["masculine"], b["gap"], b["combined"], b["contextual"]) == (100, 100, 0, 100, 100)
    assert (v["feminine"], v["masculine"], v["gap"], v["combined"]) == (0, 100, 100, 0)
    assert b["committed"] == v["committed"] == 100  # every translation holds a word of one gender's reference
    assert v["contextual"] == 100 and v["unsplit"] == 1 and b["unsplit"] == 0 and v["contextual_items"] == 2
    assert v["gap_change_ci"] == [100, 100] and v["feminine_change_ci"] == [-100, -100]
    assert v["masculine_change_ci"] == [0, 0] and "gap_change_ci" not in b
    assert res["average"]["fem-wrong"]["languages"] == ["de"] and res["average"]["fem-wrong"]["gap"] == 100
    assert res["average"]["fem-wrong"]["gap_change_ci"] == [100, 100]


def test_the_config_refuses_and_skips_in_one_line(tmp_path):
    spec = {"path": str(DATA), "languages": ["de", "pt"], "sentences": 2}
    jobs, skipped, settings = suite.configure(spec, DATA, {"de", "fr"}, "m/training.json", "c.yaml: bias.mt_geneval")
    assert list(jobs) == ["de"] and skipped == {"pt": "not a language the model was trained on (m/training.json)"}
    assert settings == {"path": str(DATA), "sentences": 2, "sets": ["counterfactual", "contextual"]}
    assert list(suite.configure(spec, DATA, None, "-", "-")[0]) == ["de", "pt"]  # no record: every language
    with pytest.raises(ForgetbenchError, match=r"c.yaml: bias.mt_geneval.languages: MT-GenEval has no \['zh'\]"):
        suite.configure(spec | {"languages": ["zh"]}, DATA, None, "-", "c.yaml: bias.mt_geneval")
    with pytest.raises(ForgetbenchError, match=r"bias.mt_geneval.sets: \['both'\] unknown"):
        suite.configure(spec | {"sets": ["both"]}, DATA, None, "-", "c.yaml: bias.mt_geneval")
    with pytest.raises(ForgetbenchError, match=r"geneval-sentences-feminine-test.en_de.en not found"):
        suite.configure(spec, tmp_path, None, "-", "-")


def test_a_sweep_reports_mt_geneval_with_intervals_and_a_finding(tiny_dir, tmp_path, capsys):
    extra = f"bias:\n  mt_geneval: {{path: {DATA}, languages: [de, fr], sentences: 3}}\n"
    cfg = _sweep_config(tmp_path, tiny_dir, name="g", sentences=2, pairs="[en-de]", extra=extra)
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    m = S["bias"]["mt_geneval"]
    assert set(m["languages"]) == {"de", "fr"} and set(m["average"]) == {"base", "prune-30", "ptq-int8"}
    d = m["languages"]["de"]["prune-30"]
    assert d["pairs"] == 3 and d["contextual_items"] == 3 and 0 <= d["feminine"] <= 100
    assert d["feminine_ci"][0] <= d["feminine"] <= d["feminine_ci"][1] and "gap_change_ci" in d
    assert m["settings"]["sentences"] == 3 and m["skipped"] == {}
    claims = [f for f in S["findings"] if "MT-GenEval" in f["claim"]]
    assert {f["variant"] for f in claims} == {"prune-30", "ptq-int8"}
    md = (run / "report" / "report.md").read_text()
    assert "Gender accuracy on human references (MT-GenEval)" in md and "gap change [95 % CI]" in md
    assert (run / "report" / "mt_geneval_languages.csv").is_file()
    # the translations in the paper's layout (for its accuracy_metric.py): the same decisions as the summary's
    r = python(REPO / "scripts" / "mt_geneval_export.py", run, "prune-30", tmp_path / "x", cwd=REPO)
    assert r.returncode == 0, r.stderr
    fem = mg.counterfactual_files(tmp_path / "x", "de")["feminine.de"]
    refs = mg.counterfactual_files(DATA, "de")
    decided = [mg.correct(h, a, b) for h, a, b in zip(mg.read_lines(fem), mg.read_lines(refs["feminine.de"]),
                                                     mg.read_lines(refs["masculine.de"]), strict=False)]
    assert len(decided) == 3 and 100 * sum(decided) / 3 == pytest.approx(d["feminine"])
    # a line-count mismatch between the feminine and masculine files: one line naming the file, exit 2
    bad = tmp_path / "bad"
    _layout(bad)
    (bad / "sentences" / "test" / "geneval-sentences-masculine-test.en_de.de").write_text("x\n")
    cfg.write_text(cfg.read_text().replace(str(DATA), str(bad)))
    capsys.readouterr()
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "r2"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "masculine-test.en_de.de has 1 lines" in err


def test_gender_score_reads_translations_made_elsewhere(tmp_path, capsys):
    """The references themselves: 100 %; each gender rendered by the other's reference: near 0 %."""
    f = {g: DATA / "sentences" / "test" / f"geneval-sentences-{g}-test.en_de.de" for g in mg.GENDERS}
    ctx = DATA / "context" / "geneval-context-wikiprofessions-original-test.en_de.de"
    assert main(["gender-score", "--mt-geneval", str(DATA), "--lang", "de", "--feminine", str(f["feminine"]),
                 "--masculine", str(f["masculine"]), "--contextual", str(ctx)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["counterfactual"]["feminine"] == r["counterfactual"]["masculine"] == 100 == r["contextual"]["accuracy"]
    assert r["counterfactual"]["pairs"] == 24 and r["counterfactual"]["gap_ci"] == [0, 0]
    assert main(["gender-score", "--mt-geneval", str(DATA), "--lang", "de", "--feminine", str(f["masculine"]),
                 "--masculine", str(f["feminine"])]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["counterfactual"]["feminine"] < 10 and r["counterfactual"]["masculine"] < 10 and "contextual" not in r
    short = tmp_path / "short.txt"
    short.write_text("eins\n")
    assert main(["gender-score", "--mt-geneval", str(DATA), "--lang", "de", "--feminine", str(short),
                 "--masculine", str(f["masculine"])]) == 2
    assert "short.txt has 1 lines; the de feminine references have 24" in capsys.readouterr().err
