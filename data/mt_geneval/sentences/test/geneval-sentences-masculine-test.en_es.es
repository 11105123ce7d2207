En 1937 estableció el Sir Halley Stewart Trust en memoria de su padre y sirvió como su primer presidente.
De estos patrones y sus acompañantes, el capitán Gronow, su biógrafo, escribió posteriormente: El más popular de estos grands monsieurs fue indudablemente Lord Cowper, ahora Lord Palmerston.
Las encarnaciones de este hombre en juegos y películas se incluyeron simultáneamente entre los chicos de videojuegos más populares de la edición de Nueva Zelanda de MSN Lifestyle.
La mayoría de los padres se avergonzaron y miraron hacia otro lado, pero el obispo Nonnus lo miró fijamente y confesó que estaba encantado.
Él piensa que Maquiavelo podría haber sido influenciado por Tácito así como por su propia experiencia, pero no encuentra ningún predecesor claro que corrobore esta afirmación.
Los sacerdotes de Vesta, conocidos como Vírgenes Vestales, administraban su templo y vigilaban el fuego eterno.
Sus diversos papeles iban desde sirvientes e ingenuos hasta vampiros y reyes.
Su forma «maestro» es ahora «señor» Jenks y ya no tienen que soportar la severidad de la primera forma «maestro», «señor» Roberts - que es extremadamente sarcástico y firme, pero puede ser amable cuando él se siente como, un poco como Monsieur, el maestro de francés que enseñaba y sigue enseñando a los chicos.
En el prólogo de «A Book of Witches Now», Manning-Sanders explica cómo deberían terminar los cuentos de hadas. Ahora bien, en todas estas historias, como en los cuentos de hadas sobre brujos en general, puedes estar seguro de una cosa: por muy terribles que parezcan los brujos (y por mucho poder que tengan para hechizar a la gente y hacer travesuras) siempre son derrotados. ...
En 1902 se dictaminó por la Cámara de los lores, que los titulares conjuntos del cargo, el conde de Ancaster, el marqués de Cholmondeley y el conde Carrington tienen que ponerse de acuerdo en un sustituto para ejercer el cargo, sujeto a la aprobación del Soberano.
Uebergang, que fue entrenador y profesor en la Shore School de Sídney, fue maestro de remo y entrenó al Shore 1st VII de 1985 llevándolo a la victoria y al título de los ocho escolares en el Campeonato de Australia de Remo de ese año.
Johnson se puso rápidamente de pie, y muy molesto, se abalanzó inmediatamente sobre Ketchell y le lanzó un único puñetazo, un gancho, un puñetazo por el que él era famoso, a la mandíbula de Ketchel, que lo dejó fuera de combate.
El maestro deshollinador no podía subir a espacios tan pequeños él solo y contrataba a chicos escaladores para subir a las chimeneas y quitar el hollín.
Su padre fue un soldado condecorado (él ganó la Cruz Militar), que más tarde se convirtió en abogado y juez de circuito.
El 11 de febrero de 1963, al ofrecérsele la elección entre ser destinado a África o a Brasil, fue designado obispo auxiliar de la diócesis de Pinheiro en Brasil.
Sin embargo, el dolor de la difícil vida doméstica de sus padres y sus relativamente pocos amigos de la infancia (Ruark, que era una especie de niño prodigio en la escuela, era un solitario) están ausentes de las narraciones de forma reveladora.
Morello observa que la introducción del personaje del padrastro malvado en el pasado es problemática para los padres adoptivos de hoy, ya que ha creado un estigma hacia los padrastros.
Cede a una pasión ingobernable y queda embarazado.
También hubo una encarnación de «El chico fantasma de la jungla» de los años 50, conocido como «el chico de la jungla de los 50», y el padre de la encarnación actual, que tomó el manto en días posteriores.
A pesar de ello, se considera que la creación se suspendió con la muerte del decimoctavo barón, sin herederos hombres, en 1746.
A la noche siguiente, Donkey entra en un molino de viento para hablar con el príncipe, solo para descubrir que se convierte en un ogro después de la puesta del sol.
Fue ordenado caballero el 21 de mayo de 1605.
En el camino, tienen una larga demora para repostar en la Isla de Navidad, lo que permite al rey relajarse un poco, hasta que los funcionarios locales aparecen con sus esposos, vestidos de gala.
La película comienza con un oficial honesto de la IAS que trata de desvelar una operación criminal masiva, y que termina en un callejón sin salida cuando se reúne con el hijo del ministro del Interior y el equipo que quiere acabar con él.
