Después de estas victorias, la carrera de Brodovitch como artista aplicada despegó.
A principios de 1776, Hewes fue nombrada la nueva secretaria del Comité de Asuntos Navales.
Poyntz fue la autora de los siguientes panfletos:
Por lo tanto, la autora creó un héroe impotente y sin poderes.
Piggy era un genio como profesora...
Sin las conexiones para conseguir contratos en teatros parisinos, Lecocq pasó la siguiente década en la oscuridad y la rutina de un trabajo como profesora, acompañante y répétitrice.
Fue revisado por la autora en 1993 para corregir errores y omisiones en la edición original.
El concepto original era pintar la imagen de orilla a orilla, sin sangría, título o crédito de la artista; un concepto que iba en contra de las prácticas de la industria musical y fue vetado inmediatamente por EMI.
Siento una gran culpa por la libertad que ofrece ser una artista.
A pesar de que muchos hábiles lingüistas han trabajado en el problema de traducir la obra de Nostradamus, todos han batallado con el formato que la autora usó.
Según un estudiante, Medvedev era una profesora popular, estricta pero no severa.
Gilovich fue una autora precoz de la ilusión de series, que se relaciona estrechamente con la falacia de la mano caliente, y explica la tendencia a ver series de datos en una secuencia de datos aleatoria como no aleatorias.
El primer diseño estaba listo en 1970 pero, debido a eventos históricos, no fue inaugurado hasta 1983 en presencia de la artista, quien para entonces ya estaba muy enferma.
Como artista joven en Bagdad en 1980, Alfraji trabajó como animadora para la televisión infantil.
Kahnweiler fue muy prolífica como autora, pero nunca produjo una autobiografía completa.
Antes de hacer música, Perretta fue una artista de grafitis.
Maznashvili es la autora de las populares Memorias del soldado.
A diferencia de la novela, la autora no se estaba despidiendo en ese momento.
El deber de advertir es una de las pocas excepciones al derecho de confidencialidad de una clienta y la obligación ética del terapeuta es mantener confidencial la información relacionada en contexto de la relación terapéutica.
Como diseñadora, Kravitz lanzó una colección de muebles en colaboración con CB2 en 2015.
La exposición de las obras de Gauguin de 1906 hizo que esta artista cautivara a Picasso más que nunca.
Interiors (1991-1992) es una serie de obras que representan entornos domésticos banales inspirados por anuncios de mobiliario que la artista encontró en guías telefónicas o vallas publicitarias.
Mientras trabajaba a tiempo completo como autora, Busch continuó escribiendo artículos y columnas mensuales para revistas como HomePc, MacWorld, Internet World, NetGuide, Windows Magazine, Windows Sources y muchas otras publicaciones.
Posteriormente, Parkinson fue secretaria de Estado de Energía, y después, secretaria de Estado de Transporte.
