"""The parsers' data: CoNLL-U files (``conll``) and length-bucketed batches with their tensors (``batching``)."""
