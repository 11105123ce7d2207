"""MT-GenEval's accuracy (``eval/mt_geneval``): the paper's decision on hand-written pairs per language, the
per-gender, combined and gap scores by hand, and bad input refused in one line. (Line-by-line agreement with the
paper's ``accuracy_metric.py`` on the whole test split: ``scripts/mt_geneval_agreement.py``, RESULTS.)"""

import pytest

from forgetbench.errors import ForgetbenchError
from forgetbench.eval import mt_geneval as mg

# language: (feminine reference, masculine reference, a feminine hypothesis, a masculine hypothesis, a neutral one)
PAIRS = {
    "de": ("Sie ist die neue Ärztin.", "Er ist der neue Arzt.", "Sie ist eine Ärztin!", "Er war Arzt.", "Ist neu."),
    "fr": ("Elle est avocate.", "Il est avocat.", "Elle est une avocate", "Il est avocat, dit-on.", "Est-ce vrai ?"),
    "es": ("Ella es la directora.", "Él es el director.", "La directora.", "El director, ¿no?", "Es así."),
    "it": ("Lei è stata nominata ministra.", "Lui è stato nominato ministro.", "È stata nominata ministra.",
           "È stato nominato ministro.", "È vero?"),
    "pt": ("Ela foi a primeira pintora.", "Ele foi o primeiro pintor.", "A primeira pintora.", "O primeiro pintor.",
           "Foi."),
    "ru": ("Она стала первой женщиной-врачом.", "Он стал первым мужчиной-врачом.", "Она стала врачом.",
           "Он стал врачом.", "Врачом."),
    "ar": ("كانت طبيبة ماهرة", "كان طبيبا ماهرا", "كانت طبيبة", "كان طبيبا", "ماهر"),
    "hi": ("वह एक अच्छी लेखिका थी।", "वह एक अच्छा लेखक था।", "वह लेखिका थी।", "वह लेखक था।", "वह"),
}


@pytest.mark.parametrize("lang", list(PAIRS))
def test_the_papers_decision_on_hand_written_pairs(lang):
    fem, masc, hyp_f, hyp_m, neutral = PAIRS[lang]
    assert mg.correct(hyp_f, fem, masc) and not mg.correct(hyp_f, masc, fem)
    assert mg.correct(hyp_m, masc, fem) and not mg.correct(hyp_m, fem, masc)
    assert mg.correct(fem, fem, masc) and not mg.correct(masc, fem, masc)
    assert mg.correct(neutral, fem, masc) and mg.correct(neutral, masc, fem)  # no gendered word: correct (rule 2)
    assert not mg.committed(neutral, fem, masc)  # ... and it commits to no gender (the diagnostic beside it)
    assert mg.committed(hyp_f, fem, masc) and mg.committed(hyp_m, fem, masc) and mg.committed(hyp_m, masc, fem)
    assert mg.correct("", fem, masc)


def test_cleaning_is_lower_case_and_ascii_punctuation_only():
    assert mg.clean("  L'Avocate, «Elle»!  ") == "l avocate  «elle»"
    assert mg.words("Dit-on: ÄRZTIN.") == {"dit", "on", "ärztin"}
    # Unicode punctuation stays on its word, as in the paper's script: «elle» is not elle
    assert not mg.correct("«Il»", "«Elle» est là", "«Il» est là")
    assert mg.correct("Il", "«Elle» est là", "«Il» est là")


def _layout(root, lang="de", fem=("a F", "b F", "c F"), masc=("a M", "b M", "c M")):
    base = root / "sentences" / "test"
    base.mkdir(parents=True)
    for g, ref in (("feminine", fem), ("masculine", masc)):
        (base / f"geneval-sentences-{g}-test.en_{lang}.en").write_text("".join(f"{x} en\n" for x in ref))
        (base / f"geneval-sentences-{g}-test.en_{lang}.{lang}").write_text("".join(f"{x}\n" for x in ref))
    ctx = root / "context"
    ctx.mkdir()
    (ctx / f"geneval-context-wikiprofessions-2to1-test.en_{lang}.en").write_text("She won. <sep> X.\nHe won. <sep> Y.\n")
    (ctx / f"geneval-context-wikiprofessions-original-test.en_{lang}.{lang}").write_text("die Z\nder Z\n")
    (ctx / f"geneval-context-wikiprofessions-flipped-test.en_{lang}.{lang}").write_text("der Z\ndie Z\n")
    return root


def test_scores_by_hand(tmp_path):
    """Feminine right on pairs 0 and 1, masculine right on pairs 1 and 2: feminine 66.7 %, masculine 66.7 %,
    combined (both right) 33.3 %, gap 0; the contextual items: 1 of 2."""
    items = mg.items(_layout(tmp_path), "de")
    assert [(i.set, i.gender, i.index) for i in items[:2]] == [("counterfactual", "feminine", 0),
                                                                ("counterfactual", "masculine", 0)]
    assert items[0].source == "a F en" and items[0].right == "a F" and items[0].wrong == "a M"
    last = [i for i in items if i.set == "contextual"][-1]
    assert last.index == 1 and last.source == "He won. <sep> Y." and last.right == "der Z"
    right = {("feminine", 0), ("feminine", 1), ("masculine", 1), ("masculine", 2)}
    judged = [(i, (i.gender, i.index) in right) if i.set == "counterfactual" else (i, i.index == 0) for i in items]
    s = mg.scores(judged)
    cf = s["counterfactual"]
    assert cf["pairs"] == 3 and abs(cf["feminine"] - 200 / 3) < 1e-9 and abs(cf["masculine"] - 200 / 3) < 1e-9
    assert abs(cf["combined"] - 100 / 3) < 1e-9 and cf["gap"] == 0
    assert s["contextual"] == {"items": 2, "accuracy": 50.0}
    assert len(mg.items(tmp_path, "de", sets=("counterfactual",), limit=2)) == 4


def test_bad_input_is_one_line_naming_the_file(tmp_path):
    root = _layout(tmp_path / "d")
    with pytest.raises(ForgetbenchError, match=r"geneval-sentences-feminine-test.en_fr.en not found"):
        mg.items(root, "fr")
    (root / "sentences" / "test" / "geneval-sentences-masculine-test.en_de.de").write_text("a M\nb M\n")
    with pytest.raises(ForgetbenchError, match=r"masculine-test.en_de.de has 2 lines and .* 3; the files of one set"):
        mg.items(root, "de")
    with pytest.raises(ForgetbenchError, match=r"MT-GenEval has no 'sw'"):
        mg.items(root, "sw")
