"""The study's claims as tests: supported, contradicted or inconclusive, from intervals only."""

from forgetbench.eval.analysis import (
    Difference,
    LambdaResult,
    OffTargetResult,
    PairGroup,
    Rate,
    RatePair,
    Thresholds,
    TierContrast,
    VariantRow,
)
from forgetbench.eval.bootstrap import Interval
from forgetbench.eval.findings import findings
from forgetbench.eval.summary import BiasSummary, GenderResult, Summary


def _summary(rel_ci, contrast_ci, better, worse, ot_ci, lam_l, lam_w, psi_ci):
    rates = RatePair(Rate(100, 5.0), Rate(100, 9.0))
    return Summary(
        "base", ["base", "prune-30"], Thresholds(), {}, bases={"prune-30": "base"},
        variant_table=[VariantRow("base", {}, None, None, 10),
                       VariantRow("prune-30", {}, None, None, 10, rel_spBLEU=rel_ci[0], rel_spBLEU_ci=Interval(*rel_ci),
                                  improved_pairs=better, significantly={"spBLEU": {"better": better, "worse": worse}})],
        tier_contrasts={"thesis": {"prune-30": {"spBLEU": TierContrast(3, 4, contrast_ci[0], contrast_ci)}}},
        off_target={"prune-30": OffTargetResult(rates, rates, {}, losers_change_ci=Interval(*ot_ci))},
        hallucination={"prune-30": {"losers": LambdaResult(50, None, None, 1.0, lambda_ci=Interval(*lam_l)),
                                    "winners": LambdaResult(40, None, None, 1.0, lambda_ci=Interval(*lam_w))}},
        bias=BiasSummary({"base": GenderResult({}, {"psi_star": 0.3}),
                          "prune-30": GenderResult({}, {"psi_star": 0.4}, change_ci={"psi_star": psi_ci})}))


def _outcomes(S):
    return {f.claim.split(" (")[0]: f.outcome for f in findings(S)}


def test_supported_claims():
    o = _outcomes(_summary([-3, 2], [-9, -1], 2, 5, [1, 7], [1.1, 1.4], [0.7, 0.95], [0.02, 0.2]))
    assert o == {"the average drop is small": "supported", "low-resource pairs lose most": "supported",
                 "some pairs improve": "supported", "off-target rises on losing sentences": "supported",
                 "λ > 1 on losers": "supported", "λ < 1 on winners": "supported", "gender bias ψ* rises": "supported"}


def test_contradicted_and_inconclusive_claims():
    o = _outcomes(_summary([-30, -12], [1, 5], 0, 10, [-6, -1], [0.8, 0.95], [1.05, 1.2], [-0.3, -0.1]))
    assert set(o.values()) == {"contradicted"}
    o = _outcomes(_summary([-12, 3], [-4, 2], 0, 3, [-1, 2], [0.9, 1.1], [0.9, 1.1], [-0.1, 0.1]))
    assert set(o.values()) == {"inconclusive"}
    o = _outcomes(_summary([None, None], [None, None], 0, 0, [None, None], [None, None], [None, None], [None, None]))
    assert set(o.values()) == {"inconclusive"}


def test_per_language_calibration_is_tested_on_the_low_resource_pairs_against_english_only():
    S = _summary([-3, 2], [-9, -1], 2, 5, [1, 7], [1.1, 1.4], [0.7, 0.95], [0.02, 0.2])
    S.calibrations = {"w-en": {"method": "wanda", "sparsity": 0.45, "choice": "english", "language": None},
                         "w-uni": {"method": "wanda", "sparsity": 0.45, "choice": "uniform", "language": None},
                         "w-mbs": {"method": "wanda", "sparsity": 0.45, "choice": "proportional", "language": None},
                         "s-uni": {"method": "sparsegpt", "sparsity": 0.45, "choice": "uniform", "language": None},
                         # another comparison group: not the English-only twin's step
                         "w-uni-layer": {"method": "wanda", "sparsity": 0.45, "choice": "uniform", "language": None,
                                         "scope": "layer"}}
    S.pair_groups = {"thesis": {"low": PairGroup(3, 0, {}, {
        "w-en vs w-uni": {"spBLEU": Difference(-0.38, [-0.64, -0.11])},  # English − uniform: reversed
        "w-mbs vs w-en": {"spBLEU": Difference(0.05, [-0.2, 0.3])}})}}
    got = {f.variant: f for f in findings(S) if f.claim.startswith("per-language calibration")}
    assert set(got) == {"w-uni", "w-mbs"}  # sparsegpt and the per-unit scope have no English-only twin: no claim
    assert got["w-uni"].outcome == "supported" and "uniform − english 0.38 [0.11, 0.64]" in got["w-uni"].numbers
    assert got["w-mbs"].outcome == "inconclusive" and "[-0.20, 0.30]" in got["w-mbs"].numbers


def test_who_pays_by_gender_names_the_languages_and_a_contrast_between_students():
    S = _summary([-3, 2], [-9, -1], 2, 5, [1, 7], [1.1, 1.4], [0.7, 0.95], [0.02, 0.2])
    S.bias = BiasSummary(
        {"base": GenderResult({"ru": {}, "he": {}, "de": {}}, {"psi_star": 0.3, "psi": 0.13}),
         "prune-30": GenderResult({"ru": {"psi_change_ci": [0.08, 0.24]}, "he": {"psi_change_ci": [-0.11, -0.01]},
                                   "de": {"psi_change_ci": [-0.03, 0.07]}}, {"psi_star": 0.4, "psi": 0.15},
                                  change_ci={"psi_star": [0.02, 0.2], "psi": [-0.01, 0.04]})},
        contrasts={"prune-30 vs base": {"gender": {"psi_star": {"difference": 0.1, "ci": [0.02, 0.2]}}},
                   "kd vs twin": {"gender": {"psi_star": {"difference": -0.05, "ci": [-0.09, -0.01]}},
                                  "gender_languages": {"fr": {"psi_star": {"difference": -0.2, "ci": [-0.3, -0.1]}},
                                                       "de": {"psi_star": {"difference": 0.0, "ci": [-0.1, 0.1]}}}}})
    got = {(f.claim, f.variant): f for f in findings(S)}
    skew = got["the male skew ψ rises (MT-Gender)", "prune-30"]
    assert skew.outcome == "inconclusive" and skew.numbers.endswith("; rises in ru; falls in he")
    kd = got["kd has more gender bias than twin (ψ*)", "kd"]  # a contrast against the base is the ψ* claim above
    assert kd.outcome == "contradicted" and kd.numbers == "ψ* kd − twin -0.050 [-0.090, -0.010]; falls in fr"
    assert not any(c.startswith("prune-30 has more") for c, _ in got)
