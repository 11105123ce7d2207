En 1937 estableció el Lady Halley Stewart Trust en memoria de su madre y sirvió como su primera presidenta.
De estas patronas y sus acompañantes, el capitán Gronow, su biógrafo, escribió posteriormente: La más popular de estas grandes dames fue indudablemente Lady Cowper, ahora Lady Palmerston.
Las encarnaciones de esta mujer en juegos y películas se incluyeron simultáneamente entre las chicas de videojuegos más populares de la edición de Nueva Zelanda de MSN Lifestyle.
La mayoría de las madres se avergonzaron y miraron hacia otro lado, pero la obispa Nonnus la miró fijamente y confesó que estaba encantada.
Ella piensa que Maquiavelo podría haber sido influenciada por Tácito así como por su propia experiencia, pero no encuentra ningún predecesor claro que corrobore esta afirmación.
Las sacerdotisas de Vesta, conocidas como Vírgenes Vestales, administraban su templo y vigilaban el fuego eterno.
Sus diversos papeles iban desde sirvientas e ingenuas hasta vampiras y reinas.
Su forma «señora» es ahora «señorita» Jenks y ya no tienen que soportar la severidad de la primera forma «señora», «señorita» Roberts - que es extremadamente sarcástica y firme, pero puede ser amable cuando ella se siente como, un poco como Mam'zelle, la maestra de francés que enseñaba y sigue enseñando a las chicas.
En el prólogo de «A Book of Witches Now», Manning-Sanders explica cómo deberían terminar los cuentos de hadas. Ahora bien, en todas estas historias, como en los cuentos de hadas sobre brujas en general, puedes estar seguro de una cosa: por muy terribles que parezcan las brujas (y por mucho poder que tengan para hechizar a la gente y hacer travesuras) siempre son derrotadas. ...
En 1902 se dictaminó por la Cámara de las ladies, que las titulares conjuntas del cargo, la condesa de Ancaster, la marquesa de Cholmondeley y la condesa Carrington tienen que ponerse de acuerdo en una sustituta para ejercer el cargo, sujeta a la aprobación del Soberano.
Uebergang, que fue entrenadora y profesora en la Shore School de Sídney, fue maestra de remo y entrenó al Shore 1st VII de 1985 llevándolo a la victoria y al título de las ocho escolares en el Campeonato de Australia de Remo de ese año.
Johnson se puso rápidamente de pie, y muy molesta, se abalanzó inmediatamente sobre Ketchell y le lanzó un único puñetazo, un gancho, un puñetazo por el que ella era famosa, a la mandíbula de Ketchel, que la dejó fuera de combate.
La maestra deshollinadora no podía subir a espacios tan pequeños ella sola y contrataba a chicas escaladoras para subir a las chimeneas y quitar el hollín.
Su madre fue una soldado condecorada (ella ganó la Cruz Militar), que más tarde se convirtió en abogada y jueza de circuito.
El 11 de febrero de 1963, al ofrecérsele la elección entre ser destinada a África o a Brasil, fue designada obispa auxiliar de la diócesis de Pinheiro en Brasil.
Sin embargo, el dolor de la difícil vida doméstica de sus padres y sus relativamente pocos amigos de la infancia (Ruark, que era una especie de niña prodigio en la escuela, era una solitaria) están ausentes de las narraciones de forma reveladora.
Morello observa que la introducción del personaje de la madrastra malvada en el pasado es problemática para los padres adoptivos de hoy, ya que ha creado un estigma hacia las madrastras.
Cede a una pasión ingobernable y queda embarazada.
También hubo una encarnación de «La chica fantasma de la jungla» de los años 50, conocida como «la chica de la jungla de los 50», y la madre de la encarnación actual, que tomó el manto en días posteriores.
A pesar de ello, se considera que la creación se suspendió con la muerte de la decimoctava baronesa, sin herederas mujeres, en 1746.
A la noche siguiente, Donkey entra en un molino de viento para hablar con la princesa, solo para descubrir que se convierte en una ogresa después de la puesta del sol.
Fue ordenada caballera el 21 de mayo de 1605.
En el camino, tienen una larga demora para repostar en la Isla de Navidad, lo que permite a la reina relajarse un poco, hasta que los funcionarios locales aparecen con sus esposas, vestidas de gala.
La película comienza con una oficial honesta de la IAS que trata de desvelar una operación criminal masiva, y que termina en un callejón sin salida cuando se reúne con la hija del ministro del Interior y el equipo que quiere acabar con ella.
