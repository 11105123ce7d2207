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
    text = results.RESULTS.read_text(encoding="utf-8")
    marked = list(results.BLOCK.finditer(text))
    assert marked  # RESULTS has tables rendered from data
    for m in marked:
        data = json.loads((results.FOLDER / f"{m.group(2)}.json").read_text(encoding="utf-8"))
        assert data["command"] and data["commit"] and data["host"]["cpu"]  # each file names what produced it


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
