"""The cross-method table of most affected pairs (the study's Table 5.11): each variant's k lowest pairs, the
methods read from the artefacts, pairs most affected under both pruning and quantisation first."""

from forgetbench.eval.analysis import PairResult, Thresholds, VariantRow
from forgetbench.eval.bootstrap import Interval, PairDifference
from forgetbench.eval.summary import Summary
from forgetbench.report.tables import _most_affected_table, method_of, most_affected

SIZES = {"base": {"dense_bytes": 10, "nominal_ratio": 1.0}, "p": {"sparse_bytes": 7, "nominal_ratio": 0.7},
         "q": {"int8_bytes": 3, "nominal_ratio": 0.25}, "nf4": {"dense_bytes": 10, "nominal_ratio": 0.125},
         "student": {"dense_bytes": 5, "nominal_ratio": 1.0}}


def _summary(rel: dict[str, list[float]]) -> Summary:
    variants = list(rel)
    pairs = [PairResult("flores", "en", x, 10, {"thesis": "High"}, {}, {}, {},
                        {v: {"spBLEU": rel[v][k], "chrF": 0.0} for v in variants}, True, False,
                        {v: {"spBLEU": PairDifference(0.0, Interval(0, 0), rel[v][k], Interval(rel[v][k] - 1, rel[v][k] + 1),
                                                      1.0)} for v in variants})
             for k, x in enumerate("abcdef")]
    return Summary("base", ["base", *variants], Thresholds(), {}, pairs=pairs, bases={v: "base" for v in variants},
                   variant_table=[VariantRow(v, size, None, None, 6) for v, size in SIZES.items()])


def test_methods_come_from_the_artefacts():
    S = _summary({"p": [0] * 6})
    assert [method_of(S, v) for v in ("p", "q", "nf4", "student")] == ["pruning", "quantisation", "quantisation",
                                                                      "other model"]


def test_pairs_affected_under_both_methods_come_first_then_by_mean_rank():
    #                 en-a  en-b  en-c  en-d  en-e  en-f
    S = _summary({"p": [-30, -20, -1, -10, 5, 0], "q": [-2, -25, -40, 3, 4, 1]})
    rows = most_affected(S, k=2)
    assert [r["pair"] for r in rows] == ["en-b", "en-a", "en-c"]  # b: both (ranks 2, 1); a: pruning #1; c: quant. #1
    assert rows[0]["methods"] == ["pruning", "quantisation"] and rows[0]["ranks"] == {"p": 2, "q": 2}
    T = _most_affected_table(S)["most_affected"]
    # k = 5: every pair but en-e is among both variants' five lowest; mean ranks a 2, b 2, c 2.5, d 4, f 4.5
    assert [r[0] for r in T[1]] == ["en-a", "en-b", "en-c", "en-d", "en-f"]  # en-e: in no list
    assert T[1][0][:3] == ["en-a", "High", "pruning & quantisation"] and T[1][0][3:] == ["-30.0 [-31.0, -29.0] (#1)",
                                                                                         "-2.0 [-3.0, -1.0] (#3)"]


def test_no_table_with_a_single_method():
    assert _most_affected_table(_summary({"p": [0] * 6})) == {}
