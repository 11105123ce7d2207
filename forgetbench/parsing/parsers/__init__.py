"""The parsers: the biaffine parser (``model``), the UPOS tagger (``tagger``), SynTr/RNGTr (``graph_parser``,
``refine``), G2GTr (``g2gtr``), UD-PrLM's USL parser (``usl_parser``), every architecture behind one registry
(``architectures``) and one interface (``interface``).

``forgetbench.parsing.parsers`` was the interface's module before the rooms: its names still read from here."""


def __getattr__(name: str):
    import importlib

    if name.startswith("__") or name == "interface":  # the room's own attributes and the submodule as it imports
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(f"{__name__}.interface"), name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
