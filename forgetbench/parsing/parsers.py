"""Every parser architecture behind one interface: build, save, load and parse.

| arch | network | model_type in config.json | decoding |
|---|---|---|---|
| ``biaffine`` | ``model.BiaffineParser`` (BiLSTM) | forgetbench-biaffine | MST |
| ``syntr`` | ``graph_parser.GraphParser``, ``graph: none`` | forgetbench-graph-parser | MST |
| ``rngtr`` | ``GraphParser`` with a graph + an initial parser | forgetbench-graph-parser | ``refine`` |
| ``g2gtr`` | ``g2gtr.G2GTransitionParser`` | forgetbench-g2gtr | greedy transitions |

An RNGTr folder is self-contained: the refiner at its root, its initial parser (a biaffine or
SynTr folder) copied into ``initial/`` (absent: the empty graph), the refinement settings in
``refinement.json``. ``load(…, initial=…, iterations=…)`` overrides both at evaluation time, so the
same refiner gives biaffine+RNGTr and empty+RNGTr. Sentences given to ``Parser.parse`` already
carry the UPOS to use (the caller tags them with the parser's tagger in predicted-tag mode).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from forgetbench.errors import ForgetbenchError
from forgetbench.io import atomic_write_json
from forgetbench.parsing.batching import Vocab, batches, batchify
from forgetbench.parsing.conll import Sentence
from forgetbench.parsing.g2gtr import G2GConfig, G2GTransitionParser, parse_batch
from forgetbench.parsing.graph_parser import GraphParser, GraphParserConfig
from forgetbench.parsing.model import BiaffineParser, ParserConfig
from forgetbench.parsing.refine import DEFAULT_ITERATIONS, mst_graph, refine
from forgetbench.parsing.saving import load_module_dir, save_module_dir
from forgetbench.parsing.tagger import UposTagger, load_tagger

ARCHS = ("biaffine", "syntr", "rngtr", "g2gtr")
MODEL_TYPES = {"biaffine": "forgetbench-biaffine", "syntr": "forgetbench-graph-parser",
               "rngtr": "forgetbench-graph-parser", "g2gtr": "forgetbench-g2gtr"}
REFINEMENT = "refinement.json"

Pred = tuple[list[int], list[str]]


def build(arch: str, cfg: dict) -> nn.Module:
    if arch == "biaffine":
        return BiaffineParser(ParserConfig(**cfg))
    if arch in ("syntr", "rngtr"):
        return GraphParser(GraphParserConfig(**cfg))
    if arch == "g2gtr":
        return G2GTransitionParser(G2GConfig(**cfg))
    raise ForgetbenchError(f"unknown parser architecture {arch!r}; use one of {', '.join(ARCHS)}")


def arch_of(model_dir: str | Path) -> str:
    p = Path(model_dir) / "config.json"
    if not p.is_file():
        raise ForgetbenchError(f"{model_dir}: not a parser folder (no config.json); train one with `forgetbench parse train`")
    cfg = json.loads(p.read_text())
    mt = cfg.get("model_type")
    if mt == "forgetbench-graph-parser":
        return "syntr" if cfg.get("graph", "none") == "none" else "rngtr"
    for arch, t in MODEL_TYPES.items():
        if t == mt:
            return arch
    raise ForgetbenchError(f"{model_dir}: config.json is not a forgetbench parser (model_type {mt!r})")


@dataclass
class Parser:
    arch: str
    model: nn.Module
    vocab: Vocab
    tagger: UposTagger | None = None
    initial: Parser | None = None  # rngtr: the parser giving G^0 (None: the empty graph)
    iterations: int = DEFAULT_ITERATIONS  # rngtr: at most T refinement iterations

    def networks(self) -> dict[str, nn.Module]:
        """The networks a compression recipe applies to (an RNGTr's initial parser too: the deployed system)."""
        nets = {"parser" if self.arch != "rngtr" else "refiner": self.model}
        if self.initial is not None:
            nets |= {f"initial.{k}": m for k, m in self.initial.networks().items()}
        return nets

    def calibration_feed(self, name: str):
        """``feed(model, sentences, batch)`` that runs network ``name`` (of ``networks()``) on the inputs it sees
        when parsing: a forward pass; a refiner's iterations from its initial graphs (from this, uncompressed,
        parser's initial); G2GTr's greedy transition steps."""
        if name.startswith("initial."):
            return self.initial.calibration_feed(name[len("initial."):])
        if name == "refiner":
            def feed(model, bs, b):
                init = self.initial.parse(bs) if self.initial is not None else None
                h0, r0 = self._initial_graph(b["words"].shape, range(len(bs)), [len(s.words) for s in bs], init)
                refine(model, b["words"], b["chars"], b["tags"], h0, r0, self.iterations)
            return feed
        if self.arch == "g2gtr":
            return lambda model, bs, b: parse_batch(model, b)
        return lambda model, bs, b: model(b["words"], b["chars"], b["tags"])

    @torch.no_grad()
    def parse(self, sents: list[Sentence], max_tokens: int = 4000, progress: bool = False, record: bool = False,
              initial_preds: list[Pred] | None = None) -> list[Pred] | tuple[list[Pred], list[list[Pred]], list[int]]:
        """Heads (0 = root) and labels per sentence. With ``record`` (RNGTr) also the trees after each
        iteration t = 1..T and the iterations each sentence ran. ``initial_preds``: the initial parser's output
        on ``sents`` when already computed (RNGTr)."""
        self.model.eval()
        index = {id(s): k for k, s in enumerate(sents)}
        init = initial_preds
        if init is None and self.arch == "rngtr" and self.initial is not None:
            init = self.initial.parse(sents, max_tokens)
        out: dict[int, Pred] = {}
        per_it: dict[int, list[Pred]] = {}
        ran: dict[int, int] = {}
        for bs in tqdm(batches(sents, max_tokens, shuffle=False), disable=None if progress else True, desc="parse"):
            b = batchify(bs, self.vocab)
            ks = [index[id(s)] for s in bs]
            lens = [len(s.words) for s in bs]
            if self.arch == "g2gtr":
                cs, _ = parse_batch(self.model, b)
                for k, c, n in zip(ks, cs, lens, strict=True):
                    out[k] = (c.heads[1 : n + 1], [self.vocab.rels[max(r, 0)] for r in c.rels[1 : n + 1]])
                continue
            if self.arch == "rngtr":
                h0, r0 = self._initial_graph(b["words"].shape, ks, lens, init)
                res = refine(self.model, b["words"], b["chars"], b["tags"], h0, r0, self.iterations, record)
                for j, (k, n) in enumerate(zip(ks, lens, strict=True)):
                    out[k] = self._pred(res["heads"][j], res["rels"][j], n)
                    ran[k] = res["iterations"][j]
                    if record:
                        per_it[k] = [self._pred(h[j], r[j], n) for h, r in res["per_iteration"]]
                continue
            heads, labels = mst_graph(self.model, *self.model.encode(b["words"], b["chars"], b["tags"]), lens)
            for j, (k, n) in enumerate(zip(ks, lens, strict=True)):
                out[k] = self._pred(heads[j], labels[j], n)
        preds = [out[k] for k in range(len(sents))]
        if record and self.arch == "rngtr":
            return preds, [[per_it[k][t] for k in range(len(sents))] for t in range(self.iterations)], \
                [ran[k] for k in range(len(sents))]
        return preds

    def _pred(self, heads: torch.Tensor, rels: torch.Tensor, n: int) -> Pred:
        return heads[1 : n + 1].tolist(), [self.vocab.rels[r] for r in rels[1 : n + 1].tolist()]

    def _initial_graph(self, shape, ks, lens, init) -> tuple[torch.Tensor, torch.Tensor]:
        h0 = torch.full(shape, -1, dtype=torch.long)
        r0 = torch.full(shape, -1, dtype=torch.long)
        if init is not None:
            for j, (k, n) in enumerate(zip(ks, lens, strict=True)):
                heads, labels = init[k]
                h0[j, 1 : n + 1] = torch.tensor(heads)
                r0[j, 1 : n + 1] = torch.tensor([self.vocab.r2i.get(lab, 0) for lab in labels])
        return h0, r0


def save(parser: Parser, out_dir: Path, info: dict) -> None:
    """Config + safetensors + vocab.json + training.json (+ refinement.json for RNGTr); the initial parser and
    tagger folders are written by the trainer."""
    save_module_dir(parser.model, MODEL_TYPES[parser.arch], parser.model.cfg.to_dict(), out_dir)
    atomic_write_json(out_dir / "vocab.json", parser.vocab.to_dict())
    atomic_write_json(out_dir / "training.json", info)
    if parser.arch == "rngtr":
        atomic_write_json(out_dir / REFINEMENT, {"iterations": parser.iterations,
                                                 "initial": "initial/" if parser.initial is not None else "empty"})


def load(model_dir: str | Path, initial: str | None = None, iterations: int | None = None) -> Parser:
    """A saved parser of any architecture. RNGTr: ``initial`` ("empty" or a parser folder) and ``iterations``
    override the saved refinement settings."""
    d = Path(model_dir)
    arch = arch_of(d)
    model = load_module_dir(d, MODEL_TYPES[arch], lambda c: build(arch, c), f"{arch} parser")
    vocab = Vocab(**json.loads((d / "vocab.json").read_text()))
    parser = Parser(arch, model, vocab, load_tagger(d))
    if arch == "rngtr":
        ref = json.loads((d / REFINEMENT).read_text())
        parser.iterations = iterations or ref["iterations"]
        src = initial if initial is not None else ("empty" if ref["initial"] == "empty" else str(d / "initial"))
        parser.initial = None if src == "empty" else load(src)
        if parser.initial is not None and parser.initial.arch not in ("biaffine", "syntr"):
            raise ForgetbenchError(f"{src}: an RNGTr initial parser must be biaffine or syntr, not {parser.initial.arch}")
    elif initial is not None or iterations is not None:
        raise ForgetbenchError(f"{d}: --initial and --iterations apply to RNGTr parsers only (this one is {arch})")
    return parser
