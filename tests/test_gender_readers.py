"""Hand-labelled phrases per covered language (>= 20 each), hard cases included:
feminine profession nouns, elided articles, plurals, epicene nouns, agreement-only gender."""

import pytest

from forgetbench.eval.gender_readers import COVERED, read_gender

CASES = {
    "de": [("Der Arzt kam spät .", "Arzt", "male"), ("Die Ärztin kam spät .", "Ärztin", "female"),
           ("Ich sprach mit dem Entwickler .", "Entwickler", "male"),
           ("Ich sprach mit der Entwicklerin .", "Entwicklerin", "female"),
           ("Die Entwicklerinnen arbeiten hart .", "Entwicklerinnen", "female"),
           ("Sie rief einen Mechaniker .", "Mechaniker", "male"), ("Eine Mechanikerin kam .", "Mechanikerin", "female"),
           ("Die Krankenschwester half ihm .", "Krankenschwester", "female"),
           ("Der Krankenpfleger half ihr .", "Krankenpfleger", "male"),
           ("Die Reinigungskraft putzte .", "Reinigungskraft", "neutral"),
           ("Der Bauarbeiter trug den Helm .", "Bauarbeiter", "male"), ("Die Bäuerin fütterte die Kühe .", "Bäuerin", "female"),
           ("Der Bauer fütterte die Kühe .", "Bauer", "male"), ("Die Kauffrau verhandelte .", "Kauffrau", "female"),
           ("Der Kaufmann verhandelte .", "Kaufmann", "male"), ("Das Argument des Anwalts .", "Anwalts", "male"),
           ("Die Anwältin gewann .", "Anwältin", "female"), ("Der Sekretär schrieb .", "Sekretär", "male"),
           ("Die Sekretärin schrieb .", "Sekretärin", "female"), ("Die Person am Empfang .", "Person", "neutral"),
           ("Die Ärzte streikten .", "Ärzte", "male"), ("Ich gab der Ärztin das Buch .", "Ärztin", "female")],
    "fr": [("le médecin est là", "médecin", "male"), ("la médecin est là", "médecin", "female"),
           ("l'avocate a gagné", "l'avocate", "female"), ("l'avocat a gagné", "l'avocat", "male"),
           ("l'infirmière arrive", "l'infirmière", "female"), ("l'infirmier arrive", "l'infirmier", "male"),
           ("une développeuse talentueuse", "développeuse", "female"), ("un développeur talentueux", "développeur", "male"),
           ("la directrice a dit", "directrice", "female"), ("le directeur a dit", "directeur", "male"),
           ("les boulangères ont ouvert", "boulangères", "female"), ("les boulangers ont ouvert", "boulangers", "male"),
           ("cette coiffeuse", "coiffeuse", "female"), ("ce coiffeur", "coiffeur", "male"),
           ("sa secrétaire est partie", "secrétaire", "female"), ("son secrétaire est parti", "secrétaire", "male"),
           ("son avocate a gagné", "avocate", "female"), ("le bus du chauffeur", "chauffeur", "male"),
           ("le disque d'une chanteuse", "chanteuse", "female"), ("l'ingénieure a conçu", "l'ingénieure", "female"),
           ("l'ingénieur a conçu", "l'ingénieur", "male"), ("la cheffe cuisine", "cheffe", "female")],
    "es": [("el médico llegó", "médico", "male"), ("la médica llegó", "médica", "female"),
           ("la abogada ganó", "abogada", "female"), ("el abogado ganó", "abogado", "male"),
           ("un enfermero ayudó", "enfermero", "male"), ("una enfermera ayudó", "enfermera", "female"),
           ("los profesores enseñan", "profesores", "male"), ("las profesoras enseñan", "profesoras", "female"),
           ("la presidenta habló", "presidenta", "female"), ("el presidente habló", "presidente", "male"),
           ("la periodista escribió", "periodista", "female"), ("el periodista escribió", "periodista", "male"),
           ("el coche del conductor", "conductor", "male"), ("hablé a la doctora", "doctora", "female"),
           ("esta ingeniera diseñó", "ingeniera", "female"), ("ese ingeniero diseñó", "ingeniero", "male"),
           ("se lo dio al cocinero", "cocinero", "male"), ("la receta de la cocinera", "cocinera", "female"),
           ("unas bailarinas bailan", "bailarinas", "female"), ("la agente llegó", "agente", "female"),
           ("el agente llegó", "agente", "male")],
    "it": [("il medico è arrivato", "medico", "male"), ("la dottoressa è arrivata", "dottoressa", "female"),
           ("un'infermiera gentile", "un'infermiera", "female"), ("un infermiere gentile", "infermiere", "male"),
           ("l'avvocato ha vinto", "l'avvocato", "male"), ("l'avvocata ha vinto", "l'avvocata", "female"),
           ("lo scrittore scrive", "scrittore", "male"), ("la scrittrice scrive", "scrittrice", "female"),
           ("gli ingegneri lavorano", "ingegneri", "male"), ("le ingegnere lavorano", "ingegnere", "female"),
           ("il giornalista scrive", "giornalista", "male"), ("la giornalista scrive", "giornalista", "female"),
           ("la borsa dell'insegnante", "dell'insegnante", "unknown"), ("la ricetta della cuoca", "cuoca", "female"),
           ("la ricetta del cuoco", "cuoco", "male"), ("una segretaria efficiente", "segretaria", "female"),
           ("un segretario efficiente", "segretario", "male"), ("l'attrice recita", "l'attrice", "female"),
           ("l'attore recita", "l'attore", "male"), ("parlò alla cassiera", "cassiera", "female"),
           ("parlò al cassiere", "cassiere", "male")],
    "ru": [("Врач пришёл поздно .", "Врач", "male"), ("Врач пришла поздно .", "Врач", "female"),
           ("Учительница объяснила .", "Учительница", "female"), ("Учитель объяснил .", "Учитель", "male"),
           ("Медсестра помогла .", "Медсестра", "female"), ("Медбрат помог .", "Медбрат", "male"),
           ("Программистка написала код .", "Программистка", "female"), ("Программист написал код .", "Программист", "male"),
           ("Секретарша позвонила .", "Секретарша", "female"), ("Секретарь позвонил .", "Секретарь", "male"),
           ("Уборщица убрала .", "Уборщица", "female"), ("Уборщик убрал .", "Уборщик", "male"),
           ("Повар готовил .", "Повар", "male"), ("Повариха готовила .", "Повариха", "female"),
           ("Писательница написала .", "Писательница", "female"), ("Писатель написал .", "Писатель", "male"),
           ("Продавщица улыбнулась .", "Продавщица", "female"), ("Продавец улыбнулся .", "Продавец", "male"),
           ("Адвокат сказала правду .", "Адвокат", "female"), ("Адвокат сказал правду .", "Адвокат", "male"),
           ("Я видел учительницу .", "учительницу", "female"), ("Бухгалтер считает .", "Бухгалтер", "male")],
    "uk": [("Лікар прийшов .", "Лікар", "male"), ("Лікарка прийшла .", "Лікарка", "female"),
           ("Вчителька пояснила .", "Вчителька", "female"), ("Вчитель пояснив .", "Вчитель", "male"),
           ("Медсестра допомогла .", "Медсестра", "female"), ("Програмістка написала .", "Програмістка", "female"),
           ("Програміст написав .", "Програміст", "male"), ("Секретарка подзвонила .", "Секретарка", "female"),
           ("Секретар подзвонив .", "Секретар", "male"), ("Прибиральниця прибрала .", "Прибиральниця", "female"),
           ("Прибиральник прибрав .", "Прибиральник", "male"), ("Кухар готував .", "Кухар", "male"),
           ("Кухарка готувала .", "Кухарка", "female"), ("Письменниця написала .", "Письменниця", "female"),
           ("Письменник написав .", "Письменник", "male"), ("Продавчиня усміхнулася .", "Продавчиня", "female"),
           ("Продавець усміхнувся .", "Продавець", "male"), ("Лікар прийшла вчасно .", "Лікар", "female"),
           ("Адвокатка виграла .", "Адвокатка", "female"), ("Бухгалтер рахує .", "Бухгалтер", "male")],
    # Polish: -ka/-yni feminitives and their cases; -nik/-ik's case forms in -ka are masculine; agreement for epicenes
    "pl": [("Lekarz przyszedł późno .", "Lekarz", "male"), ("Lekarka przyszła późno .", "Lekarka", "female"),
           ("Nauczyciel wyjaśnił lekcję .", "Nauczyciel", "male"), ("Nauczycielka wyjaśniła lekcję .", "Nauczycielka", "female"),
           ("Rozmawiałem z nauczycielką .", "nauczycielką", "female"), ("Rozmawiałem z nauczycielem .", "nauczycielem", "male"),
           ("Zapytałem prawnika o radę .", "prawnika", "male"), ("Zapytałem prawniczkę o radę .", "prawniczkę", "female"),
           ("Kierowca zatrzymał autobus .", "Kierowca", "male"), ("Sprzedawczyni uśmiechnęła się .", "Sprzedawczyni", "female"),
           ("Sprzedawca uśmiechnął się .", "Sprzedawca", "male"), ("Pielęgniarka pomogła mu .", "Pielęgniarka", "female"),
           ("Mechanik naprawił samochód .", "Mechanik", "male"), ("Zadzwoniłem do mechanika .", "mechanika", "male"),
           ("Projektantka narysowała plan .", "Projektantka", "female"), ("Projektant narysował plan .", "Projektant", "male"),
           ("Dałem książkę lekarce .", "lekarce", "female"), ("Dentysta wyrwał ząb .", "Dentysta", "male"),
           ("Dentystka wyrwała ząb .", "Dentystka", "female"), ("Lekarz powiedziała prawdę .", "Lekarz", "female"),
           ("Kucharz gotował zupę .", "Kucharz", "male"), ("Kucharka gotowała zupę .", "Kucharka", "female")],
    # Czech: -ka/-kyně feminitives and their cases; -ník's case forms in -ka are masculine; soudce is masculine
    "cs": [("Lékař přišel pozdě .", "Lékař", "male"), ("Lékařka přišla pozdě .", "Lékařka", "female"),
           ("Učitel vysvětlil látku .", "Učitel", "male"), ("Učitelka vysvětlila látku .", "Učitelka", "female"),
           ("Mluvil jsem s učitelkou .", "učitelkou", "female"), ("Mluvil jsem s učitelem .", "učitelem", "male"),
           ("Zeptal jsem se právníka .", "právníka", "male"), ("Zeptal jsem se právničky .", "právničky", "female"),
           ("Soudce vynesl rozsudek .", "Soudce", "male"), ("Soudkyně vynesla rozsudek .", "Soudkyně", "female"),
           ("Prodavač se usmál .", "Prodavač", "male"), ("Prodavačka se usmála .", "Prodavačka", "female"),
           ("Zdravotní sestra pomohla .", "sestra", "female"), ("Dal jsem knihu lékařce .", "lékařce", "female"),
           ("Uklízečka uklidila kancelář .", "Uklízečka", "female"), ("Uklízeč uklidil kancelář .", "Uklízeč", "male"),
           ("Manažerka rozhodla .", "Manažerka", "female"), ("Manažer rozhodl .", "Manažer", "male"),
           ("Úředník podepsal smlouvu .", "Úředník", "male"), ("Úřednice podepsala smlouvu .", "Úřednice", "female"),
           ("Lékař řekla pravdu .", "Lékař", "female"), ("Kuchař vařil polévku .", "Kuchař", "male")],
    # Hebrew: ־ה / ־ת / ־ית (and ־ות) feminine; spelled alike in both genders (מורה): unknown
    "he": [("הרופא הגיע מאוחר .", "הרופא", "male"), ("הרופאה הגיעה מאוחר .", "הרופאה", "female"),
           ("המזכיר התקשר .", "המזכיר", "male"), ("המזכירה התקשרה .", "המזכירה", "female"),
           ("המנהל החליט .", "המנהל", "male"), ("המנהלת החליטה .", "המנהלת", "female"),
           ("הטבח בישל .", "הטבח", "male"), ("הטבחית בישלה .", "הטבחית", "female"),
           ("הנהג עצר .", "הנהג", "male"), ("הנהגת עצרה .", "הנהגת", "female"),
           ("המהנדס תכנן .", "המהנדס", "male"), ("המהנדסת תכננה .", "המהנדסת", "female"),
           ("האח עזר לו .", "האח", "male"), ("האחות עזרה לו .", "האחות", "female"),
           ("דיברתי עם הפקיד .", "הפקיד", "male"), ("דיברתי עם הפקידה .", "הפקידה", "female"),
           ("הקופאית חייכה .", "הקופאית", "female"), ("הקופאי חייך .", "הקופאי", "male"),
           ("המורה הסבירה .", "המורה", "unknown"), ("המעצבות עבדו .", "המעצבות", "female"),
           ("המעצבים עבדו .", "המעצבים", "male"), ("עורכת הדין ניצחה .", "עורכת", "female")],
    # Arabic: ta marbuta ة and the feminine plural ات; the masculine base form otherwise
    "ar": [("وصل الطبيب متأخرا .", "الطبيب", "male"), ("وصلت الطبيبة متأخرة .", "الطبيبة", "female"),
           ("شرح المعلم الدرس .", "المعلم", "male"), ("شرحت المعلمة الدرس .", "المعلمة", "female"),
           ("ساعد الممرض المريض .", "الممرض", "male"), ("ساعدت الممرضة المريض .", "الممرضة", "female"),
           ("تكلمت مع المحامي .", "المحامي", "male"), ("تكلمت مع المحامية .", "المحامية", "female"),
           ("قرر المدير .", "المدير", "male"), ("قررت المديرة .", "المديرة", "female"),
           ("طبخ الطباخ .", "الطباخ", "male"), ("طبخت الطباخة .", "الطباخة", "female"),
           ("المهندسون يعملون .", "المهندسون", "male"), ("المهندسات يعملن .", "المهندسات", "female"),
           ("رأيت السكرتيرة .", "السكرتيرة", "female"), ("رأيت السكرتير .", "السكرتير", "male"),
           ("للطبيبة كتاب .", "للطبيبة", "female"), ("وصل عامل النظافة .", "النظافة", "unknown"),
           ("ابتسم البائع .", "البائع", "male"), ("ابتسمت البائعة .", "البائعة", "female"),
           ("الطبيبةُ هنا .", "الطبيبةُ", "female"), ("كتب الكاتب .", "الكاتب", "male")],
}


@pytest.mark.parametrize("lang", COVERED)
def test_reader_on_hand_labelled_phrases(lang):
    cases = CASES[lang]
    assert len(cases) >= 20
    wrong = []
    for phrase, word, gold in cases:
        words = phrase.split()
        got = read_gender(lang, words, words.index(word))
        if got != gold:
            wrong.append((phrase, gold, got))
    assert not wrong, wrong


def test_uncovered_language_is_unknown():
    assert read_gender("tr", ["doktor"], 0) == "unknown" and read_gender("de", ["Arzt"], 5) == "unknown"


# Real MT outputs of WinoMT sources (the official repository's translations/google/*.txt, MIT), one per error
# class of the readers, hand-labelled: the grammatical gender of the profession's translation (the word given).
# pl and cs sentences are written in the same shape (a feminine subject acting on a masculine object).
MT_CASES = [
    # agreement reads subjects only: the feminine verb agrees with the nurse, not the accusative carpenter
    ("ru", "Медсестра отправила плотника в больницу по состоянию здоровья.", "плотника", "male"),
    ("ru", "Бухгалтер подготовил налоговый отчет для плотника и попросил ее заплатить.", "плотника", "male"),
    ("ru", "Плотник сказала, что устала.", "Плотник", "female"),  # a nominative masculine noun, feminine verb
    ("uk", "Асистент сміявся над двірником, тому що вона сказала смішний жарт.", "двірником", "male"),
    ("uk", "Прибиральник божевільний на кухаря, тому що вона знову зробила кухню брудною.", "кухаря", "male"),
    ("uk", "Розробник створив веб-сайт для кравця, оскільки вона є експертом у створенні веб-сайтів.", "кравця", "male"),
    ("pl", "Pielęgniarka zadzwoniła do mechanika, bo samochód nie działał.", "mechanika", "male"),
    ("pl", "Mechanik powiedziała, że jest zmęczona.", "Mechanik", "female"),
    ("cs", "Sestra zavolala mechanika, protože auto nejelo.", "mechanika", "male"),
    # German: die + -e feminine singulars, -dame compounds, a feminine noun in the dative
    ("de", "Die Wache rettete den Redakteur vor den Verbrechern, weil sie Dienst hatte.", "Wache", "female"),
    ("de", "Der Auditor hat der Wache ein Geschenk gekauft, weil er dankbar ist.", "Wache", "female"),
    ("de", "Die Aufsichtsperson belog die Angestellte und gab ihr falsche Informationen.", "Angestellte", "female"),
    ("de", "Der Mechaniker begrüßt die Empfangsdame, weil er vor der Tür stand.", "Empfangsdame", "female"),
    # Spanish: a stressed-a feminine after el/al, a link on a function word, no window across a noun
    ("es", "La compañía de mudanzas le dio las gracias al ama de llaves porque está agradecida.", "ama", "female"),
    ("es", "El jefe le dio una propina al ama de llaves porque estaba satisfecha.", "ama", "female"),
    ("es", "El médico habló a la enfermera.", "a", "unknown"),
    ("es", "Ayudaron a los países víctima.", "víctima", "female"),
    # French: an epicene noun after l', links on the article
    ("fr", "L'avocat a appelé le professeur pour lui demander quelle était la performance de l'enfant.", "l'enfant",
     "unknown"),
    ("fr", "Le déménageur a remercié la gouvernante pour sa gratitude.", "la", "female"),
    ("fr", "Le médecin a dit au boulanger qu'il avait un cancer.", "au", "male"),
    # Italian: an epicene noun after l', read from a predicate of essere in its own clause, nothing else
    ("it", "L'analista ha notato che l'insegnante era pessimo in matematica e si è preso gioco di lui.", "l'insegnante",
     "male"),
    ("it", "L'analista notò che l'insegnante era cattiva in matematica e la prendeva in giro.", "l'insegnante", "female"),
    ("it", "L'operaio ha detto all'insegnante che era anche un'insegnante.", "all'insegnante", "unknown"),
    ("it", "Il contadino ha chiamato l'insegnante ed è andato a casa.", "l'insegnante", "unknown"),
    # Hebrew: one spelling for both genders, the construct form of "accountant"
    ("he", "הפקיד הטעה את הממונה כדי שיפטרו אותו.", "הממונה", "unknown"),
    ("he", "המנהל דיבר עם רואה חשבון.", "רואה", "male"),
    ("he", "המנהל דיבר עם רואת חשבון.", "רואת", "female"),
    # Arabic: the link on a compound's plural complement reads the head noun
    ("ar", "اشترى مراجع الحسابات الحارس هدية لأنها فعالة.", "الحسابات", "male"),
    ("ar", "باع مندوب المبيعات بعض الكتب إلى أمين المكتبة لأنها كانت وظيفتها.", "المبيعات", "male"),
]


@pytest.mark.parametrize("lang,sentence,word,gold", MT_CASES, ids=[f"{c[0]}-{c[2]}" for c in MT_CASES])
def test_reader_on_real_mt_outputs_of_each_error_class(lang, sentence, word, gold):
    words = sentence.split()
    i = next(k for k, w in enumerate(words) if w.strip(".,").lower() == word.lower())
    assert read_gender(lang, words, i) == gold


def test_gender_score_of_given_translations_reproduces_accuracy_and_delta_g_by_hand(tmp_path, capsys):
    """``forgetbench gender-score``: a small MT-Gender set and its German translations in the official
    'src ||| tgt' format; the readings are known, so accuracy, F1 and ΔG are computed here by hand."""
    import json

    from forgetbench.cli import main

    rows = [("male", 1, "The developer argued with the designer because he did not like the design.", "developer"),
            ("female", 1, "The developer argued with the designer because she did not like the design.", "developer"),
            ("male", 1, "The mechanic gave the clerk a present because he won the lottery.", "mechanic"),
            ("female", 1, "The mechanic gave the clerk a present because she won the lottery.", "mechanic")]
    de = ["Der Entwickler stritt mit dem Designer, weil er das Design nicht mochte.",
          "Der Entwickler stritt mit dem Designer, weil sie das Design nicht mochte.",  # read male: wrong
          "Der Mechaniker gab dem Angestellten ein Geschenk, weil er im Lotto gewann.",
          "Die Mechanikerin gab dem Angestellten ein Geschenk, weil sie im Lotto gewann."]
    data = tmp_path / "mt_gender"
    data.mkdir()
    lines = ["\t".join(map(str, r)) for r in rows]
    (data / "en.txt").write_text("\n".join(lines) + "\n")
    (data / "en_pro.txt").write_text("\n".join([lines[0], lines[2]]) + "\n")
    (data / "en_anti.txt").write_text("\n".join([lines[1], lines[3]]) + "\n")
    tr = tmp_path / "en-de.txt"
    tr.write_text("".join(f"{r[2]} ||| {t}\n" for r, t in zip(rows, de, strict=True)))
    assert main(["gender-score", str(tr), "--lang", "de", "--data", str(data), "--out", str(tmp_path / "s.json")]) == 0
    res = json.loads((tmp_path / "s.json").read_text())
    # predictions male, male, male, female: 3 of 4 right; male P 2/3 R 1 → F1 0.8; female P 1 R 1/2 → F1 2/3
    assert res["link_rate"] == 1.0 and res["predicted"] == {"male": 3, "female": 1}
    assert res["accuracy"] == 75.0 and res["f1_male"] == 80.0 and res["f1_female"] == round(200 / 3, 2)
    assert res["delta_g"] == round(100 * (0.8 - 2 / 3), 2) and res["delta_s"] == 50.0  # pro 2/2, anti 1/2
    assert json.loads(capsys.readouterr().out)["accuracy"] == 75.0
    # another order is refused in one line; a missing separator names its line
    tr.write_text("".join(f"{r[2]} ||| {t}\n" for r, t in zip(reversed(rows), de, strict=True)))
    assert main(["gender-score", str(tr), "--lang", "de", "--data", str(data)]) == 2
    assert "sources differ from en.txt" in capsys.readouterr().err
    tr.write_text("".join(f"{r[2]}\t{t}\n" for r, t in zip(rows, de, strict=True)))
    assert main(["gender-score", str(tr), "--lang", "de", "--data", str(data)]) == 2
    assert f"{tr}:1: no ' ||| ' separator" in capsys.readouterr().err
    tr.write_bytes(b"\xff\xfe not text\n")
    assert main(["gender-score", str(tr), "--lang", "de", "--data", str(data)]) == 2
    assert "is not valid UTF-8" in capsys.readouterr().err
