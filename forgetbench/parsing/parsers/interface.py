"""Every parser architecture behind one interface: build, save, load and parse (what differs between the
architectures: ``parsing.parsers.architectures``).

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
from forgetbench.io import atomic_write_bytes, atomic_write_json
from forgetbench.parsing.data.batching import Vocab, batches, batchify
from forgetbench.parsing.data.conll import Sentence
from forgetbench.parsing.parsers.architectures import (
    ARCHS,
    REFINEMENT,
    Architecture,
    architecture,
    architecture_of_config,
)
from forgetbench.parsing.parsers.refine import DEFAULT_ITERATIONS
from forgetbench.parsing.parsers.tagger import UposTagger, load_tagger
from forgetbench.parsing.saving import load_module_dir, save_module_dir

__all__ = ["ARCHS", "REFINEMENT", "Parser", "arch_of", "build", "load", "save"]

Pred = tuple[list[int], list[str]]


def build(arch: str, cfg: dict) -> nn.Module:
    return architecture(arch).build(cfg)


def arch_of(model_dir: str | Path) -> str:
    p = Path(model_dir) / "config.json"
    if not p.is_file():
        raise ForgetbenchError(f"{model_dir}: not a parser folder (no config.json); train one with `forgetbench parse train`")
    return architecture_of_config(json.loads(p.read_text()), str(model_dir)).name


@dataclass
class Parser:
    arch: str
    model: nn.Module
    vocab: Vocab
    tagger: UposTagger | None = None
    initial: Parser | None = None  # rngtr: the parser giving G^0 (None: the empty graph)
    iterations: int = DEFAULT_ITERATIONS  # rngtr: at most T refinement iterations

    @property
    def architecture(self) -> Architecture:
        return architecture(self.arch)

    @property
    def device(self) -> torch.device:
        """Where the network's weights are (its batches are moved there)."""
        return next(self.model.parameters()).device

    def to(self, device: torch.device | str) -> Parser:
        """The network, its initial parser and its tagger on ``device`` (in place); returns the parser."""
        self.model.to(device)
        if self.initial is not None:
            self.initial.to(device)
        if self.tagger is not None:
            self.tagger.to(device)
        return self

    def networks(self) -> dict[str, nn.Module]:
        """The networks a compression recipe applies to (an RNGTr's initial parser too: the deployed system)."""
        nets = {self.architecture.network: self.model}
        if self.initial is not None:
            nets |= {f"initial.{k}": m for k, m in self.initial.networks().items()}
        return nets

    def calibration_feed(self, name: str):
        """``feed(model, sentences, batch)`` that runs network ``name`` (of ``networks()``) on the inputs it sees
        when parsing: a forward pass; a refiner's iterations from its initial graphs (from this, uncompressed,
        parser's initial); G2GTr's greedy transition steps."""
        if name.startswith("initial."):
            return self.initial.calibration_feed(name[len("initial."):])
        return self.architecture.feed(self)

    @torch.no_grad()
    def parse(self, sents: list[Sentence], max_tokens: int = 4000, progress: bool = False, record: bool = False,
              initial_preds: list[Pred] | None = None) -> list[Pred] | tuple[list[Pred], list[list[Pred]], list[int]]:
        """Heads (0 = root) and labels per sentence. With ``record`` (RNGTr) also the trees after each
        iteration t = 1..T and the iterations each sentence ran. ``initial_preds``: the initial parser's output
        on ``sents`` when already computed (RNGTr)."""
        self.model.eval()
        arch = self.architecture
        index = {id(s): k for k, s in enumerate(sents)}
        init = initial_preds
        if init is None and arch.refines and self.initial is not None:
            init = self.initial.parse(sents, max_tokens)
        found: dict[str, dict] = {"preds": {}, "ran": {}, "per_iteration": {}}
        for bs in tqdm(batches(sents, max_tokens, shuffle=False), disable=None if progress else True, desc="parse"):
            got = arch.decode(self, batchify(bs, self.vocab, device=self.device), [index[id(s)] for s in bs],
                              [len(s.words) for s in bs], init, record)
            for key, values in got.items():
                found[key] |= values
        preds = [found["preds"][k] for k in range(len(sents))]
        if record and arch.refines:
            per_it, ran = found["per_iteration"], found["ran"]
            return preds, [[per_it[k][t] for k in range(len(sents))] for t in range(self.iterations)], \
                [ran[k] for k in range(len(sents))]
        return preds

    def pred(self, heads: torch.Tensor, rels: torch.Tensor, n: int) -> Pred:
        return heads[1 : n + 1].tolist(), [self.vocab.rels[r] for r in rels[1 : n + 1].tolist()]

    def initial_graph(self, shape, ks, lens, init) -> tuple[torch.Tensor, torch.Tensor]:
        h0 = torch.full(shape, -1, dtype=torch.long)
        r0 = torch.full(shape, -1, dtype=torch.long)
        if init is not None:
            for j, (k, n) in enumerate(zip(ks, lens, strict=True)):
                heads, labels = init[k]
                h0[j, 1 : n + 1] = torch.tensor(heads)
                r0[j, 1 : n + 1] = torch.tensor([self.vocab.r2i.get(lab, 0) for lab in labels])
        return h0.to(self.device), r0.to(self.device)


def save(parser: Parser, out_dir: Path, info: dict) -> None:
    """Config + safetensors + vocab.json + training.json (+ refinement.json for RNGTr); the initial parser and
    tagger folders are written by the trainer."""
    save_module_dir(parser.model, parser.architecture.model_type, parser.model.cfg.to_dict(), out_dir)
    atomic_write_json(out_dir / "vocab.json", parser.vocab.to_dict())
    if parser.vocab.pieces:  # the pre-trained encoder's SentencePiece model travels with the parser
        atomic_write_bytes(out_dir / parser.vocab.pieces, parser.vocab.sp.serialized_model_proto())
    atomic_write_json(out_dir / "training.json", info)
    parser.architecture.save_extra(parser, out_dir)


def _keep_frozen(model, d: Path) -> None:
    """A parser trained on a frozen encoder (``encoder.lr_scale`` 0 in its training record) loads with that encoder
    frozen, so it reads its sentences as it did in training (``PretrainedWords``: each sentence alone)."""
    from forgetbench.parsing.layers.pretrained import PretrainedWords

    rec = d / "training.json"
    words = getattr(model, "words", None)
    if not isinstance(words, PretrainedWords) or not rec.is_file():
        return
    if (json.loads(rec.read_text()).get("encoder") or {}).get("lr_scale") == 0:
        for q in words.encoder.parameters():
            q.requires_grad_(False)


def load(model_dir: str | Path, initial: str | None = None, iterations: int | None = None) -> Parser:
    """A saved parser of any architecture. RNGTr: ``initial`` ("empty" or a parser folder) and ``iterations``
    override the saved refinement settings."""
    d = Path(model_dir)
    arch = architecture(arch_of(d))
    model = load_module_dir(d, arch.model_type, arch.build, f"{arch.name} parser")
    _keep_frozen(model, d)
    vocab = Vocab(**json.loads((d / "vocab.json").read_text())).attach(d)
    parser = Parser(arch.name, model, vocab, load_tagger(d))
    arch.configure(parser, d, initial, iterations, load)
    return parser
