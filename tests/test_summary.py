"""The run's summary as one typed value: summary.json is its to_dict(), in the keys and order the report wrote
before it was typed; the bias record goes through BiasSummary unchanged; the compared variants found once."""

from forgetbench.eval.analysis import Analysis, Thresholds, VariantRow
from forgetbench.eval.bootstrap import Interval
from forgetbench.eval.summary import BiasSummary, Finding, Summary

BIAS = {"gender": {"base": {"languages": {"de": {"n": 4, "accuracy": 0.5}}, "average": {"accuracy": 0.5, "psi": 0.1},
                            "ci": {"accuracy": [0.2, 0.8]}},
                   "p30": {"languages": {"de": {"n": 4, "accuracy": 0.25}}, "average": {"accuracy": 0.25, "psi": 0.3},
                           "relative_to_base": {"accuracy": -50.0}, "ci": {"accuracy": [0.0, 0.5]},
                           "change_ci": {"accuracy": [-0.5, 0.0]}}},
        "word_sense": {"en-de": {"base": {"n": 3, "accuracy": 1.0, "accuracy_ci": [1.0, 1.0]}}},
        "aligner_comparison": {"items": 4, "same_gender_read_pct": 75.0,
                               "base": {"fast_align": {"accuracy": 0.5}, "cross_attention": {"accuracy": 0.5}}},
        "dibimt": {"de": {"base": {"n": 2, "SFII": 0.5, "SFII_ci": [0.0, 1.0]}}},
        "gender_readers": "readers 3"}


def test_the_bias_record_goes_through_its_types_unchanged():
    B = BiasSummary.from_record(BIAS)
    assert B.gender["p30"].change_ci == {"accuracy": [-0.5, 0.0]} and B.gender["base"].change_ci is None
    assert B.aligner_comparison.items == 4 and set(B.aligner_comparison.by_variant) == {"base"}
    d = B.to_dict()
    assert d == BIAS and list(d) == list(BIAS) and list(d["gender"]["p30"]) == list(BIAS["gender"]["p30"])
    assert list(d["aligner_comparison"]) == list(BIAS["aligner_comparison"])
    assert BiasSummary.from_record({}) is None
    plain = {"gender": {}, "word_sense": {}}  # a bias block with nothing read yet
    assert BiasSummary.from_record(plain).to_dict() == plain


def test_summary_json_is_the_analysis_then_the_run_with_optional_sections_only_where_present():
    A = Analysis("base", ["base", "base@torch", "p30"], Thresholds(), {"chrF": "sig"},
                 variant_table=[VariantRow("base", {}, 30.0, 10.0, 2),
                                VariantRow("p30", {}, 29.0, 9.0, 2, -3.0, -10.0, 0, Interval(-4.0, -2.0),
                                           Interval(-12.0, -8.0), {"spBLEU": {"worse": 1, "better": 0}})],
                 bases={"p30": "base"})
    S = Summary.of(A, name="demo", run={"threads": 1}, findings=[Finding("claim", "p30", "supported", "n")])
    d = S.to_dict()
    analysis_keys = [k for k in A.to_dict()]
    assert list(d)[:len(analysis_keys)] == analysis_keys and "families" not in d and "movement" not in d
    assert list(d)[len(analysis_keys):] == ["bias", "name", "model", "model_source", "quick_look", "speed",
                                            "distillation_signals", "backend", "backends", "variant_models",
                                            "tier_views", "run", "findings"]
    assert d["bias"] == {} and d["findings"] == [{"claim": "claim", "variant": "p30", "outcome": "supported",
                                                  "numbers": "n"}]
    assert d["variant_table"][0] == {"variant": "base", "size": {}, "chrF": 30.0, "spBLEU": 10.0, "pairs": 2}
    assert d["variant_table"][1]["rel_spBLEU_ci"] == [-12.0, -8.0]
    S.calibrations = {"w": {"choice": "english"}}
    assert list(S.to_dict())[-2:] == ["calibrations", "findings"]
    # the base translated by another backend is the parity check, not a comparison; found once
    assert S.comparisons == ["p30"] and S.comparisons is S.comparisons
    assert S.size_of("p30") == {} and S.base_of("p30") == "base" and S.base_of("other") == "base"
    lo, hi = S.variant_table[1].rel_spBLEU_ci  # an interval reads as the [low, high] summary.json holds
    assert (lo, hi) == (-12.0, -8.0) and S.variant_table[1].rel_spBLEU_ci[1] == -8.0
