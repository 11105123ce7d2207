"""The parsers' layers: input layers (``modules``), scoring layers (``biaffine``), the transformer encoder layer
(``encoder_layer``), graph-input attention (``graph_attention``), UD-PrLM's structure integration (``structure``) and
the pre-trained encoder a parser reads (``pretrained``)."""
