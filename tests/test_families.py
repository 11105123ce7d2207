"""Variants made from one template (the sparsity ladder, the pruning groupings): expansion, the knee rule by hand,
and a ladder sweep whose points, intervals, figure and knee reach the report."""

import json

import pytest

from forgetbench.cli import main
from forgetbench.errors import ForgetbenchError
from forgetbench.eval import bootstrap as bs
from forgetbench.eval.families import KNEE_DROP, FamilyPoint, knee

from .conftest import REPO

FLORES = REPO / "data" / "flores101"


def _cfg(tmp_path, variants, extra="", name="lad"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"""name: {name}
model: {REPO / "artifacts" / "teacher"}
variants: {variants}
benchmarks: [{{name: flores101, kind: flores101, path: {FLORES}}}]
pairs: [en-de, de-en]
sentences: 12
generation: {{max_new_tokens: 24, batch_size: 8}}
analysis: {{bleu_filter: 0, resamples: 200}}
{extra}""")
    return p


def test_a_template_makes_one_validated_recipe_per_value(tmp_path):
    from forgetbench.sweep.config import load_sweep

    cfg = load_sweep(_cfg(tmp_path, "{base: null, lad: {recipe: prune, sparsity: [0.25, 0.5], scope: module}, "
                                    "g: {recipe: prune, sparsity: 0.45, scope: [layer, attn-ffn]}}"))
    assert list(cfg.variants) == ["base", "lad-25", "lad-50", "g-layer", "g-attn-ffn"]
    r = cfg.variants["lad-50"]
    assert [(s.kind, s.config.sparsity, s.config.scope) for s in r.steps] == [("prune", 0.5, "module")]
    assert cfg.variants["g-attn-ffn"].steps[0].config.scope == "attn-ffn"
    assert cfg.families["lad"].numeric and not cfg.families["g"].numeric
    assert cfg.families["g"].members == {"g-layer": "layer", "g-attn-ffn": "attn-ffn"}


@pytest.mark.parametrize("variants,match", [
    ("{base: null, l: {recipe: prune, sparsity: 0.3}}", "needs exactly one option with a list"),
    ("{base: null, l: {recipe: prune, sparsity: [0.3, 0.5], scope: [layer, module]}}", "needs exactly one option"),
    ("{base: null, l: {recipe: prune, sparsity: [0.3, 0.3]}}", "repeated values"),
    ("{base: null, l: {recipe: prune, sparsity: [0.3, 1.5]}}", "sparsity"),
    ("{base: null, l-30: prune-30, l: {recipe: prune, sparsity: [0.3]}}", "clash with other variant names"),
])
def test_bad_templates_are_named(tmp_path, variants, match):
    from forgetbench.sweep.config import load_sweep

    with pytest.raises(ForgetbenchError, match=match):
        load_sweep(_cfg(tmp_path, variants))


def _pt(v, value, rel, lo, hi):
    iv = bs.Interval(lo, hi)
    return FamilyPoint(v, value, 10.0, iv, 40.0, iv, rel, None if rel is None else iv)


def test_the_knee_is_the_last_value_before_a_significant_large_drop():
    base = _pt("base", 0, None, None, None)
    pts = [base, _pt("l-10", 0.1, -1.0, -3.0, 1.0), _pt("l-30", 0.3, -8.0, -14.0, -2.0),  # −14 < −10 < −2: not yet
           _pt("l-50", 0.5, -20.0, -26.0, -12.5), _pt("l-70", 0.7, -60.0, -70.0, -50.0)]
    k = knee(pts)
    assert (k["value"], k["falls_at"]["value"], k["drop_bound_pct"]) == (0.3, 0.5, KNEE_DROP)
    assert ("sparsity 0.3 (l-30) is the largest whose drop is not significantly beyond 10 %: rel. spBLEU -8.0 % "
            "[-14.0, -2.0]") in k["statement"]
    assert knee([base, _pt("l-10", 0.1, -1.0, -3.0, 1.0)])["falls_at"] is None
    assert knee([base, _pt("l-10", 0.1, -30.0, -40.0, -20.0)])["variant"] == "base"


def test_a_ladder_sweep_reports_its_points_intervals_figure_and_knee(tmp_path):
    cfg = _cfg(tmp_path, "{base: null, ladder: {recipe: prune, sparsity: [0.3, 0.6, 0.9]}}")
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 0
    S = json.loads((tmp_path / "run" / "report" / "summary.json").read_text())
    F = S["families"]["ladder"]
    assert [p["variant"] for p in F["points"]] == ["base", "ladder-30", "ladder-60", "ladder-90"]
    rows = {r["variant"]: r for r in S["variant_table"]}
    for p in F["points"]:
        assert p["spBLEU"] == pytest.approx(rows[p["variant"]]["spBLEU"]) and p["chrF"] == pytest.approx(rows[p["variant"]]["chrF"])
        assert p["chrF_ci"][0] <= p["chrF"] <= p["chrF_ci"][1]
        if p["variant"] != "base":
            assert p["rel_spBLEU_ci"] == pytest.approx(rows[p["variant"]]["rel_spBLEU_ci"])
    assert F["points"][-1]["chrF"] < F["points"][0]["chrF"] - 5  # 90 % pruning destroys the teacher
    md = (tmp_path / "run" / "report" / "report.md").read_text()
    assert "## ladder: the sparsity ladder (2 pairs: en-de, de-en)" in md and F["knee"]["statement"] in md
    assert 'alt="family ladder"' in (tmp_path / "run" / "report" / "report.html").read_text()
