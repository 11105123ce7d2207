"""Parser architectures as objects: everything that differs between biaffine, SynTr, RNGTr and G2GTr, in one
place, behind one registry (``ARCHITECTURES``, ``architecture(name)``).

| arch | network | model_type in config.json | training loss | decoding |
|---|---|---|---|---|
| ``biaffine`` | ``model.BiaffineParser`` (BiLSTM) | forgetbench-biaffine | head + label CE | MST |
| ``syntr`` | ``graph_parser.GraphParser``, ``graph: none`` | forgetbench-graph-parser | head + label CE | MST |
| ``rngtr`` | ``GraphParser`` with a graph + an initial parser | forgetbench-graph-parser | CE per iteration | ``refine`` |
| ``g2gtr`` | ``g2gtr.G2GTransitionParser`` | forgetbench-g2gtr | transition CE | greedy transitions |

Each object holds its build, its training loss, its decoding of a batch, the inputs calibration feeds it,
its default training settings (Adam rate, betas, warm-up steps, token budget) and the options only it accepts. ``parsers.Parser`` and ``train.train`` call these and never
switch on an architecture's name.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from forgetbench.errors import ForgetbenchError
from forgetbench.parsing.layers.modules import subunits
from forgetbench.parsing.parsers.g2gtr import G2GConfig, G2GTransitionParser, parse_batch, transition_loss
from forgetbench.parsing.parsers.graph_parser import GraphParser, GraphParserConfig
from forgetbench.parsing.parsers.model import BiaffineParser, ParserConfig
from forgetbench.parsing.parsers.refine import DEFAULT_ITERATIONS, mst_graph, refine, refinement_loss

REFINEMENT = "refinement.json"


def loss_fn(arc, rel_at_gold, b):
    """Head cross-entropy + label cross-entropy given the gold head; ``rel_at_gold`` [B, R, L]."""
    mask = b["heads"] != -100
    arc_loss = torch.nn.functional.cross_entropy(arc[mask], b["heads"][mask])
    rmask = b["rels"] != -100
    rel_loss = torch.nn.functional.cross_entropy(rel_at_gold.transpose(1, 2)[rmask], b["rels"][rmask])
    return arc_loss + rel_loss


class Architecture:
    """A first-order graph parser decoded by MST (the biaffine parser's behaviour); subclasses change what
    differs."""

    name = ""
    model_type = ""
    network = "parser"  # the network's name among a parser's compressible networks
    refines = False  # takes an initial graph and iterates (its parse can record every iteration)
    settings: dict = {}

    def build(self, cfg: dict) -> nn.Module:
        raise NotImplementedError

    def matches(self, cfg: dict) -> bool:
        """Whether a saved ``config.json`` is this architecture's."""
        return cfg.get("model_type") == self.model_type

    def check_options(self, initial, warm_start, refiner_graphs: str, folds: int) -> None:
        """Refuse, in one line, training options this architecture does not take."""
        if initial is not None:
            raise ForgetbenchError(f"--initial is the initial parser of an RNGTr refiner; --arch is {self.name}")
        if refiner_graphs == "kfold":
            raise ForgetbenchError("kfold training graphs are k-fold predictions of an RNGTr's initial parser: give "
                                   "--arch rngtr, --initial PARSER and --folds >= 2")
        if warm_start is not None:
            raise ForgetbenchError(f"--warm-start initialises an RNGTr refiner from a SynTr; --arch is {self.name}")

    def model_kw(self, model_kw: dict, warm, dims: dict) -> dict:
        """The network settings for training (defaults this architecture adds)."""
        return model_kw

    def loss(self, model, b: dict, words, iterations: int):
        arc, rel_dep, rel_head = model.encode(words, subunits(model, b), b["tags"])
        return loss_fn(arc, model.label_scores(rel_dep, rel_head, b["heads"]), b)

    def decode(self, parser, b: dict, ks: list[int], lens: list[int], init, record: bool) -> dict:
        """Predictions of one batch: ``{"preds": {k: (heads, labels)}}`` (``ran`` and ``per_iteration`` where the
        architecture refines)."""
        model = parser.model
        heads, labels = mst_graph(model, *model.encode(b["words"], subunits(model, b), b["tags"]), lens)
        return {"preds": {k: parser.pred(heads[j], labels[j], n) for j, (k, n) in enumerate(zip(ks, lens, strict=True))}}

    def feed(self, parser):
        """``feed(model, sentences, batch)`` running the network on the inputs it sees when parsing."""
        return lambda model, bs, b: model(b["words"], subunits(model, b), b["tags"])

    def save_extra(self, parser, out_dir: Path) -> None:
        """Files besides config, weights and vocabulary (RNGTr: its refinement settings)."""

    def configure(self, parser, folder: Path, initial: str | None, iterations: int | None, load) -> None:
        """Settings a loaded parser takes from its folder or the caller (RNGTr: initial parser, iterations)."""
        if initial is not None or iterations is not None:
            raise ForgetbenchError(f"{folder}: --initial and --iterations apply to RNGTr parsers only (this one is "
                                   f"{self.name})")

    def training_record(self, initial, iterations: int, train_iterations: int, warm_start, refiner_graphs: str,
                        folds: int, kfold_info: dict) -> dict:
        """What ``training.json`` records of this architecture's own options."""
        return {}


class Biaffine(Architecture):
    name, model_type = "biaffine", "forgetbench-biaffine"
    settings = {"lr": 2e-3, "betas": (0.9, 0.9), "warmup": 0, "max_tokens": 3000}

    def build(self, cfg: dict) -> nn.Module:
        return BiaffineParser(ParserConfig(**ParserConfig.stored(cfg)))


class SynTr(Architecture):
    name, model_type = "syntr", "forgetbench-graph-parser"
    settings = {"lr": 1e-3, "betas": (0.9, 0.98), "warmup": 100, "max_tokens": 1000}

    def build(self, cfg: dict) -> nn.Module:
        return GraphParser(GraphParserConfig(**GraphParserConfig.stored(cfg)))

    def matches(self, cfg: dict) -> bool:
        return super().matches(cfg) and cfg.get("graph", "none") == "none"

    def model_kw(self, model_kw: dict, warm, dims: dict) -> dict:
        if model_kw.get("graph", "none") != "none":
            raise ForgetbenchError("SynTr has no input graph; for graph input use --arch rngtr")
        return model_kw


class RNGTr(SynTr):
    name, network, refines = "rngtr", "refiner", True

    def matches(self, cfg: dict) -> bool:
        return cfg.get("model_type") == self.model_type and cfg.get("graph", "none") != "none"

    def check_options(self, initial, warm_start, refiner_graphs: str, folds: int) -> None:
        if refiner_graphs == "kfold" and (initial is None or folds < 2):
            raise ForgetbenchError("kfold training graphs are k-fold predictions of an RNGTr's initial parser: give "
                                   "--arch rngtr, --initial PARSER and --folds >= 2")

    def model_kw(self, model_kw: dict, warm, dims: dict) -> dict:
        if model_kw.get("graph") == "none":
            raise ForgetbenchError("an RNGTr refines an input graph: --graph labelled or unlabelled (the graph-free "
                                   "parser is --arch syntr)")
        model_kw = {"graph": "labelled"} | model_kw
        if warm is not None:  # the SynTr's sizes; only the graph settings may be given
            model_kw = {k: v for k, v in warm.model.cfg.to_dict().items() if k not in dims and k != "graph"} | model_kw
        return model_kw

    def loss(self, model, b: dict, words, iterations: int):
        empty = torch.full_like(b["heads"], -1)
        return refinement_loss(model, words, subunits(model, b), b["tags"], b.get("g0_heads", empty), b.get("g0_rels", empty),
                               b["heads"], b["rels"], loss_fn, iterations)

    def decode(self, parser, b: dict, ks: list[int], lens: list[int], init, record: bool) -> dict:
        h0, r0 = parser.initial_graph(b["words"].shape, ks, lens, init)
        res = refine(parser.model, b["words"], subunits(parser.model, b), b["tags"], h0, r0, parser.iterations, record)
        out: dict = {"preds": {}, "ran": {}, "per_iteration": {}}
        for j, (k, n) in enumerate(zip(ks, lens, strict=True)):
            out["preds"][k] = parser.pred(res["heads"][j], res["rels"][j], n)
            out["ran"][k] = res["iterations"][j]
            if record:
                out["per_iteration"][k] = [parser.pred(h[j], r[j], n) for h, r in res["per_iteration"]]
        return out

    def feed(self, parser):
        def feed(model, bs, b):
            init = parser.initial.parse(bs) if parser.initial is not None else None
            h0, r0 = parser.initial_graph(b["words"].shape, range(len(bs)), [len(s.words) for s in bs], init)
            refine(model, b["words"], subunits(model, b), b["tags"], h0, r0, parser.iterations)
        return feed

    def save_extra(self, parser, out_dir: Path) -> None:
        from forgetbench.io import atomic_write_json

        atomic_write_json(out_dir / REFINEMENT, {"iterations": parser.iterations,
                                                 "initial": "initial/" if parser.initial is not None else "empty"})

    def configure(self, parser, folder: Path, initial: str | None, iterations: int | None, load) -> None:
        ref = json.loads((folder / REFINEMENT).read_text())
        parser.iterations = iterations or ref["iterations"]
        src = initial if initial is not None else ("empty" if ref["initial"] == "empty" else str(folder / "initial"))
        parser.initial = None if src == "empty" else check_initial_parser(load(src), src)

    def training_record(self, initial, iterations: int, train_iterations: int, warm_start, refiner_graphs: str,
                        folds: int, kfold_info: dict) -> dict:
        return {"initial": str(initial) if initial is not None else "empty", "iterations": iterations,
                "train_iterations": train_iterations,
                "warm_start": str(warm_start) if warm_start is not None else None,
                "refiner_training_graphs": (f"{folds}-fold predictions of the initial parser's architecture"
                                            if refiner_graphs == "kfold" else "empty") +
                                           " (then each iteration's own output)"} | kfold_info


class G2GTr(Architecture):
    name, model_type = "g2gtr", "forgetbench-g2gtr"
    settings = {"lr": 1e-3, "betas": (0.9, 0.98), "warmup": 200, "max_tokens": 150}

    def build(self, cfg: dict) -> nn.Module:
        return G2GTransitionParser(G2GConfig(**G2GConfig.stored(cfg)))

    def loss(self, model, b: dict, words, iterations: int):
        return transition_loss(model, b, words)

    def decode(self, parser, b: dict, ks: list[int], lens: list[int], init, record: bool) -> dict:
        cs, _ = parse_batch(parser.model, b)
        rels = parser.vocab.rels
        return {"preds": {k: (c.heads[1 : n + 1], [rels[max(r, 0)] for r in c.rels[1 : n + 1]])
                          for k, c, n in zip(ks, cs, lens, strict=True)}}

    def feed(self, parser):
        return lambda model, bs, b: parse_batch(model, b)


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (Biaffine(), SynTr(), RNGTr(), G2GTr())}
ARCHS = tuple(ARCHITECTURES)
INITIAL_PARSERS = ("biaffine", "syntr")  # what may give an RNGTr its initial graph
__all__ = ["ARCHITECTURES", "ARCHS", "DEFAULT_ITERATIONS", "INITIAL_PARSERS", "architecture", "loss_fn"]


def check_initial_parser(parser, source):
    """``parser`` if it may give an RNGTr its initial graphs (``INITIAL_PARSERS``), else one line naming
    ``source``."""
    if parser.arch not in INITIAL_PARSERS:
        raise ForgetbenchError(f"{source}: an RNGTr initial parser must be biaffine or syntr, not {parser.arch}")
    return parser


def architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise ForgetbenchError(f"unknown parser architecture {name!r}; use one of {', '.join(ARCHS)}") from None


def architecture_of_config(cfg: dict, where: str) -> Architecture:
    for a in ARCHITECTURES.values():
        if a.matches(cfg):
            return a
    raise ForgetbenchError(f"{where}: config.json is not a forgetbench parser (model_type {cfg.get('model_type')!r})")
