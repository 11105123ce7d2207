"""RNGTr: recursive non-autoregressive graph-to-graph refinement (docs/METHOD.md §4).

    G^0 = an initial parser's output (biaffine, SynTr) or the empty graph
    Z^t = Encoder(W, P(G^{t−1})),  G^t = Decoder(Z^t)      t = 1 … T

Rules, exactly:

- **Intermediate graphs** are per-token argmax: each word takes its best-scoring head and the
  best label at that head (not necessarily a tree).
- **Stop** when a sentence's graph no longer changes: if G^t = G^{t−1} (heads and labels of every
  word) the next iteration would see the same input and give the same output, so the sentence is
  done; its tree is the MST of iteration t's scores. The others go on, at most ``T`` iterations
  (default 3); after iteration T the tree is the MST of iteration T's scores.
- **The final graph** is the MST (single root, non-projective; ``decode.mst``), labels at its heads.
- **Training** (``refinement_loss``): every iteration is trained on the previous iteration's
  output, with no backpropagation through iterations (G^t is an argmax: discrete, detached); the
  batch loss is the mean over iterations of the head + label cross-entropy against gold.

Per-iteration trees (``record=True``): the MST tree each sentence would have if refinement stopped
after iteration t (a stopped sentence keeps its final tree), for per-iteration LAS.
"""

from __future__ import annotations

import torch

from forgetbench.parsing.layers.modules import rows
from forgetbench.parsing.structures.decode import mst
from forgetbench.parsing.structures.relations import relation_ids

DEFAULT_ITERATIONS = 3


def graph_relations(model, heads: torch.Tensor, rels: torch.Tensor) -> torch.Tensor:
    """Relation ids of the graph (heads, rels) [B, L] in the form ``model`` was built for (labelled or not)."""
    return relation_ids(heads, rels if model.cfg.graph == "labelled" else None)


def argmax_graph(model, arc, rel_dep, rel_head, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token argmax heads and the argmax label at each; -1 at the root and padding."""
    heads = arc.argmax(-1)
    rels = model.label_scores(rel_dep, rel_head, heads).argmax(1)
    word = mask.clone()
    word[:, 0] = False
    return heads.masked_fill(~word, -1), rels.masked_fill(~word, -1)


def mst_graph(model, arc, rel_dep, rel_head, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """MST heads per sentence (``lengths`` words) and the argmax labels at them, [B, L] (-1 at root/padding)."""
    arc_np = arc.detach().double().cpu().numpy()  # MST decodes on the host
    heads = torch.zeros(arc.shape[:2], dtype=torch.long)
    for k, n in enumerate(lengths):
        heads[k, 1 : n + 1] = torch.tensor(mst(arc_np[k, : n + 1, : n + 1].T))  # S[h, d]
    heads = heads.to(arc.device)
    rels = model.label_scores(rel_dep, rel_head, heads).argmax(1)
    word = torch.zeros_like(heads, dtype=torch.bool)
    for k, n in enumerate(lengths):
        word[k, 1 : n + 1] = True
    return heads.masked_fill(~word, -1), rels.masked_fill(~word, -1)


@torch.no_grad()
def refine(model, words, chars, tags, heads0: torch.Tensor, rels0: torch.Tensor, iterations: int = DEFAULT_ITERATIONS,
           record: bool = False) -> dict:
    """Refine the initial graphs (heads0, rels0) [B, L] (-1 = no arc; all -1 = the empty graph).

    Returns {"heads", "rels": final MST trees [B, L], "iterations": per sentence the iterations run,
    "per_iteration": (with ``record``) a list over t = 1..T of (heads, rels) trees}."""
    B, L = words.shape
    mask = words != 0
    lengths = (mask.sum(-1) - 1).tolist()
    heads, rels = heads0.clone(), rels0.clone()
    final_h = torch.full((B, L), -1, dtype=torch.long, device=words.device)
    final_r = torch.full((B, L), -1, dtype=torch.long, device=words.device)
    ran = [0] * B
    active = torch.arange(B, device=words.device)
    per_iteration = []
    for t in range(1, iterations + 1):
        idx = active
        arc, rd, rh = model.encode(words[idx], rows(chars, idx), tags[idx], graph_relations(model, heads[idx], rels[idx]))
        new_h, new_r = argmax_graph(model, arc, rd, rh, mask[idx])
        same = ((new_h == heads[idx]) & (new_r == rels[idx])).all(-1)
        stop = same if t < iterations else torch.ones_like(same)
        need_tree = stop | torch.tensor(record, device=stop.device).expand_as(stop)
        sel = need_tree.nonzero().flatten()
        if len(sel):
            th, tr = mst_graph(model, arc[sel], rd[sel], rh[sel], [lengths[int(i)] for i in idx[sel]])
            for j, s in enumerate(sel.tolist()):
                if stop[s]:
                    final_h[idx[s]], final_r[idx[s]] = th[j], tr[j]
            if record:
                snap_h, snap_r = final_h.clone(), final_r.clone()
                snap_h[idx[sel]], snap_r[idx[sel]] = th, tr
                per_iteration.append((snap_h, snap_r))
        for s in idx.tolist():
            ran[s] = t
        heads[idx], rels[idx] = new_h, new_r
        active = idx[~stop]
        if not len(active):
            break
    if record:  # sentences that stopped early keep their tree in the later iterations' snapshots
        while len(per_iteration) < iterations:
            per_iteration.append((final_h.clone(), final_r.clone()))
    return {"heads": final_h, "rels": final_r, "iterations": ran, "per_iteration": per_iteration}


def refinement_loss(model, words, chars, tags, heads0, rels0, gold_heads, gold_rels, loss_fn, iterations: int):
    """Mean over t = 1..``iterations`` of ``loss_fn(arc, label scores at gold heads)`` with input graph G^{t−1};
    G^t is the detached per-token argmax of iteration t (no backpropagation through iterations)."""
    mask = words != 0
    heads, rels = heads0, rels0
    total = 0.0
    for _ in range(iterations):
        arc, rd, rh = model.encode(words, chars, tags, graph_relations(model, heads, rels))
        total = total + loss_fn(arc, model.label_scores(rd, rh, gold_heads), {"heads": gold_heads, "rels": gold_rels})
        with torch.no_grad():
            heads, rels = argmax_graph(model, arc.detach(), rd.detach(), rh.detach(), mask)
    return total / iterations
