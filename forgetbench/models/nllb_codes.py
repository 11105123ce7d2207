"""NLLB-200's language codes (FLORES-200 style, ``deu_Latn``) for the project's language names.

The project names languages by their M2M-100 code (ISO 639-1 where one exists, e.g. ``de``, ``sw``,
``ast``) in configs, stores and reports. NLLB-200 (NLLB Team et al. 2022) names its 202 languages by
ISO 639-3 + ISO 15924 script, which are also FLORES-200's file stems (``deu_Latn.devtest``).

Rules:

1. ``NLLB_CODES`` maps the 101 FLORES-101 languages to the FLORES-200 code of the same devtest
   language. Where ISO 639-1 names a macrolanguage, the code is the variety FLORES-200 translated:
   ``ar`` → ``arb_Arab`` (Modern Standard Arabic), ``fa`` → ``pes_Arab``, ``lv`` → ``lvs_Latn``,
   ``ms`` → ``zsm_Latn``, ``mn`` → ``khk_Cyrl``, ``om`` → ``gaz_Latn``, ``ps`` → ``pbt_Arab``,
   ``sw`` → ``swh_Latn``, ``uz`` → ``uzn_Latn``, ``ne`` → ``npi_Deva``, ``az`` → ``azj_Latn``,
   ``et`` → ``est_Latn``, ``ff`` → ``fuv_Latn`` (Nigerian Fulfulde), ``no`` → ``nob_Latn``,
   ``zh`` → ``zho_Hans`` (FLORES-101's ``zho_simpl``).
2. A name that already has NLLB's shape (``xxx_Xxxx``) is taken as it is (``nllb_code``): any of
   the 202 languages can be named that way wherever a model is given a language (calibration data,
   distillation pairs). Sweeps and reports cover the 101 FLORES-101 languages: there an NLLB code of one
   of them stands for its project name (``NAME_OF``), and any other is refused in one line.
3. Anything else has no NLLB code: one line naming the language and the two ways to fix it.
"""

from __future__ import annotations

import re

from forgetbench.errors import ForgetbenchError

NLLB_CODES = {
    "af": "afr_Latn", "am": "amh_Ethi", "ar": "arb_Arab", "as": "asm_Beng", "ast": "ast_Latn", "az": "azj_Latn",
    "be": "bel_Cyrl", "bg": "bul_Cyrl", "bn": "ben_Beng", "bs": "bos_Latn", "ca": "cat_Latn", "ceb": "ceb_Latn",
    "ckb": "ckb_Arab", "cs": "ces_Latn", "cy": "cym_Latn", "da": "dan_Latn", "de": "deu_Latn", "el": "ell_Grek",
    "en": "eng_Latn", "es": "spa_Latn", "et": "est_Latn", "fa": "pes_Arab", "ff": "fuv_Latn", "fi": "fin_Latn",
    "fr": "fra_Latn", "ga": "gle_Latn", "gl": "glg_Latn", "gu": "guj_Gujr", "ha": "hau_Latn", "he": "heb_Hebr",
    "hi": "hin_Deva", "hr": "hrv_Latn", "hu": "hun_Latn", "hy": "hye_Armn", "id": "ind_Latn", "ig": "ibo_Latn",
    "is": "isl_Latn", "it": "ita_Latn", "ja": "jpn_Jpan", "jv": "jav_Latn", "ka": "kat_Geor", "kam": "kam_Latn",
    "kea": "kea_Latn", "kk": "kaz_Cyrl", "km": "khm_Khmr", "kn": "kan_Knda", "ko": "kor_Hang", "ky": "kir_Cyrl",
    "lb": "ltz_Latn", "lg": "lug_Latn", "ln": "lin_Latn", "lo": "lao_Laoo", "lt": "lit_Latn", "luo": "luo_Latn",
    "lv": "lvs_Latn", "mi": "mri_Latn", "mk": "mkd_Cyrl", "ml": "mal_Mlym", "mn": "khk_Cyrl", "mr": "mar_Deva",
    "ms": "zsm_Latn", "mt": "mlt_Latn", "my": "mya_Mymr", "ne": "npi_Deva", "nl": "nld_Latn", "no": "nob_Latn",
    "ns": "nso_Latn", "ny": "nya_Latn", "oc": "oci_Latn", "om": "gaz_Latn", "or": "ory_Orya", "pa": "pan_Guru",
    "pl": "pol_Latn", "ps": "pbt_Arab", "pt": "por_Latn", "ro": "ron_Latn", "ru": "rus_Cyrl", "sd": "snd_Arab",
    "sk": "slk_Latn", "sl": "slv_Latn", "sn": "sna_Latn", "so": "som_Latn", "sr": "srp_Cyrl", "sv": "swe_Latn",
    "sw": "swh_Latn", "ta": "tam_Taml", "te": "tel_Telu", "tg": "tgk_Cyrl", "th": "tha_Thai", "tl": "tgl_Latn",
    "tr": "tur_Latn", "uk": "ukr_Cyrl", "umb": "umb_Latn", "ur": "urd_Arab", "uz": "uzn_Latn", "vi": "vie_Latn",
    "wo": "wol_Latn", "xh": "xho_Latn", "yo": "yor_Latn", "zh": "zho_Hans", "zu": "zul_Latn",
}
NAME_OF = {code: name for name, code in NLLB_CODES.items()}  # the project's name of an NLLB code, where it has one
_SHAPE = re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$")


def is_nllb_code(lang: str) -> bool:
    return bool(_SHAPE.match(lang))


def nllb_code(lang: str, where: str = "") -> str:
    """The NLLB-200 code of a project language name (rule 1), or ``lang`` itself when it is one (rule 2)."""
    if is_nllb_code(lang):
        return lang
    try:
        return NLLB_CODES[lang]
    except KeyError:
        raise ForgetbenchError(f"{where + ': ' if where else ''}language {lang!r} has no NLLB-200 code in "
                               "forgetbench.models.nllb_codes; name it by its NLLB/FLORES-200 code (e.g. deu_Latn) "
                               "or use one of the 101 FLORES-101 names (de, sw, zh, …)") from None


def project_name(code: str) -> str:
    """The project's name of an NLLB code (``deu_Latn`` → ``de``); codes outside the table stay as they are."""
    return NAME_OF.get(code, code)
