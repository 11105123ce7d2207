"""RNGTr: recursive non-autoregressive graph-to-graph refinement (docs/METHOD.md §4), by the thesis's protocol
(Ch. 3, §3.3) and the authors' code where the thesis is silent (``idiap/g2g-transformer``, ``parser/model.py``).

    G^0 = an initial parser's output (biaffine, SynTr) or the empty graph
    Z^t = Encoder(W, P(G^{t−1})),  G^t = Decoder(Z^t)      t = 1 … T

Rules, exactly:

- **G¹ is the MST** of iteration 1's scores (the authors' ``prepare_mst`` at the first iteration); **later
  intermediate graphs** are per-token argmax (§3.3: each word its best-scoring head, the best label at that head;
  not necessarily a tree). **No self-loop** is ever scored: a word's own position is excluded from its heads
  (the authors' ``_mask_arc``). **A 2-cycle** (d's head is h and h's head is d) enters the next iteration's input
  with both arcs dropped (the authors' ``build_graph_*``: entries present in both directions zeroed); a tree has
  none.
- **Stop** when a sentence's graph no longer changes, in training and test alike (§3.3, "Stopping Criterion"): if
  G^t = G^{t−1} for t ≥ 2 (heads and labels of every word; G¹ is never compared with G⁰, as the authors' loops
  begin comparing after the first graph-conditioned pass) the sentence is done — at test its tree is the MST of iteration
  t's scores, in training it leaves the later iterations' loss. The others go on, at most ``T`` iterations
  (the thesis: T = 3 from an initial parser, 4 from the empty graph; ``iterations``); after iteration T the tree
  is the MST of iteration T's scores.
- **The final graph** is the MST (single root, non-projective; ``decode.mst``), labels at its heads.
- **Training** (``refinement_loss``): every iteration is trained on the previous iteration's output, with no
  backpropagation through iterations (G^t is discrete, detached); the batch loss is the mean over iterations of
  the head + label cross-entropy against gold over the sentences still refining. (The authors take one optimiser
  step per iteration; here one step on the mean: METHOD §4 lists it.)

Per-iteration trees (``record=True``): the MST tree each sentence would have if refinement stopped
after iteration t (a stopped sentence keeps its final tree), for per-iteration LAS.
"""

from __future__ import annotations

import torch

from forgetbench.parsing.layers.modules import rows
from forgetbench.parsing.structures.decode import mst
from forgetbench.parsing.structures.relations import relation_ids

DEFAULT_ITERATIONS = 3  # T from an initial parser (the thesis)
EMPTY_ITERATIONS = 4  # T from the empty graph (the thesis)


def without_two_cycles(heads: torch.Tensor) -> torch.Tensor:
    """``heads`` [B, L] with both arcs of every 2-cycle (d → h and h → d) set to -1 (no arc)."""
    B, L = heads.shape
    ok = (heads > 0) & (heads < L)
    h = heads.clamp(0, L - 1)
    back = heads.gather(1, h)  # the head's own head
    pos = torch.arange(L, device=heads.device).expand(B, L)
    cycle = ok & (back == pos)
    return heads.masked_fill(cycle, -1)


def graph_relations(model, heads: torch.Tensor, rels: torch.Tensor) -> torch.Tensor:
    """Relation ids of the graph (heads, rels) [B, L] in the form ``model`` was built for (labelled or not), its
    2-cycles dropped."""
    heads = without_two_cycles(heads)
    return relation_ids(heads, rels if model.cfg.graph == "labelled" else None)


def argmax_graph(model, arc, rel_dep, rel_head, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token argmax heads (never the word itself) and the argmax label at each; -1 at the root and padding."""
    L = arc.shape[-1]
    heads = arc.masked_fill(torch.eye(L, dtype=torch.bool, device=arc.device), float("-inf")).argmax(-1)
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


def next_graph(model, t: int, arc, rel_dep, rel_head, mask, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """G^t from iteration t's scores: the MST at t = 1, the per-token argmax after."""
    if t == 1:
        return mst_graph(model, arc, rel_dep, rel_head, lengths)
    return argmax_graph(model, arc, rel_dep, rel_head, mask)


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
        new_h, new_r = next_graph(model, t, arc, rd, rh, mask[idx], [lengths[int(i)] for i in idx])
        same = ((new_h == heads[idx]) & (new_r == rels[idx])).all(-1)
        stop = (same & (t > 1)) if t < iterations else torch.ones_like(same)  # G¹ is never compared with G⁰
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
    """Mean over t = 1..``iterations`` of ``loss_fn(arc, label scores at gold heads)`` with input graph G^{t−1}, over
    the sentences still refining: G^t (the MST at t = 1, then the detached per-token argmax) equal to G^{t−1} stops a
    sentence, and it leaves the later iterations' loss (no backpropagation through iterations)."""
    mask = words != 0
    lengths = (mask.sum(-1) - 1).tolist()
    heads, rels = heads0, rels0
    active = torch.ones(words.shape[0], dtype=torch.bool, device=words.device)
    total, n = 0.0, 0
    for t in range(1, iterations + 1):
        arc, rd, rh = model.encode(words, chars, tags, graph_relations(model, heads, rels))
        gh = gold_heads.masked_fill(~active.unsqueeze(1), -100)
        gr = gold_rels.masked_fill(~active.unsqueeze(1), -100)
        total = total + loss_fn(arc, model.label_scores(rd, rh, gold_heads), {"heads": gh, "rels": gr})
        n += 1
        if t == iterations:
            break
        with torch.no_grad():
            new_h, new_r = next_graph(model, t, arc.detach(), rd.detach(), rh.detach(), mask, lengths)
            if t > 1:  # as at test: G² against G¹ first, never G¹ against G⁰
                active = active & ~((new_h == heads) & (new_r == rels)).all(-1)
            heads, rels = new_h, new_r
        if not bool(active.any()):
            break
    return total / n
