"""The pre-trained multilingual encoder (``forgetbench pretrain-encoder``, ``pretrain/``) of UD-PrLM (Sun, Li, Zhao)
and its ablations — one of the encoders a parser can read (docs/METHOD.md §5c).

Shapes: B sentences, N subword positions (``<s> pieces </s>``, padding), H = ``d_model``, D labels.

- **Encoder** (§3.2): token + learned position embeddings, ``layers`` Transformer layers (pre-norm, GELU;
  ``parsing.layers.encoder_layer``) → H^(L). An encoder with USI has one layer fewer than its baseline (§4, layer parity:
  ``pretrain.run.encoder_config``).
- **USL** (universal structure learning, §3.3): on H^(L), r^m = ReLU(MLP^m(h)) for heads (``head_mlp`` units,
  the paper's H_head 128) and dependents (``dep_mlp``, H_dep 64), arc and label biaffines (``biaffine.usl_heads``):
  arc scores S_arc [B, N(dep), N(head)] with padding heads at −10⁹, label scores [B, N, N, D]. Its loss:
  cross-entropy of the gold head over each position's heads, plus cross-entropy of the gold label at the gold
  head (positions marked −100 unscored).
- **USI** (universal structure integration, §3.4; ``parsing.layers.structure``): S_US from the two softmaxes, H_US from
  S_US and H^(L), H^(L+1) = LayerNorm(Transformer layer(H_US + H^(L))).
- **MLM head**: a H × H GELU layer, LayerNorm, and the tied token embedding (+ bias) over H^(L) (phase 1 of
  Algorithm 1 and encoders without USI) or H^(L+1) (phase 2 with USI; ``pretrain.schedule``).

``structure: expected-label`` keeps the encoder this project first built (LeakyReLU MLPs of ``arc_mlp`` and
``rel_mlp`` units, ``structure.ExpectedLabelIntegration``) as a named ablation; encoder folders written before
the field existed read as it.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from torch import nn

from forgetbench.errors import ForgetbenchError
from forgetbench.parsing.layers.biaffine import biaffine_heads, biaffine_scores, usl_heads
from forgetbench.parsing.layers.encoder_layer import EncoderLayer
from forgetbench.parsing.layers.structure import integration, legacy_names, structure_tensor

IGNORE = -100
MODEL_TYPE = "forgetbench-encoder"
PAD, UNK, BOS, EOS, MASK = 0, 1, 2, 3, 4  # the encoder's SentencePiece layout (pretrain/data.py rule 3)
FIRST_NORMAL = 5
LEGACY_STRUCTURE = "expected-label"  # what an encoder settings record without ``structure`` was made with


@dataclass
class EncoderConfig:
    vocab_size: int
    n_rels: int = 0  # 0: MLM only (no USL)
    d_model: int = 256
    layers: int = 4  # the Transformer layers below USL (USI's own layer not counted)
    heads: int = 4
    ffn: int = 1024
    dropout: float = 0.1
    max_positions: int = 256
    arc_mlp: int = 128  # the expected-label form's MLP sizes
    rel_mlp: int = 64
    usi: bool = True  # False: the USL + MLM ablation (w/o US Integration)
    pad_id: int = 0
    structure: str = "paper"  # or LEGACY_STRUCTURE
    head_mlp: int = 128  # the paper form's H_head and H_dep (§4)
    dep_mlp: int = 64
    supervised: bool = True  # False: USL and USI built but never trained on trees (w/o UD pre-training)

    @property
    def variant(self) -> str:
        if not self.n_rels:
            return "mlm"
        if not self.usi:
            return "usl-mlm"
        return "ud-prlm" if self.supervised else "usi-mlm"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> EncoderConfig:
        """Settings as stored (``config.json``, a parser's ``pretrained``); a record without ``structure`` is
        an expected-label encoder."""
        known = {f.name for f in fields(cls)}
        return cls(**{"structure": LEGACY_STRUCTURE} | {k: v for k, v in d.items() if k in known})


def _layer(c: EncoderConfig) -> EncoderLayer:
    return EncoderLayer(c.d_model, c.heads, c.ffn, c.dropout)


class PretrainedEncoder(nn.Module):
    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.config = c
        self.embed = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_id)
        self.positions = nn.Embedding(c.max_positions, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.layers = nn.ModuleList([_layer(c) for _ in range(c.layers)])
        self.norm = nn.LayerNorm(c.d_model)
        if c.n_rels:
            if c.structure == "paper":
                self.mlp, self.scorer = usl_heads(c.d_model, c.head_mlp, c.dep_mlp, c.n_rels, c.dropout)
            else:
                self.mlp, self.scorer = biaffine_heads(c.d_model, c.arc_mlp, c.rel_mlp, c.n_rels, c.dropout)
            if c.usi:
                self.usi = integration(c.structure, c.d_model, c.n_rels)
                self.usi_layer = _layer(c)
                self.usi_norm = nn.LayerNorm(c.d_model)
                if c.structure == LEGACY_STRUCTURE:
                    self.register_load_state_dict_pre_hook(lambda _m, sd, prefix, *_a: legacy_names(sd, prefix))
        self.mlm_dense = nn.Linear(c.d_model, c.d_model)
        self.mlm_norm = nn.LayerNorm(c.d_model)
        self.mlm_bias = nn.Parameter(torch.zeros(c.vocab_size))
        nn.init.normal_(self.embed.weight, std=c.d_model ** -0.5)
        with torch.no_grad():
            self.embed.weight[c.pad_id].zero_()

    # ---- the encoder ----
    def encode(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(H^(L) [B, N, H], mask [B, N] of real positions)."""
        mask = ids != self.config.pad_id
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.drop(self.embed(ids) + self.positions(pos))
        for layer in self.layers:
            h = layer(h, src_key_padding_mask=~mask)
        return self.norm(h), mask

    # ---- USL ----
    def usl(self, h: torch.Tensor, mask: torch.Tensor):
        """(S_arc [B, N, N], label-dependent and label-head MLP outputs) on H^(L)."""
        return biaffine_scores(self.mlp, self.scorer, h, mask)

    def usl_loss(self, h: torch.Tensor, mask: torch.Tensor, heads: torch.Tensor, rels: torch.Tensor) -> torch.Tensor:
        arc, rel_dep, rel_head = self.usl(h, mask)
        scored = heads != IGNORE
        arc_loss = nn.functional.cross_entropy(arc[scored], heads[scored])
        rel_at_gold = self.scorer["rel"].at_heads(rel_dep, rel_head, heads)  # [B, D, N]
        return arc_loss + nn.functional.cross_entropy(rel_at_gold.transpose(1, 2)[scored], rels[scored])

    # ---- USI ----
    def integrate(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """H^(L+1) from H^(L) through the predicted structure."""
        arc, rel_dep, rel_head = self.usl(h, mask)
        rel = self.scorer["rel"].scores_last(rel_dep, rel_head)  # [B, N(dep), N(head), D]
        h_us = self.usi(structure_tensor(arc, rel), h)
        return self.usi_norm(self.usi_layer(h_us + h, src_key_padding_mask=~mask))

    # ---- MLM ----
    def mlm_logits(self, h: torch.Tensor) -> torch.Tensor:
        x = self.mlm_norm(nn.functional.gelu(self.mlm_dense(h)))
        return x @ self.embed.weight.T + self.mlm_bias

    def mlm_loss(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        scored = labels != IGNORE
        return nn.functional.cross_entropy(self.mlm_logits(h[scored]), labels[scored])

    # ---- what a downstream parser reads ----
    def representations(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The encoder's output for fine-tuning: H^(L+1) where there is a USI layer, else H^(L)."""
        h, mask = self.encode(ids)
        if self.config.n_rels and self.config.usi:
            h = self.integrate(h, mask)
        return h, mask

    def keep_representations_only(self) -> None:
        """Drop the heads ``representations`` does not run — the MLM head, and the USL head of an encoder without
        USI — so that a downstream model holds (and compression sees) only what it computes; their weights in a
        state dict being loaded (the whole encoder's, or a parser saved with them) are ignored."""
        gone = ["mlm_dense", "mlm_norm", "mlm_bias"] + (["mlp", "scorer"] if self.config.n_rels and not self.config.usi
                                                        else [])
        for name in gone:
            delattr(self, name)

        def ignore_gone(_module, state_dict, prefix, *_args):
            for k in [k for k in state_dict if k.startswith(prefix)]:
                rest = k[len(prefix):]
                if any(rest == g or rest.startswith(g + ".") for g in gone):
                    del state_dict[k]

        self.register_load_state_dict_pre_hook(ignore_gone)


MAX_PIECES_PER_WORD = 16  # a word's pieces beyond these are dropped (its first piece is what a parser reads)


def word_pieces(sp, forms: list[str]) -> list[list[int]]:
    """Each word's own pieces (``pretrain/data.py`` rule 4), at most ``MAX_PIECES_PER_WORD``; ``<unk>`` for none."""
    return [(sp.encode(w) or [UNK])[:MAX_PIECES_PER_WORD] for w in forms]


def pieces_tensor(sp, sentences: list[list[str]], length: int) -> torch.Tensor:
    """[B, length, K] piece ids per word (position 0, the root, empty; padding 0), as ``PretrainedWords`` reads."""
    rows = [word_pieces(sp, forms) for forms in sentences]
    k = max((len(p) for r in rows for p in r), default=1)
    out = torch.zeros(len(rows), length, k, dtype=torch.long)
    for b, r in enumerate(rows):
        for i, p in enumerate(r, 1):
            out[b, i, : len(p)] = torch.tensor(p)
    return out


def windows(pieces: list[list[int]], size: int) -> list[list[int]]:
    """Consecutive word ranges (0-based word indices) whose pieces fit ``size`` positions with ``<s>`` and
    ``</s>``; a word longer than that alone is cut to fit."""
    out, cur, used = [], [], 0
    for i, p in enumerate(pieces):
        n = min(len(p), size - 2)
        if cur and used + n > size - 2:
            out.append(cur)
            cur, used = [], 0
        cur.append(i)
        used += n
    if cur or not out:
        out.append(cur)
    return out


class PretrainedWords(nn.Module):
    """Word representations from a pre-trained encoder, the first-piece pooling of the seed: each sentence is read
    as ``<s> pieces </s>`` (``representations``: H^(L+1) through USI where there is one); word w is the state at
    its first piece, the root the state at ``<s>``. A sentence longer than the encoder's positions is read in
    consecutive windows of whole words, each its own ``<s> … </s>`` (the root: the first window's ``<s>``).

    A frozen encoder (no parameter that requires a gradient) runs in eval mode without a graph and reads each
    sentence alone, so its features do not depend on the batch a sentence comes in; inside ``memo_frozen`` they
    are computed once per sentence and reused (a parser's training: every epoch and every dev evaluation reads the
    same sentences through the same weights)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.encoder = PretrainedEncoder(cfg)
        self.encoder.keep_representations_only()
        self.memo: dict | None = None  # sentence pieces → features, only while ``memo_frozen`` holds it

    @property
    def dim(self) -> int:
        return self.encoder.config.d_model

    @property
    def frozen(self) -> bool:
        """No encoder parameter requires a gradient (``--encoder-lr-scale 0``)."""
        return not any(p.requires_grad for p in self.encoder.parameters())

    def forward(self, pieces: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """pieces [B, L, K] (``pieces_tensor``), mask [B, L] of real positions (the root included) → [B, L, d]."""
        B, L, _ = pieces.shape
        words = [[[int(x) for x in pieces[b, i] if x != PAD] for i in range(1, int(mask[b].sum()))] for b in range(B)]
        frozen = self.frozen
        self.encoder.train(self.training and not frozen)  # a frozen encoder's features: no dropout, no graph
        if not frozen:
            return self._read(words, L, pieces.device)
        feats = []
        with torch.no_grad():
            for w in words:
                key = tuple(map(tuple, w))
                f = self.memo.get(key) if self.memo is not None else None
                if f is None:
                    f = self._read([w], len(w) + 1, pieces.device)[0]
                    if self.memo is not None:
                        self.memo[key] = f
                feats.append(f)
        out = feats[0].new_zeros(B, L, self.dim)
        for b, f in enumerate(feats):
            out[b, : f.shape[0]] = f
        return out

    def _read(self, words: list[list[list[int]]], L: int, device) -> torch.Tensor:
        """[B, L, d]: the sentences' words (piece ids each), read in one batch of windows."""
        seqs, where = [], []  # where: (sentence, word position, window, position in the window)
        for b, ws in enumerate(words):
            for w_i, win in enumerate(windows(ws, self.encoder.config.max_positions)):
                ids, k = [BOS], len(seqs)
                if w_i == 0:
                    where.append((b, 0, k, 0))
                for i in win:
                    where.append((b, i + 1, k, len(ids)))
                    ids += ws[i][: self.encoder.config.max_positions - 2]
                seqs.append(ids + [EOS])
        n = max(len(x) for x in seqs)
        ids = torch.full((len(seqs), n), PAD, dtype=torch.long, device=device)
        for k, x in enumerate(seqs):
            ids[k, : len(x)] = torch.tensor(x, device=device)
        h, _ = self.encoder.representations(ids)
        out = h.new_zeros(len(words), L, h.shape[-1])
        b_i, w_i, k_i, p_i = (torch.tensor(c, device=device) for c in zip(*where, strict=True))
        out[b_i, w_i] = h[k_i, p_i]
        return out


@contextmanager
def memo_frozen(model: nn.Module):
    """While it holds, every frozen ``PretrainedWords`` in ``model`` keeps each sentence's features once read
    (exact: a frozen encoder reads each sentence alone, in eval mode); cleared on exit, so weights changed later
    (compression) are read anew."""
    mods = [m for m in model.modules() if isinstance(m, PretrainedWords) and m.frozen]
    for m in mods:
        m.memo = {}
    try:
        yield
    finally:
        for m in mods:
            m.memo = None


def is_encoder_folder(folder: str | Path) -> bool:
    try:
        return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("model_type") == MODEL_TYPE
    except (OSError, ValueError, AttributeError):
        return False


def load_encoder(folder: str | Path) -> tuple[PretrainedEncoder, object, list[str]]:
    """(encoder, its SentencePiece processor, its labels) from a ``pretrain-encoder`` model folder (``config.json``
    with ``model_type: forgetbench-encoder``, the settings and the labels; ``model.safetensors``; ``spm.model``);
    any other folder is refused in one line."""
    import sentencepiece as spm
    from safetensors.torch import load_file

    folder = Path(folder)
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cfg = None
    if not isinstance(cfg, dict) or cfg.get("model_type") != MODEL_TYPE:
        kind = cfg.get("model_type") if isinstance(cfg, dict) else None
        raise ForgetbenchError(f"{folder}: not a pre-trained encoder folder (config.json model_type {kind!r}, not "
                               f"{MODEL_TYPE!r}); give the model folder written by forgetbench pretrain-encoder")
    labels = cfg.pop("labels")
    cfg.pop("model_type")
    model = PretrainedEncoder(EncoderConfig.from_dict(cfg))
    missing, unexpected = model.load_state_dict(load_file(str(folder / "model.safetensors")), strict=False)
    if missing or unexpected:
        raise ForgetbenchError(f"{folder}: model.safetensors does not match its config.json (missing "
                               f"{missing[:2]}, unexpected {unexpected[:2]})")
    return model.eval(), spm.SentencePieceProcessor(model_file=str(folder / "spm.model")), labels
