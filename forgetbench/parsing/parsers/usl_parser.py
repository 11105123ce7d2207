"""A pre-trained encoder's USL head as a dependency parser, with no further training (UD-PrLM's "tested directly").

Rules, per sentence of n words:

1. The words are encoded as in pre-training (``pretrain/data.py`` rule 4): ``<s>``, each word's own pieces, ``</s>``;
   f(w) is the position of word w's first piece and f(0) = 0 (``<s>``, the root).
2. Word-level arc scores S[h, d] = S_arc[f(d), f(h)] (the USL head's scores between first pieces; H^(L) as in
   pre-training); the tree is ``parsing.structures.decode.mst``'s (non-projective, exactly one child of the root).
3. Each word's label: the highest-scoring relation at (f(d), f(head(d))) other than ``subword``.
4. A sentence whose pieces do not fit the encoder's positions is attached as a chain (each word to the word
   before it, the first to the root, label ``dep``) and counted in ``too_long``: its words count as parsed.
"""

from __future__ import annotations

from pathlib import Path

import torch

from forgetbench.errors import ForgetbenchError
from forgetbench.io import sha256_file
from forgetbench.parsing.layers.pretrained import BOS, EOS, UNK, load_encoder
from forgetbench.parsing.structures.decode import mst
from forgetbench.parsing.structures.subword_trees import SUBWORD, first_pieces


@torch.no_grad()
def parse_sentence(model, sp, labels: list[str], forms: list[str],
                   device: torch.device | str = "cpu") -> tuple[list[int], list[str]] | None:
    """Rules 1–3 for one sentence (the encoder's weights on ``device``), or None when it does not fit (rule 4)."""
    pieces = [sp.encode(w) or [UNK] for w in forms]
    ids = [BOS, *(i for p in pieces for i in p), EOS]
    if len(ids) > model.config.max_positions:
        return None
    first = [0, *first_pieces([len(p) for p in pieces])]
    h, mask = model.encode(torch.tensor([ids], device=device))
    arc, rel_dep, rel_head = model.usl(h, mask)
    at = torch.tensor(first, device=device)
    S = arc[0][at][:, at].T  # [head, dependent] over words 0..n
    heads = mst(S.double().cpu().numpy())  # MST decodes on the host
    rel = model.scorer["rel"](rel_dep, rel_head)[0]  # [R, N(dep), N(head)]
    allowed = torch.tensor([x != SUBWORD for x in labels], device=device)
    rels = []
    for d, hd in enumerate(heads, 1):
        scores = rel[:, first[d], first[hd]].masked_fill(~allowed, float("-inf"))
        rels.append(labels[int(scores.argmax())])
    return heads, rels


def parse_sentences(model, sp, labels: list[str], sentences,
                    device: torch.device | str = "cpu") -> tuple[list[tuple[list[int], list[str]]], int]:
    """(heads, deprels) per sentence and the number of sentences parsed by rule 4."""
    out, too_long = [], 0
    for s in sentences:
        r = parse_sentence(model, sp, labels, s.forms, device)
        if r is None:
            too_long += 1
            r = (list(range(len(s.forms))), ["dep"] * len(s.forms))
        out.append(r)
    return out, too_long


def evaluate_usl(folder: str | Path, data: str | Path, device: str = "cpu") -> dict:
    """CoNLL 2018 UAS/LAS/CLAS (``parsing.metrics``) of the USL head of the encoder in ``folder`` on ``data``."""
    from forgetbench.models.hardware import resolve_device
    from forgetbench.parsing.data.conll import read_conllu
    from forgetbench.parsing.metrics import score

    model, sp, labels = load_encoder(folder)
    device = resolve_device(device)
    model.to(device)
    if not model.config.n_rels:
        raise ForgetbenchError(f"{folder}: an MLM-only encoder has no USL head to parse with; fine-tune a parser on it")
    if not model.config.supervised:
        raise ForgetbenchError(f"{folder}: a usi-mlm encoder's USL head never learnt from trees (w/o UD pre-training); "
                               "fine-tune a parser on it")
    sents = read_conllu(data)
    preds, too_long = parse_sentences(model, sp, labels, sents, device)
    return score([(x.heads, x.deprels) for x in sents], preds).to_dict() | {
        "arch": f"usl-head ({model.config.variant})", "tags": "none", "data": str(data), "data_sha256": sha256_file(data),
        "too_long": too_long}
