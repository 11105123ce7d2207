"""Trees and graphs: tree decoders (``decode``: MST, Eisner), the arc-standard + SWAP transition system and its oracles
(``transition``), an input graph's relation ids (``relations``) and word trees as subword trees (``subword_trees``)."""
