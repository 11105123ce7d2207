"""Dependency parsers on Universal Dependencies, in rooms:

- ``data``: CoNLL-U files and batches;
- ``layers``: input, scoring and graph-attention layers, UD-PrLM's structure integration, the pre-trained encoder;
- ``structures``: tree decoders, the transition system, graph relation ids, subword trees;
- ``parsers``: every parser and tagger, behind one registry (``parsers.architectures``) and one interface
  (``parsers.interface``);
- here: training (``train``, ``epochs``), evaluation and CoNLL 2018 metrics (``evaluate``, ``metrics``), saving
  (``saving``) and parser compression (``compress_eval``).

A module's name from before the rooms (``forgetbench.parsing.conll``, ``forgetbench.parsing.model`` …) still
imports: it is the room's module itself (``MOVED``), so code written against the flat names keeps working.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

MOVED = {"conll": "data.conll", "batching": "data.batching", "modules": "layers.modules", "biaffine": "layers.biaffine",
         "encoder_layer": "layers.encoder_layer", "graph_attention": "layers.graph_attention",
         "structure": "layers.structure", "pretrained": "layers.pretrained", "model": "parsers.model",
         "tagger": "parsers.tagger", "graph_parser": "parsers.graph_parser", "refine": "parsers.refine",
         "g2gtr": "parsers.g2gtr", "usl_parser": "parsers.usl_parser", "architectures": "parsers.architectures",
         "decode": "structures.decode", "transition": "structures.transition", "relations": "structures.relations",
         "subword_trees": "structures.subword_trees"}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``forgetbench.parsing.<flat name>`` as its room's module: one module object under both names."""

    def find_spec(self, name, path=None, target=None):
        parent, _, short = name.rpartition(".")
        if parent == __name__ and short in MOVED:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        module = importlib.import_module(f"{__name__}.{MOVED[spec.name.rpartition('.')[2]]}")
        spec.loader_state = module.__spec__  # importlib sets __spec__ to this spec next; exec_module restores it
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())
