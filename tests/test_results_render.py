"""RESULTS.md's marked tables are what ``scripts/results.py`` renders from their committed result files: the repository
holds them equal, and a hand-edited number is caught."""

import importlib.util
import json

from .conftest import REPO, python

spec = importlib.util.spec_from_file_location("results", REPO / "scripts" / "results.py")
results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(results)


def test_every_marked_table_equals_its_result_file():
    r = python(REPO / "scripts" / "results.py", "check", cwd=REPO)
    assert r.returncode == 0, r.stderr
    marked = [m for doc in results.documents() for m in results.BLOCK.finditer(doc.read_text(encoding="utf-8"))]
    assert marked  # RESULTS (and the cards) have tables rendered from data
    for m in marked:
        data = json.loads((results.FOLDER / f"{m.group(2)}.json").read_text(encoding="utf-8"))
        table = data["tables"][m.group(3)]
        sources = {r["file"] for h in table.get("headlines", []) for r in h.get("from", [])} or {m.group(2)}
        for name in sources:  # each number's file names what produced it
            src = json.loads((results.FOLDER / f"{name}.json").read_text(encoding="utf-8"))
            assert src["command"] and src["commit"] and src["host"]["cpu"], name


def test_a_hand_edited_number_is_caught(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"command": "c", "tables": {"t": {
        "columns": [{"name": "variant", "align": "left"}, {"name": "chrF [95 % CI]", "digits": 1},
                    {"name": "pairs", "digits": 0}],
        "rows": [["base", [26.44, 25.9, 27.01], 28], ["int8", [None, None, None], 1012]]}}}))
    text = "prose\n<!-- results: r t -->\nstale\n<!-- /results -->\nmore prose\n"
    good = results.render(text, tmp_path)
    assert good == ("prose\n<!-- results: r t -->\n| variant | chrF [95 % CI] | pairs |\n|---|---:|---:|\n"
                    "| base | 26.4 [25.9, 27.0] | 28 |\n| int8 | – | 1,012 |\n<!-- /results -->\nmore prose\n")
    assert results.render(good, tmp_path) == good
    assert results.render(good.replace("26.4 [", "26.5 ["), tmp_path) == good  # the edit is rendered away: check fails


def test_a_headline_is_read_from_the_file_it_names(tmp_path):
    """The reader's entry table holds no number of its own: each cell is looked up (file, table, row, column) at
    render time, so a re-measured file changes the headline, and a missing row is one clear line."""
    src = {"command": "c", "tables": {"v": {"columns": [{"name": "", "align": "left"}, {"name": "prune-45", "digits": 2}],
                                            "rows": [["rel. spBLEU %", [-30.51, -34.27, -26.19]]]}}}
    (tmp_path / "demo.json").write_text(json.dumps(src))
    (tmp_path / "entry.json").write_text(json.dumps({"command": "c", "tables": {"h": {
        "columns": [{"name": c, "align": "left"} for c in ("question", "section", "headline", "number", "file")],
        "headlines": [{"question": "Who pays?", "section": "Main", "what": "prune-45",
                       "from": [{"file": "demo", "table": "v", "row": "rel. spBLEU %", "column": "prune-45"}]},
                      {"question": "Parsers?", "section": "P", "what": "LAS", "pending": "runs lost"}]}}}))
    text = "<!-- results: entry h -->\n<!-- /results -->\n"
    out = results.render(text, tmp_path)
    assert "| Who pays? | Main | prune-45 | -30.51 [-34.27, -26.19] | `demo` |" in out
    assert "| Parsers? | P | LAS | runs lost | – |" in out
    src["tables"]["v"]["rows"][0][1][0] = -29.0
    (tmp_path / "demo.json").write_text(json.dumps(src))
    assert "| -29.00 [-34.27, -26.19] |" in results.render(text, tmp_path)
    src["tables"]["v"]["rows"][0][0] = "renamed"
    (tmp_path / "demo.json").write_text(json.dumps(src))
    import pytest

    with pytest.raises(SystemExit, match="has no row 'rel. spBLEU %'"):
        results.render(text, tmp_path)
