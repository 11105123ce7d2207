"""What long commands print while they work (``forgetbench.console``): stage lines with counts in a log, a live
bar on a terminal, nothing but the result under ``--quiet``; and no library chatter before our one error line."""

import io
import json
import os
import re

from forgetbench.console import Console

from .conftest import REPO, flores_sweep, python


def _config(tmp_path, tiny_dir, extra=""):
    return flores_sweep(tmp_path / "p.yaml", tiny_dir, "{base: null, prune-30: prune-30}", "[en-de, de-en, en-sw]", 8, 8,
                        "[de, sw]", extra)


def _forgetbench(*args, cwd, env=None):
    return python("-m", "forgetbench.cli", *args, cwd=cwd, env=env)


# the library's deprecations as errors (in the spawned worker too: spawn passes the warnings options on), so a
# deprecated call fails the run instead of hiding behind forgetbench's warning filter (console rule 4)
DEPRECATIONS_ARE_ERRORS = {"PYTHONWARNINGS": "error::FutureWarning,error::DeprecationWarning"}


def test_a_sweep_logged_to_a_file_prints_stage_lines_with_counts_and_a_final_line(tiny_dir, tmp_path):
    from forgetbench.sweep import load_sweep
    from forgetbench.sweep.schedule import units

    cfg = _config(tmp_path, tiny_dir, "processes: 2\n")
    total = len(units(load_sweep(cfg)))
    r = _forgetbench("sweep", cfg, "--out", tmp_path / "run", cwd=tmp_path,  # stderr is a pipe: log lines
                     env=os.environ | DEPRECATIONS_ARE_ERRORS)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"report: {tmp_path / 'run' / 'report' / 'report.html'}"]
    lines = r.stderr.splitlines()
    assert all(ln.startswith("[sweep] p: ") for ln in lines), lines  # nothing else: no library bars or warnings
    work = [ln for ln in lines if "units of work" in ln]
    assert work[0].endswith(f": 0/{total} units (0 %), 0 sentences, elapsed 0:00")
    m = re.search(rf": done, {total}/{total} units \(100 %\), (\d+) sentences, [\d.]+ sentences/s, elapsed \d+:\d\d$",
                  work[-1])
    assert m and int(m.group(1)) == 2 * 3 * 8  # every translation of every series, counted from the store
    for mid in work[1:-1]:  # in between: at most one line per tenth, with the time left
        assert re.search(rf": (\d+)/{total} units \(\d+ %\), .*, left ~\d+:\d\d$", mid), mid
    stages = [ln.split(": ")[1] for ln in lines if ": done," in ln]
    assert stages == ["units of work (compress, translate, λ, bias)", "language identification",
                      "analysis and intervals", "report"]
    assert re.fullmatch(r"\[sweep\] p: done in \d+:\d\d \(2 process\(es\)\)", lines[-1])
    # --quiet (here on the finished run: resumed, it only recomputes the report): the result path alone
    r = _forgetbench("sweep", cfg, "--out", tmp_path / "run", "--quiet", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == f"report: {tmp_path / 'run' / 'report' / 'report.html'}\n"


def test_quiet_keeps_only_the_result_path(tiny_dir, tmp_path):
    r = _forgetbench("compress", tiny_dir, "--recipe", "prune-30", "--out", tmp_path / "c", "--quiet", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout == f"wrote {tmp_path / 'c'}\n"


def test_a_log_gets_one_line_per_tenth_and_a_terminal_a_live_bar():
    log = io.StringIO()
    con = Console("x", stream=log, tty=False)
    with con.stage("work", 20, "units", "sentences") as s:
        for k in range(1, 21):
            s.update(k, 10 * k)
    lines = log.getvalue().splitlines()
    assert lines[0] == "[x] work: 0/20 units (0 %), 0 sentences, elapsed 0:00"
    assert [re.search(r"(\d+)/20", ln).group(1) for ln in lines] == ["0", "2", "4", "6", "8", "10", "12", "14", "16",
                                                                      "18", "20"]
    assert lines[-1].startswith("[x] work: done, 20/20 units (100 %), 200 sentences, ")
    assert all("left ~" in ln for ln in lines[1:-1])
    tty = io.StringIO()
    with Console("x", stream=tty, tty=True).stage("work", 4, "units") as s:
        s.update(3)
    assert "work: " in tty.getvalue() and "3/4" in tty.getvalue() and "[x]" not in tty.getvalue()
    quiet = io.StringIO()
    q = Console("x", quiet=True, stream=quiet)
    with q.stage("work", 4, "units") as s:
        s.update(4)
    q.line("said")
    assert quiet.getvalue() == ""


def test_a_config_that_disagrees_with_its_weights_is_exactly_one_stderr_line(tiny_dir, tmp_path):
    """transformers prints its load report on its own; the CLI silences it, so our line is the only one."""
    import shutil

    bad = shutil.copytree(tiny_dir, tmp_path / "m")
    c = json.loads((bad / "config.json").read_text())
    c["vocab_size"] += 7
    (bad / "config.json").write_text(json.dumps(c))
    r = _forgetbench("compress", bad, "--recipe", "prune-30", "--out", tmp_path / "o", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("forgetbench: error: ")
    assert "shapes do not match config.json" in r.stderr and "report" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_a_mucow_error_in_a_config_with_both_bias_blocks_names_the_config(tiny_dir, tmp_path):
    cfg = _config(tmp_path, tiny_dir, f"""bias:
  mt_gender: {{path: {REPO / "data" / "mt_gender"}, languages: [de], sentences: 4}}
  mucow: {{path: {REPO / "data" / "mucow"}, pairs: [ende], sentences: 4}}
""")
    r = _forgetbench("sweep", cfg, "--out", tmp_path / "run", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"forgetbench: error: {cfg}: bias.mucow.pairs: 'ende' is not of the form en-xx" in r.stderr
    assert not (tmp_path / "run").exists()


def test_a_resumed_stage_times_only_its_own_work(monkeypatch):
    """16 of 100 units were done before a resume: the time left and the rate come from the units this run did."""
    import forgetbench.console as console

    now = [1000.0]
    monkeypatch.setattr(console.time, "perf_counter", lambda: now[0])
    log = io.StringIO()
    with Console("x", stream=log, tty=False).stage("work", 100, "units", "sentences") as s:
        s.update(16, 160)  # what the resumed run found done
        now[0] += 40.0
        s.update(20, 200)  # 4 units and 40 sentences in 40 s
    line = [ln for ln in log.getvalue().splitlines() if "20/100" in ln][0]
    assert "1.0 sentences/s" in line and "left ~13:20" in line, line  # 80 units x 10 s
