"""NLLB-200's resource labels: each of its 202 languages High or Low by its public bitext, as a tier view.

The NLLB paper (NLLB Team et al. 2022, "No Language Left Behind", §2 and Table 1) calls a language
low-resource when it has fewer than 1 M publicly available, de-duplicated bitext samples with any other
language of its 200; the rest are high-resource. ``PUBLIC_BITEXT`` holds those counts per NLLB code as the
NLLB team tabulated them for their evaluation (fairseq, branch ``nllb``,
``examples/nllb/modeling/evaluation/train_example_count/flores200_public.py``, MIT licence; English: all of
its pairs). The labels here are derived from those counts by the paper's rule, not transcribed from its
Table 1, so a language within a few per cent of the threshold may sit on the other side of it there.

Rules:

1. ``resource(code)`` = High if ``PUBLIC_BITEXT[code] >= LOW_BELOW`` else Low (English High).
2. ``nllb_tiers()`` gives the tier of every NLLB code and of every project language name that has one
   (``models.nllb_codes.NLLB_CODES``: ``de`` and ``deu_Latn`` alike) in the project's tier vocabulary
   (``eval.languages.TIERS``: only High and Low occur), so a sweep's ``tiers: {nllb: {table: nllb-200}}`` view
   (added by itself for an NLLB model) groups pairs as ``pair_tier`` does: the tier of min(ρ_src, ρ_tgt).
3. The counts themselves (``PUBLIC_BITEXT``) stay available for other thresholds.
"""

from __future__ import annotations

from forgetbench.models.nllb_codes import NLLB_CODES

LOW_BELOW = 1_000_000  # the paper's low-resource bound: fewer than 1 M public de-duplicated bitext samples
SOURCE = ("NLLB Team et al. 2022, §2 (low-resource: < 1M public de-duplicated bitext samples); counts: fairseq "
          "branch nllb, examples/nllb/modeling/evaluation/train_example_count/flores200_public.py (MIT)")

PUBLIC_BITEXT = {
    "ace_Arab": 3_999, "ace_Latn": 36_868, "acm_Arab": 12_565, "acq_Arab": 1_600, "aeb_Arab": 18_082,
    "afr_Latn": 1_422_356, "ajp_Arab": 3_200, "aka_Latn": 34_408, "als_Latn": 2_435_935, "amh_Ethi": 336_621,
    "apc_Arab": 11_494, "arb_Arab": 43_135_757, "ars_Arab": 3_200, "ary_Arab": 24_676, "arz_Arab": 89_901,
    "asm_Beng": 13_393, "ast_Latn": 20_564, "awa_Deva": 8_276, "ayr_Latn": 69_478, "azb_Arab": 57_449,
    "azj_Latn": 26_817, "bak_Cyrl": 893_277, "bam_Latn": 24_779, "ban_Latn": 16_463, "bel_Cyrl": 146_004,
    "bem_Latn": 440_961, "ben_Beng": 1_093_064, "bho_Deva": 6_212, "bjn_Arab": 3_999, "bjn_Latn": 6_191,
    "bod_Tibt": 28_053, "bos_Latn": 5_029_667, "bug_Latn": 13_919, "bul_Cyrl": 33_141_375,
    "cat_Latn": 1_073_147, "ceb_Latn": 915_739, "ces_Latn": 46_102_871, "cjk_Latn": 32_931, "ckb_Arab": 21_958,
    "crh_Latn": 7_420, "cym_Latn": 154_340, "dan_Latn": 21_655_600, "deu_Latn": 45_488_845, "dik_Latn": 23_075,
    "dyu_Latn": 77_198, "dzo_Tibt": 11_933, "ell_Grek": 55_543_618, "eng_Latn": 161_186_278,
    "epo_Latn": 748_887, "est_Latn": 13_714_264, "eus_Latn": 1_003_513, "ewe_Latn": 979_974, "fao_Latn": 4_152,
    "fij_Latn": 346_974, "fin_Latn": 36_938_793, "fon_Latn": 113_988, "fra_Latn": 53_244_834,
    "fur_Latn": 6_248, "fuv_Latn": 18_267, "gaz_Latn": 219_780, "gla_Latn": 25_994, "gle_Latn": 286_798,
    "glg_Latn": 341_813, "grn_Latn": 24_207, "guj_Gujr": 273_247, "hat_Latn": 266_428, "hau_Latn": 527_420,
    "heb_Hebr": 25_508_032, "hin_Deva": 1_403_147, "hne_Deva": 23_345, "hrv_Latn": 28_081_756,
    "hun_Latn": 38_008_211, "hye_Armn": 186_153, "ibo_Latn": 967_562, "ilo_Latn": 840_684,
    "ind_Latn": 8_362_293, "isl_Latn": 1_488_895, "ita_Latn": 73_875_871, "jav_Latn": 72_766,
    "jpn_Jpan": 3_815_333, "kab_Latn": 79_974, "kac_Latn": 52_918, "kam_Latn": 68_422, "kan_Knda": 166_698,
    "kas_Arab": 6_186, "kas_Deva": 5_969, "kat_Geor": 350_651, "kaz_Cyrl": 4_122_504, "kbp_Latn": 56_047,
    "kea_Latn": 4_720, "khk_Cyrl": 191_190, "khm_Khmr": 76_619, "kik_Latn": 98_541, "kin_Latn": 371_609,
    "kir_Cyrl": 622_886, "kmb_Latn": 115_474, "kmr_Latn": 81_040, "knc_Arab": 6_020, "knc_Latn": 9_483,
    "kon_Latn": 277_871, "kor_Hang": 3_442_616, "lao_Laoo": 23_145, "lij_Latn": 4_862, "lim_Latn": 5_250,
    "lin_Latn": 802_196, "lit_Latn": 5_699_170, "lmo_Latn": 6_212, "ltg_Latn": 4_777, "ltz_Latn": 8_612,
    "lua_Latn": 266_533, "lug_Latn": 364_212, "luo_Latn": 223_904, "lus_Latn": 186_630, "lvs_Latn": 4_619_391,
    "mag_Deva": 13_067, "mai_Deva": 21_148, "mal_Mlym": 479_682, "mar_Deva": 300_175, "min_Latn": 15_181,
    "mkd_Cyrl": 2_798_679, "mlt_Latn": 2_727_039, "mni_Beng": 3_365, "mos_Latn": 347_729, "mri_Latn": 37_643,
    "mya_Mymr": 229_082, "nld_Latn": 60_690_866, "nno_Latn": 40_299, "nob_Latn": 299_059, "npi_Deva": 59_582,
    "nso_Latn": 678_754, "nus_Latn": 17_615, "nya_Latn": 911_784, "oci_Latn": 54_893, "ory_Orya": 192_516,
    "pag_Latn": 269_794, "pan_Guru": 255_513, "pap_Latn": 5_113, "pbt_Arab": 10_172, "pes_Arab": 5_073_311,
    "plt_Latn": 818_110, "pol_Latn": 55_246_517, "por_Latn": 58_097_212, "prs_Arab": 10_079,
    "quy_Latn": 117_832, "ron_Latn": 56_172_024, "run_Latn": 430_397, "rus_Cyrl": 49_520_694,
    "sag_Latn": 233_800, "san_Deva": 9_962, "sat_Beng": 5_092, "scn_Latn": 6_200, "shn_Mymr": 11_453,
    "sin_Sinh": 770_898, "slk_Latn": 16_387_949, "slv_Latn": 19_048_870, "smo_Latn": 349_288,
    "sna_Latn": 861_576, "snd_Arab": 18_017, "som_Latn": 63_509, "sot_Latn": 1_100_946, "spa_Latn": 68_479_221,
    "srd_Latn": 14_041, "srp_Cyrl": 758_827, "ssw_Latn": 134_141, "sun_Latn": 31_212, "swe_Latn": 20_107_978,
    "swh_Latn": 2_176_057, "szl_Latn": 6_263, "tam_Taml": 608_512, "taq_Latn": 6_189, "taq_Tfng": 4_000,
    "tat_Cyrl": 536_731, "tel_Telu": 227_336, "tgk_Cyrl": 132_779, "tgl_Latn": 1_095_407,
    "tha_Thai": 4_932_570, "tir_Ethi": 159_001, "tpi_Latn": 379_967, "tsn_Latn": 1_624_736,
    "tso_Latn": 885_958, "tuk_Latn": 219_197, "tum_Latn": 215_964, "tur_Latn": 58_268_916, "twi_Latn": 996_277,
    "tzm_Tfng": 1_501, "uig_Arab": 40_894, "ukr_Cyrl": 2_115_322, "umb_Latn": 306_192, "urd_Arab": 220_362,
    "uzn_Latn": 1_305_961, "vec_Latn": 4_577, "vie_Latn": 4_642_492, "war_Latn": 275_515, "wol_Latn": 28_541,
    "xho_Latn": 1_187_930, "ydd_Hebr": 4_301, "yor_Latn": 559_622, "yue_Hant": 64_613, "zho_Hans": 16_221_397,
    "zho_Hant": 1_090_770, "zsm_Latn": 1_251_370, "zul_Latn": 1_347_720,
}


def resource(code: str) -> str:
    """Rule 1: ``High`` or ``Low`` for an NLLB code (KeyError for a code NLLB-200 does not have)."""
    return "High" if PUBLIC_BITEXT[code] >= LOW_BELOW else "Low"


def nllb_tiers() -> dict[str, str]:
    """Rule 2: NLLB code and project name → High / Low."""
    tiers = {code: resource(code) for code in PUBLIC_BITEXT}
    return tiers | {name: tiers[code] for name, code in NLLB_CODES.items()}
