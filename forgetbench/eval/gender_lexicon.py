"""Person nouns whose gender is in the word itself, and the third-person pronouns, per MT-Gender language
(METHOD §2.7): what ``gender_readers`` asks before it reads articles, agreement or suffixes.

- ``lexical(lang, word)``: "male" / "female" for a noun that names a man or a woman by itself (kinship, nobility,
  clergy, common roles: *Mutter*, *roi*, *duca*, *أم*, *כלה*), in its common inflected and plural forms; None
  otherwise (a profession noun, whose gender its form or its context tells). German asks the Wiktionary lexicon
  of the ``german-nouns`` package too where it is installed (the ``gender`` extra; CC BY-SA 4.0 data, read
  from the installed package, never shipped here): its grammatical gender, for any noun form, of nouns that are
  not adjectival (*die/der Vorsitzende*: the article decides) — feminine is female unless the noun is an
  epicene feminine (*Person*, *Geisel*, *Fachkraft*: ``EPICENE_DE``: "neutral"); masculine is only the reader's
  default for a noun with no article or suffix (*Kapitän*: ``gender_readers``), never a lexical male; neuter
  says nothing except the nouns listed here (*Mädchen*). ``packages()`` names what was installed.
- ``pronoun(lang, word)``: the gender of a third-person singular pronoun form (subject, object, stressed, and
  possessives that agree with their owner: *ihr*, *его*, *שלה*, Arabic ـها/ـه), None for forms that do not
  show it (*lui*, *su*, *son*).

The tables are written here from each language's grammar and the Wiktionary categories of kinship, nobility
and clergy terms (en.wiktionary.org, "Category:<Language> terms for family members", "…nobility", "…clergy");
the tests check them on sentences written for them. Forms are lower case; French and Italian elisions are
stripped by the readers before lookup.
"""

from __future__ import annotations

import csv
from functools import cache
from importlib import metadata, resources


def _forms(*groups: str) -> frozenset[str]:
    return frozenset(w for g in groups for w in g.split())


# (female, male) per language: nouns gendered in themselves, with their usual inflected and plural forms
_LEXICAL = {
    "de": (_forms("mutter mütter müttern tochter töchter töchtern schwester schwestern tante tanten nichte nichten "
                  "oma omas großmutter großmütter schwiegermutter schwiegertochter stiefmutter stieftochter braut "
                  "bräute ehefrau ehefrauen witwe witwen frau frauen dame damen mädchen mädchens fräulein nonne "
                  "nonnen hexe hexen magd mägde zofe amme hebamme hebammen cousine cousinen mama mutti schwägerin "
                  "herzogin gräfin fürstin kaiserin königin prinzessin äbtissin gattin"),
           _forms("vater vaters väter vätern sohn sohnes sohns söhne söhnen bruder bruders brüder brüdern onkel onkels "
                  "neffe neffen opa opas großvater großvaters großväter schwiegervater schwiegersohn stiefvater "
                  "stiefsohn bräutigam bräutigams ehemann ehemannes ehemänner witwer mann mannes männer männern herr "
                  "herrn herren junge jungen knabe knaben bursche burschen könig königs könige königen prinz prinzen "
                  "kaiser kaisers herzog herzogs herzöge graf grafen fürst fürsten baron barons ritter ritters mönch "
                  "mönchs mönche mönchen abt abtes papst papstes cousin cousins vetter vettern papa schwager gatte "
                  "gatten")),
    "fr": (_forms("mère mères fille filles sœur sœurs soeur soeurs tante tantes nièce nièces grand-mère grand-mères "
                  "belle-mère belle-fille belle-sœur femme femmes épouse épouses dame dames demoiselle demoiselles "
                  "madame mesdames mademoiselle reine reines princesse princesses duchesse duchesses comtesse "
                  "comtesses baronne baronnes impératrice nonne nonnes religieuse religieuses abbesse marraine veuve "
                  "veuves fiancée mariée héroïne maman cousine cousines copine jumelle sorcière"),
           _forms("père pères fils frère frères oncle oncles neveu neveux grand-père grand-pères beau-père beau-fils "
                  "beau-frère gendre homme hommes mari maris époux monsieur messieurs roi rois prince princes duc ducs "
                  "comte comtes baron barons empereur moine moines abbé abbés prêtre prêtres parrain veuf fiancé "
                  "marié héros papa cousin cousins copain garçon garçons jumeau sorcier")),
    "es": (_forms("madre madres hija hijas hermana hermanas tía tías sobrina sobrinas abuela abuelas nieta nietas "
                  "suegra nuera esposa esposas mujer mujeres señora señoras señorita dama damas reina reinas princesa "
                  "princesas duquesa condesa baronesa marquesa emperatriz monja monjas abadesa madrina viuda viudas "
                  "novia novias actriz actrices heroína mamá prima primas niña niñas chica chicas muchacha muchachas "
                  "bruja jefa jefas"),
           _forms("padre padres hijo hijos hermano hermanos tío tíos sobrino sobrinos abuelo abuelos nieto nietos "
                  "suegro yerno esposo esposos marido maridos hombre hombres señor señores caballero caballeros rey "
                  "reyes príncipe príncipes duque duques conde condes barón barones marqués emperador monje monjes "
                  "abad sacerdote sacerdotes fraile padrino viudo novio novios actor actores héroe papá primo primos "
                  "niño niños chico chicos muchacho muchachos brujo jefe jefes")),
    "it": (_forms("madre madri figlia figlie sorella sorelle zia zie nonna nonne suocera nuora moglie mogli donna "
                  "donne signora signorina regina regine principessa principesse duchessa contessa baronessa "
                  "imperatrice suora suore monaca monache badessa madrina vedova vedove fidanzata sposa attrice "
                  "attrici eroina mamma cugina cugine ragazza ragazze bambina bambine strega"),
           _forms("padre padri figlio figli fratello fratelli zio zii nonno nonni suocero genero marito mariti uomo "
                  "uomini re principe principi duca duchi conte conti barone baroni imperatore monaco monaci frate "
                  "frati abate sacerdote sacerdoti prete preti padrino vedovo fidanzato sposo attore attori eroe eroi "
                  "papà cugino cugini ragazzo ragazzi bambino bambini stregone")),
    # Arabic and Hebrew: bare forms (the readers strip the article and clitic prefixes); Arabic's male list holds
    # the masculine nouns and broken plurals that end in ة or ات, which the suffix rule would read as female
    "ar": (_forms("أم أمهات أخت أخوات بنت بنات ابنة عمة خالة جدة زوجة امرأة مرأة نساء نسوة سيدة فتاة فتيات ملكة "
                  "أميرة راهبة عروس أرملة عجوز أنثى"),
           _forms("أب آباء أخ إخوة أخوة إخوان ابن أبناء عم أعمام خال جد أجداد زوج رجل رجال ملك ملوك أمير أمراء راهب "
                  "رهبان كاهن كهنة فتى فتية صبي صبية شاب شبان قضاة رعاة دعاة سعاة بناة رماة غزاة ولاة قادة سادة "
                  "طلبة خليفة رحالة علامة عريس ذكر")),
    "he": (_forms("אם אמא אמהות בת בנות אחות אחיות דודה סבתא כלה אישה אשה נשים גברת מלכה נסיכה נזירה אלמנה ילדה "
                  "נערה בחורה רעיה"),
           _forms("אב אבא אבות בן בנים אח אחים דוד סבא חתן איש גבר גברים אדון מלך נסיך נזיר אלמן ילד נער בחור כהן "
                  "שרת משרת")),
}

# German feminine (or neuter) nouns that name a person of either gender: the lexicon's gender is not theirs
EPICENE_DE = _forms("person personen geisel geiseln waise waisen koryphäe fachkraft lehrkraft hilfskraft "
                    "führungskraft pflegekraft reinigungskraft bedienung vertretung leitung persönlichkeit "
                    "majestät hoheit exzellenz kind kinder mitglied mitglieder personal")

_PRONOUNS = {
    "de": (_forms("sie ihr ihre ihren ihrem ihrer ihres"), _forms("er ihn ihm sein seine seinen seinem seiner seines")),
    "fr": (_forms("elle elle-même la"), _forms("il lui-même le")),
    "es": (_forms("ella la"), _forms("él lo")),
    "it": (_forms("lei ella essa la le"), _forms("lui egli esso lo gli")),
    "ru": (_forms("она её ее ей ней неё нее ею нею"), _forms("он его ему него нему им ним нём нем")),
    "uk": (_forms("вона її їй неї нею ній"), _forms("він його йому нього ньому ним нім")),
    "pl": (_forms("ona jej niej nią ją"), _forms("on jego go jemu mu niego niemu nim")),
    "cs": (_forms("ona jí ní její ji ni"), _forms("on jeho jemu mu ho něj něho ním něm")),
    "he": (_forms("היא אותה לה שלה ממנה עליה אליה בה איתה אתה עצמה"),
           _forms("הוא אותו לו שלו ממנו עליו אליו בו איתו עצמו")),
    "ar": (_forms("هي إياها"), _forms("هو إياه")),
}


def lexical(lang: str, word: str) -> str | None:
    """"female" / "male" for a noun gendered in itself (``word`` lower case, bare), "neutral" for a German epicene
    noun; None: the word's form and context decide."""
    if lang == "de":
        if word in EPICENE_DE:
            return "neutral"
    table = _LEXICAL.get(lang)
    if table is not None:
        if word in table[0]:
            return "female"
        if word in table[1]:
            return "male"
    if lang == "de" and german_lexicon().get(word) == "f":
        return "female"  # a feminine person noun (-in, Braut, Hebamme); epicene ones are listed above
    return None


def pronoun(lang: str, word: str) -> str | None:
    table = _PRONOUNS.get(lang)
    if table is None:
        return None
    if word in table[0]:
        return "female"
    if word in table[1]:
        return "male"
    if lang == "ar" and len(word) > 2:  # a suffixed pronoun on a verb, noun or preposition: ـها her, ـه his/him
        if word.endswith("ها"):
            return "female"
        if word.endswith("ه") and not word.endswith("ة"):
            return "male"
    return None


_SKIP = ("Nachname", "Vorname", "Eigenname", "Toponym", "adjektivische Deklination", "Gebundenes Lexem", "Affix")


@cache
def german_lexicon() -> dict[str, str]:
    """Lower-cased German noun form → "m" / "f" / "n" (forms with more than one gender left out) from the
    ``german-nouns`` package's Wiktionary table, read once per process; {} where the package is absent."""
    try:
        table = resources.files("german_nouns") / "nouns.csv"
    except ModuleNotFoundError:
        return {}
    out: dict[str, set] = {}
    with table.open(encoding="utf8", newline="") as f:
        rows = csv.reader(f)
        head = next(rows)
        genus = [k for k, h in enumerate(head) if h.startswith("genus")]
        cases = [k for k, h in enumerate(head) if h.startswith(("nominativ", "genitiv", "dativ", "akkusativ"))]
        for row in rows:
            if "Substantiv" not in row[1] or any(s in row[1] for s in _SKIP):
                continue
            g = {row[k] for k in genus if row[k]}
            for k in cases:
                if row[k]:
                    out.setdefault(row[k].lower(), set()).update(g)
    return {w: next(iter(g)) for w, g in out.items() if len(g) == 1}


def packages() -> list[str]:
    """The installed lexicon packages and their versions (``gender_readers.version``)."""
    out = []
    for dist in ("german-nouns",):
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist} absent")
    return out
