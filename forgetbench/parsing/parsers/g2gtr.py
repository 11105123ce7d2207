"""G2GTr: the transition-based graph-to-graph Transformer parser (docs/METHOD.md §4), sized for this CPU.

Arc-standard with SWAP (``parsing.structures.transition``). At every step the sentence encoder is **re-run**
with the configuration as input: each position gets a role embedding (s0, s1, rest of the stack,
b0, rest of the buffer, reduced, padding) added to its token features, and every layer attends
with the relation ids of the **partial graph** built so far (labelled, ``parsing.structures.relations``;
graph-input attention of ``parsing.layers.graph_attention``). Two classifiers read the encoder states of
the top stack items and the first buffer item (a learned vector stands in for a missing item):

- Exist: MLP over [h(s0); h(s1); h(b0)] → SHIFT / LEFT / RIGHT / SWAP;
- Relation: MLP over [h(s0); h(s1)] → the label of a LEFT or RIGHT arc.

Training: teacher forcing on the lazy oracle's configurations (computed from the gold trees of
the batch; ``sampled_configurations`` of each sentence drawn uniformly per batch, all with 0),
cross-entropy on the transition plus on the label for arc transitions. Decoding: greedy, batched over sentences, invalid transitions masked
(single root guaranteed by ``Configuration.valid``); a sentence still unfinished after
``2n + n²`` steps (never seen) falls back to SHIFT/LEFT/RIGHT only, so decoding always ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from forgetbench.parsing.layers.graph_attention import ENCODER_LAYER_UNIT, GraphEncoder
from forgetbench.parsing.layers.modules import (
    MLP,
    TOKEN_UNITS,
    TokenFeatureConfig,
    token_embeddings,
    token_features,
)
from forgetbench.parsing.structures.relations import n_relation_ids, relation_ids
from forgetbench.parsing.structures.transition import LEFT, RIGHT, SWAP, Configuration, oracle

PAD_ROLE, S0, S1, STACK, B0, BUFFER, REDUCED = range(7)
N_ROLES = 7


@dataclass
class G2GConfig(TokenFeatureConfig):
    d_model: int = 128
    layers: int = 2
    heads: int = 4
    ffn: int = 256
    mlp: int = 200
    attention: str = "g2g"
    value_relations: bool = True
    relation_norm: bool = True
    dropout: float = 0.33
    attention_dropout: float = 0.1
    lazy_oracle: bool = True
    sampled_configurations: int = 8  # per sentence and batch in training (0: all); every encoder run costs O(L²)


class G2GTransitionParser(nn.Module):
    forgetbench_units = TOKEN_UNITS + [
        {"unit": "input_projection", "module": "proj"},
        ENCODER_LAYER_UNIT,
        {"unit": "classifiers", "module": "classifier"},
    ]
    forgetbench_residual_blocks = ["encoder.layers.*"]

    def __init__(self, cfg: G2GConfig):
        super().__init__()
        self.cfg = cfg
        self.embed, self.char_lstm = token_embeddings(cfg, role=nn.Embedding(N_ROLES, cfg.d_model, padding_idx=PAD_ROLE))
        self.proj = nn.Linear(cfg.feature_dim, cfg.d_model)
        self.encoder = GraphEncoder(cfg.d_model, cfg.layers, cfg.heads, cfg.ffn, n_relation_ids(True, cfg.n_rels),
                                    cfg.attention, cfg.value_relations, cfg.relation_norm, cfg.attention_dropout)
        self.absent = nn.Parameter(torch.zeros(cfg.d_model))
        d = cfg.d_model
        self.classifier = nn.ModuleDict({"exist": nn.Sequential(MLP(3 * d, cfg.mlp, cfg.dropout), nn.Linear(cfg.mlp, 4)),
                                         "relation": nn.Sequential(MLP(2 * d, cfg.mlp, cfg.dropout),
                                                                   nn.Linear(cfg.mlp, cfg.n_rels))})
        self.drop = nn.Dropout(cfg.dropout)

    def sentence_features(self, words, chars, tags):
        """Static token features of each sentence [B, L, d_model], computed once and reused by every step."""
        return self.proj(self.drop(token_features(self.embed, self.char_lstm, words, chars, tags)))

    def step(self, x0, roles, relations, items):
        """x0 [N, L, D] (each configuration's sentence features), roles [N, L], relations [N, L, L], items [N, 3]
        (s0, s1, b0 positions, -1 = absent) → (transition scores [N, 4], label scores [N, R])."""
        h = self.encoder(x0 + self.embed["role"](roles), roles != PAD_ROLE, relations)
        at = h.gather(1, items.clamp(min=0).unsqueeze(-1).expand(-1, -1, h.shape[-1]))  # [N, 3, D]
        at = torch.where((items >= 0).unsqueeze(-1), at, self.absent)
        at = self.drop(at)
        return self.classifier["exist"](at.flatten(1)), self.classifier["relation"](at[:, :2].flatten(1))

    def forward(self, words, chars, tags):
        """The start configuration of each sentence (for calibration and shape checks): its step scores."""
        x0 = self.sentence_features(words, chars, tags)
        cs = [Configuration.start(int(n) - 1) for n in (words != 0).sum(-1)]
        return self.step(x0, *config_tensors(cs, words.shape[1], words.device))


def config_tensors(cs: list[Configuration], L: int,
                   device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Roles [N, L], partial-graph relation ids [N, L, L] and (s0, s1, b0) [N, 3] of configurations (built on the
    host from the transition system's lists, then moved to ``device``)."""
    N = len(cs)
    roles = torch.zeros(N, L, dtype=torch.long)
    heads = torch.full((N, L), -1, dtype=torch.long)
    rels = torch.full((N, L), -1, dtype=torch.long)
    items = torch.full((N, 3), -1, dtype=torch.long)
    for k, c in enumerate(cs):
        roles[k, : c.n + 1] = REDUCED
        heads[k, : c.n + 1] = torch.tensor(c.heads)
        rels[k, : c.n + 1] = torch.tensor(c.rels)
        s, b = c.stack, c.buffer
        if s:
            roles[k, s] = STACK
            roles[k, s[-1]], items[k, 0] = S0, s[-1]
        if len(s) >= 2:
            roles[k, s[-2]], items[k, 1] = S1, s[-2]
        if b:
            roles[k, b] = BUFFER
            roles[k, b[0]], items[k, 2] = B0, b[0]
    if device is not None:
        roles, heads, rels, items = (t.to(device) for t in (roles, heads, rels, items))
    return roles, relation_ids(heads, rels), items


def oracle_examples(heads: torch.Tensor, rels: torch.Tensor, lazy: bool = True):
    """Teacher-forcing examples of a batch of gold trees (``batchify``'s heads/rels, -100 at root and padding):
    (sentence index [N], configurations, gold transitions [N], gold labels [N], -100 where not an arc)."""
    sent, cs, ts, ls = [], [], [], []
    for b in range(heads.shape[0]):
        n = int((heads[b] != -100).sum())
        h, r = heads[b, 1 : n + 1].tolist(), rels[b, 1 : n + 1].tolist()
        c = Configuration.start(n)
        for t, rel in oracle(h, r, lazy=lazy):
            sent.append(b)
            cs.append(Configuration(c.n, list(c.stack), list(c.buffer), list(c.heads), list(c.rels)))
            ts.append(t)
            ls.append(rel if t in (LEFT, RIGHT) and rel >= 0 else -100)
            c.apply(t, rel)
    return torch.tensor(sent), cs, torch.tensor(ts), torch.tensor(ls)


def transition_loss(model: G2GTransitionParser, b: dict, words: torch.Tensor) -> torch.Tensor:
    """Teacher-forced loss of a batch: CE(transition) + CE(label | arc transition), means over configurations."""
    sent, cs, ts, ls = oracle_examples(b["heads"], b["rels"], model.cfg.lazy_oracle)
    k = model.cfg.sampled_configurations
    if k:  # a uniform sample of each sentence's configurations (torch's seeded RNG): an unbiased loss estimate
        keep = torch.cat([idx[torch.randperm(len(idx))[:k]] for idx in
                          (torch.nonzero(sent == j).flatten() for j in range(int(sent.max()) + 1)) if len(idx)])
        sent, cs, ts, ls = sent[keep], [cs[i] for i in keep.tolist()], ts[keep], ls[keep]
    sent, ts, ls = sent.to(words.device), ts.to(words.device), ls.to(words.device)  # sampled on the host
    x0 = model.sentence_features(words, b["chars"], b["tags"])[sent]
    t_scores, l_scores = model.step(x0, *config_tensors(cs, words.shape[1], words.device))
    loss = nn.functional.cross_entropy(t_scores, ts)
    if (ls != -100).any():
        loss = loss + nn.functional.cross_entropy(l_scores, ls, ignore_index=-100)
    return loss


@torch.no_grad()
def parse_batch(model: G2GTransitionParser, b: dict) -> tuple[list[Configuration], int]:
    """Greedy parses of a batch; returns the final configurations and the number of encoder steps run."""
    model.eval()
    words = b["words"]
    L = words.shape[1]
    x0_all = model.sentence_features(words, b["chars"], b["tags"])
    cs = [Configuration.start(int(n) - 1) for n in (words != 0).sum(-1)]
    cap = [2 * c.n + c.n * c.n for c in cs]
    steps = 0
    active = [k for k, c in enumerate(cs) if not c.terminal]
    while active:
        t_scores, l_scores = model.step(x0_all[active], *config_tensors([cs[k] for k in active], L, words.device))
        t_scores, l_scores = t_scores.cpu(), l_scores.cpu()  # the transition system runs on the host
        steps += 1
        for j, k in enumerate(active):
            c = cs[k]
            valid = torch.tensor([c.valid(t) and not (t == SWAP and steps > cap[k]) for t in range(4)])
            t = int(t_scores[j].masked_fill(~valid, float("-inf")).argmax())
            c.apply(t, int(l_scores[j].argmax()) if t in (LEFT, RIGHT) else -1)
        active = [k for k in active if not cs[k].terminal]
    return cs, steps
