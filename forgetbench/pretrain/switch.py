"""Algorithm 1's switch (docs/METHOD.md §5c; Sun, Li, Zhao §3.6): phase 1 trains USL and MLM jointly for m steps,
phase 2 opens USI, and the paper opens it once "USL has converged well". This module watches the USL head during
phase 1 and says at the switch whether it had converged.

Rules:

1. Every ``train.dev_every`` steps of phase 1 (step ≤ m) a variant trained on trees logs its USL head on the
   held-out trees (``pretrain.data`` rule 5, the unmasked text): the USL loss, and the head as a parser — UAS, the
   share of scored subwords whose highest-scoring head is the gold one, and LAS, those whose label (scored at the
   predicted head) is the gold one too (subword level, no tree constraint: the head's own reading, not a decoded
   parse). Fields ``usl_dev_loss``, ``usl_dev_uas``, ``usl_dev_las``.
2. **Decision, "converged":** at m, the USL dev loss fell by less than ``REL_FALL`` (2 %) of its value over the last
   quarter of phase 1 (from the measurement nearest 0.75·m to the one at or before m), with at least
   ``MIN_POINTS`` measurements in that window. Otherwise "still falling" (or "too few measurements"), and the
   record keeps the curve so the card can show it.
3. The verdict, the head's UAS/LAS at the switch and the curve go into ``training.json`` (``switch``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

REL_FALL = 0.02
MIN_POINTS = 3


def make_watch(model, cfg, dev: dict, arith):
    """``watch()``: the USL head's held-out loss, UAS and LAS (rule 1), in the caller's eval mode."""
    from forgetbench.parsing.layers.pretrained import IGNORE
    from forgetbench.pretrain.data import pad_rows, token_chunks

    lengths = np.asarray([len(r) for r in dev["ids"]])
    chunks = token_chunks(np.arange(len(lengths)), lengths, cfg.train.max_tokens // 2)
    pad = model.config.pad_id

    def watch() -> dict:
        loss = 0.0
        n = heads_ok = labels_ok = labelled = 0
        for idx in chunks:
            ids = pad_rows([dev["ids"][i] for i in idx], pad).to(arith.device)
            heads = pad_rows([dev["heads"][i] for i in idx], IGNORE).to(arith.device)
            rels = pad_rows([dev["rels"][i] for i in idx], IGNORE).to(arith.device)
            with arith.autocast():
                h, mask = model.encode(ids)
                arc, rel_dep, rel_head = model.usl(h, mask)
                k = int((heads != IGNORE).sum())
                loss += model.usl_loss(h, mask, heads, rels).float().item() * k
                pred = arc.float().argmax(-1)
                pred_rel = model.scorer["rel"].at_heads(rel_dep, rel_head, pred).float().argmax(1)  # [B, N]
            scored = heads != IGNORE
            right = (pred == heads) & scored
            n += k
            heads_ok += int(right.sum())
            has_label = scored & (rels != IGNORE)
            labelled += int(has_label.sum())
            labels_ok += int((right & has_label & (pred_rel == rels)).sum())
        return {"usl_dev_loss": round(loss / max(n, 1), 4), "usl_dev_uas": round(100 * heads_ok / max(n, 1), 2),
                "usl_dev_las": round(100 * labels_ok / max(labelled, 1), 2)}

    return watch


def verdict(curve: list[list], m: int) -> dict:
    """Rule 2 on ``curve`` = [[step, usl_dev_loss, uas, las], …] (phase-1 measurements in step order)."""
    points = [p for p in curve if p[0] <= m]
    if not points:
        return {"step": m, "converged": None, "reason": "no phase-1 measurement", "curve": curve}
    last = points[-1]
    start = min(points, key=lambda p: (abs(p[0] - 0.75 * m), p[0]))
    window = [p for p in points if p[0] >= start[0]]
    fall = (start[1] - last[1]) / start[1] if start[1] else 0.0
    if len(window) < MIN_POINTS:
        state, why = None, f"too few measurements in the last quarter ({len(window)} < {MIN_POINTS})"
    elif fall < REL_FALL:
        state, why = True, f"USL dev loss fell {100 * fall:.1f} % over steps {start[0]}–{last[0]} (< {100 * REL_FALL:g} %)"
    else:
        state, why = False, (f"still falling: USL dev loss fell {100 * fall:.1f} % over steps {start[0]}–{last[0]} "
                             f"(≥ {100 * REL_FALL:g} %)")
    return {"step": m, "measured_at": last[0], "usl_dev_loss": last[1], "usl_dev_uas": last[2],
            "usl_dev_las": last[3], "converged": state, "reason": why, "rule": f"relative fall < {REL_FALL:g} over "
            "the last quarter of phase 1, ≥ 3 measurements", "curve": curve}


def curve_from_log(log_file: Path) -> list[list]:
    """The phase-1 measurements a run logged (rule 1), resumes included, one per step."""
    seen: dict[int, list] = {}
    if log_file.is_file():
        for line in log_file.read_text().splitlines():
            r = json.loads(line)
            if "usl_dev_loss" in r:
                seen[r["step"]] = [r["step"], r["usl_dev_loss"], r["usl_dev_uas"], r["usl_dev_las"]]
    return [seen[s] for s in sorted(seen)]


def on_log(model, watch, m: int, every: int):
    """``train.loop.run``'s ``on_log``: rule 1's fields at every ``every``-th step of phase 1."""
    from forgetbench.train.early_stop import evaluated

    def fields(step: int) -> dict:
        if every and step <= m and step % every == 0:
            with torch.no_grad():
                return evaluated(model, watch)
        return {}

    return fields
