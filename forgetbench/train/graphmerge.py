"""GraphMerge embeddings (Wu & Monz, EMNLP 2023): the embedding table re-parameterised by hops over the
word-equivalence graph (``train.graph``), trained end to end with the translation loss, baked into a plain
M2M-100 table at export.

Rules:

1. **One hop** (``GraphMerge.forward``), ``gnn`` mode: H ← W_nb (A H) + b_nb + W_self H + b_self, with dropout on
   H before each hop and ELU between hops, none after the last (**Decision**, as the authors' code: the issue's
   σ(…) on every hop would bound the last table). H⁽⁰⁾ = E, the model's own table. ``weighted-sum`` mode (the
   parameter-free baseline): H ← ½ (A H + H), i.e. the row-normalised A + I.
2. **One table everywhere.** The final table T is the encoder's and the decoder's input embedding (times the
   model's ``embed_scale``) and the output projection (logits = h Tᵀ): ``logits`` computes T once per step and
   calls the model with ``inputs_embeds``. With ``tie: false`` (the paper's "w/o Tie" ablation, §5 Table 3) the
   output projection is the original table E instead (logits = h Eᵀ), the inputs still T. The hop layers are the model's submodule ``graphmerge`` (checkpointed
   and optimised with it); the adjacency is a buffer rebuilt from ``graph.npz``, not stored in checkpoints.
   **Start** (``init``): ``identity`` sets each hop's W_self = I, W_nb = 0 and both biases 0, so T at step 0 is E
   itself (one hop) or E through the ELUs between hops (≈ E at an embedding's scale): both arms begin with the same
   table, the graph's mixing learnt from there; ``torch`` keeps nn.Linear's default, under which the biases
   dominate a table of M2M-100's scale (rows ≈ 3× E's norm, random rows at cosine ≈ 0.96). ``isotropy`` measures
   a table: mean row norm, the random-pair cosine (the isotropy floor) and the effective rank.
3. **Inference unchanged.** ``bake`` writes T (eval mode: no dropout) into the shared embedding (tied to the
   output projection) and removes ``graphmerge``: the exported folder is a plain
   ``M2M100ForConditionalGeneration``. "w/o Tie" exports two tables: T as the input embedding (the shared table
   and, as transformers unties them all with ``tie_word_embeddings: false``, its copies in the encoder and the
   decoder) and E as the ``lm_head``. ``materialised`` does the same for the duration of a block (dev chrF).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from forgetbench.train.graph import GraphSettings, build_graph_streamed, load_graph, save_graph


class GraphMerge(nn.Module):
    def __init__(self, adjacency: torch.Tensor, dim: int, settings: GraphSettings):
        super().__init__()
        self.hops, self.mode, self.tie = settings.hops, settings.mode, settings.tie
        self.register_buffer("adjacency", adjacency, persistent=False)
        self.dropout = nn.Dropout(settings.dropout)
        if self.mode == "gnn":
            self.neighbour = nn.ModuleList(nn.Linear(dim, dim) for _ in range(self.hops))
            self.own = nn.ModuleList(nn.Linear(dim, dim) for _ in range(self.hops))
            if settings.init == "identity":
                with torch.no_grad():
                    for nb, own in zip(self.neighbour, self.own, strict=True):
                        nb.weight.zero_()
                        nb.bias.zero_()
                        own.weight.copy_(torch.eye(dim))
                        own.bias.zero_()

    def forward(self, E: torch.Tensor) -> torch.Tensor:
        H = E
        for h in range(self.hops):
            H = self.dropout(H)
            with torch.autocast(H.device.type, enabled=False):  # sparse × dense in float32, backward included
                AH = torch.sparse.mm(self.adjacency, H.float()).to(H.dtype)
            if self.mode == "weighted-sum":
                H = 0.5 * (AH + H)
                continue
            H = self.neighbour[h](AH) + self.own[h](H)
            if h < self.hops - 1:
                H = F.elu(H)
        return H


@torch.no_grad()
def isotropy(T: torch.Tensor, pairs: int = 20000, seed: int = 0) -> dict:
    """A table's shape: ``mean_row_norm``; ``random_pair_cosine``, the mean cosine of ``pairs`` seeded random pairs
    of distinct rows (every pair where there are fewer; the isotropy floor an alignment score must clear);
    ``effective_rank``, exp of the entropy of the normalised singular values (Roy & Vetterli 2007)."""
    T = T.detach().float()
    n = T.shape[0]
    if n * (n - 1) // 2 <= pairs:
        i, j = torch.triu_indices(n, n, 1)
    else:
        g = torch.Generator().manual_seed(seed)
        i = torch.randint(0, n, (pairs,), generator=g)
        j = (i + torch.randint(1, n, (pairs,), generator=g)) % n  # never i itself
    cos = F.cosine_similarity(T[i], T[j], dim=-1)
    s = torch.linalg.eigvalsh((T.T @ T).double()).clamp(min=0).sqrt()  # the singular values, from the d × d Gram
    p = s / s.sum()
    p = p[p > 0]
    return {"rows": n, "mean_row_norm": round(float(T.norm(dim=-1).mean()), 6),
            "random_pair_cosine": round(float(cos.mean()), 6),
            "effective_rank": round(float(torch.exp(-(p * p.log()).sum())), 4)}


def probe(model) -> dict:
    """``isotropy`` of the table the model translates with: T (GraphMerge, eval mode) or its own E."""
    return isotropy(final_table(model) if hasattr(model, "graphmerge") else model.model.shared.weight)


def attach(model, adjacency: torch.Tensor, settings: GraphSettings) -> GraphMerge:
    """The hop layers as ``model.graphmerge`` (seeded by the caller), on the model's device."""
    gm = GraphMerge(adjacency, model.config.d_model, settings).to(model.model.shared.weight.device)
    model.graphmerge = gm
    return gm


def table(model) -> torch.Tensor:
    """T = the hops over the model's own table (rule 1)."""
    return model.graphmerge(model.model.shared.weight)


def logits(model, input_ids, attention_mask, decoder_input_ids) -> torch.Tensor:
    """Rule 2: the translation logits with T as input embedding and output projection, T computed once."""
    T = table(model)
    shared = model.model.shared
    pad = model.config.pad_token_id
    enc = F.embedding(input_ids, T, padding_idx=pad) * shared.embed_scale
    dec = F.embedding(decoder_input_ids, T, padding_idx=pad) * shared.embed_scale
    out = model.model(inputs_embeds=enc, attention_mask=attention_mask, decoder_inputs_embeds=dec)
    return F.linear(out.last_hidden_state, T if model.graphmerge.tie else shared.weight)


@torch.no_grad()
def final_table(model) -> torch.Tensor:
    was = model.graphmerge.training
    model.graphmerge.eval()
    try:
        return table(model).detach().clone()
    finally:
        model.graphmerge.train(was)


@contextlib.contextmanager
def materialised(model):
    """Rule 3 for a block: the shared table holds T (no dropout), then its own values again."""
    w = model.model.shared.weight
    own = w.detach().clone()
    with torch.no_grad():
        w.copy_(final_table(model))
    try:
        yield model
    finally:
        with torch.no_grad():
            w.copy_(own)


def bake(model) -> None:
    """Rule 3: T into the shared table (tied to the output projection; "w/o Tie": E kept as an untied
    ``lm_head``), ``graphmerge`` removed."""
    T = final_table(model)
    if not model.graphmerge.tie:  # untied: transformers then reads every table from its own key
        model.config.tie_word_embeddings = False
        model.lm_head.weight = nn.Parameter(model.model.shared.weight.detach().clone())
        for emb in (model.model.encoder.embed_tokens, model.model.decoder.embed_tokens):
            emb.weight = nn.Parameter(T.clone())
    with torch.no_grad():
        model.model.shared.weight.copy_(T)
    del model.graphmerge


def graph_pairs(data, tok, per_language: int | None, seed: int) -> dict[str, list[tuple[list[int], list[int]]]]:
    """English–x pairs of the prepared training ids, per language, the first ``per_language`` of a seeded order
    (None: all), held in memory (``graph_chunks`` streams the same pairs)."""
    out: dict[str, list] = {}
    for lang, pairs in graph_chunks(data, tok, None, per_language, 1 << 62, seed):
        out.setdefault(lang, []).extend(pairs)
    return out


def graph_chunks(data, tok, languages: list[str] | None, per_language: int | None, chunk: int, seed: int):
    """``(language, pairs)`` chunks of at most ``chunk`` English–x pairs, each language's in one seeded order (the
    first ``per_language`` of it; None: all), language after language (``languages``; None: in the order of their
    first appearance); only one chunk's ids are lists at a time."""
    eid = tok.get_lang_id("en")
    rng = np.random.default_rng(seed)
    en_side = np.nonzero(data.src_lang == eid)[0]
    order = en_side[rng.permutation(len(en_side))]
    tgt = data.tgt_lang[order]
    if languages is None:
        _, first = np.unique(tgt, return_index=True)
        codes = [int(tgt[i]) for i in sorted(first)]
        languages = [tok.convert_ids_to_tokens(c).strip("_") for c in codes]
    for lang in languages:
        rows = order[tgt == tok.get_lang_id(lang)][:per_language]
        for k in range(0, len(rows), chunk):
            yield lang, [(data.src[data.src_off[i]:data.src_off[i + 1]].tolist(),
                          data.tgt[data.tgt_off[i]:data.tgt_off[i + 1]].tolist()) for i in rows[k: k + chunk]]


def ensure_graph(out: Path, data, tok, settings: GraphSettings, languages: list[str], vocab_size: int, seed: int,
                 log=print, vocabulary: str = "") -> tuple[torch.Tensor, dict]:
    """The run's graph (rule 4 of ``train.graph``): ``out/graph.npz`` when it is there (built with these settings,
    seed and ``vocabulary``, the SHA-256 of the run's SentencePiece model, so a graph built on one machine serves
    a run prepared on another only over the same subwords; with ``aligner: auto`` whichever aligner built it),
    else built from the training bitext, streamed; returns the adjacency and its record."""
    import json

    from forgetbench.io import atomic_write_json, sha256_file

    path, rec_path = out / "graph.npz", out / "graph.json"
    key = {"settings": {k: getattr(settings, k) for k in ("aligner", "symmetrisation", "min_count", "alpha",
                                                          "pairs_per_language", "chunk", "rare")}, "seed": seed}
    if vocabulary:
        key["vocabulary"] = vocabulary
    if path.is_file() and rec_path.is_file():
        rec = json.loads(rec_path.read_text())
        if rec.get("key") == key and rec.get("sha256") == sha256_file(path):
            return load_graph(path), rec
    fixed = set(range(4)) | set(tok.lang_code_to_id.values()) | set(range(len(tok), vocab_size))
    chunks = graph_chunks(data, tok, languages, settings.pairs_per_language, settings.chunk, seed)
    g = build_graph_streamed(chunks, languages, vocab_size, settings, fixed, log)
    rec = g["record"] | {"key": key, "sha256": save_graph(g, path)}
    atomic_write_json(rec_path, rec)
    log(f"graphmerge: graph of {rec['vocabulary']:,} subwords, {rec['cross_edges']:,} cross-word edges "
        f"({rec['aligner']}), built in {rec['seconds']} s, peak memory {rec['peak_rss_mb']:,} MB")
    return load_graph(path), rec
