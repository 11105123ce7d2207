¿cuánto hace más o menos que tiene estos síntomas?
y siempre el dolor de pecho debe tratarse de esta manera, en especial a su edad
y también fiebre
y también debe controlarse su colesterol y presión arterial
¿y tiene fiebre ahora?
¿y siente este dolor de pecho ahora?
y también tiene dificultad para respirar
¿y puede decirme qué otros síntomas tiene además de este?
y cuánto ha tenido de fiebre
y también tengo tos
y tengo un poco de resfriado y tos
y hoy realmente tengo un dolor de pecho bastante fuerte
y es este el momento indicado para su alergia al polen
y aparece el dolor de pecho
y creo que tengo un poco de fiebre
y quiero que describa dónde siente el dolor de pecho
y están teniendo algo de fiebre también
y con sus antecedentes de diabetes
y sabes, siento como que el pecho se me estruja
y sabes, la gente me tose encima todo el tiempo
y siente dolor de pecho
y dijo que es una presión en el pecho
alguien de la familia tiene un problema cardíaco, enfermedad cardíaca, ataque cardíaco, colesterol alto, presión arterial alta
¿algún otro síntoma o problema que note además del dolor muscular?
¿hay otras personas enfermas como usted con los mismos síntomas en su casa?
¿tiene algún otro síntoma?
¿tiene algo de falta de aire?
todavía siente dolor en el pecho
porque esta es la temporada de gripe
pero, además, no deberían ignorarnos por el dolor de pecho de origen cardíaco
pero ahora un problema más importante es este dolor de pecho
pero tengo dificultad para respirar
pero sé que muchas personas me tosen encima
pero siempre debemos tratar el dolor de pecho con la máxima seriedad
¿pero ahora estás respirando bien, no?
por este dolor de pecho me olvidé por completo
se siente como si alguien te estrujara el pecho
todavía se siente como falta de aire
¿se quejan de estar enfermos con síntomas similares?
¿tiene alguna otra enfermedad crónica, como presión arterial alta o algo como eso?
¿tiene alguna otra enfermedad, problema médico crónico, como diabetes?
¿tiene algo de falta de aire además de dolor de pecho?
¿tiene presión arterial alta?
¿tiene algunos episodios de falta de aire con eso?
¿sabe qué síntomas tenía?
¿ve la imagen?
beba mucho líquido hoy
sin embargo, me hago pruebas para la diabetes
sin embargo, tiene síntomas bastante parecidos a los míos
¿cuánto tiene de fiebre?
¿cómo está su presión arterial?
si sigue teniendo fiebre alta
si tiene fiebre de ciento dos grados o superior
si cree que sus síntomas o problemas justifican un examen mejor
me dio fiebre ayer
también tuve un poco de fiebre
tuve fiebre ayer
tengo un dolor agudo aquí, en el pecho
también tengo algo de dificultad para respirar
te enviaré una imagen
hoy tengo un poco de dolor de pecho
hoy solo tengo un poco de dolor de cabeza y algo de fiebre
en mi opinión, es una gripe
en mi opinión, es un poco de gripe
¿es como si alguien muy, muy pesado se sentara sobre su pecho?
todo empezó con dolor de cabeza y fiebre más o menos al mismo tiempo
me duele el centro del pecho
es una presión como el dolor de pecho
es en mi pecho
es en el centro de mi pecho
es en el centro del pecho
siento dolor en el pecho
me preocupa mucho este dolor de pecho
quiero que me diga cómo describe este dolor de pecho
como presión arterial alta o diabetes
como justo en el centro del pecho
ahora puede tomar un comprimido de Tachipirina para la fiebre
ahora, Mary, hace cuántos días que tiene los síntomas
ahora dijo que tiene dolor de pecho
en ocasiones, tengo un poco de dolor de pecho
bien, tiene algún otro síntoma además de este, que no sea solo el dolor
¿o alguien sentado sobre su pecho?
básicamente igual, con fiebre y tos, dolor de cabeza y dolor muscular
justo en el centro del pecho
muéstreme en esta imagen dónde siente el dolor
desde que tiene fiebre
¿entonces piensa que algunos de estos síntomas podrían estar relacionados con el embarazo?
¿así que sus hijos tienen algunos de los mismos síntomas?
cuénteme sobre su dolor de pecho
la fiebre es más alta por la noche
la fiebre que tuve los últimos dos días
la fiebre empezó a ser más alta anoche
este es el doctor Porter en el centro de triaje de la sala de emergencias
bueno, ¿puede contarme un poco más sobre su dolor de pecho?
bueno, siento un dolor en la parte de adelante del cuerpo, aquí en el pecho
bueno, he estado sintiendo un dolor fuerte en el pecho
bueno, cuando tengo ese dolor en el pecho
¿qué tipo de dolor tienes en el pecho?
¿cuándo comenzó este dolor en el pecho?
¿dónde siente dolor en el pecho?
{NS}
siente como opresión en el pecho
sabes que tengo diabetes y demás
dijo que siente este dolor de pecho
Incidencia acumulada en rápido aumento de la enfermedad por coronavirus (COVID-19) en la Unión Europea o el Espacio Económico Europeo y el Reino Unido, del 1 de enero al 15 de marzo de 2020
La incidencia acumulada de casos de enfermedad por coronavirus (COVID-19) demuestra tendencias similares en los países de la Unión Europea o el Espacio Económico Europeo y el Reino Unido, lo que confirma que, aunque en diferentes etapas según el país, la pandemia de COVID-19 está avanzando rápidamente en todos los países.
Sobre la base de la experiencia de Italia, los países, los hospitales y las unidades de cuidados intensivos deben mejorar su preparación para una ola de pacientes con COVID-19 que requerirán atención médica y, en particular, cuidados intensivos.
El 31 de diciembre de 2019, se informó un conglomerado de casos de neumonía de etiología desconocida en Wuhan, provincia de Hubei, China.
El 9 de enero de 2020, el Centro para el Control y la Prevención de Enfermedades de China informó que el agente causante era un nuevo coronavirus que ahora se conoce como coronavirus 2 del síndrome respiratorio agudo severo (SARS-CoV-2).
Desde entonces, la enfermedad provocada por la infección con SARS-CoV-2 se ha denominado enfermedad por coronavirus (COVID-19).
La evidencia a la fecha indica que el 80 % de las personas con COVID-19 tienen una enfermedad leve, es decir, una infección del tracto respiratorio con o sin neumonía, y que la mayoría se recupera.
En el 14 % de los casos, la COVID-19 evoluciona hacia una enfermedad más grave que requiere hospitalización, mientras que el 6 % restante de los casos desarrollan una enfermedad crítica que requiere cuidados intensivos.
La mortalidad en pacientes hospitalizados por COVID-19 es del 4 %.
En este estudio, examinamos las tendencias en la incidencia acumulada de COVID-19 en cada país de la Unión Europea o el Espacio Económico Europeo (UE/EEE) y el Reino Unido (RU) y las comparamos con las de la provincia de Hubei, China.
También comparamos la cantidad actual de casos de COVID-19 en los países de la UE/EEE y el RU con la de Italia desde el 31 de enero hasta el 15 de marzo de 2020.
Casos de COVID-19 en los países de la UE/EEE y el RU
Después de China, la COVID-19 siguió propagándose geográficamente y la dinámica de la pandemia de COVID-19 en el resto del mundo actualmente sigue la de este país.
El 11 de marzo de 2020, el director general de la Organización Mundial de la Salud (OMS) declaró la COVID-19 como pandemia.
En la edición del 5 de marzo de Eurosurveillance 2020, Spiteri et al. informó sobre los primeros casos confirmados de COVID-19 en Europa de acuerdo con la definición de caso de la OMS.
En la UE/EEE, los primeros tres casos confirmados se registraron en Francia el 24 de enero de 2020, en personas que habían regresado de Wuhan, provincia de Hubei, China.
Al 15 de marzo de 2020, se habían detectados casos de COVID-19 en los 30 países de la UE/EEE y el Reino Unido (RU), conforme a lo cual entre el 31 de diciembre de 2019 y esa fecha inclusive, se habían registrado 39 768 casos y 1727 muertes, de los cuales 17 750 casos y 1441 muertes habían ocurrido en Italia solamente.
Obtención de la cantidad acumulada e incidencia acumulada de casos de COVID-19
En el Centro Europeo para el Control y la Prevención de las Enfermedades (ECDC), los recuentos de casos de COVID-19 informados en cada país del mundo, obtenidos únicamente de fuentes oficiales, como el Ministerio de Salud de los países, autoridades sanitarias nacionales y regionales y la OMS, se actualizan todos los días a las 8:00 a. m.
Estos datos se usaron para examinar las tendencias de la COVID-19 en la UE/EEE y el RU y para compararlas con la de Italia.
Como indicador de la prevalencia de los casos activos de COVID-19, calculamos la incidencia acumulada de casos de COVID-19 truncada a 14 días; de esta manera, tuvimos en cuenta el curso natural de la COVID-19, en cada país de la UE/EEE y el RU, durante el período del 1 de enero al 15 de marzo de 2020.
También presentamos la cantidad acumulada de casos informados en cada país al 15 de marzo de 2020, a las 8:00 a. m., en comparación con la de Italia para el período del 31 de enero al 15 de marzo de 2020.
Tendencias de la COVID-19 en los países de la UE/EEE y el RU
Las tendencias en la incidencia acumulada de casos de COVID-19 truncada a 14 días en los países de la UE/EEE y el RU, en general, siguieron la de la provincia de Hubei (China) (figura 1).
En la UE/EEE y el RU en general, la incidencia acumulada de la COVID-19 comenzó a aumentar alrededor del 21 de febrero y, luego, aumentó considerablemente cerca del 28 de febrero de 2020 (material complementario).
Esto se debió principalmente al aumento rápido en la cantidad de casos informados de Italia, pero todos los demás países de la UE/EEE y el RU exhibieron tendencias ascendentes de la incidencia acumulada de la COVID-19 similares (material complementario).
La figura 2 muestra la cantidad acumulada de casos de COVID-19 en los países de la UE/EEE y el RU, en comparación la de Italia para el período del 31 de enero al 15 de marzo de 2020.
Destaca que, al 15 de marzo a las 8:00 a. m., otros 15 países de la UE/EEE y el RU ya habían registrado una cantidad total de casos comparable con la de Italia solo 3 semanas antes o menos.
Nuestros resultados indican que la cantidad de casos de COVID-19 informados está aumentando rápidamente en la UE/EEE y el RU.
Las tendencias observadas en la incidencia acumulada de la COVID-19 sugieren que la pandemia está avanzando a un ritmo similar en todos los países.
Esto es así a pesar de las etapas diferentes en que se encuentran los países, las variaciones en las respuestas de salud pública nacionales y, posiblemente, las definiciones diferentes de caso en los países y los protocolos diferentes para seleccionar a los pacientes que deben someterse a la prueba para confirmar la COVID-19, incluidas las pruebas retrasadas.
A principios de marzo de 2020, los médicos de las regiones afectadas de Italia describían una situación en la que el 10 % de los pacientes con COVID-19 requerían cuidados intensivos, y los medios de comunicación informaban que los hospitales y las unidades de cuidados intensivos en estas regiones ya habían alcanzado su máxima capacidad.
Los datos sobre admisiones de casos de COVID-19 en un hospital o una unidad de cuidados intensivos actualmente están disponibles a nivel de la UE/EEE para solo el 6 % y el 1 % de los casos, respectivamente (no se muestran los datos).
Sin embargo, deberían recogerse de manera sistemática para complementar los datos de vigilancia actuales que se centran en la cantidad de casos informados y la cantidad de muertes.
Un estudio realizado en 2010–11 demostró una gran variación en la disponibilidad de camas de cuidados intensivos y cuidados intermedios en Europa, que iba de 29,2 en Alemania a 4,2 camas cada 100 000 habitantes en Portugal.
Esto significa que los países pueden tener más o menos recursos que Italia (12,5 camas de cuidados intensivos y cuidados intermedios cada 100 000 habitantes en 2010–11).
Escenarios modelo en relación con la saturación de la capacidad de atención médica, con cálculos para cada país de la UE/EEE y el RU de la prevalencia de los casos de hospitalización por COVID-19 asociados a un riesgo >90 % de superación de la capacidad de camas de cuidados intensivos, se proporcionan en la sexta actualización de la evaluación rápida del riesgo del ECDC sobre la COVID-19.
Dado que, hasta el momento, se han formado conglomerados de casos en ciertas regiones de países de la UE/EEE y el RU, y que los hospitales y las unidades de cuidados intensivos normalmente atienden a una población de captación regional definida, la información sobre los casos y las camas de cuidados intensivos preferentemente debe ponerse a disposición a nivel de la Nomenclatura de unidades territoriales estadísticas 2 (NUTS-2).
La experiencia de Italia y las tendencias actuales en otros países muestran que la pandemia de COVID-19 está avanzando rápidamente en la UE/EEE y el RU.
Los países, los hospitales y las unidades de cuidados intensivos, por ende, deben prepararse para un escenario de transmisión comunitaria sostenida del SARS-CoV-2 y un aumento en la cantidad de pacientes con COVID-19 que requieren atención médica y, en particular, cuidados intensivos, como el que está ocurriendo en las regiones afectadas de Italia.
Como se indica en la evaluación rápida del riesgo del ECDC, es esencial adoptar un enfoque rápido, proactivo e integral para retrasar la propagación del SARS-CoV-2, con un cambio de un enfoque de contención a uno de mitigación, dado que el aumento rápido previsto en el número de casos posiblemente no les dé tiempo suficiente a los responsables de las decisiones y los hospitales para comprender, aceptar y adaptar su respuesta de manera acorde si no se implementa con anticipación.
La evaluación rápida del riesgo también enumera las medidas de salud pública necesarias para mitigar el impacto de la pandemia.
Hay un breve período de oportunidad durante el cual los países tienen la posibilidad de profundizar sus esfuerzos de control para frenar la propagación del SARS-CoV-2 y disminuir la presión sobre el sistema de salud.
Si no se hace esto, es probable que los sistemas de salud de otros países de la UE/EEE se enfrenten a una ola de pacientes que requieran cuidados intensivos en los próximos días y semanas.
El brote de enfermedad por coronavirus 2019 (COVID-19), causada por el coronavirus 2 de síndrome respiratorio agudo severo (SARS) (SARS-CoV-2), hasta el momento ha provocado la muerte de 3000 personas y ha infectado a más de 80 000 en China y en otras partes de todo el mundo, lo que generó una catástrofe para los humanos.
De forma similar a su virus homólogo, el SARS-CoV, que provocó el SARS en miles de personas en 2003, el SARS-CoV-2 también podría  transmitirse del murciélago y causa síntomas similares mediante un mecanismo semejante.
Sin embargo, la COVID-19 tiene una severidad y una mortalidad menores que el SARS, pero es mucho más transmisible y afecta más a las personas mayores que a los jóvenes y más a los hombres que a las mujeres.
En respuesta al creciente número de publicaciones sobre la enfermedad emergente, el propósito de este artículo es brindar un análisis oportuno y completo del tema de investigación, que se desarrolla velozmente.
Trataremos los aspectos básicos de la epidemiología, la etiología, la virología, el diagnóstico, el tratamiento, el pronóstico y la prevención de la enfermedad.
Aunque muchas preguntas aún no tienen respuesta, esperamos que este análisis ayude a entender y erradicar esta enfermedad amenazante.
La Fiesta de la Primavera del 25 de enero de 2020 se ha convertido en un recuerdo inaudito e imborrable para todos los chinos, a quienes se los instó a quedarse en casa durante toda la festividad y por varias semanas más debido al brote de una nueva enfermedad viral.
El virus tiene casi el mismo nombre que el coronavirus (CoV) que causó un brote de síndrome respiratorio agudo severo (SARS) en 2003; por eso, el 11 de febrero de 2020, la Organización Mundial de la Salud (OMS) lo llamó SARS-CoV-2, y la enfermedad asociada se denominó enfermedad por coronavirus 2019 (COVID-19).
La epidemia comenzó en Wuhan, China y se propagó rápidamente por todo el país y a casi 50 países más de todo el mundo.
Al 2 de marzo de 2020, el virus ha provocado más de 80 000 casos confirmados de COVID-19, con más de 40 000 pacientes dados de alta y más de 3000 pacientes fallecidos.
La OMS advierte que la COVID-19 es el “enemigo público número 1” y que es potencialmente más poderoso que el terrorismo.
De acuerdo con PubMed (https://www.ncbi.nlm.nih.gov/pubmed/), en menos de dos meses, se han publicado más de 200 artículos científicos sobre la COVID-19, incluidos su virología, epidemiología, etiología, diagnóstico y tratamiento, desde el primer informe del 7 de enero de 2020, que determinó la secuencia del virus aislado de múltiples pacientes.
El objetivo de este análisis es resumir los avances en las investigaciones sobre esta nueva materia que se desarrolla velozmente.
Cuando sea posible, intentaremos comparar la COVID-19 con el SARS y otra enfermedad causada por un CoV, el síndrome respiratorio de Oriente Medio (MERS, un brote en 2012).
También examinaremos lo que se sabe hasta el momento sobre la prevención y el pronóstico de la enfermedad, así como algunas preguntas decisivas que aún no se han respondido.
Los coronavirus tradicionalmente se han considerado patógenos no letales para los humanos, que principalmente provocan alrededor del 15 % de los resfriados comunes 4.
Sin embargo, en este siglo, nos hemos encontrado dos veces con coronavirus altamente patógenos en humanos, es decir, el SARS-CoV y el MERS-CoV, que causaron un brote originalmente en China, en 2003, y en Arabia Saudita, en 2012, respectivamente, y pronto se propagaron a muchos otros países con una morbilidad y mortalidad espantosas.
Por lo tanto, el brote actual de COVID-19 es el tercero por coronavirus del que se tiene registro en la historia de la humanidad.
Como se muestra en la fig. fig. 1,1, conglomerados de neumonía de origen desconocido se informaron por primera vez el 31 de diciembre de 2019 de Wuhan a la Comisión Nacional de Salud de China.
Siete días después, se dio a conocer la secuencia del coronavirus.
El 15 de enero de 2020, se registró el primer caso mortal en Wuhan.
Mientras tanto, la epidemia se propagó rápidamente a las ciudades, las provincias y los países vecinos.
El 20 de enero, se informó la infección de proveedores de atención médica, lo que sugirió que la transmisión entre humanos era posible.
El 23 de enero, la ciudad de Wuhan fue puesta en cuarentena y se suspendieron todos los transportes públicos.
El 24 de enero, el primer estudio clínico sobre la enfermedad informó que, de los 41 pacientes con casos confirmados, solo 21 habían tenido contacto directo con el mercado de mariscos de Wuhan que se consideraba el sitio de origen de la infección de una fuente animal desconocida.
El 30 de enero, la OMS declaró al brote una emergencia sanitaria mundial.
A la fecha de este informe, la enfermedad ya se ha propagado por toda China y casi 50 países más de todo el mundo (fig. (fig. 2).2).
Dado que la situación evoluciona con rapidez, la dimensión y la severidad finales del brote aún no pueden determinarse.
El 11 de febrero de 2020, un estudio multicéntrico de 8866 pacientes, incluidos 4021 pacientes con COVID-19 confirmada, presentó una ilustración más actualizada de la epidemia que se describe a continuación (https://mp.weixin.qq.com/s/UlBi-HX_rHPXa1qHA2bhdA).
El SARS-CoV-2 infectaba a personas de todas las edades, pero principalmente a personas de 30 a 65 años.
Casi la mitad (47,7 %) de las personas infectadas tenían más de 50 años, muy pocas tenían menos de 20 y solo 14 personas infectadas eran menores de 10 años.
El SARS-CoV-2 infectaba más a los hombres (0,31/100 000) que a las mujeres (0,27/100 000).
La COVID-19 se expandió en conglomerados mayormente en Hubei y en sus alrededores.
En promedio, transcurrían 5 días (de 2 a 9) entre la aparición y el diagnóstico de la COVID-19.
El período de incubación promedio era de 4,8 días (entre 3,0 y 7,2).
El tiempo promedio desde la aparición hasta la muerte era de  9,5 días (entre 4,8 y 13).
El número reproductivo básico (R0) era de 3,77 (IC del 95 %: 3,51-4,05) y el R0 ajustado era de 2,23-4,82.
La cantidad de personas infectadas aumentó exponencialmente antes del 23 de enero de 2020, lo que coincide con la época de movilización masiva previa a la Fiesta de la Primavera en China.
La mortalidad de los pacientes con casos confirmados era del 1,44 % (IC del 95 %: 1,10-1,86 %), y la mortalidad ajustada de la totalidad de los pacientes era de 3,06 % (IC del 95 %: 2,02-4,59 %).
Los tres principales factores de riesgo para la COVID-19 eran el sexo (masculino), la edad (≥60) y neumonía grave.
Los coronavirus son una subfamilia de virus grandes y envueltos que contienen un ARN de cadena de sentido único.
Pueden dividirse en cuatro géneros, es decir, alfa, beta, gama y delta, de las cuales los alfacoronavirus y deltacoronavirus son los que infectan a los humanos.
La glicoproteína de espiga (S) de la envoltura se une a sus receptores celulares, la enzima convertidora de angiotensina 2 (ACE2) y la dipeptidil peptidasa 4 (DPP4) para el SARS-CoV y el MERS-CoV, respectivamente, y luego se produce la fusión de membranas.
El genoma de ARN viral se libera al citoplasma; luego de la replicación del genoma viral, el ARN genómico, junto con las glicoproteínas de la envoltura y las proteínas de la nucleocápside, forma vesículas que contienen viriones, que luego se fusionan con la membrana plasmática para liberar el virus.
La primera secuencia genómica del SARS-CoV-2 se anunció el 10 de enero de 2020.
Se descubrió que el SARS-CoV-2 es un nuevo tipo de betacoronavirus con una identidad genética de más del 99,98 % en 10 muestras secuenciadas tomadas del sitio original del brote: el mercado de mariscos Huanan de Wuhan.
El SARS-CoV-2 es genéticamente más parecido al SARS-CoV que al MERS-CoV.
Con un microscopio electrónico de transmisión, se encontraron partículas del SARS-CoV-2 en secciones ultradelgadas del epitelio respiratorio humano.
Se determinó que la ACE2 humana es un receptor del SARS-CoV-2, así como del SARS-CoV.
Sin embargo, la proteína S del SARS-CoV-2 se une a la ACE2 humana más débilmente que la del SARS-CoV, lo que es congruente con el hecho de que el SARS-CoV-2 causa una infección menos grave en los pacientes que el SARS-CoV.
El SARS-CoV-2 también puede formar una proteína corta nueva codificada por la orf3b y una proteína secretada codificada por la orf8.
La orf3b del SARS-CoV-2 podría tener una función en la patogenicidad viral e inhibir la expresión de IFNβ; sin embargo, la orf8 no contiene ningún dominio o motivo funcional conocido.
El 18 de febrero de 2020, Zhou, et al., reveló la estructura de criomicroscopía electrónica de la ACE2 humana de longitud completa en resolución 2.9 Å, en complejo con el aminoácido transportador B0AT1.
Descubrieron que el complejo, que tenía conformaciones abierta y cerrada, se ensamblaba como dímero, y que el complejo ACE2-B0AT1 puede unir dos proteínas S, lo que brinda evidencias para el reconocimiento y de la infección del coronavirus.
El B0AT1 podría convertirse en una diana terapéutica para el estudio de fármacos a fin de suprimir la infección del SARS-CoV-2.
El origen y el huésped intermedio
Se sabe que el SARS-CoV y el MERS-CoV se originaron en murciélagos y se transmitieron a los humanos por medio de las civetas y los camellos, respectivamente.
En una comparación filogenética del SARS-CoV-2 con otros coronavirus, se consideró que el murciélago es el huésped nativo del SARS-CoV-2, ya que el nuevo virus es idéntico en un 96 % a dos coronavirus similares al SARS de murciélagos llamados bat-SL-CoVZX45 y bat-SL-CoVZX21.
Sin embargo, aún se desconoce qué huésped intermedio ayudó al virus a cruzar la barrera de las especies para infectar a los humanos, y resta dilucidar la ruta de transmisión.
Ji, et al., propuso a las serpientes como portadoras del virus de los murciélagos a los humanos, lo que implicaba la recombinación homóloga dentro de la proteína S.
De acuerdo con un estudio, investigadores de Guangzhou, China, sugirieron que los pangolines (mamíferos de hocico largo que se alimentan de hormigas y que suelen usarse en la medicina tradicional china) son un posible huésped intermedio del SARS-CoV-2 con base en una homología genética del 99 % en un coronavirus descubierto en pangolines y el SARS-CoV-2.
Sin embargo, una diferencia del 1 % propagada por la totalidad de dos genomas sigue siendo una gran diferencia; por ende, se aguardan resultados concluyentes que brinden evidencia concreta (fig. (fig. 33).
Las propiedades físicoquímicas del SARS-CoV-2 aún se desconocen ampliamente.
El SARS-CoV y el MERS-CoV pueden sobrevivir in vitro durante 48 horas en un ambiente seco y hasta 5 días a menos de 20 °C con una humedad del 40-50 %.
El SARS-CoV-2 podría poseer propiedades similares.
Se ha informado que el SARS-CoV-2 es sensible a los rayos ultravioleta y al calor a 56 °C durante 30 minutos; el éter, el etanol al 75 %, un desinfectante con cloro, el ácido perclórico, el cloroformo y otros solventes de grasas, pero no la clorhexidina, son eficaces para desactivar el virus.
Toda la población humana en general carece de inmunidad al SARS-CoV-2 y, por ende, es susceptible al nuevo coronavirus.
Hasta el momento, no se ha anunciado ningún estudio detallado sobre la respuesta inmunitaria al SARS-CoV-2.
En consecuencia, solo podemos recurrir a estudios anteriores con otros coronavirus, especialmente el SARS-CoV y el MERS-CoV (fig. (fig. 4).4).
En general, después de que el virus invade al huésped, primero es reconocido por el sistema inmunitario innato del huésped a través de los receptores de reconocimiento de patrones (PRR), incluidos los receptores de lectinas tipo C, los receptores tipo Toll (TLR), los receptores tipo NOD (NLR) y los receptores tipo RIG-I (RLR).
A través de distintas vías, el virus induce la expresión de factores inflamatorios, la maduración de las células dendríticas y la síntesis de los interferones tipo I (IFN) que limitan la propagación del virus y aceleran la fagocitosis macrofágica de los antígenos virales.
Sin embargo, la proteína N del SARS-CoV puede ayudar al virus a escapar de las respuestas inmunitarias.
Pronto, la respuesta inmunitaria adaptativa se suma a la lucha contra el virus.
Los linfocitos T, incluidas las células T CD4+ y CD8+, cumplen una función importante en la defensa.
Las células T CD4+ estimulan a las células B para que produzcan anticuerpos específicos para el virus, y las células T CD8+ directamente matan a las células infectadas con el virus.
Las células T cooperadoras producen citocinas proinflamatorias para ayudar a las células defensoras.
Sin embargo, los coronavirus pueden inhibir las funciones de las células T induciendo la apoptosis de las células T.
La inmunidad humoral, que incluye complementos como C3a y C5a y anticuerpos, también es esencial para combatir la infección viral.
Por ejemplo, los anticuerpos aislados de un paciente recuperado neutralizaron el MERS-CoV.
Por otro lado, una reacción exagerada del sistema inmunitario genera localmente una gran cantidad de radicales libres que pueden causar daños graves a los pulmones y otros órganos, y en el peor de los casos, la falla multiorgánica e incluso la muerte.
La infección del SARS-CoV-2, caracterizada por la aparición en conglomerados, afecta con mayor probabilidad a las personas mayores con comorbilidades y mujeres embarazadas.
Es común que las personas que están expuestas a una gran cantidad de virus o cuyas funciones inmunitarias están comprometidas tengan una mayor probabilidad de infectarse que otros.
La media estimada del período de incubación del SARS-CoV-2 es de 1 a 14 días, mayormente entre 3 y 7 días, de acuerdo con un estudio de los primeros 425 casos en Wuhan.
Sin embargo, un estudio de 1099 casos demuestra que el período de incubación era de 3 días en promedio y oscilaba de 0 a 24 días.
Un estudio más reciente, como se describe antes, demuestra que el período de incubación era de 4,8 días (entre 3,0 y 7,2) con base en la demografía de 8866 casos.
Es muy importante que las autoridades de salud adapten el tiempo de cuarentena eficaz en función del período de incubación más exacto; es esta manera, se prevendrá que las personas infectadas asintomáticas transmitan el virus a otros.
Como práctica habitual, las personas expuestas al virus o infectadas normalmente deben permanecer en cuarentena durante 14 días.
¿La cuarentena debería extenderse a 24 días?
La fiebre suele ser el síntoma principal e inicial de la COVID-19, que puede estar acompañado por ningún otro síntoma o por otros síntomas como tos seca, disnea, dolor muscular, mareo, dolor de cabeza, dolor de garganta, rinorrea, dolor de pecho, diarrea, náuseas y vómitos.
Algunos pacientes tenían disnea o hipoxemia una semana después de la aparición de la enfermedad.
En casos graves, los pacientes evolucionaban rápidamente hasta desarrollar síndrome respiratorio agudo, shock séptico, acidosis metabólica y coagulopatía.
Los pacientes con fiebre o síntomas respiratorios y fiebre aguda, incluso sin anomalías pulmonares en estudios por imagen, deberían hacerse la prueba del virus para un diagnóstico temprano.
Un estudio demográfico de finales de diciembre de 2019 indicó que los porcentajes de los síntomas eran de 98 % para la fiebre, 76 % para la tos seca, 55 % para la disnea y 3 % para la diarrea; el 8 % de los pacientes requerían asistencia respiratoria.
Hallazgos similares se informaron en dos estudios recientes de un conglomerado familiar y un conglomerado causado por la transmisión de una persona asintomática.
De manera comparable, un estudio demográfico de 2012 demostró que los pacientes con MERS-CoV también tenían fiebre (98 %), tos seca (47 %) y disnea (55 %) como principales síntomas.
Sin embargo, el 80 % de ellos requerían asistencia respiratoria, mucho más que los pacientes con COVID-19 y en consonancia con la mayor letalidad del MERS con respecto a la COVID-19.
La diarrea (26 %) y el dolor de garganta (21 %) también se observaron en pacientes con MERS.
En pacientes con SARS, se demostró que la fiebre (99 %-100 %), la tos seca (29 %-75 %), la disnea (40 %-42 %), la diarrea (20 %-25 %) y el dolor de garganta (13 %-25 %) eran los principales síntomas y la asistencia respiratoria era necesaria aproximadamente en el 14 % al 20 % de los pacientes.
Para el 14 de febrero, la mortalidad de la COVID-19 era del 2 % cuando los casos confirmados alcanzaban los 66 576 en todo el mundo.
De manera similar, la mortalidad del SARS para noviembre de 2002 era del 10 % en 8096 casos confirmados.
Para el MERS, de acuerdo con un estudio demográfico de junio de 2012, la mortalidad era del 37 % en 2494 casos confirmados.
En un estudio anterior, se informó que el R0 del SARS-CoV-2 era alto y se elevaba a 6,47 con un intervalo de confianza (IC) del 95 % de 5,71 a 7,23, mientras que el R0 del SARS-CoV solo oscilaba entre 2 y 4.
Una comparación del SARS-CoV-2 con el MERS-CoV y el SARA-CoV en cuanto a los síntomas, la mortalidad y el R0 se presenta en la tabla tabla 1.1.
Las cifras precedentes sugieren que el SARS-CoV-2 tiene una capacidad de propagación mayor que el MERS-CoV y el SARS-CoV, pero su letalidad es menor que la de estos dos últimos.
Por lo tanto, resulta mucho más difícil controlar la epidemia del SARS-CoV-2 que las del MERS-CoV y el SARS-CoV.
La aparición en conglomerados suele ocurrir dentro de una misma familia o a partir de una misma reunión o vehículo, como un crucero.
Los pacientes suelen tener antecedentes de viaje o residencia en Wuhan y otras áreas afectadas o contacto con personas infectadas o pacientes en las dos semanas previas a la aparición.
Sin embargo, se ha informado que las personas pueden portar el virus sin síntomas durante más de dos semanas y que los pacientes dados de alta del hospital pueden volver a contraer el virus, señal de alarma de que debe aumentarse el tiempo de la cuarentena.
Los pacientes tienen una cantidad normal o reducida de glóbulos blancos en sangre periférica (especialmente linfocitos) en la etapa temprana.
Por ejemplo, se observó linfopenia con un conteo de glóbulos blancos de <4×109/l, incluido un conteo de linfocitos de <1×109/l, y niveles elevados de aspartato aminotransferasa en 1099 pacientes con COVID-19.
Los niveles de enzimas hepáticas y musculares y mioglobina eran elevados en la sangre de algunos pacientes, y la proteína C reactiva y la sedimentación eritrocítica eran elevadas en la sangre de la mayoría de los pacientes.
En pacientes con casos graves, el nivel de dímero-D, un producto de la degradación de la fibrina presente en la sangre, era elevado, y el conteo de linfocitos se reducía progresivamente.
Se detectan anomalías en las radiografías torácicas de la mayoría de los pacientes con COVID-19, caracterizadas por sombras u opacidades en vidrio esmerilado bilaterales en los pulmones.
Los pacientes suelen desarrollar una neumonía atípica, una lesión pulmonar aguda y síndrome de dificultad respiratoria aguda (SDRA).
Cuando se produce el SDRA, la inflamación descontrolada, la acumulación de líquido y la fibrosis progresiva afectan gravemente el intercambio gaseoso.
La disfunción de los neumocitos tipo I y tipo II disminuye el nivel de surfactante y aumenta la tensión superficial, lo que reduce la capacidad de los pulmones para expandirse y aumenta el riesgo de colapso pulmonar.
En consecuencia, los peores hallazgos en las radiografías torácicas suelen estar en paralelo con la máxima gravedad de la enfermedad.
El 18 de febrero de 2020, el primer análisis patológico de la COVID-19 demostró la descamación de los neumocitos, la formación de una membrana hialina e infiltración de linfocitos en el intersticio, y células sinciciales multinucleadas en los pulmones de un paciente que murió a causa de la enfermedad, lo que es coincidente con la patología de una infección viral y del SDRA, y similar a la de los pacientes con SARS y MERS.
La detección del ARN del SARS-CoV-2 mediante una reacción en cadena de la polimerasa con transcriptasa inversa (RT-PCR) se utilizó como el principal criterio para el diagnóstico de la COVID-19.
Sin embargo, debido a la alta tasa de falsos negativos, que podría acelerar la epidemia, comenzaron a usarse las manifestaciones clínicas para el diagnóstico (que ya no se basaba únicamente en la RT-PCR) en China el 13 de febrero de 2020.
Una situación similar ocurrió también con el diagnóstico del SARS.
Por consiguiente, una combinación de antecedentes de enfermedad, manifestaciones clínicas, pruebas de laboratorio y hallazgos radiológicos es esencial e imperativa para un diagnóstico eficaz.
El 14 de febrero de 2020, el grupo Feng Zhang describió un protocolo de uso de la técnica SHERLOCK basada en CRISPR para detectar el SARS-CoV-2, que detecta fragmentos sintéticos del ARN del SARS-CoV-2 a entre 20 × 10-18 mol/l y 200 × 10-18 mol/l (10-100 copias por microlitro de muestra) usando una varilla graduada en menos de una hora que no requiere instrumentos complejos.
Con suerte, la nueva técnica puede aumentar de manera drástica la sensibilidad y conveniencia si se verifica en muestras clínicas.
Debido a la falta de experiencia con el nuevo coronavirus, los médicos mayormente pueden brindar cuidados de apoyo a los pacientes con COVID-19, a la vez que prueban con una variedad de terapias que se han usado o propuesto antes para el tratamiento de otros coronavirus, como el SARS-CoV y el MERS-CoV, y otras enfermedades virales (tabla (tabla 2).2).
Estas terapias incluyen tratamientos en uso actualmente o potenciales con fármacos antivirales, inmunosupresores, esteroides, plasma de pacientes recuperados, medicina china y apoyo psicológico.
Hasta se propuso usar el plasma de pacientes recuperados para el tratamiento.
Las compañías farmacéuticas compiten para ver quién desarrolla primero anticuerpos y vacunas contra el virus.
El SARS-CoV-2 ataca principalmente los pulmones al principio y, probablemente, también ataca, en un grado menor, otros órganos que expresan la ACE2, como los del aparato digestivo y los riñones.
No obstante, la disfunción e insuficiencia respiratorias son la mayor amenaza para los pacientes y la principal causa de muerte.
En consecuencia, la asistencia respiratoria es crítica para aliviar los síntomas y salvar vidas, e incluye la oxigenoterapia general, el oxígeno de alto flujo, la ventilación no invasiva y la ventilación mecánica invasiva de acuerdo con la gravedad de la enfermedad.
Los pacientes con síntomas respiratorios graves necesitan asistencia de oxigenación por membrana extracorpórea (OMEC), una técnica de bypass cardiopulmonar modificada que se utiliza para el tratamiento de insuficiencias cardíacas o respiratorias potencialmente mortales.
Además, el mantenimiento del equilibrio electrolítico, la prevención y el tratamiento de infecciones secundarias y shock séptico, y la protección de las funciones de los órganos vitales también son esenciales en los pacientes con SARS-CoV-2.
Se sabe que la tormenta de citocinas es el resultado de una reacción exagerada del sistema inmunitario en los pacientes con SARS y MERS.
La tormenta de citocinas es una forma de respuesta inflamatoria sistémica caracterizada por la liberación de una serie de citocinas, entre las que se incluyen TNFα, IL-1β, IL-2, IL-6, IFNα, IFNβ, IFNγ y MCP-1.
Estas citoquinas inducen a las células inmunitarias a liberar una enorme cantidad de radicales libres que son la principal causa del SDRA y la falla multiorgánica.
La inmunosupresión es esencial para el tratamiento de las tormentas de citoquinas, especialmente en pacientes graves.
Se han usado corticosteroides y tocilizumab, un anticuerpo monoclonal antirreceptor de IL6, para tratar la tormenta de citoquinas.
Otros tratamientos inmunosupresores para la tormenta de citoquinas son la modulación de la respuesta inmunitaria dirigida por células T; el bloqueo de IFN-γ, IL-1 y TNF; la inhibición de JAK; el blinatumomab; un supresor de la vía 4 de señalización de citoquinas, e inhibidores de la HDAC.
Los esteroides, como los inmunosupresores, se usaron ampliamente en el tratamiento del SARS para reducir la gravedad del daño inflamatorio.
Sin embargo, los esteroides en altas dosis no fueron beneficiosos para las lesiones pulmonares graves en pacientes con SARS y COVID-19.
En cambio, pueden causar efectos secundarios graves, en concreto osteonecrosis, lo que afecta el pronóstico notablemente.
No obstante, se ha recomendado el uso prudente de corticosteroides en dosis bajas a moderadas durante un período breve para pacientes con COVID-19 en estado crítico.
A la fecha de este análisis, no se ha confirmado la eficacia de ninguna terapia antiviral.
Sin embargo, se ha comprobado la eficacia del remdesivir, un análogo nucleotídico, administrado por vía intravenosa en un paciente estadounidense con COVID-19.
El remdesivir es un fármaco antiviral nuevo desarrollado por Gilead inicialmente para el tratamiento de las enfermedades causadas por los virus del Ébola y de Marburgo.
Posteriormente, el remdesivir también demostró el potencial para inhibir otros virus con ARN monocatenario, como los virus MERS y SARS.
Sobre la base de estos, Gilead le ha proporcionado el compuesto a China para que lleve adelante un par de ensayos en personas infectadas con SARS-CoV-2, y hay gran expectativa por los resultados.
Además, baricitinib, interferón alfa, lopinavir/ritonavir y ribavirina se han sugerido como posibles terapias para pacientes con síntomas respiratorios agudos.
Diarrea, náuseas, vómitos, daño hepático y otras reacciones adversas pueden producirse luego de la terapia combinada con lopinavir/ritonavir.
La interacción de estos tratamientos con otros fármacos usados en los pacientes debe controlarse cuidadosamente.
Plasma de pacientes recuperados y generación de anticuerpos
