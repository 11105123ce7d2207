import numpy as np
import pytest

from forgetbench.eval.bootstrap import tally
from forgetbench.eval.gender_metrics import GenderItem, gender_scores, resampled_scores
from forgetbench.eval.word_sense import (
    DibimtItem,
    MucowItem,
    dibimt_scores,
    lemma_matches,
    mucow_scores,
    tokens,
)

from .conftest import REPO


def test_gender_metrics_equal_hand_computation():
    items = ([GenderItem("male", "male", "pro")] * 4 + [GenderItem("female", "male", "anti")] * 3
             + [GenderItem("female", "female", "pro")] * 2 + [GenderItem("male", "unknown", "anti")] * 1)
    s = gender_scores(items)
    # male: tp 4, predicted 7, gold 5 -> P 4/7, R 4/5 -> F1 = 2*(4/7)(4/5)/((4/7)+(4/5)) = 2/3
    # female: tp 2, predicted 2, gold 5 -> P 1, R 2/5 -> F1 = 4/7
    assert s.f1_male == pytest.approx(2 / 3) and s.f1_female == pytest.approx(4 / 7)
    assert s.accuracy == pytest.approx(6 / 10)
    assert s.delta_g == pytest.approx(2 / 3 - 4 / 7)
    assert s.psi == pytest.approx((2 / 3 - 4 / 7) / (2 / 3 + 4 / 7))
    # pro: 6 items all correct -> acc 1; anti: 4 items, none correct -> acc 0
    assert s.delta_s == pytest.approx(1.0)
    # psi_pro: male F1 = 1, female F1 = 1 -> 0; psi_anti: male tp 0 -> F1 0, female tp 0 -> F1 0 -> undefined
    assert s.psi_star is None
    items2 = items + [GenderItem("male", "male", "anti")]
    s2 = gender_scores(items2)
    # anti now: male tp 1, predicted 4 (3 wrong female->male + 1), gold 2 -> P 1/4, R 1/2 -> F1 1/3; female F1 0 -> psi_anti 1
    assert s2.psi_star == pytest.approx(abs(1.0 - 0.0))


def test_resampled_gender_scores_equal_gender_scores_of_each_resample():
    """The vectorised bootstrap (counts × indicators) gives gender_scores' accuracy, ψ and ψ* exactly, NaN where it
    gives None (a resample without pro items, or with no correct male/female prediction)."""
    rng = np.random.default_rng(0)
    for n in (1, 3, 12, 40):
        items = [GenderItem(str(rng.choice(["male", "female"])), str(rng.choice(["male", "female", "neutral", "unknown"])),
                            rng.choice(["pro", "anti", None])) for _ in range(n)]
        idx = rng.integers(0, n, size=(200, n))
        got = resampled_scores(items, tally(idx, n))
        for r in range(200):
            ref = gender_scores([items[j] for j in idx[r]])
            for k in ("accuracy", "psi", "psi_star"):
                want = getattr(ref, k)
                assert (np.isnan(got[k][r]) if want is None else got[k][r] == want), (n, r, k)


def test_a_smaller_mt_gender_sample_is_the_start_of_a_larger_one():
    """MT-Gender samples alternate pro- and anti-stereotypical items in file order, so a stored translation's index
    names the same item at every sample size (odd ones included); each sample is balanced to within one item."""
    from forgetbench.eval.bias import gender_jobs, read_mt_gender

    folder = REPO / "data" / "mt_gender"
    full = [r for r in read_mt_gender(folder) if r.gold in ("male", "female")]
    largest, _ = gender_jobs(folder, ["de"], 41)
    for n in (1, 2, 3, 5, 6, 40):
        rows, jobs = gender_jobs(folder, ["de", "fr"], n)
        assert rows == largest[:n] and [len(j.lines()[0]) for j in jobs] == [n, n]
        pro = sum(r.stereotype == "pro" for r in rows)
        assert pro - (n - pro) in (0, 1)
    assert [r.stereotype for r in largest[:4]] == ["pro", "anti", "pro", "anti"]
    assert [r for r in full if r.stereotype == "pro"][:21] == [r for r in largest if r.stereotype == "pro"]
    assert gender_jobs(folder, ["de"], None)[0] == full


def test_mucow_scoring_fixture():
    items = [MucowItem("1", "ted", "accelerator", ("gaspedal",), ("teilchenbeschleuniger", "beschleuniger")),
             MucowItem("2", "ted", "accelerator", ("gaspedal",), ("teilchenbeschleuniger", "beschleuniger")),
             MucowItem("3", "ted", "ace", ("ass",), ("aufschlag",)),
             MucowItem("4", "ted", "ace", ("ass",), ("aufschlag",))]
    hyps = ["Ich trat auf das Gaspedal.", "Der Teilchenbeschleuniger in Genf.", "Er ist ein Ass.", "Nichts davon."]
    s = mucow_scores(items, hyps, "de")
    assert s["outcomes"] == ["correct", "wrong", "correct", "miss"]
    assert s["accuracy"] == pytest.approx(2 / 3) and s["wrong_rate"] == 0.25 and s["miss_rate"] == 0.25


def test_lemma_matching_per_language():
    assert lemma_matches("туз", tokens("У него был туз в рукаве"), "ru")
    assert lemma_matches("ракета", tokens("Ракеты взлетели"), "ru")  # stem prefix admits case endings
    assert lemma_matches("beschleuniger", tokens("Teilchenbeschleunigern"), "de")
    assert not lemma_matches("ass", tokens("Klasse"), "en")


def test_dibimt_metrics_equal_hand_computation():
    S = ("s1", "s2", "s3")
    items = [
        DibimtItem("a", "bank", "s2", S, ("ufer",), {"bank": "s1"}),  # gold index 2, degree 3
        DibimtItem("b", "bank", "s2", S, ("ufer",), {"bank": "s1"}),
        DibimtItem("c", "bank", "s1", S, ("bank",), {"ufer": "s2"}),  # gold index 1
        DibimtItem("d", "bat", "s3", ("s1", "s2", "s3", "s4"), ("fledermaus",), {"schläger": "s2", "keule": "s4"}),
        DibimtItem("e", "bat", "s3", ("s1", "s2", "s3", "s4"), ("fledermaus",), {"schläger": "s2", "keule": "s4"}),
    ]
    hyps = ["Die Bank war geschlossen.",  # bad, s1 (index 1 < 2: MFS and MFS+)
            "Am Ufer.",  # good
            "Die Bank.",  # good
            "Mit der Keule.",  # bad, s4 (index 4 > 3: neither)
            "Nichts."]  # miss
    s = dibimt_scores(items, hyps, "de")
    assert (s["good"], s["bad"], s["miss"]) == (2, 2, 1)
    assert s["accuracy"] == pytest.approx(0.5)
    # by gold index: idx2 {a bad, b good} -> .5 ; idx1 {c good} -> 0 ; idx3 {d bad} -> 1 ; mean = 0.5
    assert s["SFII"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    # by degree: 3 -> {a, b, c}: 1/3 ; 4 -> {d}: 1 ; mean 2/3
    assert s["SPDI"] == pytest.approx((1 / 3 + 1.0) / 2)
    assert s["MFS"] == pytest.approx(0.5) and s["MFS+"] == pytest.approx(0.5)
