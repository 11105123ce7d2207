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
    assert read_gender("he", ["הרופאה"], 0) == "unknown"
