import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

from forgetbench.cli import main
from forgetbench.eval import lid
from forgetbench.eval.analysis import Thresholds, analyse
from forgetbench.eval.benchmarks import open_benchmark
from forgetbench.eval.hallucination import alignment_variance
from forgetbench.eval.languages import LANGUAGES, pair_tier, tier_of_bitext
from forgetbench.eval.metrics import SpBLEU
from forgetbench.eval.sentence_stats import lid_pass
from forgetbench.eval.store import Store
from forgetbench.eval.translate import Job

from .conftest import FLORES, REPO, flores_sweep, free_port, run_killed, same


def test_language_table_and_tiers():
    assert len(LANGUAGES) == 101
    assert LANGUAGES["en"].tier == "High" and LANGUAGES["fr"].tier == "High" and LANGUAGES["sw"].tier == "Low"
    assert {c for c, L in LANGUAGES.items() if L.tier == "High"} == {"en", "fr", "de", "it", "pt", "ru", "es"}
    assert pair_tier("de", "sw") == "Low" and pair_tier("en", "fr") == "High"
    # the thesis labels follow docs/METHOD.md's bitext thresholds for all but one language (xh: 0.13M labelled Very-Low)
    assert [c for c, L in LANGUAGES.items() if tier_of_bitext(L.bitext_m) != L.tier] == ["xh"]


def test_benchmark_line_count_mismatch_is_clear(tmp_path):
    (tmp_path / "eng.devtest").write_text("a\nb\n")
    (tmp_path / "deu.devtest").write_text("a\n")
    b = open_benchmark("x", "flores101", tmp_path)
    with pytest.raises(Exception, match="line-aligned"):
        b.pair("en", "de")


def test_alignment_variance_hand_computation():
    a = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    # row 0: mu=0.5, sum a*(mu-j)^2 = .5*.25+.5*.25 = .25 ; row 1: mu=2, 0 ; var = .25/(2*3)
    assert alignment_variance(a) == pytest.approx(0.25 / 6)
    diag = torch.eye(3)
    assert alignment_variance(diag) == 0.0


def test_lid_coverage_and_off_target_fixture(tmp_path, tiny_dir):
    assert lid.coverage("de").identifier == "lid.176"
    assert lid.coverage("ha").identifier == "cld2"  # lid.176 has no Hausa label
    assert lid.coverage("ff").identifier in ("cld2", "undefined")
    d = tmp_path / "fl"
    d.mkdir()
    en = ["The weather is very nice today and we are going to the beach with our friends.",
          "The government announced new measures to support small businesses during the crisis.",
          "Scientists have discovered a new species of frog in the rainforest of Brazil."]
    de = ["Das Wetter ist heute sehr schön und wir gehen mit unseren Freunden an den Strand.",
          "Die Regierung kündigte neue Maßnahmen zur Unterstützung kleiner Unternehmen während der Krise an.",
          "Wissenschaftler haben im Regenwald Brasiliens eine neue Froschart entdeckt."]
    (d / "eng.devtest").write_text("\n".join(en) + "\n")
    (d / "deu.devtest").write_text("\n".join(de) + "\n")
    job = Job(open_benchmark("fl", "flores101", d), "en", "de")
    st = Store(tmp_path / "s.sqlite")
    rows = [("base", "fl", "en", "de", 0, de[0], 90.0, 0.1), ("base", "fl", "en", "de", 1, de[1], 90.0, 0.1),
            ("base", "fl", "en", "de", 2, de[2], 90.0, 0.1),
            # compressed: sentence 0 and 1 come out in English (off-target), 2 is German
            ("comp", "fl", "en", "de", 0, en[0], 10.0, 0.1), ("comp", "fl", "en", "de", 1, en[1], 10.0, 0.1),
            ("comp", "fl", "en", "de", 2, de[2], 95.0, 0.1)]
    st.add_translations(rows)
    st.add_variant("base", "x", "h0", {})
    st.add_variant("comp", "y", "h1", {})
    lid_pass(st, ["base", "comp"], [job])
    sp = SpBLEU(tiny_dir / "sentencepiece.bpe.model")
    A = analyse(st, [job], "base", ["base", "comp"], sp, Thresholds(bleu_filter=0))
    assert A.delta["comp"].losers == 2 and A.delta["comp"].winners == 1
    assert A.off_target["comp"].losers.base.off_target_pct == 0.0
    assert A.off_target["comp"].losers.compressed.off_target_pct == 100.0
    assert A.off_target["comp"].overall.compressed.off_target_pct == pytest.approx(200 / 3)
    # the typed sections serialise to summary.json's keys
    d = A.to_dict()
    assert d["off_target"]["comp"]["losers"]["compressed"] == {"n": 2, "off_target_pct": 100.0}
    assert set(d["hallucination"]["comp"]["losers"]) == {"n", "var_base", "var_compressed", "lambda", "per_sentence",
                                                         "lambda_ci", "missing", "off_target", "undetermined"}
    # λ reads on-target sentences only: the two English outputs are left out, the third lacks λ in this store
    assert d["hallucination"]["comp"]["losers"]["off_target"] == 2 and d["hallucination"]["comp"]["losers"]["n"] == 0
    assert d["hallucination"]["comp"]["all"]["off_target"] == 2
    assert d["hallucination"]["comp"]["all"]["missing"] == 1  # this store has no λ at all (the sweep refuses that)
    assert set(d["variant_table"][0]) == {"variant", "size", "chrF", "spBLEU", "pairs"}
    assert set(d["variant_table"][1]) >= {"rel_chrF", "rel_spBLEU", "improved_pairs", "rel_spBLEU_ci", "significantly"}
    # the off-target change on the losers: both losers go off-target in every resample of them
    assert d["off_target"]["comp"]["losers_change_ci"] == [100.0, 100.0]
    pr = d["pairs"][0]["intervals"]["comp"]["chrF"]
    assert pr["delta"] < 0 and pr["delta_ci"][0] <= pr["delta"] <= pr["delta_ci"][1] and 0 < pr["p"] <= 1


def _sweep_config(tmp_path, tiny_dir, name="t", sentences=6, pairs="[en-de, de-en, en-sw]", extra=""):
    return flores_sweep(tmp_path / f"{name}.yaml", tiny_dir, "{base: null, prune-30: prune-30, ptq-int8: ptq-int8}", pairs,
                        sentences, 12, "[de, sw]", extra)


def _ci(v, ci, d=2) -> str:
    """A value and its interval as the report prints them."""
    return "– [–]" if v is None else f"{v:.{d}f} [{ci[0]:.{d}f}, {ci[1]:.{d}f}]"


def _assert_csvs_state_the_summary(rep, S):
    """Each report CSV's cells are summary.json's numbers, formatted as the report prints them."""
    import csv

    def rows(name):
        with open(rep / name, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    comp = [v for v in S["variants"] if v != S["base"]]
    vt = {r["variant"]: r for r in S["variant_table"]}
    got = rows("variants.csv")
    assert [r["variant"] for r in got] == [S["base"], *comp]
    for r in got:
        v = vt[r["variant"]]
        assert (r["nominal size"], r["avg spBLEU"], r["avg chrF"]) == (
            f"{v['size']['nominal_ratio']:.2f}", f"{v['spBLEU']:.2f}", f"{v['chrF']:.2f}")
        if r["variant"] in comp:
            assert r["rel. spBLEU % [95 % CI]"] == _ci(v["rel_spBLEU"], v["rel_spBLEU_ci"])
            assert r["rel. chrF % [95 % CI]"] == _ci(v["rel_chrF"], v["rel_chrF_ci"])
    for r in rows("delta.csv"):
        d = S["delta"][r["variant"]]
        assert (int(r["sentences"]), int(r["losers"]), int(r["winners"])) == (d["sentences"], d["losers"], d["winners"])
        assert r["losers % [95 % CI]"] == _ci(d["losers_pct"], d["losers_pct_ci"], 1)
    for r in rows("off_target.csv"):
        o = S["off_target"][r["variant"]]
        assert r["losers: base"] == f"{o['losers']['base']['off_target_pct']:.2f} %"
        assert r["overall: compressed"] == f"{o['overall']['compressed']['off_target_pct']:.2f} %"
        assert int(r["n (losers)"]) == o["losers"]["base"]["n"]
    for r in rows("hallucination.csv"):
        h = S["hallucination"][r["variant"]]
        assert r["λ losers [95 % CI]"] == _ci(h["losers"]["lambda"], h["losers"]["lambda_ci"], 3)
        assert r["λ all [95 % CI]"] == _ci(h["all"]["lambda"], h["all"]["lambda_ci"], 3)
        assert int(r["n losers (on-target)"]) == h["losers"]["n"]
        assert int(r["losers left out: off-target"]) == h["losers"]["off_target"]
    assert [(r["language"], r["code"], r["identifier"]) for r in rows("lid.csv")] == [
        (c["name"], c["lang"], c["identifier"]) for c in S["lid_coverage"]]
    tiers = S["tiers"]["thesis"]["tier"]
    got = rows("tier_thesis.csv")
    assert [r["tier"] for r in got] == list(tiers)
    for r in got:
        t = tiers[r["tier"]]
        assert int(r["pairs"]) == t["pairs"]
        for v in comp:
            assert r[f"{v} rel. spBLEU % [95 % CI]"] == _ci(t[v]["spBLEU"], t[v]["spBLEU_ci"])
    got = rows("pairs_prune-30.csv")
    assert [r["pair"] for r in got] == [f"{p['src']}-{p['tgt']}" for p in S["pairs"]]
    for r, p in zip(got, S["pairs"], strict=True):
        iv = p["intervals"]["prune-30"]["spBLEU"]
        assert (r["base spBLEU"], r["prune-30 spBLEU"]) == (f"{p['scores']['base']['spBLEU']:.2f}",
                                                            f"{p['scores']['prune-30']['spBLEU']:.2f}")
        assert r["rel. % [95 % CI]"] == _ci(iv["rel"], iv["rel_ci"]) and r["p"] == f"{iv['p']:.3f}"


def test_sweep_writes_every_report_file_and_html_matches_summary(tiny_dir, tmp_path):
    cfg = _sweep_config(tmp_path, tiny_dir)
    run = tmp_path / "a" / "b" / "run"  # missing parents are created (mkdir -p)
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    rep = run / "report"
    for f in ("report.html", "report.md", "summary.json", "variants.csv", "tier_thesis.csv", "delta.csv",
              "off_target.csv", "hallucination.csv", "lid.csv", "pairs_prune-30.csv"):
        assert (rep / f).is_file(), f
    S = json.loads((rep / "summary.json").read_text())
    _assert_csvs_state_the_summary(rep, S)
    html = (rep / "report.html").read_text()
    assert len(S["pairs"]) == 3 and S["base"] == "base"
    for row in S["variant_table"]:  # every number of the size/score table appears in the HTML as printed
        assert f"<td>{row['variant']}</td><td>torch</td><td>{'–' if row['variant'] == 'base' else 'base'}</td>" \
               f"<td>{row['size']['nominal_ratio']:.2f}</td>" in html
        assert f"<td>{row['spBLEU']:.2f}</td><td>{row['chrF']:.2f}</td>" in html
    assert html.count("data:image/png;base64,") >= 3
    # sections are described once: every Markdown section is an HTML section, with its title, in the same order
    import html as htmlmod

    md_titles = [ln[3:] for ln in (rep / "report.md").read_text().splitlines() if ln.startswith("## ")]
    titles = [htmlmod.unescape(t) for t in re.findall(r"<h2[^>]*>(.*?)</h2>", html)]
    html_titles = iter(titles)
    assert len(md_titles) >= 9 and all(t in html_titles for t in md_titles), md_titles
    # a reviewer's order: the variants, the Findings, the who-pays figures, the details; per-pair tables last, folded
    assert titles[:3] == ["Size and score per variant", "Findings: the study's claims tested at 95 %",
                          "Who pays at a glance: resource, tier and gender"]
    assert titles.index("Scores per pair") > titles.index("Off-target translations")
    assert html.count("<li><a href=\"#s") == len(titles) and "<details><summary>show</summary>" in html
    assert (rep / "report.md").read_text().count("Contents: Size and score per variant · Findings") == 1
    assert {c["lang"] for c in S["lid_coverage"]} == {"en", "de", "sw"}
    st = Store(run / "store.sqlite")
    assert len(st.translations()) == 3 * 3 * 6
    # rerun: nothing left to do, nothing duplicated
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    assert len(Store(run / "store.sqlite").translations()) == 54


def test_model_text_is_escaped_in_html(tmp_path):
    from forgetbench.report.tables import html_table as _table

    html = _table(["a<b"], [["<script>alert(1)</script>", "Tom & \"Jerry\""]])
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the text kept, escaped
    assert "Tom &amp; &quot;Jerry&quot;" in html and "a&lt;b" in html


def test_sigkill_resume_gives_every_row_once_and_identical_results(tiny_dir, tmp_path):
    cfg = _sweep_config(tmp_path, tiny_dir, name="k", sentences=20, pairs="[en-de, de-en, en-sw, sw-en]")
    ref_run = tmp_path / "ref"
    assert main(["sweep", str(cfg), "--out", str(ref_run), "--quiet"]) == 0
    run = tmp_path / "killed"
    rc = run_killed(f"""
        import os, signal
        from forgetbench.eval.store import Store
        real, written = Store.add_translations, []
        def add(self, rows):  # killed right after the write that brings the store to 20 rows or more
            real(self, rows)
            written.append(len(rows))
            if sum(written) >= 20:
                os.kill(os.getpid(), signal.SIGKILL)
        Store.add_translations = add
        from forgetbench.cli import main
        main(["sweep", {str(cfg)!r}, "--out", {str(run)!r}, "--quiet"])
    """)
    assert rc == -signal.SIGKILL
    n_killed = len(Store(run / "store.sqlite").translations())
    assert 20 <= n_killed < 3 * 4 * 20
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    a = [tuple(r) for r in Store(run / "store.sqlite").translations()]
    b = [tuple(r) for r in Store(ref_run / "store.sqlite").translations()]
    assert len(a) == len(set((r[0], r[1], r[2], r[3], r[4]) for r in a)) == 3 * 4 * 20
    assert [r[:7] for r in a] == [r[:7] for r in b]  # same hypotheses and scores (timings differ)
    same(_analysis(run), _analysis(ref_run))  # the layout rule: resumed batches are a fresh run's


def _analysis(run) -> dict:
    """A run's summary.json without its run record (wall times, process counts, the host)."""
    S = json.loads((run / "report" / "summary.json").read_text())
    return {k: v for k, v in S.items() if k != "run"}


def test_a_run_killed_mid_lambda_and_resumed_on_two_processes_gives_one_processs_summary(tiny_dir, tmp_path):
    """The layout rule across a kill and a change of process count: a one-process sweep killed right after its
    first stored λ values, resumed by two worker processes (which of its units each takes, and whether a λ unit
    runs inline with its translation or apart, decided by who comes first), ends with a fresh one-process run's
    summary, every float bit for bit (the run record apart), and the same stored values."""
    cfg = _sweep_config(tmp_path, tiny_dir, name="l", sentences=6, pairs="[en-de, de-en, en-sw, sw-en]")
    ref = tmp_path / "ref"
    assert main(["sweep", str(cfg), "--out", str(ref), "--quiet"]) == 0
    run = tmp_path / "killed"
    rc = run_killed(f"""
        import os, signal
        from forgetbench.eval.store import Store
        real = Store.add_stats
        def add(self, rows):  # killed right after the first λ values are stored
            real(self, rows)
            if any(r[5] == "xattn_var" for r in rows):
                os.kill(os.getpid(), signal.SIGKILL)
        Store.add_stats = add
        from forgetbench.cli import main
        main(["sweep", {str(cfg)!r}, "--out", {str(run)!r}, "--quiet"])
    """)
    assert rc == -signal.SIGKILL
    want = Store(ref / "store.sqlite").stats("xattn_var")
    assert 0 < len(Store(run / "store.sqlite").stats("xattn_var")) < len(want)
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet", "--processes", "2"]) == 0
    assert Store(run / "store.sqlite").stats("xattn_var") == want
    assert json.loads((run / "report" / "summary.json").read_text())["run"]["processes"] == 2
    same(_analysis(run), _analysis(ref))


@pytest.mark.parametrize("bad,msg", [
    ("languages: [de, xx]\n", "unknown language code 'xx'"),
    ("analysis: {bleu_filter: -1}\n", "bleu_filter"),
    ("sentences: 0\n", "sentences"),
])
def test_bad_sweep_config(tiny_dir, tmp_path, capsys, bad, msg):
    cfg = _sweep_config(tmp_path, tiny_dir)
    text = cfg.read_text()
    key = bad.split(":")[0]
    text = re.sub(rf"^{key}:.*$", bad.strip(), text, flags=re.M)
    cfg.write_text(text)
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0]
    assert not (tmp_path / "r").exists()


def test_pairs_split_across_two_cpu_processes_with_accelerate(tiny_dir, tmp_path):
    cfg = _sweep_config(tmp_path, tiny_dir, name="two", sentences=5, pairs="[en-de, de-en, en-sw, sw-en]")
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["sweep", str(cfg), "--out", str(one), "--quiet"]) == 0
    env = os.environ | {"PYTHONPATH": str(REPO), "FORGETBENCH_STORE_PORT": str(free_port())}
    p = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                        "--main_process_port", str(free_port()), "--mixed_precision", "no", "--dynamo_backend", "no",
                        "-m", "forgetbench.cli", "sweep", str(cfg), "--out", str(two), "--quiet"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    a = [tuple(r)[:7] for r in Store(two / "store.sqlite").translations()]
    b = [tuple(r)[:7] for r in Store(one / "store.sqlite").translations()]
    assert len(a) == 3 * 4 * 5 and a == b
    S = json.loads((two / "report" / "summary.json").read_text())
    assert S["run"]["processes"] == 2
    # the same without a launcher: `--processes 2` spawns the second worker itself (compression split by cost)
    three = tmp_path / "three"
    assert main(["sweep", str(cfg), "--out", str(three), "--quiet", "--processes", "2"]) == 0
    c = [tuple(r)[:7] for r in Store(three / "store.sqlite").translations()]
    assert c == b
    S3 = json.loads((three / "report" / "summary.json").read_text())
    assert S3["run"]["processes"] == 2
    same(_analysis(three), _analysis(one))  # every float bit for bit: the layout rule (docs/METHOD.md §2.9)
    same(_analysis(two), _analysis(one))


def test_a_killed_sweep_worker_ends_in_one_line_not_a_hang(tiny_dir, tmp_path):
    cfg = _sweep_config(tmp_path, tiny_dir, name="bad", sentences=4, pairs="[en-de, de-en]")
    p = subprocess.Popen([sys.executable, "-m", "forgetbench.cli", "sweep", str(cfg), "--out", str(tmp_path / "run"),
                          "--quiet", "--processes", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=REPO, env=os.environ | {"PYTHONPATH": str(REPO)})
    worker, t0 = None, time.time()
    while worker is None and time.time() - t0 < 120 and p.poll() is None:
        for pid in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split():
            cmd = open(f"/proc/{pid}/cmdline").read()
            if "spawn_main" in cmd and "resource_tracker" not in cmd:
                worker = int(pid)
        time.sleep(0.05)
    assert worker is not None
    os.kill(worker, signal.SIGKILL)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 2, err[-1500:]
    last = err.strip().splitlines()[-1]  # ours, and the last: no resource-tracker lines after it
    assert last.startswith("forgetbench: error: sweep worker forgetbench-sweep-1 was killed by signal 9 (SIGKILL)")
    assert "out-of-memory killer" in last and "rerun the same command to resume" in last and "above" not in last
    assert "leaked" not in err, err[-1500:]


def test_report_command_recomputes_from_the_store(tiny_dir, tmp_path, capsys):
    import sqlite3

    cfg = _sweep_config(tmp_path, tiny_dir, name="r", sentences=3)
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    before = json.loads((run / "report" / "summary.json").read_text())
    (run / "report" / "report.html").unlink()

    def dump():
        db = sqlite3.connect(run / "store.sqlite")
        rows = [db.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3, 4, 5").fetchall() for t in ("translations", "sentence_stats")]
        db.close()
        return rows

    stored = dump()
    assert main(["report", str(run)]) == 0
    assert (run / "report" / "report.html").is_file()
    after = json.loads((run / "report" / "summary.json").read_text())
    assert after["pairs"][0]["n"] == 3
    # the report only reads the store: no pass runs, nothing is written there, the analysis is the same
    assert dump() == stored
    assert {k: v for k, v in after.items() if k != "run"} == {k: v for k, v in before.items() if k != "run"}
    # a store whose language identification is unfinished is refused with one line, not silently reported
    db = sqlite3.connect(run / "store.sqlite")
    with db:
        db.execute("DELETE FROM sentence_stats WHERE name='on_target' AND variant='base' AND idx=0")
    db.close()
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    assert "no language identification yet" in capsys.readouterr().err


def test_ntrex_tico_tatoeba_loaders(tmp_path):
    nt = tmp_path / "ntrex"
    nt.mkdir()
    (nt / "newstest2019-src.eng.txt").write_text("a\nb\n")
    (nt / "newstest2019-ref.deu.txt").write_text("A\nB\n")
    assert open_benchmark("n", "ntrex128", nt).pair("de", "en") == (["A", "B"], ["a", "b"])
    ti = tmp_path / "tico" / "en-fr"
    ti.mkdir(parents=True)
    (ti / "tico19-test.en").write_text("x\n")
    (ti / "tico19-test.fr").write_text("y\n")
    assert open_benchmark("t", "tico19", tmp_path / "tico").pair("en", "fr") == (["x"], ["y"])
    ta = tmp_path / "tato" / "eng-swa"
    ta.mkdir(parents=True)
    (ta / "tatoeba-test-v2021-08-07.eng").write_text("p\n")
    (ta / "tatoeba-test-v2021-08-07.swa").write_text("q\n")
    assert open_benchmark("ta", "tatoeba", tmp_path / "tato").pair("sw", "en") == (["q"], ["p"])
    with pytest.raises(Exception, match="English-centric"):
        open_benchmark("t", "tico19", tmp_path / "tico").pair("de", "fr")


def test_sweep_with_gender_and_word_sense_benchmarks(tiny_dir, tmp_path, capsys):
    extra = (f"bias:\n  mt_gender: {{path: {REPO / 'data' / 'mt_gender'}, languages: [de, ru], sentences: 6, "
             f"aligner_context: {FLORES}}}\n"
             f"  mucow: {{path: {REPO / 'data' / 'mucow'}, pairs: [en-de], sentences: 5}}\n")
    cfg = _sweep_config(tmp_path, tiny_dir, name="b", sentences=2, pairs="[en-de]", extra=extra)
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    S = json.loads((run / "report" / "summary.json").read_text())
    g = S["bias"]["gender"]
    assert set(g) == {"base", "prune-30", "ptq-int8"} and set(g["base"]["languages"]) == {"de", "ru"}
    assert g["base"]["languages"]["de"]["n"] == 6
    assert g["base"]["average"]["delta_s"] is not None  # balanced sample: 3 pro- and 3 anti-stereotypical items
    assert "relative_to_base" in g["ptq-int8"]
    ws = S["bias"]["word_sense"]["en-de"]
    assert ws["base"]["n"] == 5 and ws["base"]["correct"] + ws["base"]["wrong"] + ws["base"]["both"] + ws["base"]["miss"] == 5
    html = (run / "report" / "report.html").read_text()
    assert "Gender bias (MT-Gender)" in html and "Word sense (MuCoW)" in html and "Aligners compared" in html
    ac = S["bias"]["aligner_comparison"]
    assert ac["items"] == 3 * 2 * 6 and set(ac["base"]) == {"fast_align", "cross_attention"}
    st = Store(run / "store.sqlite")
    assert len(st.stats("gender_pred")) == 3 * 2 * 6
    readings = {n: st.stats(n) for n in ("gender_pred", "gender_pred_fastalign")}
    assert S["bias"]["gender_readers"] == st.meta("gender_readers") and len(readings["gender_pred_fastalign"]) == 36
    # readings by other readers: the report refuses them; a rerun deletes them, says so and reads the items again
    st.set_meta("gender_readers", "older rules")
    st.add_stats([("base", "mt_gender", "en", "de", 0, "gender_pred", 3.0)])  # a reading those rules made
    st.close()
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    assert "read by other gender readers (older rules" in capsys.readouterr().err
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    assert "reading them again (72 readings)" in capsys.readouterr().err
    st = Store(run / "store.sqlite")
    assert {n: st.stats(n) for n in readings} == readings and st.meta("gender_readers") != "older rules"
    st.close()


def test_piece_to_word_alignment_map(tiny_dir):
    from forgetbench.eval.alignment import find_word, piece_words
    from forgetbench.models.tokenizers import load_tokenizer

    tok = load_tokenizer(tiny_dir)
    tok.src_lang = "en"
    ids = tok("The developer argued with the designer")["input_ids"]
    words = piece_words(tok, ids)
    assert words[0] is None and words[-1] is None  # language code and </s>
    assert max(w for w in words if w is not None) == 5
    assert find_word("The developer argued .".split(), "developer") == 1


def test_pronoun_links_come_from_the_same_attention_and_model_as_the_profession_links(tiny_dir):
    """The gender pass links the profession and the sentence's pronoun from one attention pass (``attention_links``)
    and one fast_align model (``fastalign_links``): each word's link is the one the single-word aligner gives it."""
    from forgetbench.eval.alignment import align_words, attention_links, fastalign_align, fastalign_links
    from forgetbench.eval.bias import GenderRow
    from forgetbench.models.load import load

    model, tok, _ = load(tiny_dir, dtype="fp32", with_signature=False)
    srcs = ["The developer argued with the designer because she did not like it .", "The nurse called him ."]
    hyps = ["Die Entwicklerin stritt mit dem Designer , weil sie es nicht mochte .", "Die Pflegerin rief ihn ."]
    rows = [GenderRow("female", 1, srcs[0], "developer", None), GenderRow("male", 1, srcs[1], "nurse", None)]
    assert [r.pronoun for r in rows] == [7, 3]
    both = attention_links(model, tok, srcs, hyps, "en", "de", [(1, 7), (1, 3)])
    assert [b[0] for b in both] == align_words(model, tok, srcs, hyps, "en", "de", [1, 1])
    assert [b[1] for b in both] == align_words(model, tok, srcs, hyps, "en", "de", [7, 3])
    links = fastalign_links(srcs, hyps, [(1, 7), (1, 3)], best_target=(True, False))
    assert [x[0] for x in links] == fastalign_align(srcs, hyps, [1, 1], best_target=True)
    assert [x[1] for x in links] == fastalign_align(srcs, hyps, [7, 3])


def test_base_only_eval_skips_the_attention_pass_and_matches_the_sweep_rows(tiny_dir, tmp_path):
    """`eval` (one variant) translates exactly what the base of a full sweep translates, and computes no λ
    inputs (there is nothing to compare with)."""
    full = _sweep_config(tmp_path, tiny_dir, name="f", sentences=3)
    base_only = tmp_path / "b.yaml"
    base_only.write_text(full.read_text().replace("variants: {base: null, prune-30: prune-30, ptq-int8: ptq-int8}",
                                                  "variants: {base: null}"))
    assert main(["sweep", str(full), "--out", str(tmp_path / "f"), "--quiet"]) == 0
    assert main(["eval", str(base_only), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    a = [tuple(r)[:7] for r in Store(tmp_path / "f" / "store.sqlite").translations("base")]
    b = [tuple(r)[:7] for r in Store(tmp_path / "b" / "store.sqlite").translations("base")]
    assert a == b and len(a) == 9
    assert Store(tmp_path / "b" / "store.sqlite").stats("xattn_var") == {}
    assert len(Store(tmp_path / "f" / "store.sqlite").stats("xattn_var")) == 27


def test_row_batches_fill_across_jobs_sorted_by_length_and_one_job_batches_as_before():
    from forgetbench.eval.translate import length_batches, row_batches

    a, b = ["xxxx", "x", "xxxxxxx", "xx"], ["xxx", "xxxxxx", "x"]
    assert row_batches([a], [[0, 1, 2, 3]], 3) == [[(0, i) for i in bt] for bt in length_batches([0, 1, 2, 3], a, 3)]
    # pending sentences only; ties by job then index; every batch full but the last
    assert row_batches([a, b], [[0, 1, 2], [0, 1, 2]], 4) == [[(0, 1), (1, 2), (1, 0), (0, 0)], [(1, 1), (0, 2)]]


def test_a_resumed_translation_decodes_each_pending_row_in_the_batch_a_fresh_run_gives_it(tmp_path):
    """The layout rule of ``eval.translate._translate``: the nominal batches are cut from every sentence of the jobs,
    not from the pending ones; a resumed call decodes, in order and whole, the fresh run's batches that hold a
    pending row, and stores only those rows (an earlier attempt's rows are kept as they are)."""
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.eval.translate import Job, run_variant

    bench = open_benchmark("flores101", "flores101", FLORES)
    jobs = [Job(bench, "en", "de", 9), Job(bench, "de", "en", 9)]

    class Echo:  # a backend without stream_rows: each row's hypothesis names the batch it was decoded in
        def __init__(self):
            self.batches = []

        def translate_rows(self, rows, num_beams, max_new_tokens):
            self.batches.append([r[0] for r in rows])
            return [f"batch {len(self.batches)}"] * len(rows)

    fresh, resumed = Echo(), Echo()
    assert run_variant(Store(tmp_path / "fresh.sqlite"), "v", fresh, jobs, 4, 1, 8, progress=False) == 18
    assert [len(b) for b in fresh.batches] == [4, 4, 4, 4, 2]
    store = Store(tmp_path / "resumed.sqlite")
    srcs = {j.src: j.lines()[0] for j in jobs}
    stored = {(j.src, i) for j in jobs for i in range(9) if srcs[j.src][i] in fresh.batches[0] + fresh.batches[3]}
    stored |= {next((j.src, i) for j in jobs for i in range(9) if srcs[j.src][i] == fresh.batches[1][0])}
    store.add_translations([("v", "flores101", s, "en" if s == "de" else "de", i, "earlier", 0.0, 0.0)
                            for s, i in sorted(stored)])
    assert run_variant(store, "v", resumed, jobs, 4, 1, 8, progress=False) == 18 - len(stored) == 9
    assert resumed.batches == [fresh.batches[1], fresh.batches[2], fresh.batches[4]]
    hyps = {(r["src"], r["idx"]): r["hyp"] for r in store.translations("v")}
    assert sum(h == "earlier" for h in hyps.values()) == 9 and len(hyps) == 18


def test_run_variant_streams_rows_into_the_store_in_chunks_with_the_batch_paths_hypotheses(tmp_path, monkeypatch):
    """The torch translator's stream (its batch kept full across the nominal batches ``row_batches`` makes) stores
    the hypotheses translating batch by batch stores, every ``batch_size`` ended rows; a translator without
    ``stream_rows`` (CTranslate2's) goes batch by batch."""
    from forgetbench.compress.pipeline import load_model_dir
    from forgetbench.eval.backends import TorchTranslator
    from forgetbench.eval.benchmarks import open_benchmark
    from forgetbench.eval.translate import Job, run_variant

    model, tok = load_model_dir(REPO / "artifacts" / "teacher")
    bench = open_benchmark("flores101", "flores101", REPO / "data" / "flores101")
    jobs = [Job(bench, "en", "de", 14), Job(bench, "sw", "en", 14)]
    tr = TorchTranslator(model, tok)

    class Batches:  # the backend interface without stream_rows
        def translate_rows(self, rows, num_beams, max_new_tokens):
            calls.append(len(rows))
            return tr.translate_rows(rows, num_beams, max_new_tokens)

    chunks, calls = [], []
    add = Store.add_translations
    monkeypatch.setattr(Store, "add_translations", lambda self, rows: chunks.append(len(rows)) or add(self, rows))
    a, b = Store(tmp_path / "a.sqlite"), Store(tmp_path / "b.sqlite")
    assert run_variant(a, "v", tr, jobs, 8, 1, 48, progress=False) == 28
    assert chunks == [8, 8, 8, 4] and calls == []
    chunks.clear()
    assert run_variant(b, "v", Batches(), jobs, 8, 1, 48, progress=False) == 28
    assert calls == [8, 8, 8, 4] and chunks == [8, 8, 8, 4]
    assert [tuple(r)[:7] for r in a.translations()] == [tuple(r)[:7] for r in b.translations()]
    assert run_variant(a, "v", tr, jobs, 8, 1, 48, progress=False) == 0  # nothing pending


def test_a_model_retrained_in_place_is_not_resumed_under_its_old_rows(tiny_dir, tmp_path, capsys):
    """A variant's folder holding other weights than the ones its stored rows came from (a student shipped anew), or
    the source of a compressed variant changed, is refused in one line, nothing done; the same weights resume."""
    import shutil

    from safetensors.torch import load_file, save_file

    base, student = shutil.copytree(tiny_dir, tmp_path / "base"), shutil.copytree(tiny_dir, tmp_path / "student")
    cfg = flores_sweep(tmp_path / "w.yaml", base, f"{{base: null, prune-30: prune-30, student: {{model: {student}}}}}",
                       "[en-de]", 2, 6)
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    n = len(Store(run / "store.sqlite").translations())
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0  # the same weights: a resume

    def retrain(folder):
        f = next(folder.glob("*.safetensors"))
        w = load_file(f)
        k = next(k for k, v in w.items() if v.dtype.is_floating_point and v.dim() == 2)
        w[k] = w[k] + 0.01
        save_file(w, f, metadata={"format": "pt"})

    for folder, named in ((student, "student"), (base, "base, prune-30, student")):
        retrain(folder)
        capsys.readouterr()
        assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"the weights of {named} changed since the run stored their translations" in err[0]
        assert "use a new --out" in err[0] and len(Store(run / "store.sqlite").translations()) == n


def test_a_changed_config_extends_a_run_only_with_extend(tiny_dir, tmp_path, capsys):
    cfg = _sweep_config(tmp_path, tiny_dir, name="x", sentences=2, pairs="[en-de]")
    run = tmp_path / "run"
    assert main(["sweep", str(cfg), "--out", str(run), "--quiet"]) == 0
    n = len(Store(run / "store.sqlite").translations())
    more = tmp_path / "more.yaml"
    more.write_text(cfg.read_text().replace("sentences: 2", "sentences: 3").replace("name: x", "name: more"))
    capsys.readouterr()
    assert main(["sweep", str(more), "--out", str(run), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "made with another config (sentences changed since)" in err[0] and "--extend" in err[0]
    assert len(Store(run / "store.sqlite").translations()) == n  # nothing done
    # a change of analysis only (the filter) resumes as it is: the stored translations are reused
    other = tmp_path / "other.yaml"
    other.write_text(cfg.read_text().replace("bleu_filter: 0", "bleu_filter: 1"))
    assert main(["sweep", str(other), "--out", str(run), "--quiet"]) == 0
    assert main(["sweep", str(more), "--out", str(run), "--quiet", "--extend"]) == 0
    assert len(Store(run / "store.sqlite").translations()) == n * 3 // 2


def test_a_run_read_with_fewer_sentences_than_it_holds_analyses_those_alone(tiny_dir, tmp_path):
    """A run extended to fewer sentences per pair than its store holds (``--extend``, or a quick look with
    ``--sentences``) analyses the config's sentences alone, the bias benchmarks' too (a smaller MT-Gender sample is
    the start of a larger one): its summary is a fresh run's on those sentences."""
    extra = (f"bias:\n  mt_gender: {{path: {REPO / 'data' / 'mt_gender'}, languages: [de], sentences: 5, "
             f"aligner_context: {FLORES}}}\n"
             f"  mucow: {{path: {REPO / 'data' / 'mucow'}, pairs: [en-de], sentences: 5}}\n")
    base = _sweep_config(tmp_path, tiny_dir, name="x", sentences=5, pairs="[en-de, de-en]", extra=extra)
    fewer = tmp_path / "fewer" / "x.yaml"
    fewer.parent.mkdir()
    fewer.write_text(base.read_text().replace("sentences: 5", "sentences: 3"))
    assert main(["sweep", str(fewer), "--out", str(tmp_path / "fresh"), "--quiet"]) == 0
    run = tmp_path / "run"
    assert main(["sweep", str(base), "--out", str(run), "--quiet"]) == 0
    assert main(["sweep", str(fewer), "--out", str(run), "--quiet", "--extend"]) == 0
    assert len(Store(run / "store.sqlite").translations("base", "flores101")) == 2 * 5  # the store keeps them all

    def analysis(r):
        S = json.loads((r / "report" / "summary.json").read_text())
        return {k: v for k, v in S.items() if k not in ("run", "speed")}

    same(analysis(run), analysis(tmp_path / "fresh"))
    assert main(["sweep", str(base), "--out", str(run), "--quiet", "--sentences", "3"]) == 0  # a quick look
    same(analysis(run) | {"quick_look": None}, analysis(tmp_path / "fresh") | {"quick_look": None})


def test_a_speed_up_is_paired_repeated_and_reported_with_its_interval():
    """eval.speed rule 2: rounds alternate which model goes first; the speed-up is the geometric mean of the
    rounds' ratios with a bootstrap interval; an interval covering 1 is reported as no measurable difference, and
    one timing each never becomes a ratio."""
    from forgetbench.eval.speed import interleaved
    from forgetbench.report.tables import _speedup

    order = []
    fast = interleaved(lambda: order.append("b") or 1.0, lambda: order.append("v") or 0.5, 4)
    assert order == ["b", "v", "v", "b", "b", "v", "v", "b"]
    assert fast["speedup"] == 2.0 and fast["speedup_ci95"] == [2.0, 2.0] and fast["measurable"]
    assert _speedup(fast, 10, 5) == "2.00× [2.00, 2.00]"
    noisy = iter([1.1, 1.0, 1.0, 0.9, 1.05, 1.0, 1.0, 0.95, 1.0, 1.0])  # ratios 1.1, 0.9, 1.05, 0.95, 1
    same = interleaved(lambda: next(noisy), lambda: next(noisy), 5)
    lo, hi = same["speedup_ci95"]
    assert lo < 1 < hi and not same["measurable"]
    assert _speedup(same, 10, 10).startswith("no measurable difference (")
    assert _speedup(None, 36.1, 23.9) == "one timing each: no ratio" and _speedup(None, None, 23.9) == "–"


def test_a_quick_look_caps_every_sentence_count_and_says_so():
    """--sentences N: at most N sentences per pair, bias benchmark and speed timing; the config as run keeps them
    and the report's first paragraph says it is a quick look; speed.rounds below 2 is refused."""
    import pytest as _pytest

    from forgetbench.errors import ForgetbenchError
    from forgetbench.eval.analysis import Thresholds
    from forgetbench.eval.summary import Summary
    from forgetbench.report.render import overview_notes
    from forgetbench.sweep.config import load_sweep, quick_look

    cfg = load_sweep(REPO / "configs" / "demo.yaml", sentences=3)
    assert cfg.quick_look == 3 and cfg.raw["sentences"] == 3 and cfg.speed_sentences == 3
    assert all(b["sentences"] == 3 for b in cfg.raw["bias"].values())
    assert load_sweep(REPO / "configs" / "demo.yaml").quick_look is None
    assert quick_look({"sentences": 2, "speed": {"sentences": 16}}, 5) == {"sentences": 2, "speed": {"sentences": 5}}
    S = Summary("base", [], Thresholds(), {}, quick_look=3)
    assert overview_notes(S)[0].startswith("A quick look (--sentences 3)")
    with _pytest.raises(ForgetbenchError, match="speed.rounds must be an integer of at least 2"):
        from forgetbench.sweep.config import _speed

        _speed({"speed": {"sentences": 4, "rounds": 1}}, "cfg.yaml")


def test_off_flags_counts_a_sentence_only_where_reference_and_every_hypothesis_are_identified():
    from forgetbench.eval.analysis.off_target import off_flags
    from forgetbench.eval.sentence_stats import REF
    key = ("flores101", "en", "sw")
    on = {(REF, *key, 0): 1.0, ("a", *key, 0): 0.0, ("b", *key, 0): 1.0,  # counts: a off target, b on target
          (REF, *key, 1): 0.0, ("a", *key, 1): 1.0, ("b", *key, 1): 1.0,  # reference not placed in Swahili
          (REF, *key, 2): 1.0, ("a", *key, 2): None, ("b", *key, 2): 1.0,  # a's hypothesis unidentified
          (REF, *key, 3): None, ("a", *key, 3): 1.0, ("b", *key, 3): 1.0}  # no identifier for the language
    assert off_flags(on, ("a", "b"), key, 0) == (1.0, 0.0)
    assert [off_flags(on, ("a", "b"), key, i) for i in (1, 2, 3)] == [None, None, None]
    assert off_flags(on, ("b",), key, 2) == (0.0,)  # b alone: its hypothesis is identified
