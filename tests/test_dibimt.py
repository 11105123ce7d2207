"""DiBiMT as a sweep benchmark: a synthetic file in its JSONL format (the real data is closed) is translated and
scored per variant, every metric with its interval and paired change; bad files are one line naming file:line."""

import json

import pytest

from forgetbench.cli import main
from forgetbench.eval.word_sense import dibimt_scores, read_dibimt

from .conftest import REPO

FLORES = REPO / "data" / "flores101"
SENTENCES = ["The bank of the river was full of people.", "He went to the bank to get money.",
             "The key to the house is on the table.", "Press the key to start the machine.",
             "The bat flew out of the cave at night.", "He hit the ball with a bat.",
             "The city council met in the old hall.", "The children played in the park after school."]


def _items(n=8):
    out = []
    for k in range(n):
        senses = [f"s{k}.{j}" for j in range(1 + k % 3 + 1)]  # 2-4 senses, frequency order
        gold = senses[k % len(senses)]
        bad = {lemma: s for lemma, s in zip(("und", "ist", "ein"), [s for s in senses if s != gold], strict=False)}
        out.append({"id": f"x{k}", "sentence": SENTENCES[k], "lang": "de", "word": SENTENCES[k].split()[1],
                    "gold": gold, "senses": senses, "good": ["der", "die", "das"][k % 3:k % 3 + 1], "bad": bad})
    return out


def _write(path, items):
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in items))
    return path


def _cfg(tmp_path, dib):
    p = tmp_path / "dib.yaml"
    p.write_text(f"""name: dib
model: {REPO / "artifacts" / "teacher"}
variants: {{base: null, prune-45: prune-45}}
benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]
pairs: [en-de]
sentences: 4
generation: {{max_new_tokens: 32, batch_size: 8}}
analysis: {{bleu_filter: 0, resamples: 200}}
bias: {{dibimt: {{path: {dib}, languages: [de]}}}}
""")
    return p


def test_a_dibimt_file_is_translated_and_scored_with_intervals(tmp_path):
    dib = _write(tmp_path / "dibimt.jsonl", _items())
    assert main(["sweep", str(_cfg(tmp_path, dib)), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    S = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    D = S["bias"]["dibimt"]["de"]
    import sqlite3

    con = sqlite3.connect(tmp_path / "run" / "store.sqlite")
    items = read_dibimt(dib, sources=True)
    for v in ("base", "prune-45"):
        hyps = dict(con.execute("SELECT idx, hyp FROM translations WHERE variant = ? AND benchmark = 'dibimt:de'", (v,)))
        assert len(hyps) == 8
        ref = dibimt_scores(items, [hyps[i] for i in range(8)], "de")
        assert {k: D[v][k] for k in ref} == ref  # the stored translations, rescored by the scorer
        for m in ("accuracy", "SFII", "SPDI"):
            if D[v][m] is not None:
                lo, hi = D[v][f"{m}_ci"]
                assert lo <= D[v][m] <= hi
    assert D["base"]["good"] + D["base"]["bad"] > 0 and "SFII_change_ci" in D["prune-45"]
    md = (tmp_path / "run" / "report" / "report.md").read_text()
    assert "## Word sense (DiBiMT)" in md and "| de | prune-45 | 8 |" in md


@pytest.mark.parametrize("edit,match", [
    (lambda x: x.pop("gold"), "dibimt.jsonl:3: missing key 'gold'"),
    (lambda x: x.update(gold="nowhere"), "dibimt.jsonl:3: unknown sense id 'nowhere'"),
    (lambda x: x.update(bad={"und": "s9.9"}), "dibimt.jsonl:3: unknown sense id 's9.9'"),
    (lambda x: x.pop("sentence"), "dibimt.jsonl:3: missing key 'sentence'"),
])
def test_a_bad_dibimt_file_is_one_line_naming_file_and_line(tmp_path, capsys, edit, match):
    items = _items()
    edit(items[2])
    dib = _write(tmp_path / "dibimt.jsonl", items)
    capsys.readouterr()
    assert main(["sweep", str(_cfg(tmp_path, dib)), "--out", str(tmp_path / "run")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and match in err[0], err
    assert not (tmp_path / "run").exists()
