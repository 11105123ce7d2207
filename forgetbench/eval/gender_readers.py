"""Offline readers of the gender of a translated person noun (MT-Gender).

``read_gender(lang, words, i, pronoun=None)`` looks at ``words[i]`` (the aligned translation of the profession),
its own phrase and, where given, ``words[pronoun]`` (the word aligned to the source's pronoun), and returns
"male", "female", "neutral" or "unknown". The order of evidence (METHOD §2.7): the noun's own gender where the
word is gendered in itself (``gender_lexicon``: tables per language, and German's Wiktionary lexicon where the
``german-nouns`` package is installed); the language's rules below; the pronoun, for an epicene noun only.

Covered: de, fr, es, it (determiner + suffix rules, written here from the languages' grammar),
ru, uk (pymorphy3 with its Russian and Ukrainian dictionaries; the noun's gender, or for
common-gender nouns the agreeing past-tense verb or adjective nearby), pl, cs (suffix rules over the
feminine derivations -ka/-yni/-kyně and their case forms, the masculine agent suffixes and their case
forms, then an agreeing past-tense form -ła/-la nearby, as for Russian), he, ar (the feminine endings:
Hebrew ־ה/־ת/־ית, Arabic ة and the plural ات; the masculine base form otherwise; Hebrew nouns that spell
both genders alike, like מורה, are "unknown"). No offline morphological analyser for these four installs
from the package registries without a model download (camel-tools, MorphoDiTa, Morfeusz need data
files), hence rules; each is checked on hand-written sentences (tests/test_gender_readers.py,
tests/test_gender_lexicon.py).

Rules shared by the readers (each with real MT sentences of its shape in the tests):

- *Agreement reads subjects only.* A past-tense verb or adjective agreeing nearby tells the gender of a
  masculine noun (or a common-gender one) only when the noun is in the nominative (ru, uk: pymorphy3's
  case; pl, cs: the nominative forms of the masculine suffixes): in "Медсестра отправила [плотника]" the
  feminine verb agrees with the nurse, not with the accusative carpenter.
- *The link may land on a determiner* (fr "[la] gouvernante", "[au] boulanger"; de "[Die] Mechanikerin"): in
  French a gendered article or contraction is read itself, an elided or plural one hands over to the next
  word; in German, Spanish and Italian the noun after the determiner is read (it carries the suffix). A link
  on another function word (es "a", "de") is "unknown", never read as a suffix.
- *Windows stop at a noun*: a determiner is looked for left of the noun across prenominal modifiers only,
  never across another word (es "los países [víctima]"; de "Die Krankheit von [Konteradmiral]").
- Dictionary readings that are not common nouns (pymorphy3's surnames, "Surn") are not used.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib import metadata
from pathlib import Path

from forgetbench.eval import gender_lexicon as lexicon

COVERED = ("de", "fr", "es", "it", "ru", "uk", "pl", "cs", "he", "ar")

_PUNCT = re.compile(r"^[\W_]+|[\W_]+$", re.UNICODE)


@cache
def version() -> str:
    """What decides a reading: this module's and ``gender_lexicon``'s source (SHA-256, first 16 hex digits), the
    installed pymorphy3 with its Russian and Ukrainian dictionaries, and german-nouns (or "absent"). A run store
    keeps it beside its readings, so that a sweep resumed under other readers reads its MT-Gender items again
    instead of mixing two sets of rules."""
    src = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    src = hashlib.sha256(Path(lexicon.__file__).read_bytes() + src.encode()).hexdigest()[:16]  # and the tables
    libs = []
    for dist in ("pymorphy3", "pymorphy3-dicts-ru", "pymorphy3-dicts-uk"):
        try:
            libs.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            libs.append(f"{dist} absent")
    return f"{src}; " + ", ".join([*libs, *lexicon.packages()])


def _clean(w: str) -> str:
    return _PUNCT.sub("", w).lower()


def _left(words: list[str], i: int, n: int = 3) -> list[str]:
    return [_clean(w) for w in words[max(0, i - n) : i]][::-1]  # nearest first


# ---------------------------------------------------------------- German
_DE_MASC_ONLY = {"den", "dem", "einen", "einem", "eines", "des", "keinen", "keinem", "seinen", "seinem", "ihren", "ihrem",
                 "meinen", "meinem", "diesen", "diesem", "dieses", "jenen", "jenem", "unseren", "unserem"}
_DE_MASC_NOM = {"der", "ein", "kein", "sein", "mein", "dein", "unser", "euer", "dieser", "jener", "jeder"}
_DE_NOT_FEM_IN = {"medizin", "termin", "kamin", "vitamin", "benzin", "magazin", "berlin", "disziplin", "maschine", "rubin",
                  "cousin", "delfin", "pinguin", "kabin", "urin", "harlekin"}
_DE_FEM_NOUNS = {"frau", "krankenschwester", "hebamme", "dame", "putzfrau", "kauffrau", "geschäftsfrau", "hausfrau", "wache",
                 "aufsicht", "hilfe", "haushälterin"}
_DE_NEUTRAL = {"person", "fachkraft", "lehrkraft", "hilfskraft", "mitglied", "personal", "kraft"}


_DE_DET = {"der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "eines"}


_DE_ADJ_END = ("e", "en", "er", "es", "em")


def _de_left(words, i):
    """Determiners and attributive adjectives left of a German noun, nearest first, up to 3 words: the scan stops
    at another noun (a capitalised word that is neither the sentence's first nor a determiner) and at any word
    that is neither an inflected adjective nor a determiner (a preposition: "Die Krankheit von Konteradmiral")."""
    out = []
    for j in range(i - 1, max(-1, i - 4), -1):
        raw, w = words[j], _clean(words[j])
        if w in _DE_DET or w in _DE_MASC_ONLY or w in _DE_MASC_NOM or w in _DE_FEM_DET:
            out.append(w)
            continue
        if not w or (raw[:1].isupper() and j > 0) or not w.endswith(_DE_ADJ_END) or w in _DE_FUNCTION:
            break
        out.append(w)
    return out


_DE_FEM_DET = {"die", "eine", "keine", "diese", "seine", "ihre", "meine", "jede", "einer", "keiner", "dieser", "jener",
               "unsere", "deine"}
_DE_FUNCTION = {"hatte", "habe", "haben", "werden", "wurde", "wurden", "sie", "ohne", "gegen", "unter",
                "über", "hinter", "neben", "zwischen", "wieder", "immer", "gerne", "einige", "alle", "viele", "wenn",
                "aber", "denn", "weil", "dass", "oder", "und"}


def _de(words, i):
    w = _clean(words[i])
    if w in _DE_DET and i + 1 < len(words):  # the link landed on the article: the noun after it
        return _de(words, i + 1)
    if w in _DE_NEUTRAL or w.endswith(("kraft", "person", "personal")):
        return "neutral"
    if w in _DE_FEM_NOUNS or w.endswith(("frau", "schwester", "dame", "wache")):
        return "female"
    if (w.endswith("in") and w not in _DE_NOT_FEM_IN and len(w) > 4) or w.endswith("innen"):
        return "female"
    if w.endswith("mann") or w.endswith("männer"):
        return "male"
    for d in _de_left(words, i):
        if d in _DE_MASC_ONLY or d in _DE_MASC_NOM:
            return "male"
        if d in {"die", "eine", "keine", "diese", "seine", "ihre", "meine", "jede"}:
            # a feminine profession noun carries -in; "die Ärzte", "die Entwickler" are (generic) masculine plurals;
            # "die Angestellte", "die Vorgesetzte" (nominalised participles) and "eine … -e" are feminine singulars;
            # an umlauted -e after "die" is a plural ("die Ärzte", "die Köche")
            if w.endswith("e") and (d != "die" or not re.search("[äöü]", w)):
                return "female"
            masc_looking = w.endswith(("er", "e", "en", "t", "ent", "ant", "eur", "or", "ist", "loge", "at", "äre"))
            return "male" if masc_looking else "female"
    if lexicon.german_lexicon().get(w) == "m":  # a masculine noun without article or suffix: Kapitän, Chef
        return "male"
    return "male" if w.endswith(("er", "eur", "ent", "ant", "ist", "or", "loge", "arzt", "at")) else "unknown"


# ---------------------------------------------------------------- French
_FR_M = {"le", "un", "du", "au", "ce", "cet", "mon", "ton", "son", "quel", "aucun"}
_FR_F = {"la", "une", "cette", "ma", "ta", "sa", "quelle", "aucune"}
_FR_FEM_SUFFIX = ("eure", "euse", "rice", "ière", "ienne", "enne", "esse", "ante", "ente", "ée", "oise", "ine", "aise", "ate", "ère",
                  "ette", "elle")
_FR_MASC_SUFFIX = ("eur", "ier", "ien", "ant", "ent", "ais", "ois", "in", "é", "at", "er", "ot", "ard", "ien")


def _fr_suffix(w):
    if len(w) > 3 and w[-1] in "sx":  # plural
        w = w[:-1]
    if w.endswith(_FR_FEM_SUFFIX):
        return "female"
    if w.endswith(_FR_MASC_SUFFIX):
        return "male"
    return "unknown"


_FR_EPICENE = {"enfant", "élève", "artiste", "secrétaire", "journaliste", "comptable", "bibliothécaire", "concierge",
               "responsable", "réceptionniste", "propriétaire", "analyste", "juriste", "libraire", "guide", "camarade"}
_FR_ARTICLE = {"le": "male", "un": "male", "au": "male", "du": "male", "la": "female", "une": "female"}
_FR_HANDOVER = {"l", "d", "les", "des", "aux", "à", "de"}  # articles without gender: the noun after them says it


def _fr_noun(w):
    return "unknown" if w in _FR_EPICENE or (len(w) > 3 and w[-1] in "sx" and w[:-1] in _FR_EPICENE) else _fr_suffix(w)


def _fr(words, i):
    raw = words[i].lower()
    w = _clean(raw)
    if w in _FR_ARTICLE or w in _FR_HANDOVER:  # the link landed on the determiner
        return _FR_ARTICLE.get(w) or (_fr(words, i + 1) if i + 1 < len(words) else "unknown")
    m = re.match(r"^(l|d|qu|j)['’](.+)$", w) or re.match(r"^(l|d|qu|j)['’](.+)$", raw)
    if m:  # elided article glued to the noun: gender from the suffix (none for an epicene noun)
        return _fr_noun(_clean(m.group(2)))
    for d in _left(words, i, 2):
        if d in ("mon", "ton", "son") and w[:1] in "aeéèêiîoôuhy":
            break  # "son avocate": mon/ton/son also stand before vowel-initial feminine nouns
        if d in _FR_M or d in ("d'un", "d’un", "qu'un", "qu’un"):
            return "male"
        if d in _FR_F or d in ("d'une", "d’une", "qu'une", "qu’une"):
            return "female"
        if d.endswith(("l'", "l’")) or d in ("l", "d", "les", "des", "aux", "ces", "mes", "ses", "leurs", "de", "leur",
                                              "notre", "votre", "chaque"):
            break
    return _fr_noun(w)  # an epicene noun ("secrétaire") without a gendered determiner: unknown


# ---------------------------------------------------------------- Spanish
_ES_M = {"el", "un", "del", "al", "este", "ese", "aquel", "los", "unos", "estos", "esos", "aquellos", "otro", "ningún"}
_ES_F = {"la", "una", "esta", "esa", "aquella", "las", "unas", "estas", "esas", "aquellas", "otra", "ninguna"}


_ES_STRESSED_A = {"ama", "amas"}  # feminine nouns taking el/un before a stressed a- ("el ama de llaves")
_ES_FUNCTION = {"a", "de", "en", "con", "por", "para", "que", "y", "o", "se", "le", "lo", "su", "sus", "sin", "al", "del"}
_ES_PRENOMINAL = {"nuevo", "nueva", "buen", "buena", "gran", "mismo", "misma", "propio", "propia", "joven", "viejo",
                  "vieja", "primer", "primera", "único", "única"}


# nouns in -a that name either gender (el/la colega): their determiner or their pronoun tells
_ES_EPICENE = {"colega", "guía", "policía", "psiquiatra", "pediatra", "atleta", "idiota", "astronauta", "burócrata",
               "demócrata", "hincha", "espía", "centinela", "camarada", "homicida", "patriota", "compatriota",
               "cineasta", "nómada", "terapeuta", "políglota", "logopeda"}


def _es(words, i):
    w = _clean(words[i])
    if (w in _ES_M or w in _ES_F) and i + 1 < len(words):  # the link landed on the determiner: the noun after it
        return _es(words, i + 1)
    if w in _ES_STRESSED_A:
        return "female"
    if w in _ES_FUNCTION:  # the link landed on a function word: no suffix to read
        return "unknown"
    if w in _ES_EPICENE or (w.endswith("s") and w[:-1] in _ES_EPICENE):
        for d in _left(words, i, 2):
            if d in _ES_M or d in _ES_F:
                return "male" if d in _ES_M else "female"
            if d not in _ES_PRENOMINAL:
                break
        return "unknown"
    for d in _left(words, i, 2):
        if d in _ES_M:
            return "male"
        if d in _ES_F:
            return "female"
        if d not in _ES_PRENOMINAL:  # another word (a noun): its determiner is not this noun's
            break
    if (w.endswith(("a", "as")) and not w.endswith(("ista", "istas", "eta", "etas", "ata", "atas", "cía"))
            or w.endswith(("ora", "oras", "esa", "triz", "trices"))):
        return "female"
    if w.endswith(("o", "os", "or", "ores", "ero", "ón", "ones", "és", "eses")):  # barón, marqués
        return "male"
    return "unknown"


# ---------------------------------------------------------------- Italian
_IT_M = {"il", "lo", "un", "uno", "del", "dello", "al", "allo", "nel", "nello", "dal", "dallo", "sul", "questo", "quel", "quello",
         "i", "gli", "dei", "degli", "ai", "agli", "nessun", "suo", "mio"}
_IT_F = {"la", "una", "della", "alla", "nella", "dalla", "sulla", "questa", "quella", "le", "delle", "alle", "nelle", "un'",
         "un’", "sua", "mia", "nessuna"}


def _it_suffix(w):
    if w.endswith(("essa", "trice", "iera", "ina", "ica", "a", "esse", "trici")) and not w.endswith(("ista", "iatra")):
        return "female"
    if w.endswith(("o", "ore", "iere", "ino", "ico", "i", "tori")):
        return "male"
    return "unknown"


def _it(words, i):
    raw = words[i].lower()
    if (_clean(raw) in _IT_M or _clean(raw) in _IT_F) and i + 1 < len(words):  # a link on the determiner
        return _it(words, i + 1)
    m = re.match(r"^(un|l|dell|all|nell|dall|sull)['’](.+)$", raw)
    if m:
        if m.group(1) == "un":
            return "female"  # un' only before feminine nouns
        g = _it_suffix(_clean(m.group(2)))
        return g if g != "unknown" else _it_predicate(words, i)  # l'insegnante: the noun's own clause
    return _it_determined(words, i, raw)


_IT_ESSERE = {"è", "era", "fu", "sarà", "sia", "fosse", "sarebbe"}
_IT_ADVERBS = {"molto", "anche", "così", "troppo", "davvero", "sempre", "già", "ancora", "più", "poco", "tanto"}


def _it_predicate(words, i):
    """An epicene noun's gender from its own clause: ``N essere [adverb] X`` where X is a participle or adjective in
    -o/-a (``l'insegnante è arrivata``, ``l'insegnante era pessimo``): a predicate of *essere* agrees with its
    subject. Anything else — a verb with *avere*, a determiner (a predicate noun), a conjunction, punctuation, a
    relative or complement ``che`` (``all'insegnante che era …``: whose clause?) — says nothing: unknown."""
    k = i + 1
    if k >= len(words) or words[k].lower() not in _IT_ESSERE:
        return "unknown"
    for w in words[k + 1: k + 4]:
        w = w.lower()
        if w in _IT_ADVERBS:
            continue
        if w in _IT_M or w in _IT_F or not re.fullmatch(r"\w{3,}", w):
            return "unknown"
        return {"o": "male", "a": "female"}.get(w[-1], "unknown")
    return "unknown"


_IT_PLURAL_F = {"due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove", "dieci", "alcune", "molte", "tante",
                "poche", "queste", "quelle", "altre", "tutte", "certe", "varie"}


def _it_determined(words, i, raw):
    w = _clean(raw)
    for d in _left(words, i, 2):
        if d in _IT_M:
            return "male"
        if d in _IT_F:
            return "female"
        if d in _IT_PLURAL_F and w.endswith(("iere", "ore")):  # due cameriere, alcune signore: feminine plurals
            return "female"
    return _it_suffix(w)


# ---------------------------------------------------------------- Russian, Ukrainian (pymorphy3)
@cache
def _morph(lang: str):
    import pymorphy3

    return pymorphy3.MorphAnalyzer(lang=lang)


def _slavic(lang, words, i):
    m = _morph(lang)
    w = _clean(words[i])
    parses = [p for p in m.parse(w) if p.tag.POS == "NOUN" and "Surn" not in p.tag]  # surnames are no readings
    genders = {p.tag.gender for p in parses[:2] if p.tag.gender}
    subject = any(p.tag.case == "nomn" for p in parses[:2])  # agreement reads a nominative noun only
    if genders == {"femn"}:
        return "female"
    if genders == {"masc"}:
        # a masculine profession noun may still refer to a woman: trust an agreeing past-tense verb or adjective
        agree = _agreement(m, words, i) if subject else None
        return agree if agree == "female" else "male"
    if genders == {"neut"}:
        return "neutral"
    agree = _agreement(m, words, i) if subject or not parses else None
    if agree:
        return agree
    # feminitives the dictionaries lack (програмістка, продавчиня): productive feminine suffixes
    if w.endswith(("ка", "иця", "иня", "ница", "щица", "иха", "ша", "ки", "ку", "ицю", "иню")):
        return "female"
    return "unknown"


def _agreement(m, words, i):
    for j in [*range(i + 1, min(len(words), i + 4)), *range(i - 1, max(-1, i - 3), -1)]:
        for p in m.parse(_clean(words[j]))[:1]:
            if p.tag.POS in ("VERB", "ADJF", "PRTF") and p.tag.gender in ("masc", "femn") and p.tag.number != "plur":
                return "male" if p.tag.gender == "masc" else "female"
    return None


# ---------------------------------------------------------------- Polish, Czech (suffix rules)
# feminine derivations and their case forms; a -k- form after i/y is a masculine -nik/-ik/-yk noun's (prawnika)
_PL_FEM = re.compile(r"(?<![iy])(ka|ki|kę|ką|ek|kom|kami|kach)$|(rce|lce|nce|tce|czce)$|(yni|ynią|ynię|ini|inią|owa|ówna)$")
_PL_MASC = ("arz", "arza", "arzem", "arzowi", "arze", "erz", "ciel", "ciela", "cielem", "cielowi", "nik", "nika", "nikiem",
            "nikowi", "niku", "ik", "ika", "ikiem", "yk", "yka", "ykiem", "ant", "anta", "antem", "ent", "enta", "entem",
            "ista", "isty", "istę", "istą", "ysta", "ysty", "ystę", "log", "loga", "logiem", "or", "ora", "orem", "er",
            "era", "erem", "ca", "cy", "cę", "cą", "acz", "acza", "aczem", "ec")
_CS_FEM = re.compile(r"(?<![iíyý])(ka|ky|ku|kou|kám|kách|kami)$|(lce|řce|čce|tce|nce|erce)$|(yně|yni|yní|ová|ové|ovou)$")
_CS_FEM_NOUNS = {"sestra", "sestry", "sestře", "sestru", "sestrou", "žena", "ženy", "paní", "dáma"}
_CS_MASC = ("tel", "tele", "teli", "telem", "ář", "áře", "áři", "ářem", "ař", "aře", "aři", "ařem", "ník", "níka", "níkem",
            "níkovi", "ik", "ika", "ikem", "ent", "enta", "entem", "ant", "anta", "antem", "ista", "isty", "istu", "istou",
            "or", "ora", "orem", "ér", "éra", "érem", "er", "era", "erem", "log", "loga", "logem", "ač", "ače", "ačem", "eč",
            "eče", "ečem", "ce", "ci", "cem", "ec")


def _past_tense(words, i, fem: tuple, masc: tuple):
    """The gender of the nearest past-tense form (Polish -ła/-ł, Czech -la/-l) after, then before, the noun."""
    for j in [*range(i + 1, min(len(words), i + 4)), *range(i - 1, max(-1, i - 3), -1)]:
        w = _clean(words[j])
        if len(w) > 3 and w.endswith(fem):
            return "female"
        if len(w) > 2 and w.endswith(masc):
            return "male"
    return None


# the nominative singular forms of the masculine suffixes: only a noun in one of them is a subject
_PL_MASC_NOM = ("arz", "erz", "ciel", "nik", "ik", "yk", "ant", "ent", "ista", "ysta", "log", "or", "er", "ca", "acz",
                "ec")
_CS_MASC_NOM = ("tel", "ář", "ař", "ník", "ik", "ent", "ant", "ista", "or", "ér", "er", "log", "ač", "eč", "ce", "ec")


def _west_slavic(words, i, fem_re, fem_nouns, masc, masc_nom, past_fem, past_masc):
    w = _clean(words[i])
    if w in fem_nouns or fem_re.search(w):
        return "female"
    if w.endswith(masc):  # a masculine noun may name a woman: an agreeing feminine past tense says so, as subject
        nominative = w.endswith(masc_nom) and not w.endswith(tuple(x for x in masc if x not in masc_nom
                                                                   and x.endswith(masc_nom)))
        agree = _past_tense(words, i, past_fem, past_masc) if nominative else None
        return "female" if agree == "female" else "male"
    return _past_tense(words, i, past_fem, past_masc) or "unknown"


def _pl(words, i):
    return _west_slavic(words, i, _PL_FEM, {"kobieta", "kobiety", "pani"}, _PL_MASC, _PL_MASC_NOM, ("ła", "łaby"),
                        ("ł", "łby"))


def _cs(words, i):
    return _west_slavic(words, i, _CS_FEM, _CS_FEM_NOUNS, _CS_MASC, _CS_MASC_NOM, ("la", "lá"), ("l",))


# ---------------------------------------------------------------- Hebrew, Arabic (feminine endings)
_MARKS = re.compile(r"[\u0591-\u05C7\u064B-\u065F\u0670]")  # Hebrew points and cantillation, Arabic harakat
_HE_BOTH = {"מורה", "מנקה", "אופה", "רואה", "קונה", "בונה", "ממונה"}  # one spelling, both genders
_HE_CONSTRUCT = {"רואה": "male", "רואת": "female"}  # רואה/רואת חשבון: the construct form tells the accountant's gender
_HE_PREFIX = re.compile(r"^[והבלשכמ]?ה?")


def _he(words, i):
    w = _MARKS.sub("", _clean(words[i])).replace("\u05f3", "").replace("'", "").replace('"', "").replace("\u05f4", "")
    bare = _HE_PREFIX.sub("", w, count=1)
    if i + 1 < len(words) and _clean(words[i + 1]) == "חשבון" and (w in _HE_CONSTRUCT or bare in _HE_CONSTRUCT):
        return _HE_CONSTRUCT.get(w) or _HE_CONSTRUCT[bare]
    if w in _HE_BOTH or _HE_PREFIX.sub("", w, count=1) in _HE_BOTH:
        return "unknown"
    if w.endswith(("ת", "ה")):  # -ה, -ת, -ית, plural -ות
        return "female"
    return "male" if len(w) >= 2 else "unknown"


_AR_NOT_PERSON = {"نظافة", "شرطة", "صحة", "حراسة", "إدارة", "خدمة"}  # second words of compounds (عامل نظافة)


_AR_COMPLEMENT = {"حسابات", "مبيعات", "مكتبة", "منزل", "بيت"}  # second words of compounds (مراجع الحسابات, أمين المكتبة)


def _ar(words, i):
    w = _MARKS.sub("", _clean(words[i])).replace("\u0640", "")  # tatweel
    if i > 0 and re.sub(r"^(وال|بال|فال|كال|لل|ال)", "", w) in _AR_COMPLEMENT:  # the link on the compound's complement
        return _ar(words, i - 1)
    if w in _AR_NOT_PERSON or re.sub(r"^(وال|بال|فال|كال|لل|ال)", "", w) in _AR_NOT_PERSON:
        return "unknown"
    if w.endswith(("ة", "ات")):  # ta marbuta, feminine plural
        return "female"
    if len(w) >= 5 and w.endswith(_AR_TA_SUFFIXED):  # ة written ت before a possessive suffix: والدتها, زميلته
        return "female"
    return "male" if len(w) >= 3 else "unknown"


_AR_TA_SUFFIXED = ("تها", "ته", "تهم", "تهن", "تي", "تك", "تنا", "تكم")


_READERS = {"de": _de, "fr": _fr, "es": _es, "it": _it, "ru": lambda w, i: _slavic("ru", w, i),
            "uk": lambda w, i: _slavic("uk", w, i), "pl": _pl, "cs": _cs, "he": _he, "ar": _ar}


def read_gender(lang: str, words: list[str], i: int, pronoun: int | None = None,
                pronoun_over_masculine: bool = False) -> str:
    """The gender of the person ``words[i]`` names, in this order (METHOD §2.7): (1) the noun's own gender where
    the word is gendered in itself (``gender_lexicon.lexical``: *Mutter*, *roi*, *أم*); (2) the language's reader:
    feminine marking (derivation, an agreeing determiner or adjective in the noun's own phrase) and the
    masculine or epicene readings of its rules; (3) where that reading is unknown (an epicene noun:
    *l'insegnante*, *המורה*), the pronoun the translation gives the person: ``pronoun``, the index of the word
    linked to the source sentence's pronoun (WinoMT's pronoun refers to the profession), when that word is a
    gendered third-person pronoun. A masculine noun stays masculine whatever pronoun follows (*der Arzt … sie*:
    the noun does not mark the woman, which is what MT-Gender measures); ``pronoun_over_masculine`` reads the
    whole sentence's referent instead (the pronoun outweighs a masculine noun), for comparison with annotators
    who read it so (``scripts/gender_human_agreement.py``)."""
    if lang not in _READERS or not 0 <= i < len(words):
        return "unknown"
    lex = _lexical_at(lang, words, i)
    if lex:
        return lex
    g = _READERS[lang](words, i)
    if pronoun is not None and pronoun != i and 0 <= pronoun < len(words) and (
            g == "unknown" or (g == "male" and pronoun_over_masculine)):
        return _pronoun_gender(lang, words[pronoun]) or g
    return g


_ELISION = re.compile(r"^(l|d|qu|j|s|un|dell|all|nell|dall|sull|dall|coll)['’]")
_AR_PREFIX = re.compile(r"^(وال|فال|بال|كال|لل|ال|و|ف)")
_DETERMINERS = {"de": _DE_DET, "fr": set(_FR_ARTICLE) | _FR_HANDOVER, "es": _ES_M | _ES_F, "it": _IT_M | _IT_F}


def _lexical_at(lang, words, i):
    k = i
    while k + 1 < len(words) and _clean(words[k]) in _DETERMINERS.get(lang, ()):  # a link on the determiner
        k += 1
    w = _MARKS.sub("", _clean(words[k]))
    candidates = [w, _ELISION.sub("", w)]
    if lang in ("fr", "es") and len(w) > 3 and w[-1] in "sx":  # plurals: veufs, neveux, madres
        candidates.append(w[:-1])
    if lang == "ar":
        stems = {w, _AR_PREFIX.sub("", w), _AR_PREFIX.sub("", _AR_PREFIX.sub("", w))}
        bare = {re.sub(f"({_AR_POSSESSIVE})$", "", c) for c in stems if len(c) > 2}  # أختي, أمه, زوجها
        candidates += [*stems, *bare, *(c[:-1] + "ة" for c in bare if c.endswith("ت"))]  # جدتي → جدة
    elif lang == "he":
        w = w.replace('"', "").replace("\u05f4", "")
        stems = {w, _HE_PREFIX.sub("", w, count=1), re.sub("^[והבלשכמ]", "", w)}
        bare = {_HE_FINAL(re.sub(f"({_HE_POSSESSIVE})$", "", c)) for c in stems if len(c) > 2}  # אחותי, אמי
        candidates += [*stems, *bare, *(c[:-1] + "ה" for c in bare if c.endswith("ת"))]  # דודתי → דודה
    for c in candidates:
        g = lexicon.lexical(lang, c)
        if g:
            return g
    return None


_AR_POSSESSIVE = "ها|هما|هم|هن|كم|كن|نا|ه|ي|ك"
_HE_POSSESSIVE = "יה|יו|נו|כם|כן|הם|הן|י|ו|ך|ם|ן"
_HE_FINALS = {"מ": "ם", "נ": "ן", "צ": "ץ", "פ": "ף", "כ": "ך"}


def _HE_FINAL(w):
    return w[:-1] + _HE_FINALS.get(w[-1], w[-1]) if w else w


def _pronoun_gender(lang, word):
    w = _ELISION.sub("", _MARKS.sub("", _clean(word)))  # qu'elle
    g = lexicon.pronoun(lang, w)
    if g is None and lang == "he":
        g = lexicon.pronoun(lang, re.sub("^[וש]", "", w))
    return g
