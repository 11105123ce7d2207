"""Gender readers on sentence pairs written for them (METHOD §2.7): each pair is one sentence with a woman and one
with a man, the person's word in [brackets] and, where the reading needs it, the word that translates the source's
pronoun in {braces}. The pairs cover what suffix rules cannot know — nouns gendered in themselves (kinship,
nobility, clergy), feminine plurals and oblique forms that look masculine, agreement windows that must stop at
another noun, and epicene nouns whose pronoun tells."""

from __future__ import annotations

import pytest

from forgetbench.eval import gender_lexicon
from forgetbench.eval.alignment import tokens
from forgetbench.eval.gender_readers import read_gender, version

PAIRS = {
    "de": [
        ("Die [Mutter] las dem Kind vor .", "Der [Vater] las dem Kind vor ."),
        ("Meine [Tochter] studiert Medizin .", "Mein [Sohn] studiert Medizin ."),
        ("Die [Braut] trug ein weißes Kleid .", "Der [Bräutigam] trug einen schwarzen Anzug ."),
        ("Gestern hat [Königin] Silvia das Museum besucht .", "Gestern hat [König] Carl das Museum besucht ."),
        ("Ihre [Großmutter] wohnt in Berlin .", "Ihr [Großvater] wohnt in Berlin ."),
        ("[Nonnen] beten jeden Morgen .", "[Mönche] beten jeden Morgen ."),
        ("Das [Mädchen] spielte im Garten .", "Der [Junge] spielte im Garten ."),
        ("Die Krankheit von [Konteradmiralin] Meier war ernst .", "Die Krankheit von [Konteradmiral] Meier war ernst ."),
        ("Die Rede von [Kapitänin] Berg war kurz .", "Die Rede von [Kapitän] Berg war kurz ."),
        ("[Tante] Erna kommt morgen .", "[Onkel] Otto kommt morgen ."),
        ("Zwei [Nichten] kamen zur Feier .", "Zwei [Neffen] kamen zur Feier ."),
        ("[Mama] hat angerufen .", "[Papa] hat angerufen ."),
        ("Gestern sprach [Frau] Schmidt mit uns .", "Gestern sprach [Herr] Schmidt mit uns ."),
        ("Er half der [Witwe] beim Umzug .", "Er half dem [Witwer] beim Umzug ."),
        ("Sie dankte der [Mutter] herzlich .", "Sie dankte dem [Vater] herzlich ."),
        ("[Gräfin] Dracula wohnte in einem Schloss .", "[Graf] Dracula wohnte in einem Schloss ."),
        ("[Oma] backt Kuchen .", "[Opa] backt Kuchen ."),
        ("Die [Schwiegertochter] kam zu Besuch .", "Der [Schwiegersohn] kam zu Besuch ."),
        ("Die [Stiefmutter] war streng .", "Der [Stiefvater] war streng ."),
        ("Ihre [Töchter] spielen Fußball .", "Ihre [Söhne] spielen Fußball ."),
        ("Mit seiner [Braut] tanzte er .", "Mit ihrem [Bräutigam] tanzte sie ."),
        ("Die Hochzeit von [Prinzessin] Anne war groß .", "Die Hochzeit von [Prinz] Harry war groß ."),
        ("[Cousinen] kamen zu Besuch .", "[Cousins] kamen zu Besuch ."),
    ],
    "fr": [
        ("Les [femmes] travaillent ici .", "Les [hommes] travaillent ici ."),
        ("Il parle avec leur [fille] .", "Il parle avec leur [fils] ."),
        ("Mes [sœurs] habitent à Lyon .", "Mes [frères] habitent à Lyon ."),
        ("Chaque [mère] aime ses enfants .", "Chaque [père] aime ses enfants ."),
        ("Les [nonnes] prient .", "Les [moines] prient ."),
        ("Deux [dames] attendaient .", "Deux [messieurs] attendaient ."),
        ("Trois [reines] arrivèrent .", "Trois [rois] arrivèrent ."),
        ("Il a parlé d'une jeune [fille] .", "Il a parlé d'un jeune [garçon] ."),
        ("Paul a deux [tantes] .", "Paul a deux [oncles] ."),
        ("[Madame] Dupont est là .", "[Monsieur] Dupont est là ."),
        ("Leur [mère] est infirmière .", "Leur [père] est infirmier ."),
        ("Leur [avocate] a gagné .", "Leur [avocat] a gagné ."),
        ("Leur [directrice] est partie .", "Leur [directeur] est parti ."),
        ("Ses [nièces] jouent .", "Ses [neveux] jouent ."),
        ("Des [duchesses] sont venues .", "Des [ducs] sont venus ."),
        ("Chaque [grand-mère] raconte des histoires .", "Chaque [grand-père] raconte des histoires ."),
        ("L'[épouse] du maire est arrivée .", "L'[époux] de la maire est arrivé ."),
        ("Des [veuves] de guerre manifestent .", "Des [veufs] de guerre manifestent ."),
        ("[Mesdames] , bienvenue .", "[Messieurs] , bienvenue ."),
        ("L'[enfant] pleure parce {qu'elle} a faim .", "L'[enfant] pleure parce {qu'il} a faim ."),
        ("Aux [filles] du village , on offre des fleurs .", "Aux [garçons] du village , on offre des fleurs ."),
        ("Il a invité une [journaliste] et {elle} est venue .", "Il a invité un [journaliste] et {il} est venu ."),
        ("C'est le livre d'une [journaliste] .", "C'est le livre d'un [journaliste] ."),
    ],
    "es": [
        ("[Madre] e hija llegaron .", "[Padre] e hijo llegaron ."),
        ("Su [madre] es médica .", "Su [padre] es médico ."),
        ("Mi [nieta] estudia derecho .", "Mi [nieto] estudia derecho ."),
        ("Nuestra [actriz] favorita ganó .", "Nuestro [actor] favorito ganó ."),
        ("Su [mujer] trabaja en Madrid .", "Su [marido] trabaja en Madrid ."),
        ("Su [reina] murió ayer .", "Su [rey] murió ayer ."),
        ("Su [duquesa] llegó tarde .", "Su [duque] llegó tarde ."),
        ("Habló con su [jefa] ayer .", "Habló con su [jefe] ayer ."),
        ("Su [baronesa] cenó sola .", "Su [barón] cenó solo ."),
        ("Su [marquesa] viajó a Roma .", "Su [marqués] viajó a Roma ."),
        ("Su [emperatriz] gobernó bien .", "Su [emperador] gobernó bien ."),
        ("Su [estudiante] llegó tarde porque {ella} perdió el autobús .",
         "Su [estudiante] llegó tarde porque {él} perdió el autobús ."),
        ("Su [colega] no vino porque {ella} estaba enferma .", "Su [colega] no vino porque {él} estaba enfermo ."),
        ("Sus [monjas] rezan .", "Sus [monjes] rezan ."),
        ("Su [princesa] azul llegó .", "Su [príncipe] azul llegó ."),
        ("Su [sacerdotisa] habló .", "Su [sacerdote] habló ."),
        ("[Mamá] llamó por teléfono .", "[Papá] llamó por teléfono ."),
        ("Dos [madres] esperaban .", "Dos [padres] esperaban ."),
        ("Su [heroína] favorita es Juana .", "Su [héroe] favorito es Juan ."),
        ("Su [condesa] escribió una carta .", "Su [conde] escribió una carta ."),
        ("Conocí a su [suegra] ayer .", "Conocí a su [yerno] ayer ."),
    ],
    "it": [
        ("[Donne] e uomini votano .", "[Uomini] e donne votano ."),
        ("Tre [ragazze] giocavano .", "Tre [ragazzi] giocavano ."),
        ("Tante [madri] aspettano .", "Tanti [padri] aspettano ."),
        ("Arrivò [duchessa] Maria .", "Arrivò [duca] Ferdinando ."),
        ("[Regina] Elisabetta parlò .", "[Re] Giorgio parlò ."),
        ("[Presidente] ha detto che {lei} partirà .", "[Presidente] ha detto che {lui} partirà ."),
        ("Due [cameriere] sono arrivate .", "Due [camerieri] sono arrivati ."),
        ("Alcune [signore] aspettavano .", "Alcuni [signori] aspettavano ."),
        ("[Moglie] e marito litigano .", "[Marito] e moglie litigano ."),
        ("Molte [suore] pregano .", "Molti [frati] pregano ."),
        ("[Principessa] Anna visitò Roma .", "[Principe] Carlo visitò Roma ."),
        ("[Contessa] Matilde governava .", "[Conte] Ugolino governava ."),
        ("Due [zie] vennero .", "Due [zii] vennero ."),
        ("L'[insegnante] ha detto che {lei} era stanca .", "L'[insegnante] ha detto che {lui} era stanco ."),
        ("Poche [monache] restano .", "Pochi [monaci] restano ."),
        ("[Giudice] Rossi ha detto che {lei} decide .", "[Giudice] Rossi ha detto che {lui} decide ."),
        ("Tre [figlie] studiano .", "Tre [figli] studiano ."),
        ("Molte [nonne] cucinano .", "Molti [nonni] cucinano ."),
        ("[Vedove] di guerra protestano .", "[Vedovi] di guerra protestano ."),
        ("Cinque [sorelle] cantano .", "Cinque [fratelli] cantano ."),
    ],
    "ar": [
        ("جاءت [الأم] مبكرا .", "جاء [الأب] مبكرا ."),
        ("[النساء] يعملن هنا .", "[الرجال] يعملون هنا ."),
        ("زارت [والدتها] المستشفى .", "زار [والده] المستشفى ."),
        ("[الفتيات] يلعبن .", "[الفتية] يلعبون ."),
        ("[راهبات] الدير صلين .", "[كهنة] المعبد صلوا ."),
        ("[الأخوات] وصلن .", "[الإخوة] وصلوا ."),
        ("تحدثت [أختي] معي .", "تحدث [أخي] معي ."),
        ("[البنت] تدرس .", "[الابن] يدرس ."),
        ("[العروس] جميلة .", "[العريس] وسيم ."),
        ("[زوجته] طبيبة .", "[زوجها] طبيب ."),
        ("[الطالبات] نجحن .", "[الطلبة] نجحوا ."),
        ("[القاضيات] حكمن .", "[القضاة] حكموا ."),
        ("[الملكة] حكمت .", "[الخليفة] حكم ."),
        ("[أمه] مريضة .", "[أبوه] مريض ."),
        ("[جدتي] تطبخ .", "[جدي] يطبخ ."),
        ("[المسافرة] سافرت .", "[الرحالة] سافر ."),
        ("[القائدات] اجتمعن .", "[القادة] اجتمعوا ."),
        ("[ابنتها] ذكية .", "[ابنها] ذكي ."),
        ("[خالتي] طيبة .", "[خالي] طيب ."),
        ("[الأخت] هنا .", "[الأخ] هنا ."),
    ],
    "he": [
        ("[האם] הגיעה .", "[האב] הגיע ."),
        ("[אמא] שלי בבית .", "[אבא] שלי בבית ."),
        ("[סבתא] אפתה עוגה .", "[סבא] אפה עוגה ."),
        ("[נשים] רבות באו .", "[גברים] רבים באו ."),
        ("[השרתת] ניקתה .", "[השרת] ניקה ."),
        ("[המורה] אמרה {שהיא} עייפה .", "[המורה] אמר {שהוא} עייף ."),
        ("[המנקה] שכחה את המפתח {שלה} .", "[המנקה] שכח את המפתח {שלו} ."),
        ("[האופה] פתחה את החנות {שלה} .", "[האופה] פתח את החנות {שלו} ."),
        ("[הממונה] ביקשה שנעזור {לה} .", "[הממונה] ביקש שנעזור {לו} ."),
        ("[הקונה] שילמה כי {היא} מיהרה .", "[הקונה] שילם כי {הוא} מיהר ."),
        ("[אחותי] רופאה .", "[אחי] רופא ."),
        ("[האמהות] הגיעו .", "[האבות] הגיעו ."),
        ("[המשרתת] הביאה מים .", "[המשרת] הביא מים ."),
        ("[דודתי] באה .", "[דודי] בא ."),
        ("[אמי] חולה .", "[אבי] חולה ."),
        ("[הבונה] סיימה את הבית {שלה} .", "[הבונה] סיים את הבית {שלו} ."),
        ("פגשתי את [המורה] וביקשתי {ממנה} עזרה .", "פגשתי את [המורה] וביקשתי {ממנו} עזרה ."),
        ("ראיתי את [המנקה] ודיברתי {איתה} .", "ראיתי את [המנקה] ודיברתי {איתו} ."),
        ("[כלתי] הגיעה לחתונה .", "[חתני] הגיע לחתונה ."),
        ("שאלתי את [האופה] אם {היא} פתוחה .", "שאלתי את [האופה] אם {הוא} פתוח ."),
    ],
    "ru": [
        ("Я позвал [коллегу] , потому что {она} знает ответ .", "Я позвал [коллегу] , потому что {он} знает ответ ."),
        ("Мы навестили [сироту] и подарили {ей} книгу .", "Мы навестили [сироту] и подарили {ему} книгу ."),
        ("Все обсуждали [судью] , а {она} молчала .", "Все обсуждали [судью] , а {он} молчал ."),
        ("Мы встретили [зануду] , и {она} опять спорила .", "Мы встретили [зануду] , и {он} опять спорил ."),
        ("Учитель похвалил [непоседу] , потому что {она} старалась .",
         "Учитель похвалил [непоседу] , потому что {он} старался ."),
        ("Мы пожалели [беднягу] , ведь {она} замёрзла .", "Мы пожалели [беднягу] , ведь {он} замёрз ."),
        ("Соседи ругали [неряху] , но {она} не слушала .", "Соседи ругали [неряху] , но {он} не слушал ."),
        ("Дети дразнили [плаксу] , и {она} убежала .", "Дети дразнили [плаксу] , и {он} убежал ."),
        ("Мы накормили [обжору] , и {она} уснула .", "Мы накормили [обжору] , и {он} уснул ."),
        ("Тренер взял [левшу] в команду , потому что {она} сильная .",
         "Тренер взял [левшу] в команду , потому что {он} сильный ."),
        ("Никто не любил [сластёну] , и {её} не звали .", "Никто не любил [сластёну] , и {его} не звали ."),
        ("Мы ждали [растяпу] , но {она} опоздала .", "Мы ждали [растяпу] , но {он} опоздал ."),
        ("Все уважали [работягу] , ведь {она} трудилась .", "Все уважали [работягу] , ведь {он} трудился ."),
        ("Мы заметили [тихоню] , когда {она} запела .", "Мы заметили [тихоню] , когда {он} запел ."),
        ("Мама отругала [грязнулю] , и {она} умылась .", "Мама отругала [грязнулю] , и {он} умылся ."),
        ("Никто не звал [задиру] , но {она} пришла .", "Никто не звал [задиру] , но {он} пришёл ."),
        ("Мы уговорили [жадину] , и {она} поделилась .", "Мы уговорили [жадину] , и {он} поделился ."),
        ("Все смеялись над [недотёпой] , а {она} не обижалась .",
         "Все смеялись над [недотёпой] , а {он} не обижался ."),
        ("Директор выгнал [подлизу] , и {она} плакала .", "Директор выгнал [подлизу] , и {он} плакал ."),
        ("Мы позвали [невежу] , но {она} не ответила .", "Мы позвали [невежу] , но {он} не ответил ."),
    ],
    "uk": [
        ("Я покликав [колегу] , бо {вона} знає відповідь .", "Я покликав [колегу] , бо {він} знає відповідь ."),
        ("Ми відвідали [сироту] і подарували {їй} книжку .", "Ми відвідали [сироту] і подарували {йому} книжку ."),
        ("Усі обговорювали [суддю] , а {вона} мовчала .", "Усі обговорювали [суддю] , а {він} мовчав ."),
        ("Сусіди сварили [нероба] , але {вона} не слухала .", "Сусіди сварили [нероба] , але {він} не слухав ."),
        ("Ми помітили [задиру] , коли {вона} кричала .", "Ми помітили [задиру] , коли {він} кричав ."),
        ("Ми нагодували [ненажеру] , і {вона} заснула .", "Ми нагодували [ненажеру] , і {він} заснув ."),
        ("Діти дражнили [плаксу] , і {вона} втекла .", "Діти дражнили [плаксу] , і {він} утік ."),
        ("Ми пожаліли [бідолаху] , бо {вона} змерзла .", "Ми пожаліли [бідолаху] , бо {він} змерз ."),
        ("Ми чекали [роззяву] , але {вона} запізнилася .", "Ми чекали [роззяву] , але {він} запізнився ."),
        ("Ми вмовили [жадюгу] , і {вона} поділилася .", "Ми вмовили [жадюгу] , і {він} поділився ."),
        ("Усі сварили [замазуру] , а {вона} сміялася .", "Усі сварили [замазуру] , а {він} сміявся ."),
        ("Ми втішили [невдаху] , і {вона} усміхнулася .", "Ми втішили [невдаху] , і {він} усміхнувся ."),
        ("Мама посварила [нечупару] , і {вона} вмилася .", "Мама посварила [нечупару] , і {він} вмився ."),
        ("Ми розбудили [ледацюгу] , але {вона} знову заснула .", "Ми розбудили [ледацюгу] , але {він} знову заснув ."),
        ("Директор вигнав [підлизу] , і {вона} плакала .", "Директор вигнав [підлизу] , і {він} плакав ."),
        ("Ніхто не любив [ябеду] , і {її} не кликали .", "Ніхто не любив [ябеду] , і {його} не кликали ."),
        ("Ми переконали [скнару] , і {вона} заплатила .", "Ми переконали [скнару] , і {він} заплатив ."),
        ("Усі хвалили [шибайголову] , бо {вона} врятувала пса .", "Усі хвалили [шибайголову] , бо {він} врятував пса ."),
        ("Я знайшов [колегу] , і {вона} допомогла .", "Я знайшов [колегу] , і {він} допоміг ."),
        ("Ми запросили [суддю] , але {вона} відмовилася .", "Ми запросили [суддю] , але {він} відмовився ."),
    ],
}


def _parse(sentence: str):
    words, noun, pron = [], None, None
    for w in sentence.split():
        if "[" in w:
            noun, w = len(words), w.replace("[", "").replace("]", "")
        elif "{" in w:
            pron, w = len(words), w.replace("{", "").replace("}", "")
        words.append(w)
    return words, noun, pron


@pytest.mark.parametrize("lang", list(PAIRS))
def test_sentence_pairs_read_each_referents_gender(lang):
    assert len(PAIRS[lang]) >= 20
    wrong = []
    for pair in PAIRS[lang]:
        for sentence, gold in zip(pair, ("female", "male"), strict=True):
            words, i, p = _parse(sentence)
            got = read_gender(lang, words, i, pronoun=p)
            if got != gold:
                wrong.append((sentence, gold, got))
    assert not wrong, wrong


def test_pronouns_decide_only_where_the_noun_leaves_room():
    # a masculine noun stays masculine: the noun does not mark the woman, whatever pronoun follows
    de = "Der Arzt kam spät , weil sie im Stau stand".split()
    fr = "Le vendeur est parti parce qu'elle était malade".split()
    assert read_gender("de", de, 1, pronoun=6) == "male" and read_gender("fr", fr, 1, pronoun=5) == "male"
    # … unless the referent of the whole sentence is asked for (as WinoMT's German annotators read it)
    assert read_gender("de", de, 1, pronoun=6, pronoun_over_masculine=True) == "female"
    assert read_gender("fr", fr, 1, pronoun=5, pronoun_over_masculine=True) == "female"
    # an explicit feminine noun keeps its gender against a masculine pronoun in either reading
    for over in (False, True):
        assert read_gender("de", "Die Ärztin sagte , er komme".split(), 1, pronoun=4, pronoun_over_masculine=over) == "female"
    # in Russian a masculine noun is read as itself, whatever pronoun follows (METHOD §2.7, the counts)
    assert read_gender("ru", "Менеджер позвал кассира , потому что она устала".split(), 2, pronoun=6) == "male"
    # a non-pronoun at the pronoun's link says nothing
    assert read_gender("fr", "L' enfant pleure parce que maman dort".split(), 1, pronoun=5) == "unknown"


def test_hebrew_acronyms_stay_one_token():
    assert tokens('הספרנית הביטה במנכ"ל וביקשה') == ["הספרנית", "הביטה", 'במנכ"ל', "וביקשה"]
    assert read_gender("he", tokens('הספרנית הביטה במנכ"לית'), 2) == "female"


def test_german_reads_without_the_lexicon_package(monkeypatch):
    """Without german-nouns the tables and the rules still read the kinship and noble nouns; the version names
    the package as absent."""
    monkeypatch.setattr(gender_lexicon, "german_lexicon", lambda: {})
    for pair in PAIRS["de"][:7]:
        for sentence, gold in zip(pair, ("female", "male"), strict=True):
            words, i, p = _parse(sentence)
            assert read_gender("de", words, i, pronoun=p) == gold, sentence
    assert "german-nouns" in version()
