"""How ``train.corpus`` reads the shared folder's parallel files (METHOD §5): a Tatoeba pair by line feeds only
(U+0085 inside a sentence stays in it), one clear error where it is not line-parallel; a WMT-news pair by
``str.splitlines``, skipped where its counts differ; the pack copies a file's own lines."""

import pytest

from forgetbench.errors import ForgetbenchError
from forgetbench.train.corpus import filtered_copy, raw_pairs


def _folder(root, lang: str, foreign: str, eng: str, wmt: tuple[str, str] | None = None):
    """``lang``'s Tatoeba pair (and, given ``wmt``, a WMT-news pair in its first WMT folder) under ``root``."""
    from forgetbench.train.corpus import SOURCES

    iso, wmt_dirs, tato = SOURCES[lang]
    t = root / "tatoeba" / "test-v2021-08-07" / tato
    t.mkdir(parents=True)
    (t / f"tatoeba-test-v2021-08-07.{iso}").write_text(foreign, encoding="utf-8")
    (t / "tatoeba-test-v2021-08-07.eng").write_text(eng, encoding="utf-8")
    if wmt:
        w = root / "wmt_news" / wmt_dirs[0]
        w.mkdir(parents=True)
        (w / f"newstest.{iso}").write_text(wmt[0], encoding="utf-8")
        (w / "newstest.eng").write_text(wmt[1], encoding="utf-8")
    (root / "flores101" / "devtest").mkdir(parents=True)
    (root / "flores101" / "devtest" / "eng.devtest").write_text("A sentence of the test set, long enough.\n")
    return root


def test_a_tatoeba_line_holding_u0085_is_one_sentence(tmp_path):
    shared = _folder(tmp_path / "s", "pl", "Nancy wygl\u0085da.\r\nTak.\n", "Nancy looks.\r\nYes.\n")
    assert raw_pairs(shared, "pl") == [("Nancy looks.", "Nancy wygl\u0085da."), ("Yes.", "Tak.")]


def test_a_wmt_pair_cut_by_u0085_is_skipped_and_an_unparallel_tatoeba_pair_is_one_error(tmp_path):
    shared = _folder(tmp_path / "s", "de", "Ja.\n", "Yes.\n", wmt=("Ta\u0085g.\nNacht.\n", "Day.\nNight.\n"))
    assert raw_pairs(shared, "de") == [("Yes.", "Ja.")]  # the WMT file's counts differ under splitlines: skipped
    ok = _folder(tmp_path / "o", "de", "Ja.\n", "Yes.\n", wmt=("Tag.\nNacht.\n", "Day.\nNight.\n"))
    assert raw_pairs(ok, "de") == [("Day.", "Tag."), ("Night.", "Nacht."), ("Yes.", "Ja.")]
    bad = _folder(tmp_path / "b", "pl", "Tak.\nNie.\n", "Yes.\n")
    with pytest.raises(ForgetbenchError, match=r"2 lines against 1 in tatoeba-test-v2021-08-07\.eng; the Tatoeba pair"):
        raw_pairs(bad, "pl")


def test_the_pack_copies_a_files_own_lines(tmp_path):
    shared = _folder(tmp_path / "s", "pl", "Nancy wygl\u0085da.\nTak.\n", "Nancy looks.\nYes.\n")
    filtered_copy(shared, ["pl"], tmp_path / "copy")
    rel = "tatoeba/test-v2021-08-07/eng-pol/tatoeba-test-v2021-08-07.pol"
    assert (tmp_path / "copy" / rel).read_bytes() == (shared / rel).read_bytes()
    assert raw_pairs(tmp_path / "copy", "pl") == raw_pairs(shared, "pl")
