"""Language table: ISO 639-1/3, M2M-100 code, FLORES-101 file, NTREX file, resource tier and bitext.

Tiers (docs/METHOD.md §2) from the bitext with English |L| in millions of sentence pairs, as used by
the thesis (appendix table 6.4): Very-Low ≤ 0.1M, Low 0.1–1M, Medium 1–100M, High > 100M.
Values come from ``bias_compressedMT/metadata.json`` (MIT, the study's authors). That file's
index order is undocumented; **Decision:** it is the FLORES-101 languages ordered by English
name (one Chinese). Checks that fix it: index 19 (bitext placeholder 1000, best scores) is
English, and the six High languages then are French, German, Italian, Portuguese, Russian and
Spanish, which is M2M-100's high-resource set. A pair's tier is the tier of min(ρ_x, ρ_y).
"""

from __future__ import annotations

from dataclasses import dataclass

from forgetbench.errors import ForgetbenchError

TIERS = ("Very-Low", "Low", "Medium", "High")

# (English name, ISO 639-3 / FLORES file stem, ISO 639-1 or other M2M code, NTREX stem or None,
#  thesis tier index 0..3, bitext with English in millions of pairs) — in the metadata's order.
_TABLE = [
    ("Afrikaans", "afr", "af", "afr", 1, 0.57), ("Amharic", "amh", "am", "amh", 1, 0.339),
    ("Arabic", "ara", "ar", "arb", 2, 25.2), ("Armenian", "hye", "hy", None, 1, 0.977),
    ("Assamese", "asm", "as", None, 0, 0.043), ("Asturian", "ast", "ast", None, 1, 0.124),
    ("Azerbaijani", "azj", "az", None, 1, 0.867), ("Belarusian", "bel", "be", None, 0, 0.042),
    ("Bengali", "ben", "bn", "ben", 2, 2.16), ("Bosnian", "bos", "bs", None, 1, 0.187),
    ("Bulgarian", "bul", "bg", None, 2, 10.3), ("Burmese", "mya", "my", None, 1, 0.283),
    ("Catalan", "cat", "ca", None, 2, 5.77), ("Cebuano", "ceb", "ceb", None, 1, 0.484),
    ("Chinese", "zho_simpl", "zh", "zho_Hans", 2, 37.9), ("Croatian", "hrv", "hr", None, 0, 0.042),
    ("Czech", "ces", "cs", "ces", 2, 23.2), ("Danish", "dan", "da", None, 2, 10.6),
    ("Dutch", "nld", "nl", "nld", 2, 82.4), ("English", "eng", "en", "eng", 3, 1000.0),
    ("Estonian", "est", "et", "est", 2, 4.82), ("Filipino", "tgl", "tl", None, 0, 0.071),
    ("Finnish", "fin", "fi", "fin", 2, 15.2), ("French", "fra", "fr", "fra", 3, 289.0),
    ("Fula", "ful", "ff", None, 0, 0.071), ("Galician", "glg", "gl", None, 2, 1.13),
    ("Ganda", "lug", "lg", None, 0, 0.014), ("Georgian", "kat", "ka", None, 2, 1.23),
    ("German", "deu", "de", "deu", 3, 216.0), ("Greek", "ell", "el", None, 2, 23.7),
    ("Gujarati", "guj", "gu", None, 1, 0.16), ("Hausa", "hau", "ha", "hau", 1, 0.335),
    ("Hebrew", "heb", "he", "heb", 2, 6.64), ("Hindi", "hin", "hi", "hin", 2, 3.3),
    ("Hungarian", "hun", "hu", "hun", 2, 16.3), ("Icelandic", "isl", "is", None, 2, 1.17),
    ("Igbo", "ibo", "ig", None, 1, 0.145), ("Indonesian", "ind", "id", "ind", 2, 39.1),
    ("Irish", "gle", "ga", None, 1, 0.329), ("Italian", "ita", "it", "ita", 3, 116.0),
    ("Japanese", "jpn", "ja", "jpn", 2, 23.2), ("Javanese", "jav", "jv", None, 2, 1.49),
    ("Kabuverdianu", "kea", "kea", None, 0, 0.005), ("Kamba", "kam", "kam", None, 0, 0.05),
    ("Kannada", "kan", "kn", None, 1, 0.155), ("Kazakh", "kaz", "kk", None, 1, 0.701),
    ("Khmer", "khm", "km", None, 1, 0.398), ("Korean", "kor", "ko", "kor", 2, 7.46),
    ("Kyrgyz", "kir", "ky", None, 1, 0.566), ("Lao", "lao", "lo", None, 1, 0.153),
    ("Latvian", "lav", "lv", None, 2, 4.8), ("Lingala", "lin", "ln", None, 0, 0.021),
    ("Lithuanian", "lit", "lt", None, 2, 6.69), ("Luo", "luo", "luo", None, 1, 0.142),
    ("Luxembourgish", "ltz", "lb", None, 2, 3.41), ("Macedonian", "mkd", "mk", None, 2, 1.13),
    ("Malay", "msa", "ms", None, 1, 0.968), ("Malayalam", "mal", "ml", None, 1, 0.497),
    ("Maltese", "mlt", "mt", None, 2, 5.82), ("Maori", "mri", "mi", None, 1, 0.196),
    ("Marathi", "mar", "mr", "mar", 1, 0.109), ("Mongolian", "mon", "mn", None, 1, 0.555),
    ("Nepali", "npi", "ne", None, 0, 0.02), ("Northern Sotho", "nso", "ns", None, 0, 0.014),
    ("Norwegian", "nob", "no", None, 2, 10.9), ("Nyanja", "nya", "ny", None, 1, 0.932),
    ("Occitan", "oci", "oc", None, 0, 0.005), ("Oriya", "ory", "or", None, 0, 0.005),
    ("Oromo", "orm", "om", None, 1, 0.162), ("Pashto", "pus", "ps", None, 1, 0.293),
    ("Persian", "fas", "fa", None, 2, 6.63), ("Polish", "pol", "pl", "pol", 2, 40.9),
    ("Portuguese", "por", "pt", "por", 3, 137.0), ("Punjabi", "pan", "pa", None, 1, 0.142),
    ("Romanian", "ron", "ro", None, 2, 31.9), ("Russian", "rus", "ru", "rus", 3, 127.0),
    ("Serbian", "srp", "sr", None, 2, 7.01), ("Shona", "sna", "sn", None, 1, 0.877),
    ("Sindhi", "snd", "sd", None, 0, 0.022), ("Slovak", "slk", "sk", None, 2, 10.5),
    ("Slovenian", "slv", "sl", None, 2, 5.42), ("Somali", "som", "so", None, 1, 0.358),
    ("Sorani Kurdish", "ckb", "ckb", None, 1, 0.305), ("Spanish", "spa", "es", "spa", 3, 315.0),
    ("Swahili", "swh", "sw", "swa", 1, 0.349), ("Swedish", "swe", "sv", None, 2, 54.8),
    ("Tajik", "tgk", "tg", None, 1, 0.544), ("Tamil", "tam", "ta", "tam", 1, 0.992),
    ("Telugu", "tel", "te", "tel", 1, 0.381), ("Thai", "tha", "th", None, 2, 10.6),
    ("Turkish", "tur", "tr", "tur", 2, 41.2), ("Ukrainian", "ukr", "uk", "ukr", 2, 5.44),
    ("Umbundu", "umb", "umb", None, 1, 0.217), ("Urdu", "urd", "ur", "urd", 1, 0.63),
    ("Uzbek", "uzb", "uz", None, 0, 0.0), ("Vietnamese", "vie", "vi", "vie", 2, 32.1),
    ("Welsh", "cym", "cy", None, 1, 0.826), ("Wolof", "wol", "wo", "wol", 0, 0.087),
    ("Xhosa", "xho", "xh", None, 0, 0.13), ("Yoruba", "yor", "yo", "yor", 1, 0.171),
    ("Zulu", "zul", "zu", None, 1, 0.123),
]

# docs/METHOD.md §2: languages whose M2M-100 training data mixes two scripts while FLORES has one
TWO_SCRIPT = frozenset({"sr", "cy", "az", "uz", "ja", "bn", "lo", "zh"})


@dataclass(frozen=True)
class Language:
    name: str
    iso3: str  # FLORES-101 file stem
    code: str  # M2M-100 language code (ISO 639-1 where one exists)
    ntrex: str | None
    tier: str  # thesis tier
    bitext_m: float  # bitext with English, millions of pairs

    @property
    def flores_file(self) -> str:
        return f"{self.iso3}.devtest"


LANGUAGES: dict[str, Language] = {
    code: Language(name, iso3, code, ntrex, TIERS[t], bt) for name, iso3, code, ntrex, t, bt in _TABLE
}
assert len(LANGUAGES) == 101


def language(code: str, where: str = "") -> Language:
    """The language of an M2M-100 code; ``where`` (file and key) prefixes the one-line refusal of an unknown code."""
    try:
        return LANGUAGES[code]
    except KeyError:
        from forgetbench.configs import did_you_mean

        raise ForgetbenchError(f"{where + ': ' if where else ''}unknown language code {code!r}; "
                               f"{did_you_mean(code, LANGUAGES)}use M2M-100 "
                               f"codes such as {', '.join(list(LANGUAGES)[:6])}… (see forgetbench.eval.languages)"
                               ) from None


def tier_of_bitext(millions: float) -> str:
    """docs/METHOD.md thresholds: Very-Low ≤ 100K, Low 100K–1M, Medium 1M–100M, High > 100M."""
    if millions <= 0.1:
        return "Very-Low"
    if millions <= 1:
        return "Low"
    if millions <= 100:
        return "Medium"
    return "High"


TIER_ABBR = {"Very-Low": "VL", "Low": "L", "Medium": "M", "High": "H"}
PAIR_GROUPS = [f"{a}2{b}" for a in TIER_ABBR.values() for b in TIER_ABBR.values()]  # VL2VL … H2H, the study's order


def pair_group(src_tier: str, tgt_tier: str) -> str:
    """The SMaLL-100 study's pair group of a direction, e.g. ``H2VL`` (High source, Very-Low target)."""
    return f"{TIER_ABBR[src_tier]}2{TIER_ABBR[tgt_tier]}"


def tiers_from_counts(counts: dict[str, int], thresholds: list[int]) -> dict[str, str]:
    """Tiers from training-pair counts: < t0 Very-Low, < t1 Low, < t2 Medium, else High; English High."""
    return {"en": "High"} | {lang: TIERS[sum(n >= t for t in thresholds)] for lang, n in counts.items()}


def pair_tier(src: str, tgt: str, tiers: dict[str, str] | None = None) -> str:
    """Tier of min(ρ_src, ρ_tgt); ``tiers`` overrides the thesis table (e.g. the project's own counts)."""
    get = (lambda c: tiers[c]) if tiers else (lambda c: language(c).tier)
    return min(get(src), get(tgt), key=TIERS.index)
