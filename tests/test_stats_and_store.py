"""One formula each for mean / relative change / percentage, and the store's 'rows still missing a statistic'."""

import statistics

import pytest

from forgetbench.eval.store import Store
from forgetbench.stats import mean, pct, rel


def test_relative_change_is_one_formula_for_every_report():
    assert rel(11.0, 10.0) == pytest.approx(10.0)
    assert rel(9.0, 10.0) == pytest.approx(-10.0)
    # a measure that can be negative (gender bias ψ): moving away from zero is a positive change
    assert rel(-0.3, -0.2) == pytest.approx(-50.0) and rel(-0.1, -0.2) == pytest.approx(50.0)
    assert rel(1.0, 0.0) is None and rel(None, 1.0) is None and rel(1.0, None) is None


def test_mean_skips_missing_values_and_pct_guards_zero():
    xs = [0.1] * 10 + [None]
    assert mean(xs) == statistics.fmean([0.1] * 10) and mean([None, None]) is None and mean([]) is None
    assert pct(1, 4) == 25.0 and pct(0, 0) is None


def test_missing_stat_lists_translations_without_the_statistic(tmp_path):
    s = Store(tmp_path / "store.sqlite")
    s.add_translations([("base", "b", "en", "de", i, f"h{i}", 1.0, 0.1) for i in range(4)]
                       + [("p30", "b", "en", "de", 0, "x", 1.0, 0.1)])
    assert s.missing_stat("on_target", "base", "b", "en", "de") == {0: "h0", 1: "h1", 2: "h2", 3: "h3"}
    s.add_stats([("base", "b", "en", "de", 1, "on_target", 1.0), ("base", "b", "en", "de", 3, "on_target", None),
                 ("base", "b", "en", "de", 2, "xattn_var", 0.5)])
    # a NULL value counts as computed (an undefined identifier), another statistic does not count
    assert s.missing_stat("on_target", "base", "b", "en", "de") == {0: "h0", 2: "h2"}
    assert s.missing_stat("on_target", "p30", "b", "en", "de") == {0: "x"}
    assert s.missing_stat("on_target", "base", "b", "en", "fr") == {}
    s.close()
